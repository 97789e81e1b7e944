"""Each lm-eval sample's trace: written beside lm-eval's own sample records, and read back with them, failing first.

The model writes one trace file per generation to ``<trace_dir>/<run>/<task>/doc<doc_id>.json``
(``doc<doc_id>_<k>.json`` for a task's k-th repeat), ``<run>`` the time the model was built, so runs into one folder
(a γ sweep) keep their own; the results name it (``config.sbd_viz.trace_run``). A trace's ``meta["lm_eval"]`` names
the task, the doc id and lm-eval's ``prompt_hash`` of the context. ``traced_samples(output_path)`` reads lm-eval's
``samples_<task>_<date>.jsonl`` files under an ``--output_path`` and pairs each record with its run's trace file (the
run read from the results file of the same date), the failing samples first; ``sbd-viz gaps FILE`` or
``sv.load_trace(FILE)`` opens one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import replace
from datetime import datetime
from pathlib import Path

TRACES = "sbd_viz_traces"  # the folder the runner puts beside lm-eval's output (``python -m sbd_viz.harness run``)
SAMPLES_FILE = re.compile(r"samples_(?P<task>.+)_(?P<date>\d{4}-\d\d-\d\dT[\d.\-]+)\.jsonl$")


def prompt_hash(context: str) -> str:
    """lm-eval's ``prompt_hash`` of a sample (sha256 of its context, as ``lm_eval.utils.hash_string`` writes it)."""
    return hashlib.sha256(context.encode("utf-8")).hexdigest()


def trace_file(trace_dir, task: str, doc_id, repeat: int = 0) -> Path:
    """Where the trace of ``task``'s document ``doc_id`` (its ``repeat``-th generation) is written."""
    name = f"doc{doc_id}" if not repeat else f"doc{doc_id}_{repeat}"
    return Path(trace_dir) / task / f"{name}.json"


class TraceFolder:
    """Writes each generation's trace under ``folder/<run>``, one file per (task, doc id, repeat); ``run`` is the
    time it was made, written as lm-eval writes its own (``2026-12-06T13-05-22.123456``)."""

    def __init__(self, folder):
        self.run = datetime.now().isoformat().replace(":", "-")
        self.folder = Path(folder) / self.run
        self._repeats: Counter = Counter()

    def write(self, task: str, doc_id, context: str, trace) -> Path:
        key = (task, doc_id)
        repeat, self._repeats[key] = self._repeats[key], self._repeats[key] + 1
        path = trace_file(self.folder, task, doc_id, repeat)
        path.parent.mkdir(parents=True, exist_ok=True)
        sample = {"task": task, "doc_id": doc_id, "repeat": repeat, "prompt_hash": prompt_hash(context)}
        return replace(trace, meta={**trace.meta, "lm_eval": sample}).save(path)


def _run_of(samples_file: Path, date: str) -> dict:
    """The ``config.sbd_viz`` of the results lm-eval wrote with ``samples_file`` (the same date; ``results_<date>``,
    or ``<name>_<date>`` for an ``--output_path`` ending in .json); {} if there is none."""
    for path in samples_file.parent.glob(f"*_{date}.json"):
        try:
            return json.loads(path.read_text(encoding="utf-8")).get("config", {}).get("sbd_viz") or {}
        except (OSError, ValueError, AttributeError):
            continue
    return {}


def _score(record: dict) -> float:
    """A record's first metric as a number (lm-eval's ``metrics`` names them); NaN if it has none."""
    for name in record.get("metrics") or ():
        value = record.get(name)
        if isinstance(value, (bool, int, float)):
            return float(value)
    return float("nan")


def traced_samples(output_path, trace_dir=None) -> list[dict]:
    """Every sample record lm-eval wrote under ``output_path`` (``--log_samples``), each as ``{task, doc_id, score,
    record, trace, run, label, settings}`` (``trace``: its trace file, or None if none was written; ``run``: the date
    lm-eval gave the run; ``label`` and ``settings``: its decoder and the settings model_args gave it), the lowest
    score first (failing samples first), then by task and doc id. ``trace_dir``: where the traces are (default:
    ``output_path``'s ``sbd_viz_traces``)."""
    root = Path(output_path)
    root = root.parent if root.suffix == ".json" else root
    traces = Path(trace_dir) if trace_dir is not None else root / TRACES
    rows = []
    for path in sorted(root.rglob("samples_*.jsonl")):
        match = SAMPLES_FILE.search(path.name)
        if match is None:
            continue
        task, run = match["task"], _run_of(path, match["date"])
        folder = traces / run["trace_run"] if run.get("trace_run") else traces
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            found = trace_file(folder, task, record["doc_id"])
            rows.append(
                {
                    "task": task,
                    "doc_id": record["doc_id"],
                    "score": _score(record),
                    "record": record,
                    "trace": found if found.is_file() else None,
                    "run": match["date"],
                    "label": run.get("label", ""),
                    "settings": run.get("settings") or {},
                }
            )
    # NaN (no metric) after every scored sample
    return sorted(rows, key=lambda r: (r["score"] != r["score"], r["score"], r["task"], r["run"], r["doc_id"]))
