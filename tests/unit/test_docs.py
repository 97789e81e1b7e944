"""The rendered walkthroughs in docs/notebooks are current: made from today's notebooks and model.

``python docs/render_notebooks.py`` (``make docs``) renders them and records, per notebook, the
hash of its cells and the shipped model's fingerprint; a notebook edited or a model retrained
since then fails here until the command is run again.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OUT = ROOT / "docs" / "notebooks"


def _render_module():
    spec = importlib.util.spec_from_file_location("render_notebooks", ROOT / "docs" / "render_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def render():
    return _render_module()


@pytest.fixture(scope="module")
def stamp():
    path = OUT / "rendered.json"
    assert path.is_file(), "docs/notebooks/rendered.json is missing: run `make docs`"
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_is_rendered_from_its_current_cells(path, render, stamp):
    assert path.name in stamp, f"{path.name} has never been rendered: run `make docs`"
    assert stamp[path.name]["source"] == render.source_hash(path), \
        f"{path.name} changed since it was rendered: run `make docs`"
    html, md = OUT / f"{path.stem}.html", OUT / f"{path.stem}.md"
    assert html.is_file() and md.is_file()
    page = html.read_text(encoding="utf-8")
    assert "plotly.min.js" in page and "Traceback" not in page
    for image in md.read_text(encoding="utf-8").split("](")[1:]:  # every image the Markdown names exists
        name = image.split(")", 1)[0]
        if name.endswith(".png"):
            assert (OUT / name).is_file(), name


@pytest.mark.heavy
def test_rendered_with_the_shipped_model(render, stamp):
    fingerprint = render.model_fingerprint()
    stale = [name for name, entry in stamp.items() if entry["model"] != fingerprint]
    assert not stale, f"rendered with another model: {stale}; run `make docs`"


def test_the_hash_sees_a_changed_cell(render, tmp_path):
    path = NOTEBOOKS[0]
    nb = json.loads(path.read_text(encoding="utf-8"))
    copy = tmp_path / path.name
    copy.write_text(json.dumps(nb), encoding="utf-8")
    before = render.source_hash(copy)
    nb["cells"][-1]["source"] = ["changed"]
    copy.write_text(json.dumps(nb), encoding="utf-8")
    assert render.source_hash(copy) != before


def test_a_progress_bar_is_dropped_and_an_explorer_keeps_its_note(render):
    widget = render.WIDGET_MIME
    bar = {"data": {widget: {"model_id": "a"}, "text/plain": "sweep:  40%|████      | 2/5 [00:01<00:02, 1.9it/s]"}}
    explorer = {"data": {widget: {"model_id": "b"}, "text/plain": "Explorer(children=(Text(value='assert 1 + 1 == '),"}}
    assert render.is_progress_bar(bar) and not render.is_progress_bar(explorer)
    assert not render.is_progress_bar({"data": {"text/plain": "50%|##| printed, not a widget"}})


def test_links_that_leave_the_notebooks_folder_work_from_the_rendered_pages(render):
    """A notebook links the glossary as ../sbd_viz/GLOSSARY.md from notebooks/; its pages live in docs/notebooks/."""
    md = "all of them are in the [glossary](../sbd_viz/GLOSSARY.md), figures in [here](02_files/a.png)"
    html = "<a href=\"../sbd_viz/GLOSSARY.md\">glossary</a> <a href='../bench/GAPS.md'>x</a> <a href=\"#top\">"
    assert render.relink(md) == md.replace("](../sbd_viz", "](../../sbd_viz")
    assert render.relink(html) == html.replace('"../sbd_viz', '"../../sbd_viz').replace("'../bench", "'../../bench")
    for notebook in NOTEBOOKS:  # every link a notebook makes this way lands on a file of the repository
        for target in re.findall(r"\]\((\.\./[^)#\s]+)", notebook.read_text(encoding="utf-8")):
            assert (notebook.parent / target).is_file(), f"{notebook.name}: {target}"
            assert (OUT / render.relink(f"]({target}")[2:]).resolve() == (notebook.parent / target).resolve()


def test_a_file_a_notebook_links_is_kept_beside_the_pages(render, tmp_path, monkeypatch):
    """Notebook 3 links its GIF instead of inlining it: the renderer copies a linked file the run wrote."""
    import nbformat

    monkeypatch.setattr(render, "OUT", tmp_path / "out")
    (tmp_path / "worst_item.gif").write_bytes(b"GIF89a")
    (tmp_path / "stray.gif").write_bytes(b"GIF89a")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": "[**worst_item.gif**](worst_item.gif), written beside this notebook"})])])
    assert [p.name for p in render.keep_files(nb, tmp_path)] == ["worst_item.gif"]
    assert (tmp_path / "out" / "worst_item.gif").read_bytes() == b"GIF89a"
    assert "base64" not in (ROOT / "notebooks" / "03_gap_fill_failures.ipynb").read_text(encoding="utf-8")
