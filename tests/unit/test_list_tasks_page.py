"""bench/scripts/bench_list_tasks.py without a model: its per-task numbers from hand-made decodes (exact-map outcomes
and sampled points), and its page rendered from a small JSON through ``--from-json``."""

import json

import pytest

from conftest import bench_script

# Two items of "copy", one of "sort". SBD's map: item 0 is right on [0, 0.5) at 1 token a call and on the sliver
# [0.71, 0.73) at 3 a call (where a 3-point γ grid 0, 1, 2 never looks), wrong elsewhere.
SBD_ITEMS = [
    [[0.0, 0.5, True, False, True, 4, 4], [0.5, 0.71, True, False, False, 4, 2], [0.71, 0.73, True, False, True, 6, 2],
     [0.73, 2.0, True, True, False, 4, 1]],
    [[0.0, 2.0, True, True, True, 4, 4]],
    [[0.0, 1.0, True, False, True, 8, 8], [1.0, 2.0, True, True, True, 8, 2]],
]
DECODED = {
    "tasks": ["copy", "sort"], "item_tasks": ["copy", "copy", "sort"],
    "curves": [
        {"decoder": "ntp", "label": "NTP", "how": "one setting", "knob": None,
         "samples": [{"value": None, "outcomes": [[True, 4, 4], [True, 4, 4], [False, 8, 8]]}]},
        {"decoder": "sbd", "label": "SBD", "how": "exact γ map", "knob": "gamma", "grid": [0.0, 1.0, 2.0],
         "items": SBD_ITEMS},
        {"decoder": "jacobi", "label": "Jacobi", "how": "sampled block_size", "knob": "block_size",
         "samples": [{"value": 1, "outcomes": [[True, 4, 4], [True, 4, 4], [False, 8, 8]]},
                     {"value": 4, "outcomes": [[True, 4, 2], [True, 4, 2], [False, 8, 3]]}]},
    ],
}


@pytest.fixture(scope="module")
def script():
    return bench_script("bench_list_tasks")


def rows_by(rows):
    return {(r["task"], r["label"]): r for r in rows}


def test_numbers_per_task_and_decoder(script):
    rows = rows_by(script.metrics(DECODED))
    sbd = rows[("copy", "SBD")]
    # copy's segments: [0, 0.5) 100% at 8/8, [0.5, 0.71) 50% at 8/6, the sliver 100% at 10/6, [0.73, 2] 50% at 8/5
    assert sbd["segments"] == 4 and sbd["points"][2] == [pytest.approx(10 / 6, abs=1e-6), 100.0]
    assert sbd["PB90"] == pytest.approx(10 / 6) and sbd["PB60"] == pytest.approx(10 / 6)
    grid = {g["metric"]: g for g in sbd["grid"]}
    assert grid["PB90"]["grid"] == 1.0 and grid["PB90"]["missed"] == ["[0.71, 0.73)"]
    assert rows[("copy", "NTP")]["PB90"] == 1.0 and rows[("copy", "NTP")]["AUP"] == 100.0
    assert rows[("copy", "Jacobi")]["PB90"] == 2.0  # its block-4 point: 8 tokens in 4 calls, both right
    assert rows[("sort", "NTP")]["PB90 of NTP"] is None  # NTP gets no sort item right: no relative level
    assert rows[("sort", "SBD")]["PB90"] == 4.0 and rows[("sort", "SBD")]["ntp_accuracy"] == 0.0
    everything = rows[("all tasks", "SBD")]
    assert everything["best_accuracy"] == 100.0 and len(everything["ranges"]) == everything["segments"]


