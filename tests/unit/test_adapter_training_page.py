"""bench/ADAPTER_TRAINING.md's data (the page is that data rendered: tests/unit/test_bench_pages.py): its rows are the
probe's held-out sets in training order, its decodes held out are exact; and the adapter choices', probe sets' and
draft trees' pages' data hold what those pages claim."""

import json

import pytest

from conftest import bench_script


def page_module():
    return bench_script("adapter_training")


def test_the_rows_go_forward_in_training_and_hold_both_held_out_sets():
    data = json.loads(page_module().JSON.read_text())
    steps = [r["step"] for r in data["rows"]]
    assert steps == sorted(steps) and len(steps) >= 3
    assert all({"chat", "code"} <= set(r) for r in data["rows"])
    assert all(r["scored_tokens"] > 0 for r in data["rows"])


def test_the_log_fit_recovers_a_known_line():
    module = page_module()
    rows = [{"scored_tokens": 2 ** i, "x": {"single_tpc": 1.0 + 0.1 * i}} for i in range(10, 15)]
    slope, intercept = module.log_fit(rows, "x")
    assert abs(slope - 0.1) < 1e-9 and abs(intercept - 1.0) < 1e-9


def test_held_out_rows_are_exact_decodes_in_training_order():
    """Each held-out row is a bench_adapter run's exact decoders (decodes, not the probe): every item wrote the base's
    greedy ids, at every step."""
    data = json.loads(page_module().JSON.read_text())
    held = data.get("held_out", [])
    assert held, "no held-out measurement on the page"
    assert [h["step"] for h in held] == sorted(h["step"] for h in held)
    for h in held:
        assert h["command"].startswith("python bench/scripts/bench_adapter.py")
        for decoders in h["sets"].values():
            assert decoders and all(r["identical"] == r["items"] > 0 for r in decoders.values()), h["step"]


def test_a_held_out_row_is_read_from_a_bench_adapter_run(tmp_path):
    run = {"header": {"command": "python bench/scripts/bench_adapter.py --chat 1"},
           "results": {"sets": {"chat": {"lookup": {"items": 1, "identical": 1, "tokens_per_call": 1.5,
                                                    "after_prefill": 1.6, "calls": 3},
                                         "verified": {"block 4, γ 8": {"items": 1, "identical": 1,
                                                                         "tokens_per_call": 1.2, "after_prefill": 1.3}},
                                         "tree": {}}}}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    assert page_module().held_out_row(750, path) == {
        "step": 750, "command": "python bench/scripts/bench_adapter.py --chat 1",
        "sets": {"chat": {"prompt lookup": {"items": 1, "identical": 1, "tokens_per_call": 1.5, "after_prefill": 1.6},
                          "verified SBD, block 4, γ 8": {"items": 1, "identical": 1, "tokens_per_call": 1.2,
                                                         "after_prefill": 1.3}}}}


def test_a_run_resumed_into_another_folder_reads_as_one_curve(tmp_path):
    """Two logs in training order: the second's steps go on from the first's, and a step both hold is the second's."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    probe = {"chat": {"single_tpc": 1.5, "slot_accuracy": [0.8, 0.4]}}
    first.write_text("".join(json.dumps({"step": s, "loss": 1.0, "scored": 10 * s, "step_s": 2.0,
                                         **({"probe": probe} if s % 2 == 0 else {})}) + "\n" for s in (1, 2, 3, 4)))
    second.write_text("".join(json.dumps({"step": s, "loss": 0.5, "scored": 10 * s, "step_s": 4.0,
                                          **({"probe": probe} if s % 2 == 0 else {})}) + "\n" for s in (4, 5, 6)))
    rows, steps = page_module().read_log([first, second])
    assert [r["step"] for r in rows] == [2, 4, 6]
    assert [r["loss"] for r in rows] == [1.0, 0.5, 0.5]  # step 4 as the second log has it
    assert steps == [2.0, 2.0, 2.0, 4.0, 4.0, 4.0]
    assert [r["train_minutes"] for r in rows] == [round(4 / 60, 1), round(10 / 60, 1), round(18 / 60, 1)]


def test_the_page_is_rendered_for_the_shipped_adapter():
    """The page names the step the package ships (its adapter.json's), measures that adapter held out, and its curve
    reaches that step; training further starts from it."""
    module = page_module()
    data = json.loads(module.JSON.read_text())
    step = data["shipped_step"]
    assert step == module.shipped_step() and data["shipped_head"] == module.shipped_head()
    assert [h["step"] for h in data["held_out"] if h["step"] == step] == [step]
    assert data["rows"][-1]["step"] >= data["shipped_step"]
    further = data["continued"]
    assert further["command"].startswith("sbd-viz train --adapter ")
    assert "--resume-from sbd_viz/weights/smollm2-135m-sbd " in further["command"]
    assert further["rows"][0]["step"] == step


def test_the_probe_sets_page_holds_all_four_sets():
    module = bench_script("probe_sets")
    data = json.loads(module.JSON.read_text())
    assert set(data["results"]["sets"]) == set(module.SETS)
    assert all(s["blocks"] > 0 and 1.0 <= s["single_tpc"] <= data["results"]["block_size"]
               for s in data["results"]["sets"].values())
    shipped = json.loads((module.SHIPPED / "adapter.json").read_text())["extra"]
    if data["results"]["adapter"] == str(module.SHIPPED.relative_to(module.run_info.ROOT)):  # the shipped adapter
        assert data["results"]["steps"] == shipped["steps"]
        assert data["results"]["sampler_head"] == shipped.get("sampler_head")  # measured with the head it ships
        if shipped.get("sampler_head"):
            assert all(1.0 <= s["head"]["single_tpc"] <= data["results"]["block_size"]
                       for s in data["results"]["sets"].values())


@pytest.mark.parametrize("option", ["rank", "loss"])
def test_each_training_choice_page_compares_paired_runs(option):
    module = bench_script("adapter_choices")
    page, json_path = module.paths(option)
    data = json.loads(json_path.read_text())
    assert page.is_file()
    assert data["results"]["option"] == option
    runs = data["results"]["runs"]
    assert len(runs) >= 2 and len({r["steps"] for r in runs.values()}) == 1  # the same steps for every run
    assert len({json.dumps(r["probes"]) for r in runs.values()}) == len(runs)  # the runs really differ
    if option == "rank":  # a larger rank has more parameters
        sizes = [runs[r]["parameters"] for r in sorted(runs, key=int)]
        assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    else:  # a loss changes no parameter count
        assert len({r["parameters"] for r in runs.values()}) == 1


def test_wider_draft_trees_keep_more():
    module = bench_script("draft_trees")
    data = json.loads(module.JSON.read_text())
    assert module.rows_per_call((1, 1, 1)) == 20 and module.nodes((2, 2, 1)) == 2 + 4 + 4
    for result in data["results"]["sets"].values():
        for kind in ("adapter", "head"):
            chain, wide = result[kind]["1,1,1"], result[kind]["8,4,2"]
            # a tree holds the chain, so it keeps at least as much at every slot, and keeps more in all
            assert all(w >= c for w, c in zip(wide["slot_right"], chain["slot_right"]))
            assert 1.0 <= chain["single_tpc"] < wide["single_tpc"] <= data["results"]["block_size"]
