"""A model folder may record the block size it decodes at (``config.sbd_block_size``); every entry point that
decodes without being told a block size takes it: decode, decode_batch, evaluate, sweep, the explorer, the
CLI, the app and its precomputed sweep. Nothing recorded: 16, the paper's."""

import json

import pytest

import sbd_viz as sv
from sbd_viz import tasks

from conftest import tiny_model

PROMPT = "assert sorted([5, 1, 3]) == "


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    """A tiny model whose folder records block size 8, saved and loaded again as a user would."""
    model = tiny_model()
    model.model.config.sbd_block_size = 8
    folder = tmp_path_factory.mktemp("eight")
    model.model.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["sbd_block_size"] == 8
    return sv.load_model(folder)


@pytest.mark.heavy
def test_the_block_size_is_the_recorded_one_else_16(eight):
    assert eight.block_size == 8
    assert tiny_model().block_size == 16


@pytest.mark.heavy
def test_decode_takes_the_models_block_size_unless_told(eight):
    own = sv.decode(eight, PROMPT, max_new_tokens=20)
    assert own.config["block_size"] == 8 and max(s.block_size for s in own.steps) <= 8
    told8 = sv.decode(eight, PROMPT, max_new_tokens=20, block_size=8)

    def calls(trace):  # what each call did (not its wall time)
        return [(s.block_start, s.block_size, s.masked, s.commits) for s in trace.steps]

    assert own.output_ids == told8.output_ids and calls(own) == calls(told8)
    told = sv.decode(eight, PROMPT, max_new_tokens=20, block_size=16)
    assert told.config["block_size"] == 16 and max(s.block_size for s in told.steps) > 8  # 20 tokens: one block of 16


@pytest.mark.heavy
def test_decode_batch_evaluate_and_sweep_take_it_too(eight):
    assert [t.config["block_size"] for t in sv.decode_batch(eight, [PROMPT, "assert 1 + 2 == "],
                                                             max_new_tokens=12)] == [8, 8]
    items = tasks.load_suite(split="test", per_family=1, families=("add", "sorted"))
    result = sv.evaluate(eight, items, max_new_tokens=12, measure_speedup=False, keep_traces=True)
    assert {r["trace"].config["block_size"] for r in result["rows"]} == {8}
    df = sv.sweep(eight, items, gammas=[0.5], max_new_tokens=12, cache_dir=None, progress=False,
                  speed_batch_size=None)
    assert list(df["block_size"]) == [8, 1]  # the SBD setting, then NTP's row


@pytest.mark.parametrize("bad", [0, 65, 8.0, "8", True])
@pytest.mark.heavy
def test_a_bad_recorded_block_size_fails_named_by_its_config_key(bad):
    model = tiny_model()
    model.model.config.sbd_block_size = bad
    with pytest.raises(ValueError, match=r"config\.sbd_block_size: .*\[1, 64\]"):
        sv.decode(model, PROMPT, max_new_tokens=4)
    assert sv.decode(model, PROMPT, max_new_tokens=4, block_size=4).n_tokens == 4  # told: the record is not read


def test_a_folder_with_a_bad_block_size_fails_at_load(tmp_path):
    model = tiny_model()
    model.model.config.sbd_block_size = 0
    model.model.save_pretrained(tmp_path)
    model.tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"config\.sbd_block_size: model .* records 0"):
        sv.load_model(tmp_path)


@pytest.mark.heavy
def test_the_explorer_and_the_cli_start_at_it(eight, tmp_path):
    from sbd_viz import cli
    from sbd_viz.explorer import explore

    assert explore(eight, PROMPT, max_new_tokens=8).block_size.value == 8
    assert explore(eight, PROMPT, max_new_tokens=8, block_size=4).block_size.value == 4
    for told, expected in (([], 8), (["--block-size", "4"], 4)):
        out = tmp_path / f"t{expected}.json"
        assert cli.main(["trace", PROMPT, "--model", eight.model.name_or_path, "--max-new-tokens", "8",
                         "--out", str(out), *told]) == 0
        assert sv.load_trace(out).config["block_size"] == expected


@pytest.mark.heavy
def test_the_app_starts_at_it_and_its_sweep_records_it(eight, monkeypatch):
    import pandas as pd

    from sbd_viz import analysis

    from sbd_viz.app import page as app
    demo = app.build_demo(eight, sweep=None)
    sliders = [c["props"] for c in demo.config["components"]
               if str(c.get("props", {}).get("label", "")).startswith("block size")]
    assert [s["value"] for s in sliders] == [8]
    asked = []

    def sweep(model, suite, **kwargs):  # what the app asks of the sweep, without decoding the suite
        asked.append(kwargs["block_sizes"])
        return pd.DataFrame([{"rule": "ntp", "block_size": 1}])

    monkeypatch.setattr(analysis, "sweep", sweep)
    out = app.precompute_sweep(eight.model.name_or_path)
    assert asked and all(b == [8] for b in asked) and json.loads(out.read_text())["block_size"] == 8


@pytest.mark.heavy
def test_the_app_says_when_its_precomputed_sweep_is_of_another_block_size(eight, tmp_path):
    from sbd_viz.app import page as app
    rows = [{"rule": "entropy_bounded", "gamma": 0.1, "block_size": 16, "gap_free": False, "accuracy": 0.9,
             "tokens_per_call": 5.0}]
    (tmp_path / app.SWEEP_FILE).write_text(json.dumps({"block_size": 16, "rows": rows}))
    curve = app.SpeedQualityCurve(eight, tmp_path, compute=False)
    assert curve.df is not None and "measured at block 16; the model decodes at block 8" in curve.status
    (tmp_path / app.SWEEP_FILE).write_text(json.dumps({"block_size": 8, "rows": rows}))
    assert "measured at block" not in app.SpeedQualityCurve(eight, tmp_path, compute=False).status
