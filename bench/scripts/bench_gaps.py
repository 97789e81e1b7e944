"""Gap fills: what they cost, and the gap-free ablation. Writes ``bench/GAPS.md`` and ``bench/results/gaps.json``.

    python bench/scripts/bench_gaps.py --per-family 20 --threads 2       # 200 held-out items: minutes on 2 cores
    python bench/scripts/bench_gaps.py --from-json bench/results/gaps.json   # the page again, decoding nothing

One ``sv.sweep`` of the entropy-bounded rule over ``--gammas`` at the model's block size, every setting run as it is
and gap-free (``gap_free=(False, True)``: the same rule restricted to a contiguous run from the leftmost masked slot),
each beside NTP (HF ``generate``, greedy) item by item, so the speedups are measured side by side. The JSON keeps the
sweep's rows whole (what ``sbd-viz sweep --gap-free-too --out FILE`` writes as CSV); the page shows some of their
columns and reads them.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time

from sbd_viz.trace.labels import COUNT_LABELS

import run_info  # beside this file

GAMMAS = (0.0, 0.1, 0.35, 0.6, 1.0)
COUNTED = COUNT_LABELS[(True, True)]  # the sweep's tokens_per_call: its tokens over its calls


def run(args, argv) -> dict:
    """The sweep: its rows, and the header that says what ran, where and when."""
    import torch

    import sbd_viz as sv

    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    suite = sv.tasks.load_suite(split="test", per_family=args.per_family)
    t0 = time.perf_counter()
    df = sv.sweep(model, suite, gammas=args.gammas, gap_free=(False, True), cache_dir=None)
    rows = df.astype(object).where(df.notna(), None).to_dict(orient="records")  # NaN -> null
    header = {"command": shlex.join(["python", "bench/scripts/bench_gaps.py", *argv]), "date": run_info.utc_now(),
              "machine": f"{run_info.machine(args.threads)} ({run_info.cpu_name()})",
              "minutes": (time.perf_counter() - t0) / 60, "items": len(suite), "per_family": args.per_family,
              "block_size": model.block_size}
    return {"header": header, "rows": rows}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _range(values, fmt: str = ".1f", unit: str = "") -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def _span(values) -> str:
    """A range of points, each to a tenth and without a trailing ``.0``."""
    lo, hi = (f"{round(v, 1):g}" for v in (min(values), max(values)))
    return lo if lo == hi else f"{lo}-{hi}"


def render(d: dict) -> str:
    """The page from a run's data."""
    h, rows = d["header"], d["rows"]
    ntp = next(r for r in rows if r["rule"] == "ntp")
    free = {r["gamma"]: r for r in rows if r["rule"] != "ntp" and not r["gap_free"]}
    tight = {r["gamma"]: r for r in rows if r["rule"] != "ntp" and r["gap_free"]}
    gammas = sorted(g for g in free if g in tight)
    fingerprint = next(r["fingerprint"] for r in rows if r.get("fingerprint"))

    def acc_split(r: dict) -> str:
        return " / ".join("–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"
                          for v in (r["accuracy_with_gaps"], r["accuracy_without_gaps"]))

    lines = ["# Gap fills: what they cost, and the gap-free ablation", "",
             f"Produced by `{h['command']}` on {h['date']} ({h['machine']}; {h['minutes']:.1f} min) on {h['items']} "
             f"held-out suite items ({h['per_family']} per family), entropy-bounded rule, block {h['block_size']}. "
             "Every setting is decoded beside NTP (HF `generate`, greedy), item by item, so the speedups are measured "
             "side by side; the table below is columns of the sweep's rows in `bench/results/gaps.json`, which has "
             "them all.", "",
             *run_info.earlier_model(fingerprint),
             "A gap fill is a commit made while a slot to its left in the block was still masked "
             "(`PREFIX <m> <m> TOKEN`). `gap_free=True` restricts the same rule to a contiguous run from the leftmost "
             "masked slot.", "",
             f"| γ | free: accuracy | free: {COUNTED} | free: wall speedup | free: gap fills per kept token | free: "
             f"accuracy of answers with / without a gap fill | gap-free: accuracy | gap-free: {COUNTED} | gap-free: "
             "wall speedup |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for g in gammas:
        f, t = free[g], tight[g]
        lines.append(f"| {g:g} | {f['accuracy']:.3f} | {f['tokens_per_call']:.2f} | {f['speedup_wall']:.2f}x | "
                     f"{f['gap_fill_rate']:.3f} | {acc_split(f)} | {t['accuracy']:.3f} | {t['tokens_per_call']:.2f} | "
                     f"{t['speedup_wall']:.2f}x |")
    lines += ["", f"NTP on the same items: accuracy {ntp['accuracy']:.3f}.", "", "What it says:", ""]
    small = min(g for g in gammas if g > 0)  # the smallest γ that lets a call commit more than one token
    s_free, s_tight = free[small], tight[small]
    lost = 100 * (ntp["accuracy"] - s_free["accuracy"])
    back = 100 * (s_tight["accuracy"] - s_free["accuracy"])
    fewer = 1 - s_tight["tokens_per_call"] / s_free["tokens_per_call"]
    lines += [f"- **Gap fills are how SBD gets its speed here, and at small γ they are nearly free.** At γ "
              f"{small:g} the free rule is within {lost:.1f} points of NTP with {s_free['tokens_per_call']:.1f} "
              f"{COUNTED}; removing gap fills costs {fewer:.0%} of them ({s_tight['tokens_per_call']:.1f}) and buys "
              + (f"back those {lost:.1f} points." if back >= lost else f"back {back:.1f} of those points.")]
    large = [g for g in gammas if g > small]
    if large:
        mid, top = large[0], large[-1]
        accuracy = _range([100 * tight[g]["accuracy"] for g in large], unit="%")
        fewer_tpc = _range([100 * (1 - tight[g]["tokens_per_call"] / free[g]["tokens_per_call"]) for g in large],
                           ".0f", "%")
        tight_wall = _range([tight[g]["speedup_wall"] for g in large], unit="x")
        free_wall = _range([free[g]["speedup_wall"] for g in large], unit="x")
        gain = _span([100 * (tight[g]["accuracy"] - free[g]["accuracy"]) for g in large])
        lines.append(
            f"- **At larger γ, answers with gap fills are where the errors are.** At γ {mid:g} answers that kept a "
            f"gap fill are right {_pct(free[mid]['accuracy_with_gaps'])} of the time against "
            f"{_pct(free[mid]['accuracy_without_gaps'])} for the rest; at γ {top:g}, "
            f"{_pct(free[top]['accuracy_with_gaps'])} against {_pct(free[top]['accuracy_without_gaps'])}. The "
            f"gap-free rule at the same γ keeps {accuracy} accuracy with {fewer_tpc} fewer tokens per call than the "
            f"free rule (wall-clock: {tight_wall} vs {free_wall} faster than NTP), so for γ >= {mid:g} it is {gain} "
            f"points more accurate at nearly the same speed. At γ {small:g} the price of gap-free is larger in "
            f"wall-clock ({s_tight['speedup_wall']:.1f}x vs {s_free['speedup_wall']:.1f}x faster than NTP).")
    lines += ["- Correlation is not cause: long answers have the most room for gap fills and are the hardest items. "
              "Notebook 3 (`notebooks/03_gap_fill_failures.ipynb`) checks each suspicious gap fill against what NTP "
              "would have written at that position given the same prefix (teacher forced).", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--gammas", nargs="+", type=float, default=list(GAMMAS), help="γ values (default: %(default)s)")
    p.add_argument("--per-family", type=int, default=20, help="held-out items of each family (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    run_info.add_page_arguments(p, run_info.BENCH / "GAPS.md", run_info.RESULTS / "gaps.json")
    args = p.parse_args(argv)
    if not args.from_json and args.per_family < 1:
        p.error(f"--per-family: need at least one item a family, got {args.per_family}")
    print(run_info.page_from_data(args, argv, run, render))
    return 0


if __name__ == "__main__":
    sys.exit(main())
