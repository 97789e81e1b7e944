#!/usr/bin/env bash
# Is ctx_add (a name looked up two lines up, plus a literal) past what the shipped model can learn, or only
# past what it learns inside the mix? v3.6 answers it right 0.92 of the time (200 held-out items,
# standalone) after ~10 hours of mixed training. Here the shipped model and its depth-upscaled copy
# (`--deepen 2`, 12 layers starting from the same function) are fine-tuned side by side on ctx_add alone
# (the `ctx-add-alone` mix) for the same wall time, one thread each, same data and schedule; then the start
# and both ends answer the same 200 held-out ctx_add items, standalone and in the model card's
# prompt-length buckets (bench/context_errors.py: NTP, greedy, deterministic).
# A diagnostic: the arms forget every other family and are not candidates to ship.
# Usage: bench/ctx_add_alone.sh [MINUTES] [LR]   (default 50 3e-4). Runs go to runs/add_alone_d{1,2}.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-50}
LR=${2:-3e-4}
uptime
train() {  # name, extra flags
  rm -rf runs/$1
  # shellcheck disable=SC2086  # the flags are words on purpose
  nice .venv/bin/sbd-viz train --base models/sbd-char-5m $2 --seq-len 512 --batch-size 8 \
    --lr "$LR" --warmup 20 --max-steps 5000 --time-budget-min "$MINUTES" --mix ctx-add-alone \
    --distractors 0 --doc-min-lines 4 --doc-max-lines 16 --seed 3 --no-bf16 --threads 1 --log-every 25 \
    --probe-per-family 0 --ckpt-every-min 10 --out runs/$1 > runs/$1.log 2>&1 &
}
train add_alone_d1 ""
train add_alone_d2 "--deepen 2"
wait
uptime
.venv/bin/python bench/context_errors.py --model models/sbd-char-5m runs/add_alone_d1/final runs/add_alone_d2/final \
  --families ctx_add --per-family 200 --no-probe --threads 2 --json runs/add_alone_errors.json
uptime
