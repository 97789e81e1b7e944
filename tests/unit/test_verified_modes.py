"""Verified SBD's drafting modes as the app offers them (``decoders.verified.settings.MODES``): each named as the bench
pages and the γ strip name it, each reaching the decode (its trace's config and calls), the fastest measured mode a
model's page starts on, and an SBD text model's examples opening on verified SBD with its measured numbers."""

from types import SimpleNamespace

import gradio as gr
import pytest

import sbd_viz as sv
from conftest import sharp_model
from sbd_viz.app import causal
from sbd_viz.app.curve import SpeedQualityCurve
from sbd_viz.app.page import Handlers
from sbd_viz.app.state import Controls
from sbd_viz.decoders.verified.settings import MODES, fastest_mode, mode_label

PROMPT = "ab ab ab ab ab "


def test_modes_are_named_as_the_bench_pages_name_them():
    assert list(MODES) == [
        "tree: chain, 1 block a call",
        "tree: token tree 2,1,1, 1 block a call",
        "tree: chain, every block",
        "single drafting",
    ]
    assert mode_label({"verify": False, "drafting": "tree"}) == ""  # not verified SBD: no mode
    assert mode_label({"verify": True}) == "single drafting"
    assert mode_label({"verify": True, "drafting": "tree", "tree_widths": [1, 1], "tree_blocks": 2}) == (
        "tree: chain, 2 blocks a call"
    )


def test_the_fastest_mode_measured_is_a_models_start():
    assert fastest_mode(SimpleNamespace(adapter=object())) == "tree: chain, 1 block a call"  # bench/TREE_BLOCKS.md
    assert fastest_mode(sharp_model()) == "single drafting"  # bench/VERIFIED_MODES.md: no tree mode was faster


@pytest.fixture(scope="module")
def handlers():
    h = Handlers(sharp_model(), SpeedQualityCurve(compute=False), map_sessions=0)
    yield h
    h.close()


def decode(handlers, verify, mode):
    controls = Controls(PROMPT, "entropy_bounded", 1.0, False, 4, 24, 0.0, 0, False, verify, "SBD", False, mode)
    session = list(handlers.decode(controls))[-1][0]
    return session.trace


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_reaches_the_decode_and_keeps_ntps_text(handlers, mode):
    trace = decode(handlers, True, mode)
    assert mode_label(trace.config) == mode
    ntp = sv.decode_ntp(handlers.model, PROMPT, max_new_tokens=24)
    assert trace.output_ids == ntp.output_ids  # every mode is exact


def test_moving_the_mode_changes_the_calls_and_off_verified_it_is_not_read(handlers):
    calls = {mode: [s.n_input for s in decode(handlers, True, mode).steps] for mode in MODES}
    assert len({str(c) for c in calls.values()}) > 1, "every drafting mode made the same calls"
    plain = decode(handlers, False, "tree: chain, 1 block a call")
    assert not plain.config.get("verify") and "drafting" not in plain.config
    assert mode_label(decode(handlers, True, None).config) == fastest_mode(handlers.model)  # None: the model's own


def test_an_unknown_mode_is_refused_by_name(handlers):
    with pytest.raises(gr.Error, match="drafting: unknown 'wide'"):
        decode(handlers, True, "wide")


def test_an_sbd_text_models_examples_open_on_verified_sbd_with_its_numbers():
    adapter = SimpleNamespace(name="smollm2-135m-sbd", adapter=object())
    rows = causal.measured(adapter)
    picks = causal.example_choices(adapter, ["SBD", "SBD + remasking", "Jacobi", "prompt lookup"])
    assert len(picks) == len(causal.ADAPTER_EXAMPLES)
    for prompt, _chat, label, decoder, verify in picks:
        run = rows[prompt]["runs"][causal.VERIFIED]
        assert decoder == "SBD" and verify is True
        assert f"verified SBD: {run['tokens']} tokens in {run['calls']} calls" in label
        assert run["mode"] == fastest_mode(adapter) and run["same_as_ntp"]
    base = SimpleNamespace(name="smollm2-135m", adapter=None)
    assert all(v is False for *_, v in causal.example_choices(base, ["Jacobi", "prompt lookup"]))
