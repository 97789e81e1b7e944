"""Trace: JSON round trip, rejection of bad files, derived measures, kept gap fills."""

import json
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz.trace.data import SCHEMA_VERSION, Trace
from sbd_viz.trace.labels import render_state, visible

from conftest import hand_trace


@pytest.fixture(scope="module")
def trace(tiny):
    return sv.decode(tiny, "assert 1 + 1 == ", rule="top_k", gamma=3, block_size=6, max_new_tokens=14)


@pytest.mark.heavy
def test_json_round_trip_is_lossless(trace, tmp_path):
    assert sv.trace_from_json(trace.to_json()) == trace
    path = trace.save(tmp_path / "t.json")
    again = sv.load_trace(path)
    assert again == trace
    assert again.to_json() == trace.to_json()


@pytest.mark.heavy
def test_ntp_trace_round_trips(tiny):
    ntp = sv.decode_ntp(tiny, "hi", max_new_tokens=4)
    assert sv.trace_from_json(ntp.to_json()) == ntp


def test_derived_measures(trace):
    assert trace.calls_per_block() == [2, 2, 1]  # 3 slots per call in blocks of 6, 6, 2
    hand = hand_trace(stop_at=13)  # 9 calls; the output "abcdefghijkl\n" stops in block 2
    assert (hand.nfe, hand.n_tokens, hand.n_blocks, hand.calls_per_block()) == (9, 13, 3, [3, 3, 3])
    assert hand.tokens_per_call == pytest.approx(13 / 9)
    # a b c d e f | g h i j | k l \n: each token's call, from the schedules in conftest.HAND
    assert hand.token_calls() == [1, 2, 2, 1, 2, 0, 3, 4, 5, 5, 7, 6, 8]


def test_kept_gap_fills_leave_out_what_the_stop_discarded():
    """A gap fill is a commit made while slots to its left in its block were still masked; it counts
    (kept_gap_fills) only if it is in the final output. Block 2 commits slot 3 ('m') with slots 0 and 2
    open, and the output then stops at slot 2's newline: that gap fill was discarded."""
    trace = hand_trace(stop_at=13)
    assert [(g.call, g.slot, g.gap, g.text, g.kept) for g in trace.gap_fills()] == [
        (0, 5, 5, "f", True), (1, 3, 2, "d", True), (6, 1, 1, "l", True), (6, 3, 2, "m", False)]
    assert trace.kept_gap_fills() == trace.gap_fills()[:3]
    assert [g.kept for g in hand_trace().gap_fills()] == [True] * 4  # no stop: every gap fill is kept


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="other.tool"), "schema"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.pop("steps"), "missing"),
    (lambda d: d["steps"][0].update(commits=[]), "commits nothing"),
    (lambda d: d["steps"][0]["commits"][0].update(slot="x"), "integer"),
    (lambda d: d["steps"][0].update(wall_time=None), "finite number"),
    (lambda d: d["steps"][1].update(call=7), "numbered"),
    (lambda d: d["steps"][0]["commits"][0].update(slot=99), "not masked"),
])
def test_malformed_traces_are_rejected(trace, mutate, message):
    d = json.loads(trace.to_json())
    mutate(d)
    with pytest.raises(sv.TraceFormatError, match=message):
        sv.trace_from_json(json.dumps(d))


def test_foreign_and_broken_files(tmp_path):
    bad = {"list.json": "[1, 2]", "junk.json": "{not json", "empty.json": ""}
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(sv.TraceFormatError, match=name):
            sv.load_trace(tmp_path / name)
    (tmp_path / "bin.json").write_bytes(b"\x80\x04\x95pickle")
    with pytest.raises(sv.TraceFormatError, match="not a text file"):
        sv.load_trace(tmp_path / "bin.json")


def test_render_state():
    assert render_state(["a", None, None, "b"], prefix="x == ") == "x == a<m><m>b"
    assert render_state(["\n"], prefix="y") == "y⏎"


def test_visible_shows_whitespace_and_spaces_only_when_asked():
    assert visible("a b\n\tc") == "a b⏎⇥c"  # a text stays readable: its spaces stay spaces
    assert visible(" \n", spaces=True) == "␣⏎" and visible("", spaces=True) == "∅"  # a token never looks blank
    assert visible("") == ""


def test_verdicts_pair_each_check_with_the_draft_it_judged():
    trace = sv.load_trace(Path(__file__).parents[1] / "data" / "trace_verified.json")
    verdicts = trace.verdicts()
    assert len(verdicts) == len(trace.checks()) > 0  # every check judged one draft, and no draft twice
    for (call, position), (checked_in, check) in verdicts.items():
        step = trace.steps[call]
        commit = next(c for c in step.commits if step.block_start + c.slot == position)
        assert check.position == position and check.token_id == commit.token_id and not commit.ntp
        assert call < checked_in and check in trace.steps[checked_in].checks


@pytest.mark.parametrize("version", [1, 2, 4, "3", None])
def test_one_file_version_is_read(version):
    """A file is written and read in one version (``SCHEMA_VERSION``); any other is refused, naming it."""
    saved = json.loads((Path(__file__).parents[1] / "data" / "trace_sbd.json").read_text())
    assert saved["version"] == SCHEMA_VERSION and sv.trace_from_dict(saved).config["rule"] == "entropy_bounded"
    with pytest.raises(sv.TraceFormatError, match=f"version {version!r}; this sbd_viz reads version {SCHEMA_VERSION}"):
        sv.trace_from_dict({**saved, "version": version})


def test_a_trace_at_the_end_of_a_notebook_cell_shows_as_its_page(monkeypatch):
    """The package registers a trace's HTML view with IPython's formatter when imported in a notebook (the trace
    itself imports no renderer): a displayed trace is ``plots.trace_html``."""
    from IPython.core.interactiveshell import InteractiveShell

    from sbd_viz import plots

    trace = hand_trace()
    assert plots.trace_html(trace).startswith("<div><style>")
    monkeypatch.setattr(plots, "trace_html", lambda t: f"the page of {t.prompt!r}")  # the view is called, not copied
    shell = InteractiveShell.instance()
    try:
        formatter = shell.display_formatter.formatters["text/html"]
        assert formatter(trace) is None  # not known before the package registers it
        sv._jupyter_view()
        assert formatter(trace) == "the page of 'go: '"
    finally:
        InteractiveShell.clear_instance()
