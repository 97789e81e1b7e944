"""Render the walkthroughs with their outputs, for readers who do not run them.

    python docs/render_notebooks.py            # every notebook (make docs)
    python docs/render_notebooks.py 01 03      # only these

For each ``notebooks/NN_name.ipynb`` it executes a copy on the shipped model (the notebook in
``notebooks/`` stays without outputs) and writes, under ``docs/notebooks/``:

- ``NN_name.html``: the notebook with its outputs and interactive figures (one shared
  ``plotly.min.js`` beside it; open the file in a browser, no network needed);
- ``NN_name.md`` and ``NN_name_files/``: the same as Markdown with each figure as a PNG (its
  first view, screenshotted in headless Chromium), for code hosts that do not run JavaScript;
- ``rendered.json``: for each notebook, the hash of its cells and the model's fingerprint.
  ``tests/unit/test_docs.py`` recomputes both, so docs that no longer match the notebooks or the
  shipped model fail the tests until this command is run again.

Widgets (``sv.explore``) need a live kernel: the pages show a note in their place. A tqdm progress bar is a
widget too, and says nothing once the run is over: it is dropped.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "docs" / "notebooks"
STAMP = OUT / "rendered.json"
CHROMIUM = "/usr/bin/chromium"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TQDM_BAR = re.compile(r"\d+%\|.*\|")  # a tqdm bar's text: "sweep:  40%|████      | 2/5 [00:01<00:02, ...]"
WIDGET_NOTE = ("<p><i>[An interactive ipywidgets explorer is shown here when the notebook runs in Jupyter; "
               "it needs a live kernel.]</i></p>")


def source_hash(path: Path) -> str:
    """What the rendering depends on in a notebook: its cells' types and sources (not outputs, not metadata)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [[c["cell_type"], "".join(c["source"])] for c in nb["cells"]]
    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()[:16]


def model_fingerprint() -> str:
    sys.path.insert(0, str(ROOT))
    import sbd_viz as sv

    return sv.load_model().fingerprint()


