"""What every ``bench/`` report says about its run: when, on what machine, and how busy the machine was; and where
the pages (``bench/``), their data (``bench/results/``) and the scripts (``bench/scripts/``) are.

One place, so the reports word these facts alike. Timings on a shared CPU depend on the load, so a report
that measures time prints the load average at its start and end.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent  # bench/scripts: what measures and renders
BENCH = SCRIPTS.parent  # bench/: the pages (and their figures)
RESULTS = BENCH / "results"  # bench/results: each page's data, which its page is rendered from
ROOT = BENCH.parent  # the repository


def utc_now() -> str:
    """``2026-11-27 12:40 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``; ``unknown`` where there is none (not Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load() -> str:
    """The 1-, 5- and 15-minute load averages: ``0.61 1.36 1.78``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine(threads: int | None = None) -> str:
    """``2 cores, torch 2.13.0, Python 3.12.3``, and ``, 1 thread`` when the run set its thread count."""
    import torch

    text = f"{os.cpu_count()} cores, torch {torch.__version__}, Python {platform.python_version()}"
    return text if threads is None else f"{text}, {threads} thread{'' if threads == 1 else 's'}"


def shipped_fingerprint() -> str:
    """The shipped character model's fingerprint, as its card's results record it (no model is loaded)."""
    import json

    card = ROOT / "sbd_viz" / "weights" / "sbd-char-5m" / "card_results.json"
    return json.loads(card.read_text())["header"]["model_fingerprint"]


def earlier_model(fingerprint: str) -> list[str]:
    """The paragraph of a page measured on another ``sbd-char-5m`` than the one the package ships (none on a page
    of the shipped one): the pages that carry it time calls, which cost the same on the same architecture."""
    shipped = shipped_fingerprint()
    if fingerprint == shipped:
        return []
    return [f"The model measured is an earlier `sbd-char-5m` (fingerprint {fingerprint}) with the shipped model's",
            f"architecture (the shipped one is {shipped}): a call costs the same; what depends on the weights "
            "(accuracy,", "tokens per call) is the earlier model's.", ""]


def save_run(data: dict, json_name: str, page_name: str, page: str, out: str | None = None) -> Path:
    """Save a run's ``data`` as ``bench/results/<json_name>`` and its rendered ``page`` as ``bench/<page_name>``
    (both into the folder ``out`` instead, if given); returns the page's path."""
    import json

    data_dir, page_dir = (Path(out), Path(out)) if out else (RESULTS, BENCH)
    for folder in (data_dir, page_dir):
        folder.mkdir(parents=True, exist_ok=True)
    (data_dir / json_name).write_text(json.dumps(data, indent=1))
    (page_dir / page_name).write_text(page)
    return page_dir / page_name


def add_page_arguments(parser, page: str | Path | None, data: str | Path | None,
                       unset: tuple[str, str] = ("print it", "not saved")) -> None:
    """Add the options of every page's script: ``--out`` (the page), ``--json`` (the run's data) and ``--from-json``
    (render the page again from a saved run), defaulting to ``page`` and ``data``. ``unset`` is what the help says
    the script does when that default is None: (for ``--out``, for ``--json``)."""
    # str, as the scripts' own defaults were: bench_lm_eval adds ".partial" to --json
    out, run_json = (None if path is None else str(path) for path in (page, data))
    parser.add_argument("--out", default=out, help=f"the page (default: {'%(default)s' if out else unset[0]})")
    parser.add_argument("--json", default=run_json,
                        help=f"the run's data (default: {'%(default)s' if run_json else unset[1]})")
    parser.add_argument("--from-json", default=None, help="render the page again from a run's --json, running nothing")


def page_from_data(args, argv, run, render) -> str:
    """The end of a script whose run is one dict: read it from ``--from-json``, else ``run(args, argv)`` and save it
    to ``--json``; write ``render(data)`` to ``--out`` and return it."""
    import json

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        data = run(args, list(sys.argv[1:] if argv is None else argv))
        Path(args.json).write_text(json.dumps(data, indent=1))
    text = render(data)
    Path(args.out).write_text(text)
    return text


def write_page(parser, args, argv, run, markdown) -> None:
    """The end of a page's script: decode (``run(args, argv)`` -> header, results, examples) or read a run's
    ``--json`` again (``--from-json``), render ``markdown(header, results, examples)``, write it to ``--out`` (else
    print it), and save the run to ``--json``."""
    import json

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        header, results, examples = data["header"], data["results"], data["examples"]
    else:
        if getattr(args, "per_family", 1) < 1:  # the suite's pages take --per-family
            parser.error(f"--per-family: need at least one item a family, got {args.per_family}")
        header, results, examples = run(args, argv)
    text = markdown(header, results, examples)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    if args.json and not args.from_json:
        Path(args.json).write_text(json.dumps({"header": header, "results": results, "examples": examples},
                                              indent=1, allow_nan=False))
