"""``python -m sbd_viz.harness`` (and ``sbd-viz lm-eval``): lm-eval's own command line with ``sbd_viz`` registered.

``run ...``: lm-eval's ``lm-eval run`` as it is, after registering the model, with the shipped tasks on the include
path and, under ``--log_samples --output_path DIR``, every generation's trace in ``DIR/sbd_viz_traces`` (unless
model_args names a ``trace_dir``). ``samples DIR``: the logged samples of a run with their trace files, failing first.
Any other first word goes to lm-eval's command line unchanged (``ls tasks``, ``validate``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from . import MODEL_NAME, TASKS
from .samples import TRACES, traced_samples


def _option(argv: list[str], name: str) -> int | None:
    """The index of ``name``'s value in ``argv`` (``--name value`` or ``--name=value``), or None."""
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return i + 1
        if word.startswith(name + "="):
            return i
    return None


def _value(argv: list[str], name: str) -> str | None:
    i = _option(argv, name)
    if i is None:
        return None
    return argv[i].split("=", 1)[1] if argv[i].startswith(name + "=") else argv[i]


def _set(argv: list[str], name: str, value: str) -> None:
    i = _option(argv, name)
    if i is None:
        argv += [name, value]
    elif argv[i].startswith(name + "="):
        argv[i] = f"{name}={value}"
    else:
        argv[i] = value


def run_argv(argv: list[str]) -> list[str]:
    """``lm-eval run``'s arguments with the shipped tasks on ``--include_path`` and, for ``--model sbd_viz`` under
    ``--log_samples --output_path``, a ``trace_dir`` in model_args (``DIR/sbd_viz_traces``)."""
    argv = list(argv)
    include = _value(argv, "--include_path")
    _set(argv, "--include_path", str(TASKS) if not include else f"{include}:{TASKS}")
    output = _value(argv, "--output_path")
    if _value(argv, "--model") == MODEL_NAME and output and ("--log_samples" in argv or "-s" in argv):
        folder = Path(output).parent if output.endswith(".json") else Path(output)
        args = _value(argv, "--model_args") or ""
        if args.lstrip().startswith("{"):
            parsed = json.loads(args)
            parsed.setdefault("trace_dir", str(folder / TRACES))
            _set(argv, "--model_args", json.dumps(parsed))
        elif "trace_dir=" not in args:
            _set(argv, "--model_args", ",".join(a for a in (args, f"trace_dir={folder / TRACES}") if a))
    return argv


def samples_report(output_path, trace_dir=None, top: int | None = None) -> str:
    """The logged samples under ``output_path`` with their trace files, failing first (``traced_samples``)."""
    rows = traced_samples(output_path, trace_dir)
    if not rows:
        return f"{output_path}: no samples_*.jsonl (run lm-eval with --log_samples --output_path)"
    lines = ["| task | doc | score | run | trace |", "| --- | --- | --- | --- | --- |"]
    for row in rows[:top]:
        score = "" if math.isnan(row["score"]) else f"{row['score']:g}"
        setting = ", ".join([row["label"], *(f"{k}={v}" for k, v in row["settings"].items())] if row["label"] else [])
        run = f"{setting} ({row['run']})" if setting else row["run"]
        lines.append(f"| {row['task']} | {row['doc_id']} | {score} | {run} | {row['trace'] or '(none)'} |")
    lines.append("")
    lines.append(
        "open one: sbd-viz gaps TRACE.json, sbd-viz roofline --trace TRACE.json, sv.load_trace(TRACE.json), or the "
        "app's Downloads tab (open a trace file) on the page of the model that wrote it"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["samples"]:
        parser = argparse.ArgumentParser(prog="python -m sbd_viz.harness samples", description=samples_report.__doc__)
        parser.add_argument("output_path", help="lm-eval's --output_path of a run with --log_samples")
        parser.add_argument("--traces", default=None, help=f"the traces' folder (default: OUTPUT_PATH/{TRACES})")
        parser.add_argument("--top", type=int, default=None, help="show at most this many samples")
        args = parser.parse_args(argv[1:])
        print(samples_report(args.output_path, args.traces, args.top))
        return 0
    from lm_eval.__main__ import cli_evaluate

    if argv[:1] == ["run"]:
        argv = ["run", *run_argv(argv[1:])]
    sys.argv = ["lm-eval", *argv]
    cli_evaluate()
    return 0