def execute(path: Path):
    """The notebook executed in a fresh folder; figures come back as Plotly JSON outputs."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ["PLOTLY_RENDERER"] = "plotly_mimetype"  # the kernel inherits it: figures as JSON, not inline JS
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(nb, timeout=None, kernel_name="python3", resources={"metadata": {"path": tmp}}).execute()
        keep_files(nb, Path(tmp))
    return nb


def keep_files(nb, folder: Path) -> list[Path]:
    """The files a notebook wrote in its folder and links from its outputs (notebook 3's GIF, ``[x.gif](x.gif)``),
    copied beside the rendered pages, so each link works there as it does beside the notebook."""
    import shutil

    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    kept = []
    for name in sorted(set(re.findall(r"\]\(([\w.-]+\.(?:gif|png|csv|json|html))\)", text))):
        if (folder / name).is_file():
            OUT.mkdir(parents=True, exist_ok=True)
            kept.append(Path(shutil.copyfile(folder / name, OUT / name)))
    return kept


def _figure_div(spec: dict, div_id: str) -> str:
    """A figure's div and the script that draws it with the page's shared plotly.js (frames included)."""
    import plotly.io as pio

    fig = pio.from_json(json.dumps(spec), skip_invalid=True)
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id, auto_play=False)


def _screenshot(browser, html: str, width: int, height: int) -> bytes:
    page = browser.new_page(viewport={"width": width + 40, "height": height + 40}, device_scale_factor=1.5)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "plotly.min.js").write_text(_plotly_js(), encoding="utf-8")
            page_path = Path(tmp) / "figure.html"
            page_path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
                                 f"<script src='plotly.min.js'></script></head><body>{html}</body></html>",
                                 encoding="utf-8")
            page.goto(page_path.as_uri())
            graph = page.locator(".plotly-graph-div")
            graph.locator(".main-svg").first.wait_for()
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            return graph.screenshot()
    finally:
        page.close()


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def is_progress_bar(output) -> bool:
    """A tqdm bar: a widget whose text form is a progress meter (an explorer's is its widget tree)."""
    data = output.get("data", {})
    return WIDGET_MIME in data and bool(TQDM_BAR.search(str(data.get("text/plain", ""))))


def split_outputs(nb, stem: str, browser):
    """Two copies of the executed notebook: figures as interactive HTML, and figures as PNGs."""
    import copy

    html_nb, md_nb = copy.deepcopy(nb), copy.deepcopy(nb)
    n = 0
    for hc, mc in zip(html_nb.cells, md_nb.cells):
        if hc.cell_type != "code":
            continue
        hc.outputs = [o for o in hc.outputs if not is_progress_bar(o)]
        mc.outputs = [o for o in mc.outputs if not is_progress_bar(o)]
        for ho, mo in zip(hc.outputs, mc.outputs):
            data = ho.get("data", {})
            if PLOTLY_MIME in data:
                n += 1
                spec = data[PLOTLY_MIME]
                div = _figure_div(spec, f"{stem}-fig{n}")
                ho["data"] = {"text/html": div}
                layout = spec.get("layout", {})
                png = _screenshot(browser, div, int(layout.get("width") or 800), int(layout.get("height") or 500))
                mo["data"] = {"image/png": base64.b64encode(png).decode()}
            elif WIDGET_MIME in data:
                ho["data"] = {"text/html": WIDGET_NOTE}
                mo["data"] = {"text/markdown": WIDGET_NOTE.replace("<p><i>", "*").replace("</i></p>", "*")}
    return html_nb, md_nb, n


UP_LINK = re.compile(r"(\]\(|href=[\"'])\.\./")  # a Markdown link or an HTML href that climbs out of notebooks/


def relink(text: str) -> str:
    """A page's links as they resolve from ``docs/notebooks/``: a notebook links from ``notebooks/`` (its
    ``../sbd_viz/GLOSSARY.md`` is the repository's), and its pages sit one folder deeper, so each link that
    climbs out climbs one level more."""
    return UP_LINK.sub(lambda m: m.group(1) + "../../", text)


def write(stem: str, html_nb, md_nb) -> None:
    from nbconvert import HTMLExporter, MarkdownExporter

    html, _ = HTMLExporter(template_name="lab").from_notebook_node(html_nb)
    # the figures' scripts need plotly.js before them: one shared copy beside the pages
    html = html.replace("</head>", "<script src='plotly.min.js' charset='utf-8'></script>\n</head>", 1)
    (OUT / f"{stem}.html").write_text(relink(html), encoding="utf-8")
    md, resources = MarkdownExporter().from_notebook_node(md_nb, resources={"output_files_dir": f"{stem}_files"})
    files = OUT / f"{stem}_files"
    if files.exists():
        for old in files.iterdir():
            old.unlink()
    for name, blob in resources.get("outputs", {}).items():
        target = OUT / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)
    (OUT / f"{stem}.md").write_text(relink(md), encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", help="notebook numbers or names (default: all)")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.only:
        paths = [p for p in paths if any(p.name.startswith(o) for o in args.only)]
        if not paths:
            parser.error(f"only: no notebook matches {args.only}")
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "plotly.min.js").write_text(_plotly_js(), encoding="utf-8")
    stamp = json.loads(STAMP.read_text()) if STAMP.exists() else {}
    fingerprint = model_fingerprint()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless", "--disable-gpu"])
        try:
            for path in paths:
                t0 = time.perf_counter()
                nb = execute(path)
                html_nb, md_nb, n = split_outputs(nb, path.stem, browser)
                write(path.stem, html_nb, md_nb)
                stamp[path.name] = {"source": source_hash(path), "model": fingerprint,
                                    "rendered": time.strftime("%Y-%m-%d")}
                print(f"{path.name}: {n} figures, {time.perf_counter() - t0:.0f} s")
        finally:
            browser.close()
    STAMP.write_text(json.dumps(dict(sorted(stamp.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
