"""Sweeps that decode each γ piece once: the model calls they save on the character model's bench suite, and that
their rows are the same.

Each sweep below runs twice on the same items, back to back: with ``reuse_pieces=True`` (the default: a γ whose
piece, ``Trace.gamma_range``, was decoded at another γ of the sweep reads that decode) and with
``reuse_pieces=False`` (every γ decoded on its own, as the sweeps did before). Forwards are counted by a hook on the
network itself, so they hold every call made: the decoders', HF ``generate``'s for NTP, and the sweep's
teacher-forced passes. The page also gives the sweeps' own counts (``attrs``) and compares every column of the two
frames but the wall-clock ones.

- **speed**: ``bench/scripts/bench_speed.py``'s sweep (held-out suite, its γ values, entropy-bounded, the model's
  block; long- and short-answer families apart), decodes timed beside NTP;
- **app**: the app's speed/quality curve (``sbd_viz.app.curve.SWEEP_GRID``: four rules, the verified line);
- **decoders**: ``sv.sweep_decoders`` with its defaults (every decoder, γ 0.1, 0.5, 1, 2; plain and verified).

    nice python bench/scripts/bench_sweep_pieces.py --threads 1 --out bench/SWEEP_PIECES.md \
        --json bench/results/sweep_pieces.json
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.tasks.asserts import LONG_FAMILIES, SHORT_FAMILIES

import run_info  # beside this file
from bench_speed import GAMMAS as SPEED_GAMMAS

TIMED = ("wall_time", "ntp_wall_time", "speedup_wall", "measured_at")


@contextlib.contextmanager
def counted_forwards(model):
    count = [0]
    handle = model.model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    try:
        yield count
    finally:
        handle.remove()


def speed_page(model, per_family: int):
    def sweep(reuse):
        frames = []
        for families in (LONG_FAMILIES, SHORT_FAMILIES):
            items = tasks.load_suite(split="test", per_family=per_family, families=families)
            frames.append(sv.sweep(model, items, gammas=SPEED_GAMMAS, block_sizes=(model.block_size,),
                                   cache_dir=None, progress=False, reuse_pieces=reuse))
        return frames
    return sweep


def app_curve(model, per_family: int):
    from sbd_viz.app.curve import SWEEP_GRID, SWEEP_VERIFIED

    def sweep(reuse):
        items = tasks.load_suite("pyasserts", "test", per_family=per_family)
        return [sv.sweep(model, items, rules=[rule], gammas=list(gammas), block_sizes=[model.block_size],
                         progress=False, cache_dir=None, verify=(False, True) if rule == SWEEP_VERIFIED else (False,),
                         reuse_pieces=reuse) for rule, gammas in SWEEP_GRID.items()]
    return sweep


def decoders(model, per_family: int):
    def sweep(reuse):
        return [sv.sweep_decoders(model, tasks.load_suite(split="test", per_family=per_family), reuse_pieces=reuse)]
    return sweep


SWEEPS = {"speed": speed_page, "app": app_curve, "decoders": decoders}


def own_counts(frames) -> tuple[int, int]:
    """The sweeps' own count: calls of the decodes run, and of those not run (read off a piece)."""
    run = sum(f.attrs["calls_run"] for f in frames)
    saved = sum(f.attrs["calls_reused"] if "calls_reused" in f.attrs else f.attrs["calls_direct"] - f.attrs["calls_run"]
                for f in frames)
    return run, saved


def same_rows(a, b) -> bool:
    return all(x[[c for c in x.columns if c not in TIMED]].equals(y[[c for c in y.columns if c not in TIMED]])
               for x, y in zip(a, b))


