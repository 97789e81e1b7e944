#!/usr/bin/env bash
# What a depth-upscaled copy costs to train here: seconds per step of `sbd-viz train --deepen 2` (12 layers)
# beside the 6-layer model, run one after the other on an otherwise idle machine (load average printed).
# Usage: bench/depth_cost.sh [BASE_MODEL_DIR]   (default: the shipped model; scratch runs go to runs/cost_d*)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-sbd_viz/models/sbd-char-5m}
uptime
for shape in "128 32" "512 8"; do
  set -- $shape
  for d in 1 2; do
    rm -rf runs/cost_d$d
    .venv/bin/sbd-viz train --base "$BASE" --deepen $d --seq-len $1 --batch-size $2 --max-steps 12 --warmup 2 \
      --log-every 1 --probe-per-family 0 --no-bf16 --threads 2 --mix v3-lookup --out runs/cost_d$d > /dev/null 2>&1
    # the log's clock (minutes since start) at steps 2 and 12: ten steps, the first one's set-up left out
    .venv/bin/python -c "
import json; r = [json.loads(line) for line in open('runs/cost_d$d/train_log.jsonl')]
print('windows $2 x $1, deepen $d: %.2f s a step over steps 3-12' % ((r[-1]['min'] - r[1]['min']) * 60 / (len(r) - 2)))"
  done
done
uptime
