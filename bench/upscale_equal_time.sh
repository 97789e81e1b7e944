#!/usr/bin/env bash
# Does a bigger model pay for itself in a fixed CPU budget? The shipped model and an upscaled copy of it
# (`sbd-viz train --deepen N` or `--widen HIDDEN`: more layers or more width, starting from the same
# function, see sbd_viz/upscale.py) fine-tuned side by side for the same wall time, one thread each, same
# data, same lr and schedule; then both, and the start, judged on the same held-out items: the quick model
# card (exact match, standalone and in documents), the answer loss (a finer ruler) and what a decoding call
# costs each.
# Usage: bench/upscale_equal_time.sh [MINUTES] [UPSCALE]   (default 65 "--deepen 2"; e.g. 65 "--widen 384")
# Runs and results go to runs/upscale_same and runs/upscale_<upscale>, e.g. runs/upscale_deepen2.
# (Measured as bench/depth_equal_time.sh, whose two arms were runs/depth_d1 and runs/depth_d2.)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-65}
UPSCALE=${2:---deepen 2}
UP=upscale_$(echo "$UPSCALE" | tr -d ' -')
source bench/train_arm.sh
uptime
train() {  # name, extra flags
  # shellcheck disable=SC2086  # the flags are words on purpose
  train_arm "$1" --base sbd_viz/models/sbd-char-5m $2 --lr 5e-4 --time-budget-min "$MINUTES" --mix v3-lookup --seed 3 \
    --probe-per-family 4
}
train upscale_same ""
train "$UP" "$UPSCALE"
wait
uptime
for m in sbd_viz/models/sbd-char-5m runs/upscale_same/final runs/$UP/final; do
  .venv/bin/python bench/model_card.py --model $m --per-family 20 --quick --threads 2 \
    --out runs/upscale_card_$(basename $(dirname $m))_$(basename $m) > /dev/null
done
.venv/bin/python bench/answer_loss.py --model sbd_viz/models/sbd-char-5m runs/upscale_same/final runs/$UP/final \
  --per-family 40 --threads 2 --json runs/${UP}_answer_loss.json
# what a decoding call costs each, interleaved: median ms of a 1-token call and of a 16-slot block call
UP=$UP .venv/bin/python - <<'PY'
import importlib.util, os, torch, sbd_viz as sv
torch.set_num_threads(2)
spec = importlib.util.spec_from_file_location("bench_speed", "bench/bench_speed.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
models = {p: sv.load_model(p) for p in ("sbd_viz/models/sbd-char-5m", f"runs/{os.environ['UP']}/final")}
prompt = sv.tasks.load_suite(per_family=1)[1].prompt
runs = {p: [bench.latency_table(m, prompt, k=16, reps=20) for _ in range(3)] for p, m in models.items()}
for p, tables in runs.items():
    print(p, {f"{row['n_input']}-token call": sorted(t[i]["median_ms"] for t in tables)[1]
              for i, row in enumerate(tables[0][:2])}, "ms")
PY
uptime
