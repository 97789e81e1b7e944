"""The SBD adapter's training choices, measured: runs that differ in one option of ``sbd-viz train --adapter``,
side by side. ``--option rank`` writes ``bench/ADAPTER_RANKS.md`` (and ``adapter_ranks.json``), ``--option loss``
``bench/ADAPTER_LOSSES.md`` (and ``adapter_losses.json``).

Each run is ``sbd-viz train --adapter`` from scratch on the same data, seed, order and masks (the same cached
continuations copied into each run folder), differing only in the option. Read from each run's ``log.jsonl``: the
held-out probe every ``--probe-every`` steps (``adapter_train.probe``: tokens per call (single block), as on
ADAPTER_TRAINING.md); the cross-entropy on the base's greedy ids and the masked-slot accuracy of the training
batches (the same batches in every run, so comparable whatever the run's loss); the seconds a step; and the
adapter's parameter count from its ``final/adapter.safetensors``. With ``--held-out VALUE=JSON`` (a
``bench/scripts/probe_sets.py --adapter FOLDER/final --json JSON`` run), the same probe on the sets the adapter is
judged on: the hand-written held-out chat questions and HumanEval.

    python bench/scripts/adapter_choices.py --option rank --run 8=runs/rank-8 --run 16=runs/rank-16 \
        --run 32=runs/rank-32 --command "..." --how "..."
    python bench/scripts/adapter_choices.py --option loss --run ce=runs/loss-ce --run kl=runs/loss-kl \
        --held-out ce=/tmp/ce.json --held-out kl=/tmp/kl.json --command "..." --how "..."
    python bench/scripts/adapter_choices.py --option rank --from-json bench/results/adapter_ranks.json  # the page
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_info  # noqa: E402

SINGLE = "tokens per call (single block)"
HELD_OUT = ("held-out chat", "HumanEval")  # probe_sets.py's sets that no run's prompts are drawn like
SWING = 0.05  # the probe's swing between neighbouring probes of one run (ADAPTER_TRAINING.md)
# option -> (page title, page and JSON stem, how a value is named in the tables, how values sort)
CHOICES = {"rank": ("The adapter's LoRA rank", "adapter_ranks", "rank {}", int),
           "loss": ("The adapter's loss: cross-entropy on the base's greedy ids, or KL to its distribution",
                    "adapter_losses", "loss {}", str)}


def and_list(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def paths(option: str) -> tuple[Path, Path]:
    stem = CHOICES[option][1]
    return run_info.BENCH / f"{stem.upper()}.md", run_info.RESULTS / f"{stem}.json"


def read_run(folder: Path) -> dict:
    from safetensors import safe_open

    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    with safe_open(str(folder / "final" / "adapter.safetensors"), "pt") as f:
        params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    probes = [{"step": e["step"], "scored_tokens": e["scored"],
               **{s: e["probe"][s]["single_tpc"] for s in ("chat", "code")}} for e in log if "probe" in e]
    last = log[-25:]
    return {"steps": log[-1]["step"], "parameters": params, "probes": probes,
            # a run whose loss is cross-entropy logs it as its loss; any other logs it as "ce" beside its own
            "ce_last_25": round(statistics.mean(e.get("ce", e["loss"]) for e in last), 4),
            "acc_last_25": round(statistics.mean(e["acc"] for e in last), 4),
            "step_seconds_median": round(statistics.median(e["step_s"] for e in log), 2)}


def run(args, argv):
    """(header, results, examples) for ``run_info.write_page``: the runs named by ``--run``, read, not trained."""
    header = {"date": run_info.utc_now(), "machine": run_info.machine(1), "cpu": run_info.cpu_name(),
              "command": args.command, "how": args.how}
    runs = {}
    for spec in args.run:
        value, _, folder = spec.partition("=")
        runs[value] = read_run(Path(folder))
    for spec in args.held_out:
        value, _, path = spec.partition("=")
        if value not in runs:
            raise SystemExit(f"--held-out: {value!r} names no --run")
        probed = json.loads(Path(path).read_text())
        if probed["results"]["steps"] != runs[value]["steps"]:
            raise SystemExit(f"--held-out: {path} probed step {probed['results']['steps']}, the run ended at "
                             f"{runs[value]['steps']}")
        runs[value]["held_out"] = {"command": probed["header"]["command"],
                                   **{s: probed["results"]["sets"][s]["single_tpc"] for s in HELD_OUT}}
    return header, {"option": args.option, "runs": runs}, None


def markdown(h: dict, results: dict, examples=None) -> str:
    option, runs = results["option"], results["runs"]
    title, _, name, key = CHOICES[option]
    values = sorted(runs, key=key)
    steps = sorted({p["step"] for r in runs.values() for p in r["probes"]})
    lines = [f"# {title}", "",
             f"Command: `{h['command']}`. Run: {h['date']} on {h['machine']} ({h['cpu']}). {h['how']} "
             "Each run trains from scratch on the same data, seed, order and masks, and differs only in "
             f"`--{option}`. The probe is the training run's own (see ADAPTER_TRAINING.md): *{SINGLE}* is its "
             "prediction from slot accuracies on held-out prompts drawn like the training's, not counted from "
             "decodes.", "",
             "| step | " + " | ".join(f"{name.format(v)}: chat: {SINGLE} | {name.format(v)}: code: {SINGLE}"
                                     for v in values) + " |",
             "|---:|" + "---:|---:|" * len(values)]
    for step in steps:
        cells = []
        for v in values:
            p = next((p for p in runs[v]["probes"] if p["step"] == step), None)
            cells += [f"{p['chat']:.2f}", f"{p['code']:.2f}"] if p else ["", ""]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += ["", f"| {option} | adapter parameters | cross-entropy on the base's greedy ids (mean of the last 25 "
                  "steps) | masked-slot accuracy (mean of the last 25 steps) | seconds a step (median) |",
              "|---:|---:|---:|---:|---:|"]
    for v in values:
        r = runs[v]
        lines.append(f"| {v} | {r['parameters']:,} | {r['ce_last_25']:.3f} | {r['acc_last_25']:.3f} | "
                     f"{r['step_seconds_median']:.1f} |")
    probed = [v for v in values if "held_out" in runs[v]]
    if probed:
        lines += ["", f"The same probe on the sets the adapter is judged on, never drawn like the training's "
                      f"(`bench/scripts/probe_sets.py` on each run's final adapter, step {steps[-1]}; see "
                      "PROBE_SETS.md):", "",
                  f"| {option} | " + " | ".join(f"{s}: {SINGLE}" for s in HELD_OUT) + " | command |",
                  "|---:|" + "---:|" * len(HELD_OUT) + "---|"]
        for v in probed:
            h = runs[v]["held_out"]
            lines.append(f"| {v} | " + " | ".join(f"{h[s]:.2f}" for s in HELD_OUT) + f" | `{h['command']}` |")
    last = steps[-1]
    final = {v: next(p for p in runs[v]["probes"] if p["step"] == last) for v in values}
    # each run's last numbers, the probe's sets and (where every run has them) the held-out ones
    scores = {v: {"chat": final[v]["chat"], "code": final[v]["code"],
                  **({s: runs[v]["held_out"][s] for s in HELD_OUT} if len(probed) == len(values) else {})}
              for v in values}
    spread = {s: max(scores[v][s] for v in values) - min(scores[v][s] for v in values) for s in scores[values[0]]}
    best = {s: max(values, key=lambda v: final[v][s]) for s in ("chat", "code")}
    within = all(d <= SWING for d in spread.values())
    lines += ["", f"At step {last}: " + "; ".join(
        f"{name.format(v)} {final[v]['chat']:.2f} chat, {final[v]['code']:.2f} code" for v in values) + ". "
        "The runs differ by at most " + and_list(
            [f"{spread['chat']:.2f} on the probe's chat", f"{spread['code']:.2f} on its code"]
            + [f"{spread[s]:.2f} on {s}" for s in HELD_OUT if s in spread])
        + (f", within the probe's swing between neighbouring probes of one run (about ±{SWING}, "
           f"ADAPTER_TRAINING.md): over these steps `--{option}` does not change how fast the adapter learns."
           if within else
           f", more than the probe's swing between neighbouring probes of one run (about ±{SWING}, "
           f"ADAPTER_TRAINING.md): {name.format(best['chat'])} leads on chat, {name.format(best['code'])} on code.")
        + f" These are the first {last} steps of a run of thousands (the shipped adapter trained 3,650): they "
        f"compare how fast each run learns, not where each would end."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--option", required=True, choices=sorted(CHOICES), help="the training option the runs vary")
    p.add_argument("--run", action="append", default=[], metavar="VALUE=FOLDER", help="a run folder and its value")
    p.add_argument("--held-out", action="append", default=[], metavar="VALUE=JSON",
                   help="a bench/scripts/probe_sets.py JSON of that run's final adapter")
    p.add_argument("--command", default="", help="the training commands, as the page states them")
    p.add_argument("--how", default="", help="how the runs ran (together or not, threads), as the page states it")
    run_info.add_page_arguments(p, None, None, unset=("the option's page in bench/",
                                                      "the option's JSON in bench/results/"))
    args = p.parse_args(argv)
    if not args.from_json and not args.run:
        p.error("--run: give at least one VALUE=FOLDER")
    page, data = paths(args.option)
    args.out = args.out or str(page)
    args.json = args.json or str(data)
    run_info.write_page(p, args, sys.argv[1:] if argv is None else argv, run, markdown)


if __name__ == "__main__":
    main()
