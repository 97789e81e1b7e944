"""The SBD adapter's learning curve: the held-out probe of a ``sbd-viz train --adapter`` run, as a page.

    python bench/adapter_training.py --log runs/sbd-adapter/log.jsonl     # writes bench/adapter_training.json + .md
    python bench/adapter_training.py --from-json                          # the page again from the JSON

The probe (``sbd_viz.training.adapter_train.probe``) runs every ``--probe-every`` steps on prompts of the training
kinds that were never trained on: fully masked blocks of the decode block size tile each held-out continuation of the
base's greedy text; it reports each slot's argmax accuracy against the base's greedy ids and ``single_tpc``, the
tokens per call verified SBD reaches if each call's first slot is NTP's own token and its drafts after it are kept
up to the first wrong one (what a block drafted in one call yields when checked in the next).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
JSON = HERE / "adapter_training.json"
PAGE = HERE / "ADAPTER_TRAINING.md"


def read_log(path: Path) -> list[dict]:
    """The probe rows of a run's log, with the training tokens scored and the seconds trained before each."""
    rows, seconds = [], 0.0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        seconds += entry.get("step_s", 0.0)
        if "probe" in entry:
            rows.append({"step": entry["step"], "scored_tokens": entry["scored"], "train_minutes": round(seconds / 60, 1),
                         "loss": entry["loss"], **{name: entry["probe"][name] for name in sorted(entry["probe"])}})
    return rows


def render(data: dict) -> str:
    rows = data["rows"]
    sets = [k for k in rows[0] if isinstance(rows[0][k], dict)] if rows else []
    k = len(rows[0][sets[0]]["slot_accuracy"]) if rows else 0
    head = ["step", "training tokens scored", "minutes trained"]
    for s in sets:
        head += [f"{s}: tokens per call (single block)", f"{s}: slot accuracy 1..{k}"]
    lines = [
        "# The SBD adapter's learning curve (held-out probe)",
        "",
        f"Command: `{data['command']}`. Run: {data['run']}. Rendered by `python bench/adapter_training.py "
        "--log runs/sbd-adapter/log.jsonl` from the run's log (the probe is described in that script's docstring; "
        "its prompts were never trained on). Minutes are the training steps' own time on this shared 2-core CPU, "
        "the probe excluded.",
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
            "; ".join(f"{s} {a[s]['single_tpc']:.2f} → {b[s]['single_tpc']:.2f} tokens per call" for s in sets))]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", type=Path, default=Path("runs/sbd-adapter/log.jsonl"), help="the run's log.jsonl")
    p.add_argument("--command", default="", help="the training command, as the page states it")
    p.add_argument("--run", default="", help="when and where the run ran, as the page states it")
    p.add_argument("--from-json", action="store_true", help="render the page from the committed JSON only")
    args = p.parse_args(argv)
    if args.from_json:
        data = json.loads(JSON.read_text())
    else:
        data = {"command": args.command, "run": args.run, "rows": read_log(args.log)}
        JSON.write_text(json.dumps(data, indent=1) + "\n")
    PAGE.write_text(render(data))
    print(PAGE.read_text())


if __name__ == "__main__":
    main()
