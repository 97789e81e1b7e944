#!/usr/bin/env bash
# Leg P: can the mix teach ctx_add what ctx_add alone did (bench/ctx_add_alone.sh: 0.98 of 200 held-out
# items after 110 minutes, every other family forgotten) while keeping the rest? Two arms side by side, one
# thread each, same data (the `ctx-heavy` mix: ctx_add 46% of the items, the other context families 30%,
# the ten others 24%), same schedule (peak lr LR, AdamW from zero, time-based cosine to 0.1x, moving
# average DECAY):
#   p_v36  starts from the shipped model, copied to runs/base_v36 so a card can swap weights meanwhile (v3.6 in
#          the recorded run; after a later ship the copy is that model, and the names p_v36/base_v36 stay);
#   p_spec starts from the ctx_add specialist, the end of bench/ctx_add_alone.sh's 6-layer arm (it must exist).
# Then every start and end answers the same 200 held-out ctx_add items, standalone and in the model card's
# prompt-length buckets (bench/context_errors.py). The full card is run on the candidates by hand.
# Usage: bench/ctx_heavy.sh [MINUTES LR DECAY]   (default 90 3e-4 0.998). An arm whose final/ exists is not re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-90} LR=${2:-3e-4} DECAY=${3:-0.998}
SPECIALIST=runs/add_alone_d1_b/final
[ -d runs/base_v36 ] || cp -r sbd_viz/models/sbd-char-5m runs/base_v36
[ -d "$SPECIALIST" ] || { echo "no $SPECIALIST: run bench/ctx_add_alone.sh first" >&2; exit 1; }
source bench/train_arm.sh
uptime
train() {  # out, base
  train_arm_once "$1" --base "$2" --lr "$LR" --time-budget-min "$MINUTES" --mix ctx-heavy --distractors 0 \
    --seed 21 --probe-per-family 0 --ema-decay "$DECAY"
}
train p_v36 runs/base_v36
train p_spec "$SPECIALIST"
wait
uptime
.venv/bin/python bench/context_errors.py --model runs/base_v36 "$SPECIALIST" runs/p_{v36,spec}/final{,_ema} \
  --families ctx_add --per-family 200 --no-probe --threads 2 --json runs/ctx_heavy_errors.json
uptime
