"""Every page of ``bench/`` rendered again from its data in ``bench/results/``: nothing is decoded, timed or trained.

    python bench/scripts/render_pages.py            # write every page (what `make bench-pages` runs)
    python bench/scripts/render_pages.py --check    # write nothing; name the pages that are not their data rendered

A page is its script's rendering of the JSON its run saved: ``PAGES`` says, for each page, which script renders it
from which file (the same function the script calls after a run, and with ``--from-json``). A page that is not here
has no data to be rendered from, and does not belong in ``bench/`` (``tests/unit/test_bench_pages.py`` checks both).
The figures beside two pages (``list_tasks.png``, ``roofline.png``) are drawn by their runs in headless Chromium and
are not drawn again here.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_info  # noqa: E402


def written(module, data: dict) -> str:
    """A page ``run_info.write_page`` writes: the script's ``markdown(header, results, examples)``."""
    return module.markdown(data["header"], data["results"], data["examples"])


def call_cost(module, data: dict) -> str:
    """CALL_COST.md sets the tokens per call bench/results/adapter.json measured beside its break-even."""
    return module.page(data["header"], data["results"], module.measured_tokens_per_call(run_info.RESULTS /
                                                                                        "adapter.json"))


class Page(NamedTuple):
    page: str  # in bench/
    script: str  # in bench/scripts/
    data: str  # in bench/results/
    render: Callable[[object, dict], str]  # (the script as a module, the data) -> the page's text

    def rendered(self) -> str:
        module = importlib.import_module(self.script)
        return self.render(module, json.loads((run_info.RESULTS / self.data).read_text()))


PAGES = [
    Page("ADAPTER.md", "bench_adapter", "adapter.json", written),
    Page("ADAPTER_BLOCKS.md", "bench_adapter", "adapter_blocks.json", written),
    Page("ADAPTER_SMALL_BLOCKS.md", "bench_adapter", "adapter_small_blocks.json", written),
    Page("ADAPTER_LOSSES.md", "adapter_choices", "adapter_losses.json", written),
    Page("ADAPTER_RANKS.md", "adapter_choices", "adapter_ranks.json", written),
    Page("ADAPTER_TRAINING.md", "adapter_training", "adapter_training.json", lambda m, d: m.render(d)),
    Page("APP.md", "bench_app", "app.json", lambda m, d: m.render(d)),
    Page("BLOCK_SIZES.md", "block_sizes", "block_sizes.json", lambda m, d: m.render(d)),
    Page("CALL_COST.md", "bench_call_cost", "call_cost.json", call_cost),
    Page("DIVERGENCE.md", "bench_divergence", "divergence.json", lambda m, d: m.markdown(*m.from_data(d))),
    Page("DRAFT_TREES.md", "draft_trees", "draft_trees.json", written),
    Page("GAMMA_MAP.md", "bench_gamma_map", "gamma_map.json", written),
    Page("GAPS.md", "bench_gaps", "gaps.json", lambda m, d: m.render(d)),
    Page("INCOHERENT.md", "bench_incoherent", "incoherent.json", written),
    Page("LIST_TASKS.md", "bench_list_tasks", "list_tasks.json", written),
    Page("LM_EVAL.md", "bench_lm_eval", "lm_eval.json", lambda m, d: m.render(d)),
    Page("OVERHEAD.md", "bench_overhead", "overhead.json", lambda m, d: m.render(d)),
    Page("PROBE_SETS.md", "probe_sets", "probe_sets.json", written),
    Page("REAL_LM.md", "bench_real_lm", "real_lm.json", lambda m, d: m.markdown(d)),
    Page("REMASK.md", "bench_remask", "remask.json", written),
    Page("RESULTS.md", "bench_speed", "speed.json", lambda m, d: m.report(d)),
    Page("ROOFLINE.md", "bench_roofline", "roofline.json", lambda m, d: m.render(d)),
    Page("SBD_FINETUNE.md", "bench_sbd_finetune", "sbd_finetune.json", written),
    Page("SCALE.md", "bench_scale", "scale.json", lambda m, d: m.report(d)),
    Page("SLIDER.md", "bench_slider_browser", "slider.json", lambda m, d: m.render(d)),
    Page("SWEEP_PIECES.md", "bench_sweep_pieces", "sweep_pieces.json", written),
    Page("TREE_BLOCKS.md", "bench_tree_blocks", "tree_blocks.json", written),
    Page("TREE_BLOCKS_2THREADS.md", "bench_tree_blocks", "tree_blocks_2threads.json", written),
    Page("VERIFIED.md", "bench_verified", "verified.json", lambda m, d: m.report(d)),
    Page("VERIFIED_MODES.md", "bench_verified_modes", "verified_modes.json", written),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is not its data rendered")
    args = p.parse_args(argv)
    stale = []
    for page in PAGES:
        path, text = run_info.BENCH / page.page, page.rendered()
        if path.is_file() and path.read_text() == text:
            continue
        stale.append(page.page)
        if not args.check:
            path.write_text(text)
    verb = "differ from their data rendered" if args.check else "rendered again"
    print(f"{len(PAGES)} pages; {len(stale)} {verb}" + (f": {', '.join(stale)}" if stale else ""))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
