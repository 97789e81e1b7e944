"""The SBD adapter's learning curve: the held-out probe of a ``sbd-viz train --adapter`` run, as a page.

    python bench/scripts/adapter_training.py --log runs/sbd-adapter/log.jsonl   # the JSON in bench/results/ + the page
    python bench/scripts/adapter_training.py --log A/log.jsonl --log B/log.jsonl  # a run resumed into another
                                                                                  # folder: B's steps go on from A's
    python bench/scripts/adapter_training.py --from-json                        # the page again from the JSON
    python bench/scripts/adapter_training.py --log ... --held-out 750=A.json --held-out 1200=B.json
                                              # and verified SBD measured on held-out text at those steps

``--held-out STEP=JSON`` takes a ``bench/scripts/bench_adapter.py --json`` run of the adapter at that step: decodes,
not a prediction. Its exact decoders' tokens per call on each held-out set go in a second table, so the probe's
curve can be read against what held-out text gives.

The probe (``sbd_viz.training.adapter_train.probe``) runs every ``--probe-every`` steps on prompts of the training
kinds that were never trained on: fully masked blocks of the decode block size tile each held-out continuation of the
base's greedy text; it reports each slot's argmax accuracy against the base's greedy ids and ``single_tpc``, the
tokens per call verified SBD reaches if each call's first slot is NTP's own token and its drafts after it are kept
up to the first wrong one (what a block drafted in one call yields when checked in the next).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from sbd_viz.trace.labels import COUNT_LABELS

BENCH = Path(__file__).resolve().parents[1]  # the pages; their data in bench/results
JSON = BENCH / "results" / "adapter_training.json"
GPU_COMMAND = ("sbd-viz train --adapter --device cuda --out runs/sbd-adapter-gpu --resume-from "
               "sbd_viz/weights/smollm2-135m-sbd --chat-prompts 1650 --proposed-prompts 4000 --code-prompts 4000 "
               "--new-tokens 128 --batch-size 64 --max-steps 20000 --probe-every 500 --save-every 200")
PAGE = BENCH / "ADAPTER_TRAINING.md"
# The probe's ratio, predicted from slot accuracies rather than counted from decodes: none of COUNT_LABELS' four
SINGLE = "tokens per call (single block)"


def read_log(paths: list[Path]) -> tuple[list[dict], list[float]]:
    """The probe rows of a run's logs (read in order: a later log's steps replace an earlier one's), with the training
    tokens scored and the seconds trained before each; and every step's own seconds."""
    entries = {}
    for path in paths:
        for line in path.read_text().splitlines():  # a resumed run repeats the steps after its checkpoint: keep the last
            entry = json.loads(line)
            entries[entry["step"]] = entry
    rows, seconds, steps = [], 0.0, []
    for entry in (entries[k] for k in sorted(entries)):
        seconds += entry.get("step_s", 0.0)
        steps.append(entry.get("step_s", 0.0))
        if "probe" in entry:
            rows.append({"step": entry["step"], "scored_tokens": entry["scored"], "train_minutes": round(seconds / 60, 1),
                         "loss": entry["loss"], **{name: entry["probe"][name] for name in sorted(entry["probe"])}})
    return rows, steps


def _shipped_extra() -> dict:
    """What training recorded of the adapter the package ships (its ``adapter.json``'s ``extra``)."""
    from sbd_viz.models import adapted_lm, gated_adapter

    return gated_adapter.read_config(adapted_lm.shipped_folder("smollm2-135m-sbd")).extra


def shipped_step() -> int:
    """The training step of the adapter the package ships."""
    return int(_shipped_extra()["steps"])


def shipped_head() -> bool:
    """Whether the shipped adapter carries a sampler head."""
    return bool(_shipped_extra().get("sampler_head"))


def held_out_row(step: int, path: Path) -> dict:
    """A ``bench_adapter`` run's exact decoders, per held-out set: items, identical items and both counts."""
    run = json.loads(Path(path).read_text())
    keep = ("items", "identical", "tokens_per_call", "after_prefill")
    sets = {}
    for name, got in run["results"]["sets"].items():
        decoders = {"prompt lookup": got["lookup"]}
        for kind, title in (("verified", "verified SBD"), ("tree", "verified SBD, tree drafting")):
            for setting, r in got.get(kind, {}).items():
                decoders[f"{title}, {setting}"] = r
        sets[name] = {label: {k: r[k] for k in keep} for label, r in decoders.items()}
    return {"step": step, "command": run["header"]["command"], "sets": sets}


