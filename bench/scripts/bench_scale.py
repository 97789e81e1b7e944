"""Sweeps at scale: decode and sweep throughput at batch 1, 8 and 32, and a sweep on 1 and 2 processes.

    python bench/scripts/bench_scale.py [--threads 2] [--per-family 40] [--rounds 2]
    python bench/scripts/bench_scale.py --quick          # seconds: checks the script; writes nothing by default

One run on a quiet machine (no training run going; the load average is printed):

1. **Decoding**: the test suite decoded with SBD (entropy-bounded γ 0.1, block 16, to the end of
   the answer line) item by item with ``sv.decode`` (batch 1) and with ``BatchDecoding`` at batch 8
   and 32, rounds interleaved (1, 8, 32, then 32, 8, 1); items per second (median of rounds), how
   busy the batch was (busy row-calls / computed row-slots; requested tokens / computed tokens),
   and how many items' output ids differ from batch 1's.
2. **Sweeps**: ``sv.sweep`` of one setting over the suite at batch 1, 8 and 32 with
   ``speed_batch_size=None`` (the quality columns: SBD, NTP beside it, teacher forcing), items per
   second and whether the quality columns equal batch 1's.
3. **Processes**: the batch-8 sweep under ``accelerate launch`` with 2 processes of 1 thread each,
   against 1 process of 2 threads: wall time of the launched command (start-up included) and the
   sweep's own seconds; rows equal or not.

Writes ``bench/SCALE.md`` and ``bench/results/scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run_info  # beside this file

QUALITY = ["accuracy", "calls_per_token", "tokens_per_call", "speedup_calls", "gap_fill_rate", "n_gap_fills",
           "ntp_agreement", "same_as_ntp", "n_items", "calls", "tokens"]
SWEEP_SCRIPT = """
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
import sbd_viz as sv
from sbd_viz.analysis.evaluation import is_main_process

model = sv.load_model()
items = sv.tasks.load_suite(per_family=int(sys.argv[2]))
t0 = time.perf_counter()
df = sv.sweep(model, items, gammas=[0.1], cache_dir=None, progress=False, batch_size=int(sys.argv[3]),
              speed_batch_size=None)
seconds = time.perf_counter() - t0
if is_main_process():
    df.to_csv(sys.argv[1], index=False)
    print(json.dumps({"sweep_seconds": seconds}))
