"""Every page of bench/ is its data rendered: each committed page equals its script's rendering of its JSON in
bench/results/ (what `make bench-pages` writes, here in memory), no page lacks data, and no data lacks a page.
Nothing is decoded or timed."""

import pytest

from conftest import ROOT, bench_script

RENDER = bench_script("render_pages")
BENCH = ROOT / "bench"


@pytest.mark.parametrize("page", RENDER.PAGES, ids=lambda p: p.page)
def test_the_committed_page_is_its_data_rendered(page):
    assert (BENCH / page.page).read_text() == page.rendered(), (
        f"bench/{page.page} is not bench/results/{page.data} rendered: run `make bench-pages` (after a change to "
        f"bench/scripts/{page.script}.py) or the command the page names (after a change to what it measures)")


def test_every_page_has_data_and_every_data_file_a_page():
    """A page no script renders from data is hand-written, and does not belong here; a results file no page reads is
    data without a page."""
    pages = {p.page for p in RENDER.PAGES}
    assert {p.name for p in BENCH.glob("*.md")} - {"README.md"} == pages
    assert {p.name for p in (BENCH / "results").iterdir()} == {p.data for p in RENDER.PAGES}
    assert all((BENCH / "scripts" / f"{p.script}.py").is_file() for p in RENDER.PAGES)


def test_the_check_names_a_page_that_is_not_its_data_rendered(tmp_path, monkeypatch):
    """``render_pages.py --check`` writes nothing and fails on a page that differs; without it, the page is written."""
    page = RENDER.PAGES[0]
    monkeypatch.setattr(RENDER, "PAGES", [page])
    monkeypatch.setattr(RENDER.run_info, "BENCH", tmp_path)
    (tmp_path / page.page).write_text("by hand\n")
    assert RENDER.main(["--check"]) == 1 and (tmp_path / page.page).read_text() == "by hand\n"
    assert RENDER.main([]) == 0 and (tmp_path / page.page).read_text() == page.rendered()
    assert RENDER.main(["--check"]) == 0
