"""bench/bench_list_tasks.py run for real on the shipped character model with one item per task: every registered
decoder is run or named as skipped, the γ decoders' rows come from exact maps, and each row's numbers are the ones
``sbd_viz.analysis.parallelism`` gives for its points."""

import json

import pytest

import sbd_viz as sv
from sbd_viz import list_tasks as lt
from sbd_viz.analysis import parallelism as par

from conftest import bench_script


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("list_tasks")
    data, page = folder / "run.json", folder / "page.md"
    bench_script("bench_list_tasks").main(["--limit", "1", "--models", "char", "--lengths", "3", "--grid-points", "3",
                                           "--json", str(data), "--out", str(page)])
    return json.loads(data.read_text()), page.read_text()


def test_every_decoder_is_run_or_skipped_with_a_reason(run):
    (model,) = run[0]["results"]["models"]
    ran = {r["label"] for r in model["rows"]}
    skipped = {s["decoder"] for s in model["skipped"]}
    for spec in sv.decoders():
        assert spec.label in ran or spec.name in skipped, spec.name
        assert all(label in ran for label in spec.variants) or spec.name in skipped
    assert all(s["reason"].startswith("serves ") for s in model["skipped"])
    assert model["items"] == len(lt.LIST_TASKS)


def test_rows_hold_their_own_numbers(run):
    (model,) = run[0]["results"]["models"]
    for r in model["rows"]:
        assert r["PB90"] == pytest.approx(par.pbx(r["points"], 90), rel=1e-5)  # the points are kept rounded
        assert r["best_accuracy"] == pytest.approx(max(y for _, y in r["points"]), abs=1e-6)
        if r["how"] == "exact γ map":
            assert r["segments"] == len(r["points"]) == len(r["ranges"]) and len(r["grid"]) == 5
    page = run[1]
    assert "## `sbd-char-5m` (assert prompts)" in page and "exact γ map" in page


def test_a_quick_subset_runs_only_what_it_names_and_draws_the_closed_forms(tmp_path):
    data, page, png = tmp_path / "run.json", tmp_path / "page.md", tmp_path / "fig.png"
    bench_script("bench_list_tasks").main(["--models", "char", "--tasks", "copy", "--decoders", "sbd", "--lengths",
                                           "3", "--per-length", "1", "--grid-points", "2", "--json", str(data),
                                           "--out", str(page), "--png", str(png)])
    (model,) = json.loads(data.read_text())["results"]["models"]
    assert {r["task"] for r in model["rows"]} == {"copy", "all tasks"}
    assert {r["label"] for r in model["rows"]} == {"NTP", "SBD", "verified SBD"} and model["items"] == 1
    assert set(model["tokens_per_item"]) == {"copy"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "![Closed forms beside the measured curves](fig.png)" \
        in page.read_text()
