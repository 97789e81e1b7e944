"""bench/ADAPTER.md: the SBD adapter on SmolLM2-135M against its base, on held-out chat and HumanEval. The exact
decoders' claims hold in its JSON (the page is that JSON rendered: tests/unit/test_bench_pages.py): every verified row
wrote generate's ids on every item. bench/ADAPTER_BLOCKS.md and bench/ADAPTER_SMALL_BLOCKS.md (the same script at
blocks of 4 and 8, and of 2 and 3) are held to the same. No model is loaded."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE, DATA = ROOT / "bench" / "ADAPTER.md", ROOT / "bench" / "results" / "adapter.json"
# (page, its JSON): the main page, and the block-size comparisons
PAGES = [(PAGE, DATA), (ROOT / "bench" / "ADAPTER_BLOCKS.md", ROOT / "bench" / "results" / "adapter_blocks.json"),
         (ROOT / "bench" / "ADAPTER_SMALL_BLOCKS.md", ROOT / "bench" / "results" / "adapter_small_blocks.json")]
each_page = pytest.mark.parametrize("page, data_file", PAGES, ids=lambda p: p.name)


def data(data_file: Path = DATA):
    return json.loads(data_file.read_text())


@each_page
def test_the_page_names_its_command_and_load(page, data_file):
    header, page = data(data_file)["header"], page.read_text()
    assert f"`{header['command']}`" in page.splitlines()[:6]  # at the top
    assert header["command"].startswith("python bench/scripts/bench_adapter.py")
    assert header["load_start"] in page and header["load_end"] in page


@each_page
def test_every_verified_row_wrote_generates_ids_on_every_item(page, data_file):
    """Exactness: verified SBD (single and tree drafting, its chain and its token tree) and prompt lookup write the
    base's greedy text."""
    sets = data(data_file)["results"]["sets"]
    header = data(data_file)["header"]
    assert any(s["items"] for s in sets.values())
    for name, s in sets.items():
        assert s["items"] == header["items"][name]
        if not s["items"]:
            continue
        rows = dict(s["verified"])
        rows.update({f"tree {k}": v for k, v in (s["tree"] or {}).items()})
        rows.update({f"token tree {k}": v for k, v in (s.get("token_tree") or {}).items()})
        rows.update({"prompt lookup": s["lookup"], "generate": s["generate"]})
        assert len(s["verified"]) == len(header["blocks"]) * len(header["gammas"])
        for row_name, row in rows.items():
            assert row["items"] == s["items"], (name, row_name)
            assert row["identical"] == row["items"], (name, row_name)  # exact: every item's ids equal generate's
            assert row["tokens"] == s["tokens"], (name, row_name)  # so the same tokens
            assert row["tokens_per_call"] == pytest.approx(row["tokens"] / row["calls"])
            assert row["accepted"] <= row["checked"]


def test_plain_sbd_and_the_other_counts_are_within_their_bounds():
    results = data()["results"]
    for s in results["sets"].values():
        for row in (s.get("plain") or {}).values():
            assert row["identical"] <= row["items"] == s["items"]
            assert 0 <= row["kept_share"] <= 1
    he = results["humaneval"]
    if he:
        assert set(he) >= {"generate"}
        for row in he.values():
            assert row["items"] == results["sets"]["code"]["items"] and 0 <= row["passed"] <= row["items"]
    timing = results["timing_summary"]
    if timing:
        assert 0 <= timing["disturbed"] < timing["runs"]
        for pair in timing["ratios"].values():
            assert 0 <= pair["pairs"] <= pair["of"]
            assert pair["pairs"] == 0 or pair["lo"] <= pair["median"] <= pair["hi"]


def test_the_real_text_guide_quotes_the_pages_numbers():
    """docs/real_text.md sums the page up in a sentence: its tokens per call (tree drafting at its best γ, prompt
    lookup) and the paired wall-clock ratio are the JSON's."""
    results = data()["results"]
    guide = (ROOT / "docs" / "real_text.md").read_text()
    for name in ("chat", "code"):
        best = max(row["tokens_per_call"] for row in results["sets"][name]["tree"].values())
        lookup = results["sets"][name]["lookup"]["tokens_per_call"]
        assert f"{best:.2f}" in guide and f"{lookup:.2f}" in guide, name
    ratio = results["timing_summary"]["ratios"]["verified SBD vs generate"]["median"]
    assert f"{ratio:.2f}×" in guide
