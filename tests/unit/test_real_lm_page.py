"""bench/REAL_LM.md is its JSON rendered, and its clocks are paired: each row's ratio is the median over the rounds
where neither run was disturbed, and a row whose pairs were all disturbed shows none."""
import importlib.util
import json
import sys

from conftest import ROOT

BENCH = ROOT / "bench"


def page_module():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_real_lm_page", BENCH / "bench_real_lm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_its_json_rendered():
    module = page_module()
    data = json.loads((BENCH / "real_lm.json").read_text())
    assert (BENCH / "REAL_LM.md").read_text() == module.markdown(data)


def test_every_rows_ratio_comes_from_its_kept_pairs():
    import paired

    data = json.loads((BENCH / "real_lm.json").read_text())
    assert data["rounds"] >= 2 and data["guard"] > 1
    for row in data["rows"]:
        assert len(row["rounds"]) == data["rounds"]
        for name in ("jacobi", "prompt_lookup"):
            assert row[name]["wall"] == paired.ratio(row["rounds"], "generate", name)


def test_a_row_whose_pairs_were_all_disturbed_shows_no_ratio():
    module = page_module()
    data = json.loads((BENCH / "real_lm.json").read_text())
    row = data["rows"][0]
    for r in row["rounds"]:
        r["disturbed"] = ["jacobi"]
    row["jacobi"]["wall"] = module.paired.ratio(row["rounds"], "generate", "jacobi")
    line = next(l for l in module.markdown(data).splitlines() if l.startswith("| " + row["prompt"][:20]))
    assert row["jacobi"]["wall"]["median"] is None and "| — |" in line
