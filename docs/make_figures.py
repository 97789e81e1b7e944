"""Render the README's pictures from the shipped model, through a real headless Chromium.

    python docs/make_figures.py               # docs/block_fill.png
    python docs/make_figures.py --tradeoff    # also docs/tradeoff.png (sweeps the suite: a few minutes)

``block_fill.png`` is ``plots.block_fill`` of an example prompt at its final frame (the figure's first
view is the finished decode). The example is the first of a few held-out prompts whose SBD answer is right,
with a block that took two calls or more and a gap fill kept in the output, so the picture shows how SBD
fills a block; if none does (a retrained model), the script stops and says so. The model is
``sv.load_model()``: the shipped one, or ``$SBD_VIZ_MODEL``.

Plotly draws in the browser, so the PNG is a screenshot of the offline page ``plots.save_html`` writes
(plotly.js inline), taken with Playwright driving the system Chromium.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

import sbd_viz as sv  # noqa: E402
from sbd_viz import plots  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
STOP = "\n"
# (prompt, expected answer): Python computes the answers; model output is only compared as text.
EXAMPLES = [  # held-out suite items
    ('assert ", ".join(["m", "xwg", "oko", "qr"]) == ', repr(", ".join(["m", "xwg", "oko", "qr"])).replace("'", '"')),
    ('assert "zhcp" * 3 == ', '"' + "zhcp" * 3 + '"'),
    ("assert [x * 2 for x in [7, 8]] == ", repr([x * 2 for x in [7, 8]])),
    ("assert list(range(97, 104)) == ", repr(list(range(97, 104)))),
]
# gamma 0.35, one of the paper's values; the block size is the model's own.
SETTINGS = dict(rule="entropy_bounded", gamma=0.35, stop=STOP)


def shows_the_mechanism(trace: sv.Trace, answer: str) -> bool:
    """A right answer, a block that took two calls or more, and a gap fill kept in the output."""
    return trace.text.strip() == answer and max(trace.calls_per_block()) >= 2 and bool(trace.kept_gap_fills())


def pick_example(model) -> sv.Trace:
    """The first example that shows the mechanism (``shows_the_mechanism``)."""
    for prompt, answer in EXAMPLES:
        trace = sv.decode(model, prompt, **SETTINGS)
        if shows_the_mechanism(trace, answer):
            return trace
    raise SystemExit(f"no example shows a block of several calls and a kept gap fill at {SETTINGS}: "
                     "add a held-out prompt that does to EXAMPLES")


def screenshot(fig, path: Path) -> Path:
    """Save ``fig`` as a PNG of its rendering in headless Chromium (2x pixels for sharp text)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "figure.html"
        plots.save_html(fig, page_path)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": int(fig.layout.width) + 40,
                                                  "height": int(fig.layout.height) + 40}, device_scale_factor=2)
                page.goto(page_path.as_uri())
                graph = page.locator(".plotly-graph-div")
                graph.locator(".main-svg").first.wait_for()
                # plotly.js draws synchronously once started; two animation frames let the text settle
                page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                graph.screenshot(path=str(path))
            finally:
                browser.close()
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs"), help="folder for the PNGs")
    parser.add_argument("--tradeoff", action="store_true", help="also draw the speed / quality curve")
    parser.add_argument("--per-family", type=int, default=10, help="suite items per family for --tradeoff")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    model = sv.load_model()
    trace = pick_example(model)
    print(f"example: {trace.prompt}{trace.text.strip()}  gamma {SETTINGS['gamma']}, "
          f"block {trace.config['block_size']}: "
          f"{trace.nfe} calls for {trace.n_tokens} tokens, calls per block {trace.calls_per_block()}, "
          f"{len(trace.kept_gap_fills())} gap fills kept")
    print("wrote", screenshot(plots.block_fill(trace), out / "block_fill.png"))

    if args.tradeoff:
        suite = sv.tasks.load_suite("pyasserts", split="test", per_family=args.per_family)
        import pandas as pd

        # each rule's knob means something else, so each gets its own grid; one NTP row is enough
        eb = sv.sweep(model, suite, rules=["entropy_bounded"], gammas=[0.0, 0.1, 0.35, 0.6, 1.0],
                      max_new_tokens=48)
        ct = sv.sweep(model, suite, rules=["confidence_threshold"], gammas=[0.9, 0.7, 0.5],
                      max_new_tokens=48)
        df = pd.concat([eb, ct[ct.rule != "ntp"]], ignore_index=True)
        print("wrote", screenshot(plots.tradeoff(df, current=dict(rule="entropy_bounded", gamma=0.35)),
                                  out / "tradeoff.png"))


if __name__ == "__main__":
    main()
