"""The ipywidgets explorer, driven headlessly (no kernel, no browser) on a tiny random model."""

import re
import subprocess
import sys

import ipywidgets as widgets
import pytest

import sbd_viz as sv
from sbd_viz import plots, explorer as sbd_widgets
from sbd_viz.explorer import PLOTLY_MIME, figure_at_call

pytestmark = pytest.mark.heavy  # the explorer decodes again on each control: seconds per test

PROMPT = "assert 4 + 5 == "
# A random-init model is unsure everywhere (entropy ~ log V ~ 4.6 nats per slot), so gamma 50
# commits a whole block per call and gamma 0 commits one slot per call: the two are easy to tell apart.
SMALL = dict(block_size=4, max_new_tokens=8)


def shown_figure(explorer) -> dict:
    """The plotly figure (as a dict) the explorer's Output widget currently holds."""
    (record,) = explorer.view.outputs
    return record["data"][PLOTLY_MIME]


def cell_states(figure: dict) -> list[str]:
    """Every grid cell's state in a shown block-fill figure, row by row."""
    rows = figure["layout"]["meta"]["rows"]
    return [cell[0] for heatmap in figure["data"][:rows] for cell in heatmap["customdata"][0] if cell]


def calls_shown(explorer) -> int:
    """The model calls the metrics table shows (the library's measures, as rows)."""
    return int(re.search(r"<b>model calls</b></td><td><b>(\d+)</b>", explorer.metrics.value).group(1))


@pytest.fixture
def explorer(tiny):
    return sv.explore(tiny, PROMPT, gamma=50.0, **SMALL)


def test_explore_builds_a_widget_showing_the_finished_decode(explorer):
    assert isinstance(explorer, widgets.Widget)
    trace = explorer.trace
    assert trace.config["gamma"] == 50.0 and trace.config["block_size"] == 4
    assert trace.nfe == 2  # two blocks of 4, each filled in one call
    assert explorer.call.max == explorer.play.max == trace.nfe - 1
    assert explorer.call.value == trace.nfe - 1
    shown = shown_figure(explorer)
    assert set(cell_states(shown)) <= {"done", "now"}  # finished: nothing masked, nothing in the future
    assert not shown["layout"].get("sliders") and not shown["layout"].get("updatemenus")
    assert calls_shown(explorer) == trace.nfe
    assert f"NTP: {explorer.ntp_trace.nfe} for {explorer.ntp_trace.n_tokens} tokens" in explorer.metrics.value
    assert "call 1" in explorer.step_info.value


def test_changing_gamma_redecodes_and_redraws(explorer):
    before_metrics, before_figure = explorer.metrics.value, shown_figure(explorer)
    ntp = explorer.ntp_trace
    explorer.gamma.value = 0.0
    trace = explorer.trace
    assert trace.config["gamma"] == 0.0
    assert trace.nfe == 8  # one slot per call
    assert explorer.call.max == 7 and explorer.call.value == 7
    assert explorer.metrics.value != before_metrics and calls_shown(explorer) == 8
    assert shown_figure(explorer) != before_figure
    assert explorer.ntp_trace is ntp  # NTP does not depend on gamma: decoded once


def test_the_scrubber_shows_the_blocks_after_that_call(explorer):
    explorer.gamma.value = 0.0
    explorer.call.value = 0
    states = cell_states(shown_figure(explorer))
    assert states.count("now") == 1 and states.count("masked") == 3 and states.count("future") == 4
    assert "call 0" in explorer.step_info.value and "prefill fused with block 0" in explorer.step_info.value
    explorer.call.value = 4  # the first call of block 1 also feeds block 0's final tokens
    assert "the fused call" in explorer.step_info.value
    assert "call 4" in shown_figure(explorer)["layout"]["title"]["text"]


def test_a_rule_change_resets_the_knob_and_decodes_once(tiny, monkeypatch):
    explorer = sv.explore(tiny, PROMPT, **SMALL)
    calls = []
    real = sbd_widgets.decode
    monkeypatch.setattr(sbd_widgets, "decode", lambda *a, **k: calls.append(k) or real(*a, **k))
    explorer.rule.value = "top_k"
    assert len(calls) == 1
    assert calls[0]["rule"] == "top_k" and calls[0]["gamma"] == sv.COMMIT_RULES["top_k"].default
    assert explorer.trace.nfe == 2 * 4 // 4  # four slots per call, two blocks of 4
    explorer.rule.value = "left_to_right"
    assert explorer.gamma.disabled and explorer.trace.nfe == 8


