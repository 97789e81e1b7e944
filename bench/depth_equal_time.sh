#!/usr/bin/env bash
# Does depth pay for itself in a fixed CPU budget? The shipped model (6 layers) and its `--deepen 2` copy
# (12 layers, starting from the same function) fine-tuned side by side for the same wall time, one thread
# each, same data, same lr and schedule; then both, and the start, judged on the same held-out items:
# the quick model card (exact match, standalone and in documents) and the answer loss (a finer ruler).
# Usage: bench/depth_equal_time.sh [MINUTES]   (default 65; runs and results go to runs/depth_*)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-65}
uptime
for d in 1 2; do
  rm -rf runs/depth_d$d
  nice .venv/bin/sbd-viz train --base models/sbd-char-5m --deepen $d --seq-len 512 --batch-size 8 \
    --lr 5e-4 --warmup 20 --max-steps 5000 --time-budget-min "$MINUTES" --mix v3-lookup \
    --doc-min-lines 4 --doc-max-lines 16 --seed 3 --no-bf16 --threads 1 --log-every 25 \
    --probe-per-family 4 --ckpt-every-min 10 --out runs/depth_d$d > runs/depth_d$d.log 2>&1 &
done
wait
uptime
for m in models/sbd-char-5m runs/depth_d1/final runs/depth_d2/final; do
  .venv/bin/python bench/model_card.py --model $m --per-family 20 --quick --threads 2 \
    --out runs/depth_card_$(basename $(dirname $m))_$(basename $m) > /dev/null
done
.venv/bin/python bench/answer_loss.py --model models/sbd-char-5m runs/depth_d1/final runs/depth_d2/final \
  --per-family 40 --threads 2 --json runs/depth_answer_loss.json
# what a decoding call costs each, interleaved: median ms of a 1-token call and of a 16-slot block call
.venv/bin/python - <<'PY'
import importlib.util, torch, sbd_viz as sv
torch.set_num_threads(2)
spec = importlib.util.spec_from_file_location("bench_speed", "bench/bench_speed.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
models = {p: sv.load_model(p) for p in ("models/sbd-char-5m", "runs/depth_d2/final")}
prompt = sv.tasks.load_suite(per_family=1)[1].prompt
runs = {p: [bench.latency_table(m, prompt, k=16, reps=20) for _ in range(3)] for p, m in models.items()}
for p, tables in runs.items():
    print(p, {f"{row['n_input']}-token call": sorted(t[i]["median_ms"] for t in tables)[1]
              for i, row in enumerate(tables[0][:2])}, "ms")
PY
uptime
