"""bench/REAL_LM.md's clocks are paired: each row's ratio in its JSON is the median over the rounds where neither
run was disturbed, and a row whose pairs were all disturbed shows none (the page is its JSON rendered:
tests/unit/test_bench_pages.py)."""
import json

from conftest import ROOT, bench_script

DATA = ROOT / "bench" / "results" / "real_lm.json"


def page_module():
    return bench_script("bench_real_lm")


def test_every_rows_ratio_comes_from_its_kept_pairs():
    paired = page_module().paired

    data = json.loads(DATA.read_text())
    assert data["rounds"] >= 2 and data["guard"] > 1
    for row in data["rows"]:
        assert len(row["rounds"]) == data["rounds"]
        for name in ("jacobi", "prompt_lookup"):
            assert row[name]["wall"] == paired.ratio(row["rounds"], "generate", name)


def test_a_row_whose_pairs_were_all_disturbed_shows_no_ratio():
    module = page_module()
    data = json.loads(DATA.read_text())
    row = data["rows"][0]
    for r in row["rounds"]:
        r["disturbed"] = ["jacobi"]
    row["jacobi"]["wall"] = module.paired.ratio(row["rounds"], "generate", "jacobi")
    line = next(l for l in module.markdown(data).splitlines() if l.startswith("| " + row["prompt"][:20]))
    assert row["jacobi"]["wall"]["median"] is None and "| — |" in line
