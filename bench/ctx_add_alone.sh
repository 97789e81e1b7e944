#!/usr/bin/env bash
# Is ctx_add (a name looked up two lines up, plus a literal) past what the shipped model can learn, or only
# past what it learns inside the mix? v3.6 answers it right 0.92 of the time (200 held-out items,
# standalone) after ~10 hours of mixed training. Here the shipped model and its depth-upscaled copy
# (`--deepen 2`, 12 layers starting from the same function) are fine-tuned side by side on ctx_add alone
# (the `ctx-add-alone` mix) for the same wall time, one thread each, same data and schedule, in two legs:
# MINUTES at LR (AdamW from zero), then MINUTES2 at LR2 from there (AdamW from the first leg's moments, new
# data). Then the start and every end answer the same 200 held-out ctx_add items, standalone and in the
# model card's prompt-length buckets (bench/context_errors.py: NTP, greedy, deterministic).
# A diagnostic: the arms forget every other family and are not candidates to ship.
# Usage: bench/ctx_add_alone.sh [MINUTES LR MINUTES2 LR2]   (default 50 3e-4 60 1e-4)
# Runs go to runs/add_alone_d{1,2} (first leg) and runs/add_alone_d{1,2}_b (second leg); a leg whose
# final/ exists is not re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-50} LR=${2:-3e-4} MINUTES2=${3:-60} LR2=${4:-1e-4}
source bench/train_arm.sh
uptime
train() {  # out, minutes, lr, seed, extra flags
  # shellcheck disable=SC2086  # the flags are words on purpose
  train_arm_once "$1" $5 --lr "$3" --time-budget-min "$2" --mix ctx-add-alone --distractors 0 --seed "$4" \
    --probe-per-family 0
}
train add_alone_d1 "$MINUTES" "$LR" 3 "--base sbd_viz/models/sbd-char-5m"
train add_alone_d2 "$MINUTES" "$LR" 3 "--base sbd_viz/models/sbd-char-5m --deepen 2"
wait
for d in d1 d2; do
  train add_alone_${d}_b "$MINUTES2" "$LR2" 4 "--base runs/add_alone_$d/final --optimizer-from runs/add_alone_$d/checkpoint"
done
wait
uptime
.venv/bin/python bench/context_errors.py --model sbd_viz/models/sbd-char-5m runs/add_alone_d{1,2}/final runs/add_alone_d{1,2}_b/final \
  --families ctx_add --per-family 200 --no-probe --threads 2 --json runs/add_alone_errors.json
uptime