def test_a_bad_setting_shows_its_error_and_keeps_the_last_decode(explorer):
    trace = explorer.trace
    explorer.prompt.value = ""
    assert "error" in explorer.metrics.value and "prompt" in explorer.metrics.value
    assert explorer.trace is trace


def test_other_decode_arguments_pass_through(tiny):
    explorer = sv.explore(tiny, PROMPT, stop="\n", seed=3, temperature=1.0, **SMALL)
    assert explorer.trace.config["stop"] == ["\n"] and explorer.trace.config["seed"] == 3
    with pytest.raises(ValueError, match="rule"):
        sv.explore(tiny, PROMPT, rule="nope")
    with pytest.raises(ValueError, match="block_size"):  # named, not clamped to the slider's range
        sv.explore(tiny, PROMPT, block_size=100)


def test_figure_at_call_resolves_the_incremental_frames(tiny):
    trace = sv.decode(tiny, PROMPT, gamma=0.0, block_size=4, max_new_tokens=12)
    fig = plots.block_fill(trace)
    last = figure_at_call(fig, trace.nfe - 1)
    rows = fig.layout.meta["rows"]
    for r in range(2 * rows):  # heatmap rows and gap outlines equal the finished view
        assert last.data[r].to_plotly_json() == fig.data[r].to_plotly_json()
    first = figure_at_call(fig, 0)
    assert [c[0] for c in first.data[rows - 1].customdata[0]] == ["future"] * 4
    with pytest.raises(ValueError, match="call"):
        figure_at_call(fig, trace.nfe)


def test_importing_sbd_viz_does_not_import_ipywidgets():
    code = "import sys, sbd_viz; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_verified_checkbox_redecodes_with_verification(tiny):
    explorer = sv.explore(tiny, PROMPT, gamma=50.0, **SMALL)
    assert not explorer.verify.value and "verified" not in explorer.metrics.value
    explorer.verify.value = True
    trace = explorer.trace
    assert trace.verified and trace.output_ids == explorer.ntp_trace.output_ids
    assert "drafts accepted by NTP" in explorer.metrics.value and "= NTP ✓" in explorer.metrics.value
    explorer.call.value = 1
    assert "fed" in explorer.step_info.value and "causally" in explorer.step_info.value
    assert explorer.settings()["verify"] is True
    # a rollback's step line names the rejected draft and NTP's token; a checking-only call that accepts commits nothing
    from pathlib import Path

    explorer.trace = sv.load_trace(Path(__file__).parents[1] / "data" / "trace_verified.json")
    step = explorer.trace.steps[7]
    line = explorer._step_html(7)
    assert "rollback: " in line and f"NTP wanted '{step.rejected[0].ntp_text}'" in line
    assert "committed nothing" in explorer._step_html(10) and "no block" in explorer._step_html(10)


def test_the_save_button_writes_the_animation_as_a_gif(explorer, tmp_path):
    from PIL import Image

    explorer.gif_path.value = str(tmp_path / "t.gif")
    explorer.save.click()
    with Image.open(tmp_path / "t.gif") as gif:
        assert gif.n_frames == explorer.trace.nfe
    assert f"saved {explorer.trace.nfe} frames" in explorer.saved.value
    explorer.gif_path.value = str(tmp_path / "t.png")  # a bad name is said, not raised
    explorer.save.click()
    assert "error" in explorer.saved.value and "path" in explorer.saved.value