def run(args, argv):
    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    argv = list(sys.argv[1:] if argv is None else argv)
    header = {"command": " ".join(["python bench/scripts/bench_sweep_pieces.py", *argv]),
              "date": run_info.utc_now(), "machine": run_info.machine(args.threads), "load_start": run_info.load(),
              "model": model.name, "block_size": model.block_size, "per_family": args.per_family}
    t0 = time.perf_counter()
    results = []
    for name in args.sweeps:
        sweep = SWEEPS[name](model, args.per_family)
        row = {"sweep": name}
        frames = {}
        for reuse in (True, False):
            with counted_forwards(model) as count:
                t = time.perf_counter()
                frames[reuse] = sweep(reuse)
                row[f"seconds_{reuse}"] = round(time.perf_counter() - t, 1)
            row[f"forwards_{reuse}"] = count[0]
            row[f"own_run_{reuse}"], row[f"own_saved_{reuse}"] = own_counts(frames[reuse])
        row["settings"] = sum(len(f) - 1 for f in frames[True])
        row["items"] = int(frames[True][0]["n_items"].iloc[0]) if name != "speed" else \
            sum(int(f["n_items"].iloc[0]) for f in frames[True])
        row["same_rows"] = same_rows(frames[True], frames[False])
        results.append(row)
        print(row, file=sys.stderr, flush=True)
    header["seconds"] = round(time.perf_counter() - t0, 1)
    header["load_end"] = run_info.load()
    return header, results, []


def markdown(header: dict, results: list[dict], examples: list[dict]) -> str:
    lines = [
        "# Sweeps that decode each γ piece once: model calls saved on the bench suite", "",
        f"Command: `{header['command']}`  ",
        f"Run {header['date']} on {header['machine']}; load average {header['load_start']} at the start, "
        f"{header['load_end']} at the end; {header['seconds']} s.  ",
        f"Model `{header['model']}`, block {header['block_size']}; held-out suite, {header['per_family']} items per "
        "family.", "",
        "Each sweep ran twice on the same items: **pieces** (`reuse_pieces=True`, the default: a γ whose piece was "
        "decoded at another γ of the sweep reads that decode) and **every γ** (`reuse_pieces=False`: each γ decoded "
        "on its own). **Forwards** are counted by a hook on the network: every call, the decoders', NTP's (HF "
        "`generate`) and the sweep's teacher-forced passes. **Decode calls** are the sweeps' own count of their "
        "decodes' calls (`attrs`), teacher-forced passes aside. **Same rows**: every column of the two frames equal "
        "but the wall-clock ones (`wall_time`, `ntp_wall_time`, `speedup_wall`, `measured_at`).", "",
        "| sweep | items | settings | forwards: every γ | forwards: pieces | forwards saved | decode calls: every γ "
        "| decode calls: pieces | decode calls saved | same rows |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        before, after = r["forwards_False"], r["forwards_True"]
        own_before, own_after = r["own_run_False"], r["own_run_True"]
        lines.append(
            f"| {r['sweep']} | {r['items']} | {r['settings']} | {before:,} | {after:,} "
            f"| {before - after:,} ({100 * (before - after) / before:.0f}%) | {own_before:,} | {own_after:,} "
            f"| {own_before - own_after:,} ({100 * (own_before - own_after) / own_before:.0f}%) "
            f"| {'yes' if r['same_rows'] else 'NO'} |")
    seconds = "; ".join(f"{r['sweep']} {r['seconds_False']:.0f} s every γ, {r['seconds_True']:.0f} s pieces"
                        for r in results)
    lines += ["", "The calls are exact. The page compares calls, not seconds: each sweep ran once each way on a CPU "
              "shared with other jobs (load averages above), where a run's seconds measure the load as much as the "
              f"sweep ({seconds}). In a sweep that times its decodes (the speed page's, the app's) a reused row keeps "
              "the seconds measured with the decode it reads (the same decode), so its wall-clock columns are one "
              "measurement, not two.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model folder (default: the shipped model)")
    p.add_argument("--sweeps", nargs="+", choices=list(SWEEPS), default=list(SWEEPS))
    p.add_argument("--per-family", type=int, default=10, help="held-out items per family (the speed page's)")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, None, None)
    run_info.write_page(p, p.parse_args(argv), argv, run, markdown)


if __name__ == "__main__":
    main()
