"""bench/scripts/bench_list_tasks.py run for real on the shipped character model with one item per task: every
registered decoder is run or named as skipped, the γ decoders' rows come from exact maps, and each row's numbers are the
ones ``sbd_viz.analysis.parallelism`` gives for its points."""

import json

import pytest

import sbd_viz as sv
from sbd_viz.tasks import lists as lt
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


def test_a_run_with_a_cache_resumes_without_decoding_what_it_saved(tmp_path, monkeypatch):
    """--cache: each finished curve is saved; a second run of the same suite reads them back and decodes nothing (its
    decoders are made to fail), writing the same page; another suite decodes again."""
    args = ["--models", "char", "--tasks", "copy", "--decoders", "sbd", "--lengths", "3", "--per-length", "1",
            "--grid-points", "2", "--cache", str(tmp_path / "cache")]
    script = bench_script("bench_list_tasks")
    script.main(args + ["--json", str(tmp_path / "a.json"), "--out", str(tmp_path / "a.md")])
    assert {p.name for p in (tmp_path / "cache").iterdir()} == {"char-ntp.json", "char-sbd.json",
                                                                "char-verified-sbd.json"}

    def no_decode(*_, **__):
        raise AssertionError("decoded although the cache holds this curve")

    monkeypatch.setattr(script, "gamma_map", no_decode)
    monkeypatch.setattr(script.sv, "decode_ntp", no_decode)
    script.main(args + ["--json", str(tmp_path / "b.json"), "--out", str(tmp_path / "b.md")])
    first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert first["results"] == second["results"]
    with pytest.raises(AssertionError, match="decoded although"):  # another suite is not read from the cache
        script.main(args[:-2] + ["--grid-points", "3", "--cache", str(tmp_path / "cache"), "--out",
                                 str(tmp_path / "c.md")])
