#!/usr/bin/env bash
# Does teaching the context families' parts on their own pay for itself, against more of the same
# fine-tune? Two copies of one start (default runs/depth_d1/final, v3.1 + 65 min) fine-tuned side by
# side for the same wall time, one thread each, same lr and schedule, same seed:
#   control: the v3-lookup mix, as before;
#   parts:   the v3-parts mix, which adds two training-only families (ctx_get: the lookup alone;
#            range_sum: ctx_range's unwritten sum alone), and up to 3 extra assignments shuffled into
#            every context item's setup (--distractors 3).
# Then the start and both ends judged on the same held-out items: the answer loss and the quick card.
# Usage: bench/curriculum_equal_time.sh [MINUTES] [START]   (default 70, runs/depth_d1/final; results in runs/lookup_*)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-70}
START=${2:-runs/depth_d1/final}
source bench/train_arm.sh
uptime
train() {  # name, mix, distractors
  train_arm "lookup_$1" --base "$START" --lr 5e-4 --time-budget-min "$MINUTES" --mix "$2" --distractors "$3" \
    --seed 4 --probe-per-family 4
}
train control v3-lookup 0
train parts v3-parts 3
wait
uptime
.venv/bin/python bench/answer_loss.py --model "$START" runs/lookup_control/final runs/lookup_parts/final \
  --per-family 40 --threads 2 --json runs/lookup_answer_loss.json
for m in runs/lookup_control/final runs/lookup_parts/final; do
  .venv/bin/python bench/model_card.py --model $m --per-family 20 --quick --threads 2 \
    --out runs/lookup_card_$(basename $(dirname $m)) > /dev/null
done
.venv/bin/python bench/context_errors.py --model "$START" runs/lookup_control/final runs/lookup_parts/final \
  --per-family 40 --threads 2 --json runs/lookup_context_errors.json
uptime