def test_no_seconds_before_time_it_then_paired_warmed_medians_and_their_ratio(explorer, monkeypatch):
    """Without "time it" the measures show no seconds at all (a fresh decode beside NTP's first, cold decode read as a
    10x speedup); the button runs each side once to warm up, then both in every round, and shows both medians, their
    ratio per token and the median of the rounds' ratios, each named; a new decode drops them."""
    assert "not timed" in explorer.metrics.value and not re.search(r"\d ms", explorer.metrics.value)
    assert "speedup · wall clock" not in explorer.metrics.value
    seen = []
    real = sbd_widgets.decode
    monkeypatch.setattr(sbd_widgets, "decode", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    explorer.time_button.click()
    assert len(seen) == 1 + sbd_widgets.ROUNDS and all(kw["gamma"] == 50.0 for kw in seen)  # a warm-up, the rounds
    timing = explorer.timing
    assert timing.rounds == sbd_widgets.ROUNDS and timing.warmed
    shown = explorer.metrics.value
    trace, ntp = explorer.trace, explorer.ntp_trace
    ms, ntp_ms = (1000 * x for x in timing.median_seconds())
    assert f"SBD {ms:.0f} ms · NTP {ntp_ms:.0f} ms" in shown and "after a warm-up run of each" in shown
    ratio = (ntp_ms / ntp.n_tokens) / (ms / trace.n_tokens)
    assert re.search(r"speedup · wall clock</b></td><td><b>" + re.escape(f"{ratio:.2f}×"), shown)
    mid, lo, hi = timing.speedup(trace.n_tokens, ntp.n_tokens)
    assert "ratio of the medians above" in shown
    assert f"median of the {sbd_widgets.ROUNDS} per-round ratios: {mid:.2f}× (range {lo:.2f}–{hi:.2f}×)" in shown
    explorer.gamma.value = 0.0
    assert explorer.timing is None and "not timed" in explorer.metrics.value


def test_the_wall_clock_rows_name_each_statistic_when_they_disagree():
    """A median of per-round ratios below 1 beside a faster median: both are shown, each named, never one alone."""
    from conftest import hand_trace
    from sbd_viz.analysis.timing import Timing

    trace = hand_trace()
    ntp = trace  # same tokens: per-token ratios are plain ratios
    timing = Timing(seconds=(1.0, 1.0, 1.0, 5.0, 5.0), ntp_seconds=(0.9, 0.9, 0.9, 6.0, 6.0), warmed=True)
    medians, speed = sbd_widgets.wall_clock_measures(trace, ntp, timing, "SBD")
    assert medians.value == "SBD 1000 ms · NTP 900 ms"
    assert speed.value == "0.90×" and "median of the 5 per-round ratios: 0.90×" in speed.note
    timing = Timing(seconds=(1.0, 1.0, 4.0, 4.0, 4.0), ntp_seconds=(0.9, 0.9, 4.4, 4.4, 4.4), warmed=True)
    medians, speed = sbd_widgets.wall_clock_measures(trace, ntp, timing, "SBD")
    assert speed.value == "1.10×" and "per-round ratios: 1.10×" in speed.note
    timing = Timing(seconds=(1.0, 2.0, 3.0), ntp_seconds=(0.9, 2.4, 3.3))  # medians 2.0 / 2.4, ratios .9 1.2 1.1
    _, speed = sbd_widgets.wall_clock_measures(trace, ntp, timing, "SBD")
    assert speed.value == "1.20×" and "per-round ratios: 1.10× (range 0.90–1.20×)" in speed.note


def test_the_gamma_slider_keeps_a_usable_width(explorer):
    """In its row (rule dropdown, slider, two checkboxes) the slider had a 20 px track: it now has a width it does
    not shrink below, and the checkboxes take only the width of their words."""
    layout = explorer.gamma.layout
    assert layout.width == layout.min_width and int(layout.width.removesuffix("px")) >= 400
    assert layout.flex == "0 0 auto"
    for box in (explorer.gap_free, explorer.verify):
        assert box.layout.width == "auto" and box.indent is False
    row = next(c for c in explorer.children if isinstance(c, widgets.HBox) and explorer.gamma in c.children)
    assert explorer.gamma in row.children


def test_the_decode_order_picture_and_its_measures(explorer):
    """The explorer draws the decode-order picture (this decode and NTP on one step axis) and shows its Kendall τ
    and out-of-order rate; both follow a re-decode."""
    order = sv.decode_order(explorer.trace)
    (record,) = explorer.order.outputs
    figure = record["data"][PLOTLY_MIME]
    names = [t["name"] for t in figure["data"]]
    assert any(n.startswith("SBD: τ") for n in names) and any(n.startswith("NTP: τ") for n in names)
    rows = figure["layout"]["meta"]["order"]
    assert [r["label"] for r in rows] == ["SBD", "NTP"]
    tau = "n/a" if order.kendall_tau != order.kendall_tau else f"{order.kendall_tau:.2f}"
    assert f"τ {tau} · {order.out_of_order_rate:.0%} out of order" in explorer.metrics.value
    assert f"{order.n_out_of_order} of {order.n_commits} output tokens" in explorer.metrics.value
    explorer.gamma.value = 0.0  # one slot per call: another order
    again = sv.decode_order(explorer.trace)
    (record,) = explorer.order.outputs
    assert record["data"][PLOTLY_MIME]["layout"]["meta"]["order"][0]["commits"] == again.n_commits
    assert f"{again.n_out_of_order} of {again.n_commits} output tokens" in explorer.metrics.value
    assert record["data"][PLOTLY_MIME] != figure