def test_the_page_from_its_json(script, tmp_path):
    header = {"command": "python bench/scripts/bench_list_tasks.py --limit 1", "date": "2026-12-02 08:00 UTC",
              "machine": "2 cores", "load_start": "1.00 2.00 3.00", "load_end": "4.00 5.00 6.00", "seconds": 9.5,
              "lengths": [3], "per_length": 4, "limit": 1, "seed": 2510, "grid_points": 3, "rule": "entropy_bounded"}
    results = {"models": [{"model": "char", "name": "sbd-char-5m", "style": "assert", "block_size": 8, "items": 3,
                           "calls": 1234, "seconds": 9.0,
                           "skipped": [{"decoder": "diffusion_gemma", "reason": "serves a DiffusionGemma model"}],
                           "rows": script.metrics(DECODED)}]}
    examples = [{"model": "char", "task": "copy", "prompt": "xs = [1, 2]\nassert xs == ", "answer": "[1, 2]",
                 "ntp": "[1, 2]\n"}]
    data = tmp_path / "run.json"
    data.write_text(json.dumps({"header": header, "results": results, "examples": examples}))
    out = tmp_path / "page.md"
    script.main(["--from-json", str(data), "--out", str(out)])
    page = out.read_text()
    assert f"`{header['command']}`" in page.splitlines()[2] and "1.00 2.00 3.00" in page and "4.00 5.00 6.00" in page
    assert "Not run: diffusion_gemma (serves a DiffusionGemma model)." in page
    assert "| copy | SBD | exact γ map (4 segments) | 100% | 100% | 1.67 | 1.67 | 1.67 | 1.67 |" in page
    assert "| sort | SBD | exact γ map (2 segments) | 0% | 100% | 4.00 |" in page and "| – | – |" in page
    assert "| `sbd-char-5m` | copy | SBD | PB90 | 1.67 | 1.00 |" in page and "[0.71, 0.73)" in page
    assert "`xs = [1, 2]⏎assert xs == `" in page
    # a grid that sees every segment: nothing to list
    fine = {**DECODED, "curves": [dict(c, grid=[i / 100 for i in range(201)]) if "grid" in c else c
                                  for c in DECODED["curves"]]}
    results["models"][0]["rows"] = script.metrics(fine)
    data.write_text(json.dumps({"header": header, "results": results, "examples": []}))
    script.main(["--from-json", str(data), "--out", str(out)])
    assert "Nowhere: every PBx and AUP from the grid equals the exact map's." in out.read_text()


def test_limit_takes_items_in_turn_from_the_lengths(script):
    from sbd_viz.tasks import lists as lt

    items = lt.list_suite(tasks=("copy", "sort"), lengths=(3, 5), per_length=2)
    picked = script.pick(items, 3)
    assert [(i.task, i.length) for i in picked] == [("copy", 3), ("copy", 5), ("copy", 3), ("sort", 3), ("sort", 5),
                                                    ("sort", 3)]
    assert script.pick(items, None) == items


def test_the_page_embeds_the_figure_it_is_given(script):
    header = {"command": "c", "date": "d", "machine": "m", "load_start": "1", "load_end": "2", "seconds": 1.0,
              "lengths": [3], "per_length": 1, "limit": None, "seed": 2510, "grid_points": 3,
              "rule": "entropy_bounded"}
    results = {"models": [{"model": "char", "name": "sbd-char-5m", "style": "assert", "block_size": 8, "items": 3,
                           "calls": 1, "seconds": 1.0, "skipped": [], "rows": script.metrics(DECODED)}]}
    assert "![Closed forms" not in script.markdown(header, results, [])
    page = script.markdown({**header, "figure": "list_tasks.png"}, results, [])
    assert "## Closed form beside the measured curve" in page and "(list_tasks.png)" in page


def test_a_quick_subset_is_refused_with_an_unknown_decoder(script):
    with pytest.raises(SystemExit):
        script.main(["--decoders", "nope", "--models", "char"])


def test_the_committed_page_holds_both_models_and_its_figure(script):
    from pathlib import Path

    from sbd_viz.tasks.lists import LIST_TASKS

    bench = Path(script.__file__).resolve().parents[1]
    data = json.loads((bench / "results" / "list_tasks.json").read_text())
    assert data["header"]["figure"] == "list_tasks.png"  # --png bench/list_tasks.png, beside the page
    assert [m["name"] for m in data["results"]["models"]] == ["sbd-char-5m", "smollm2-135m-sbd"]
    for model in data["results"]["models"]:
        labels = {r["label"] for r in model["rows"]}
        assert {"NTP", "SBD", "verified SBD", "SBD + remasking", "Jacobi", "prompt lookup"} <= labels
        assert {r["task"] for r in model["rows"]} == {*LIST_TASKS, "all tasks"}
    assert (bench / "list_tasks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
