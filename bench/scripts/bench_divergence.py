"""Which items SBD loses against NTP, and the commit where each first went wrong.

For each place (the standalone suite and the model card's prompt-length buckets in documents), every held-out
item is decoded by NTP and by SBD (entropy-bounded, ``--gamma``, the model's block size) on the same weights;
where the two outputs differ, ``sbd_viz.analysis.divergence.first_divergence`` finds the first commit, in call order, that
left NTP's text. The report counts the items SBD loses (NTP right, SBD wrong) and wins, and for the lost ones how
many first went wrong at the call's *uncounted* slot (eq. 8 leaves its entropy out of gamma) with more entropy than
gamma alone: commits the budget would not have allowed. Then it lists the lost items with the block at that call.

Deterministic (greedy, no timing): the same model and draw give the same report. ``--from-json`` renders a
run's ``--json`` again without decoding.

    python bench/scripts/bench_divergence.py --model sbd_viz/weights/sbd-char-5m --per-family 40 --threads 1 \
        --out bench/DIVERGENCE.md --json bench/results/divergence.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.analysis.divergence import REPORT_COLUMNS, divergence_report

import run_info  # beside this file

MAX_NEW_TOKENS = 64  # the model card's room for an answer: the same items in the same buckets


def summarise(report, n_items: int) -> dict:
    """Counts for one place: items, those SBD loses / wins against NTP, both wrong, and of the lost ones how many
    first went wrong at the call's uncounted slot, and at it with more entropy than gamma."""
    lost = report[report.ntp_correct & ~report.sbd_correct]
    return {"items": n_items, "differ": len(report), "sbd_loses": len(lost),
            "sbd_wins": int((~report.ntp_correct & report.sbd_correct).sum()),
            "both_wrong": int((~report.ntp_correct & ~report.sbd_correct).sum()),
            "lost_at_uncounted": int((lost.uncounted == True).sum()),  # noqa: E712 -- a column of True/False/None
            "lost_outside_budget": int((lost.outside_budget == True).sum())}  # noqa: E712


def _code(text: str) -> str:
    """``text`` as a code span inside a table cell (a ``|`` would end the cell)."""
    return "`" + str(text).replace("|", "\\|") + "`"


def markdown(header: dict, results: list[tuple[str, dict, object]]) -> str:
    lines = [f"# Where SBD loses against NTP: {header['model']}", "",
             f"Produced by `{header['command']}` on {header['date']} ({header['machine']}; {header['minutes']:.1f} "
             "min). Greedy decoding; nothing is timed.", "",
             f"Entropy-bounded γ {header['gamma']:g}, block {header['block_size']}, against NTP on the same weights; "
             f"{header['per_family']} held-out items a family (draw {header['suite_seed']}), standalone and in the "
             "model card's documents. *Lost*: NTP right, SBD wrong. *At the uncounted slot*: the first commit that "
             "left NTP's text was its call's highest-entropy commit, whose entropy eq. 8 does not count; *outside the "
             "budget*: and that entropy alone is above γ.",
             "", "| place | items | outputs differ | SBD loses | SBD wins | both wrong | lost at the uncounted slot "
             "| of them outside the budget |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, counts, _ in results:
        lines.append(f"| {name} | {counts['items']} | {counts['differ']} | {counts['sbd_loses']} | "
                     f"{counts['sbd_wins']} | {counts['both_wrong']} | {counts['lost_at_uncounted']} | "
                     f"{counts['lost_outside_budget']} |")
    lines += ["", "## The items SBD loses, and the call where each first left NTP's text", "",
              "| place | family | answer | SBD wrote | call | slot | gap | wrote / NTP | entropy (nats) | commits "
              "in the call | counted entropy | uncounted | block after the call |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, _, report in results:
        for r in report[report.ntp_correct & ~report.sbd_correct].itertuples():
            if pd.isna(r.call):  # SBD stopped early with every commit NTP's: no commit to show
                lines.append(f"| {name} | {r.family} | {_code(r.answer)} | {_code(r.sbd_output.strip())} |" + " |" * 9)
                continue
            lines.append(f"| {name} | {r.family} | {_code(r.answer)} | {_code(r.sbd_output.strip())} | {int(r.call)} "
                         f"| {int(r.slot)} | {int(r.gap)} | {_code(repr(r.text))} / {_code(repr(r.ntp_text))} "
                         f"| {r.entropy:.3f} | {int(r.n_commits)} | {r.budget_spent:.3f} "
                         f"| {'yes' if r.uncounted else 'no'} | {_code(r.state)} |")
    return "\n".join(lines) + "\n"


def _records(report) -> list[dict]:
    return report.astype(object).where(report.notna(), None).to_dict(orient="records")  # NaN -> null


def from_json(path: str) -> tuple[dict, list[tuple[str, dict, object]]]:
    """The header and results a run wrote with ``--json``, to render again without decoding."""
    return from_data(json.loads(Path(path).read_text()))


def from_data(data: dict) -> tuple[dict, list[tuple[str, dict, object]]]:
    """``from_json`` of the JSON's contents."""
    results = [(name, counts, pd.DataFrame(data["items"][name], columns=list(REPORT_COLUMNS)))
               for name, counts in data["counts"].items()]
    return data["header"], results


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model folder (default: the shipped model)")
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--suite-seed", type=int, default=tasks.SUITE_SEED, help="which held-out draw (the card's)")
    p.add_argument("--families", nargs="+", default=None, choices=list(tasks.FAMILIES), help="only these families")
    p.add_argument("--no-standalone", action="store_true", help="only the items in documents")
    p.add_argument("--threads", type=int, default=2)
    run_info.add_page_arguments(p, None, None)
    args = p.parse_args(argv)
    if args.from_json:
        header, results = from_json(args.from_json)
    else:
        if args.per_family < 1:
            p.error(f"--per-family: need at least one item a family, got {args.per_family}")
        header, results = run(args, argv)
    text = markdown(header, results)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    if args.json and not args.from_json:
        Path(args.json).write_text(json.dumps({"header": header, "counts": {n: c for n, c, _ in results},
                                               "items": {n: _records(r) for n, _, r in results}},
                                              indent=1, allow_nan=False))


def run(args, argv) -> tuple[dict, list[tuple[str, dict, object]]]:
    """Decode every place's items by NTP and SBD; the header says what was run, where and when."""
    torch.set_num_threads(args.threads)
    header = {"model": args.model or "the shipped model", "gamma": args.gamma, "per_family": args.per_family,
              "suite_seed": args.suite_seed, "date": run_info.utc_now(),
              "command": "python bench/scripts/bench_divergence.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": run_info.machine(args.threads)}
    t0 = time.perf_counter()
    model = sv.load_model(args.model)
    header["block_size"] = model.block_size  # the card's: the model's own
    suite = tasks.load_suite(split="test", per_family=args.per_family, seed=args.suite_seed,
                             families=tuple(args.families) if args.families else None)
    results = []
    for name, items in tasks.asserts.places(suite, model.context_length or 512, MAX_NEW_TOKENS):
        if name == "standalone" and args.no_standalone:
            continue
        report = divergence_report(model, items, max_new_tokens=MAX_NEW_TOKENS, stop="\n", rule="entropy_bounded",
                                   gamma=args.gamma, block_size=model.block_size)
        results.append((name, summarise(report, len(items)), report))
        print(name, results[-1][1], flush=True)
    header["minutes"] = (time.perf_counter() - t0) / 60
    return header, results


if __name__ == "__main__":
    main()