"""


def decode_round(model, prompts, batch_size, config, decoder="sbd"):
    import sbd_viz as sv
    from sbd_viz.decoders.batch import BatchDecoding

    t0 = time.perf_counter()
    if batch_size == 1 and decoder == "sbd":
        traces = [sv.decode(model, p, rule=config.rule, gamma=config.gamma, block_size=config.block_size,
                            stop=config.stop, max_new_tokens=config.max_new_tokens) for p in prompts]
        stats = None
    elif batch_size == 1:
        traces = [sv.decode_ntp(model, p, max_new_tokens=config.max_new_tokens, stop=config.stop) for p in prompts]
        stats = None
    else:
        batch = BatchDecoding(model, prompts, config, batch_size, decoder=decoder)
        traces = batch.run()
        stats = batch.stats.as_dict()
    return time.perf_counter() - t0, [list(t.output_ids) for t in traces], stats


def forward_ceiling(model, rows: int = 32, widths=(1, 16, 32, 56), repeats: int = 5) -> list[dict]:
    """What one forward of ``rows`` rows saves over ``rows`` single-row forwards, at each width (tokens per row,
    no cache): the most any batching can give on this CPU at that width (medians of ``repeats``)."""
    import torch

    out = []
    with torch.inference_mode():
        for width in widths:
            ids = torch.randint(3, model.model.config.vocab_size, (rows, width))
            singles, batched = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for r in range(rows):
                    model.model(input_ids=ids[r: r + 1], use_cache=False)
                singles.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                model.model(input_ids=ids, use_cache=False)
                batched.append(time.perf_counter() - t0)
            s, b = statistics.median(singles), statistics.median(batched)
            out.append({"rows": rows, "width": width, "singles_ms": 1000 * s, "batched_ms": 1000 * b, "ratio": s / b})
            print(f"ceiling: {rows} rows x {width} tokens: {s / b:.2f}x", flush=True)
    return out


def launched_sweep(processes: int, threads: int, per_family: int, batch_size: int, out: Path) -> dict:
    script = out.parent / "sweep_script.py"
    script.write_text(SWEEP_SCRIPT)
    args = [str(script), str(out), str(per_family), str(batch_size), str(threads)]
    if processes == 1:
        cmd = [sys.executable] + args
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"] + args
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{done.stderr[-3000:]}")
    inner = json.loads(done.stdout.strip().splitlines()[-1])
    return {"processes": processes, "threads": threads, "wall_seconds": wall, **inner}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--per-family", type=int, default=40, help="suite items per family (40 = the whole test split)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--quick", action="store_true", help="a few items, one round; writes nothing unless --out")
    p.add_argument("--out", default=None,
                   help="write SCALE.md and scale.json into this folder (default: bench/ and bench/results/)")
    args = p.parse_args(argv)
    if args.quick:
        args.per_family, args.rounds = 1, 1

    import pandas as pd
    import torch

    import sbd_viz as sv

    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(f"load average at start: {run_info.load()}", flush=True)
    model = sv.load_model()
    items = sv.tasks.load_suite(per_family=args.per_family)
    prompts = [item.prompt for item in items]
    config = sv.DecodeConfig(gamma=0.1, block_size=16, stop=("\n",))

    # 1. decoding: SBD and greedy NTP (the sweep's baseline), each batch size, rounds interleaved
    runs = [(d, b) for d in ("sbd", "ntp") for b in args.batches]
    seconds = {run: [] for run in runs}
    outputs, stats = {}, {}
    for r in range(args.rounds):
        for d, b in (runs if r % 2 == 0 else list(reversed(runs))):
            s, out, st = decode_round(model, prompts, b, config, d)
            seconds[(d, b)].append(s)
            outputs[(d, b)], stats[(d, b)] = out, st
            print(f"decode round {r} {d} batch {b}: {len(prompts) / s:.1f} items/s", flush=True)
    base = args.batches[0]
    decode_rows = []
    for d, b in runs:
        med = statistics.median(seconds[(d, b)])
        row = {"decoder": d, "batch": b, "seconds": med, "items_per_s": len(prompts) / med,
               "vs_batch_1": statistics.median(seconds[(d, base)]) / med,
               "differ": sum(x != y for x, y in zip(outputs[(d, b)], outputs[(d, base)]))}
        st = stats[(d, b)]
        if st:
            row.update({k: st[k] for k in ("row_efficiency", "token_efficiency", "calls", "row_calls", "compactions",
                                           "prefill_pieces")})
        decode_rows.append(row)
    ceiling = forward_ceiling(model, rows=max(args.batches), repeats=1 if args.quick else 5)

    # 2. sweeps
    sweep_rows, frames = [], {}
    for b in args.batches:
        t0 = time.perf_counter()
        frames[b] = sv.sweep(model, items, gammas=[0.1], cache_dir=None, progress=False, batch_size=b,
                             speed_batch_size=None)
        s = time.perf_counter() - t0
        sweep_rows.append({"batch": b, "seconds": s, "items_per_s": len(items) / s})
        print(f"sweep batch {b}: {len(items) / s:.2f} items/s", flush=True)
    t1 = sweep_rows[0]["seconds"]
    for row in sweep_rows:
        row["vs_batch_1"] = t1 / row["seconds"]
        row["quality_equal"] = bool(frames[row["batch"]][QUALITY].equals(frames[base][QUALITY]))

    # 3. processes
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        procs = [launched_sweep(1, args.threads, args.per_family, 8, tmp / "one.csv"),
                 launched_sweep(2, max(1, args.threads // 2), args.per_family, 8, tmp / "two.csv")]
        one, two = pd.read_csv(tmp / "one.csv"), pd.read_csv(tmp / "two.csv")
        procs_equal = bool(one[QUALITY].equals(two[QUALITY]))
    for row in procs:
        row["items_per_s"] = len(items) / row["sweep_seconds"]
        print(f"sweep on {row['processes']} process(es): {row['sweep_seconds']:.1f} s sweep, "
              f"{row['wall_seconds']:.1f} s launched", flush=True)

    end_load = os.getloadavg()
    result = {"when": run_info.utc_now(), "threads": args.threads,
              "n_items": len(items), "load_start": load, "load_end": end_load,
              "machine": run_info.machine(),
              "fingerprint": model.fingerprint(), "decode": decode_rows, "ceiling": ceiling, "sweep": sweep_rows,
              "processes": procs, "processes_equal": procs_equal,
              "command": shlex.join(["python", "bench/scripts/bench_scale.py",
                                     *(argv if argv is not None else sys.argv[1:])])}
    print(json.dumps(result, indent=1))
    if args.quick and not args.out:
        return 0
    page = run_info.save_run(result, "scale.json", "SCALE.md", report(result), args.out)
    print(f"wrote {page}")
    return 0


def report(r: dict) -> str:
    lines = [
        "# Sweeps at scale: batched decoding and two processes", "",
        f"Produced by `{r['command']}` on {r['when']}; {r['machine']}, {r['threads']} threads; model "
        f"`sbd-char-5m` (fingerprint {r['fingerprint']}); load average {r['load_start'][0]:.2f} at the start, "
        f"{r['load_end'][0]:.2f} at the end. {r['n_items']} test-suite items, SBD entropy-bounded γ 0.1, "
        "block 16, each decoded to the end of its answer line.", "",
        *run_info.earlier_model(r["fingerprint"]),
        "## Decoding", "",
        "Batch 1 is `sv.decode` (SBD) or `sv.decode_ntp` (greedy NTP) item by item; batch B is `sv.BatchDecoding` "
        "(rows advance independently, a finished row's place goes to the next prompt; NTP rows feed prompts in "
        "pieces of 16). Items per second: median of the rounds, interleaved.", "",
        "| decoder | batch | items/s | × batch 1 | outputs differing from batch 1 | busy row-calls / row-slots | "
        "requested / computed tokens | forwards | prefill pieces |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in r["decode"]:
        lines.append(f"| {d['decoder']} | {d['batch']} | {d['items_per_s']:.1f} | **{d['vs_batch_1']:.2f}** | "
                     f"{d['differ']} | {d.get('row_efficiency', 1.0):.2f} | "
                     f"{d.get('token_efficiency', float('nan')):.2f} | {d.get('calls', '')} | "
                     f"{d.get('prefill_pieces', '')} |")
    lines += [
        "", "## The ceiling on this CPU", "",
        "One forward of a batch against the same rows as single forwards (random ids, no cache, medians): the "
        "most any batching design can save at that many tokens per row. An SBD row feeds its 16-slot block "
        "and up to 16 new tokens, so its forwards sit at 16-32 tokens per row.", "",
        "| rows | tokens per row | single forwards ms | one batched forward ms | ratio |", "| --- | --- | --- | --- | --- |"]
    for c in r.get("ceiling", []):
        lines.append(f"| {c['rows']} | {c['width']} | {c['singles_ms']:.0f} | {c['batched_ms']:.0f} | "
                     f"**{c['ratio']:.2f}** |")
    lines += [
        "", "## Sweeps", "",
        "`sv.sweep(model, suite, gammas=[0.1], batch_size=B, speed_batch_size=None)`: SBD, greedy NTP beside it "
        "(batched too), and the teacher-forced agreement passes; no wall-clock columns.", "",
        "| batch | seconds | items/s | × batch 1 | quality columns equal batch 1's |", "| --- | --- | --- | --- | --- |"]
    for s in r["sweep"]:
        lines.append(f"| {s['batch']} | {s['seconds']:.1f} | {s['items_per_s']:.2f} | **{s['vs_batch_1']:.2f}** | "
                     f"{'yes' if s['quality_equal'] else 'NO'} |")
    lines += [
        "", "## Processes", "",
        "The batch-8 sweep as one process of all the threads, and under `accelerate launch --multi_gpu "
        "--num_processes 2` (torchrun, gloo on this CPU) with the threads split between the processes.", "",
        "| processes | threads each | sweep seconds | items/s | launched command seconds (start-up included) |",
        "| --- | --- | --- | --- | --- |"]
    for p in r["processes"]:
        lines.append(f"| {p['processes']} | {p['threads']} | {p['sweep_seconds']:.1f} | {p['items_per_s']:.2f} | "
                     f"{p['wall_seconds']:.1f} |")
    lines += ["", f"Two-process rows equal the one-process rows (quality columns): "
              f"**{'yes' if r['processes_equal'] else 'NO'}**.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