def log_fit(rows: list[dict], name: str) -> tuple[float, float]:
    """Least squares of tokens per call against log2(tokens scored): (slope per doubling, intercept)."""
    xs = [math.log2(r["scored_tokens"]) for r in rows]
    ys = [r[name]["single_tpc"] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def training_further(continued: dict | None, shipped: int | None) -> list[str]:
    """The command that trains the shipped adapter further on this CPU, and what a run of it gave."""
    if not continued:
        return []
    rows, sets = continued["rows"], list(continued["rows"][0]["probe"])
    lines = ["", "## Training further", "",
             f"The shipped adapter is this run's step {shipped:,}, and training goes on from it: `--resume-from` "
             "starts from an adapter folder, reading the steps and tokens it was trained for from its "
             "`adapter.json`, and the run stops at `--max-steps`. The base's greedy continuations of the prompts "
             "(and the questions it proposes itself) are generated into `runs/sbd-adapter/data` before the first "
             f"step: {continued['data_time']}.", "",
             "```bash", continued["command"], "```", "",
             "A new adapter needs its own sampler head (the shipped one was trained on the shipped adapter's hidden "
             f"states) before the two are compared: `{continued['head_command']}`. It replaces the shipped one only "
             "if `bench/scripts/bench_adapter.py --adapter runs/sbd-adapter/final` measures it better on the held-out "
             f"decodes. On this CPU that did not happen. {continued['ran']}; the probe "
             f"(`bench/scripts/probe_sets.py`, {SINGLE}) on the sets the adapter is judged on and on its own read:",
             "",
             "| set | " + " | ".join(f"step {r['step']:,}" + (" (shipped)" if r["step"] == shipped else "")
                                   for r in rows) + " |",
             "|---|" + "---:|" * len(rows)]
    lines += [f"| {name} | " + " | ".join(f"{r['probe'][name]:.2f}" for r in rows) + " |" for name in sets]
    lo, hi = continued["noise"]
    lines += ["", f"The steps differ by no more than the probe's own noise (the run's log probed its chat set every "
              f"50 steps from {continued['noise_steps'][0]:,} to {continued['noise_steps'][1]:,}, reading "
              f"{lo:.2f} to {hi:.2f}), so neither was kept: more steps on this CPU do not pay."]
    return lines


def render(data: dict) -> str:
    rows = data["rows"]
    sets = [k for k in rows[0] if isinstance(rows[0][k], dict)] if rows else []
    k = len(rows[0][sets[0]]["slot_accuracy"]) if rows else 0
    head = ["step", "training tokens scored", "minutes trained"]
    for s in sets:
        head += [f"{s}: {SINGLE}", f"{s}: slot accuracy 1..{k}"]
    lines = [
        "# The SBD adapter's learning curve (held-out probe)",
        "",
        f"Command: `{data['command']}`. Run: {data['run']}. Rendered by `python bench/scripts/adapter_training.py"
        + "".join(f" --log {log}" for log in data.get("logs", ["runs/sbd-adapter/log.jsonl"]))
        + "` from the run's log (the probe is described in that script's docstring; "
        "its prompts were never trained on). Minutes are the training steps' own wall time on this 2-core CPU, "
        "the probe excluded, while tests and benchmarks shared the cores: a step of 8 sequences took "
        f"{data['step_seconds']['fastest']:.1f} s at the fastest and {data['step_seconds']['median']:.1f} s at the "
        "median, so the minutes say more about the machine's load than about the work; the tokens scored do not. "
        f"*{SINGLE}* is the probe's prediction from its slot accuracies, not counted from decodes: the tokens a "
        "verified SBD call writes if it checks a block drafted by the call before it, averaged over the held-out "
        "blocks. No prefill call is in it: of the counts every view names, it predicts "
        f"*{COUNT_LABELS[(True, False)]}*.",
        "",
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---:" for _ in head) + " |",
    ]
    for r in rows:
        cells = [str(r["step"]), f"{r['scored_tokens']:,}", f"{r['train_minutes']:.1f}"]
        for s in sets:
            cells += [f"{r[s]['single_tpc']:.2f}", " / ".join(f"{a:.2f}" for a in r[s]["slot_accuracy"])]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) >= 2:
        a, b = rows[len(rows) // 2], rows[-1]
        lines += ["", "From step {} to step {} ({:,} to {:,} tokens scored): {}.".format(
            a["step"], b["step"], a["scored_tokens"], b["scored_tokens"],
            "; ".join(f"{s} {a[s]['single_tpc']:.2f} → {b[s]['single_tpc']:.2f} {SINGLE}" for s in sets))]
    if len(rows) >= 3:
        lines += ["", "**What the curve predicts** (an extrapolation, not a measurement): a straight line through "
                  f"{SINGLE} against log2(tokens scored), fitted to the rows above, gains"]
        for s in sets:
            slope, intercept = log_fit(rows, s)
            need = 2 ** ((2.0 - intercept) / slope) if slope > 0 else float("inf")
            last = rows[-1]
            where = ("not on this line" if not math.isfinite(need)
                     else f"at about {need:,.0f} tokens scored, within this run (the last probe reads "
                          f"{last[s]['single_tpc']:.2f})" if need <= last["scored_tokens"]
                     else f"at about {need:,.0f} tokens scored ({need / last['scored_tokens']:,.1f}× this run)")
            lines.append(f"- {s}: {slope:+.3f} {SINGLE} per doubling of the tokens scored; 2.0 {SINGLE} {where}")
        lines += ["", "The probe's prompts are drawn like the training's (chat templates x topics, standard-library "
                  "signatures), so the curve and its line speak for prompts like those. On the held-out sets the "
                  "adapter is judged on, the same probe on the same adapter predicts less: "
                  "[PROBE_SETS.md](PROBE_SETS.md)."]
    held = data.get("held_out", [])
    if held:
        counted, after = COUNT_LABELS[(True, True)], COUNT_LABELS[(True, False)]
        lines += ["", "## Measured on held-out text at some steps", "",
                  "The probe predicts; these are decodes. `bench/scripts/bench_adapter.py` run on the adapter at that "
                  "step (its command below; its `--json` read in with `--held-out STEP=JSON`), on held-out chat and "
                  "HumanEval, the same items at every step. *identical*: items whose ids equal the base's greedy "
                  "`generate`.", ""]
        head = ["step", "set", "decoder", "identical", counted, after]
        lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---:", "---", "---"] + ["---:"] * 3) + "|"]
        for h in held:
            for name, decoders in h["sets"].items():
                for label, r in decoders.items():
                    lines.append(f"| {h['step']} | {name} | {label} | {r['identical']}/{r['items']} | "
                                 f"{r['tokens_per_call']:.2f} | {r['after_prefill']:.2f} |")
        lines += [""] + [f"- step {h['step']}: `{h['command']}`" for h in held]
        shipped = data.get("shipped_step")
        if shipped is not None and any(h["step"] != shipped for h in held):
            lines += ["", f"Only the adapter at step {shipped} is kept (it ships as "
                      "`sbd_viz/weights/smollm2-135m-sbd`; a command without `--adapter` measures it): the other "
                      "rows ran on that step's checkpoint of the run (`--adapter` named it), which git does not keep."]
        if data.get("shipped_head"):
            lines += ["", "These rows are the adapter alone. The package ships it with a sampler head "
                      "(`sbd_viz.models.sampler_head`, trained after the adapter on its frozen hidden states), which chains "
                      "tree drafting's drafts: its decodes on the same items are [ADAPTER.md](ADAPTER.md)."]
        first, last = held[0], held[-1]
        probe = {r["step"]: r for r in rows}
        if len(held) >= 2 and first["step"] in probe and last["step"] in probe:
            said = []
            for name in last["sets"]:
                common = [d for d in last["sets"][name] if "tree" in d and d in first["sets"].get(name, {})]
                for d in common:
                    said.append(f"{name}, {d}: {first['sets'][name][d]['after_prefill']:.2f} → "
                                f"{last['sets'][name][d]['after_prefill']:.2f} {after} held out, while the probe "
                                f"predicted {probe[first['step']][name]['single_tpc']:.2f} → "
                                f"{probe[last['step']][name]['single_tpc']:.2f}")
            lines += ["", f"From step {first['step']} to step {last['step']}: " + "; ".join(said) + "."]
    lines += ["", "**Against the full fine-tune** ([SBD_FINETUNE.md](SBD_FINETUNE.md): the paper's objective on every "
              "weight, an hour on this CPU): that run changed the model's own greedy text (0 of 16 prompts kept the "
              f"base's first 40 tokens) and reached 1.20 {COUNT_LABELS[(True, True)]} with verified SBD on its "
              "held-out code; the "
              "adapter leaves the base's text exact by construction, and its verified SBD on held-out chat and "
              "HumanEval is on [ADAPTER.md](ADAPTER.md). The two were measured on different held-out text.",
              *training_further(data.get("continued"), data.get("shipped_step")),
              "", "**The job on a GPU** (never run here: this machine has none): the same command with more data, "
              "longer continuations, larger batches and many more steps, starting from the shipped adapter:", "",
              "```bash", GPU_COMMAND, "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", type=Path, action="append", default=[], metavar="LOG",
                   help="the run's log.jsonl (repeatable, in training order; default runs/sbd-adapter/log.jsonl)")
    p.add_argument("--command", default="", help="the training command, as the page states it")
    p.add_argument("--run", default="", help="when and where the run ran, as the page states it")
    p.add_argument("--from-json", action="store_true", help="render the page from the committed JSON only")
    p.add_argument("--held-out", action="append", default=[], metavar="STEP=JSON",
                   help="a bench_adapter.py --json run of the adapter at training step STEP (repeatable)")
    args = p.parse_args(argv)
    held = []
    for spec in args.held_out:
        step, sep, path = spec.partition("=")
        if not sep or not step.strip().isdigit() or not Path(path).is_file():
            p.error(f"--held-out: expected STEP=JSON with an existing bench_adapter JSON, got {spec!r}")
        held.append(held_out_row(int(step), Path(path)))
    if args.from_json:
        data = json.loads(JSON.read_text())
    else:
        logs = args.log or [Path("runs/sbd-adapter/log.jsonl")]
        rows, steps = read_log(logs)
        data = {"command": args.command, "run": args.run, "logs": [str(log) for log in logs], "rows": rows,
                "step_seconds": {"fastest": min(steps), "median": statistics.median(steps)},
                "shipped_step": shipped_step(), "shipped_head": shipped_head()}
    if held:
        data["held_out"] = sorted(held, key=lambda h: h["step"])
    if held or not args.from_json:
        JSON.write_text(json.dumps(data, indent=1) + "\n")
    PAGE.write_text(render(data))
    print(PAGE.read_text())


if __name__ == "__main__":
    main()
