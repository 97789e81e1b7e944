# Sourced by the side-by-side training scripts (bench/*_equal_time.sh, ctx_add_alone.sh, ctx_heavy.sh).
# train_arm OUT FLAGS...: start one arm of a side-by-side fine-tune in the background, afresh, in runs/OUT
# (log in runs/OUT.log). The flags every arm shares are here: 512-character windows from 4-16-line
# documents, batch 8, one thread each so two arms share the two cores evenly, a checkpoint every 10 minutes;
# FLAGS name what differs (base, lr, minutes, mix, seed, ...). The caller waits for its arms with `wait`.
train_arm() {
  local out=$1
  shift
  rm -rf "runs/$out"
  nice .venv/bin/sbd-viz train "$@" --seq-len 512 --batch-size 8 --warmup 20 --max-steps 5000 \
    --doc-min-lines 4 --doc-max-lines 16 --no-bf16 --threads 1 --log-every 25 --ckpt-every-min 10 \
    --out "runs/$out" > "runs/$out.log" 2>&1 &
}

# train_arm_once OUT FLAGS...: the same, unless runs/OUT/final exists (a finished arm is kept, so a script
# that stopped part-way can be re-run).
train_arm_once() {
  [ -d "runs/$1/final" ] || train_arm "$@"
}
