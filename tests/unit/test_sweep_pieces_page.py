"""bench/scripts/bench_sweep_pieces.py without a model: the page from a run's numbers, and the sweeps' own counts read
from frames' attrs."""

import json

import pandas as pd

from conftest import bench_script

HEADER = {"command": "python bench/scripts/bench_sweep_pieces.py --sweeps speed", "date": "2026-12-02 12:00 UTC",
          "machine": "2 cores", "load_start": "1.00 2.00 3.00", "load_end": "4.00 5.00 6.00", "seconds": 60.0,
          "model": "sbd-char-5m", "block_size": 8, "per_family": 10}
ROW = {"sweep": "speed", "items": 140, "settings": 14, "forwards_True": 600, "forwards_False": 1000,
       "own_run_True": 500, "own_run_False": 900, "own_saved_True": 400, "own_saved_False": 0,
       "seconds_True": 30.0, "seconds_False": 50.0, "same_rows": True}


def test_the_page_states_calls_saved_and_whether_rows_are_the_same(tmp_path):
    script = bench_script("bench_sweep_pieces")
    data, out = tmp_path / "run.json", tmp_path / "page.md"
    data.write_text(json.dumps({"header": HEADER, "results": [ROW, {**ROW, "sweep": "decoders", "same_rows": False}],
                                "examples": []}))
    script.main(["--from-json", str(data), "--out", str(out)])
    page = out.read_text()
    assert f"`{HEADER['command']}`" in page and "1.00 2.00 3.00" in page
    assert "| speed | 140 | 14 | 1,000 | 600 | 400 (40%) | 900 | 500 | 400 (44%) | yes |" in page
    assert "speed 50 s every γ, 30 s pieces" in page
    assert "| decoders | 140 | 14 |" in page and page.rstrip().count("| NO |") == 1


def test_own_counts_read_both_sweeps_attrs():
    script = bench_script("bench_sweep_pieces")
    suite = pd.DataFrame({"x": [1]})
    suite.attrs.update(calls_run=70, calls_reused=30)
    decoders = pd.DataFrame({"x": [1]})
    decoders.attrs.update(calls_run=50, calls_direct=80)
    assert script.own_counts([suite, decoders]) == (120, 60)
    a, b = pd.DataFrame({"calls": [1, 2], "wall_time": [0.1, 0.2]}), pd.DataFrame({"calls": [1, 2],
                                                                                    "wall_time": [0.3, 0.4]})
    assert script.same_rows([a], [b]) and not script.same_rows([a], [b.assign(calls=[1, 3])])
