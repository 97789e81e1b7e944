"""``app.scrubber``: the γ map as the page's plain data. Every piece is there with its exact ends, the pieces cover the
slider's range with no gap or overlap, every slider position lands in one decoded piece whose numbers are the decode
at that γ, and each cell of a piece's block fill is the trace's last commit at that slot (read back against the
trace's own ``block_state``, ``token_calls`` and ``gap_fills``)."""

import dataclasses
import json
import random

import gradio as gr
import pytest

import sbd_viz as sv
from conftest import ROOT, hand_trace
from sbd_viz.analysis.gamma_map import GammaMap, Piece, _slider_positions, gamma_map
from sbd_viz.app import scrubber
from sbd_viz.app.state import Session
from sbd_viz.trace.labels import token_label

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = "assert 12 + 7 == "
N = 12


def holds(p: dict, g: float) -> bool:
    """The page's test of whether a payload piece holds ``g`` (the scrubber's script does the same)."""
    return p["lo"] < g < p["hi"] or (g == p["lo"] and p["lo_closed"]) or (g == p["hi"] and p["hi_closed"])


@pytest.fixture(scope="module")
def step_map(sharp):
    return gamma_map(sharp, PROMPT, max_new_tokens=N, step=0.01)


def check_cells(trace):
    """``block_cells(trace)`` against the trace's own accounts of its final state."""
    blocks = scrubber.block_cells(trace)
    assert [b["block"] for b in blocks] == sorted({s.block for s in trace.steps})
    calls = trace.token_calls()  # the call that committed each output token
    fills = {(g.block, g.slot, g.call) for g in trace.gap_fills()}
    n0 = len(trace.prompt_ids)
    for b in blocks:
        steps = trace.block_steps(b["block"])
        assert b["first"] == steps[0].call
        final = trace.block_state(steps[-1], after=True)  # each slot's text, None where masked
        assert len(b["cells"]) == len(final)
        for slot, (cell, text) in enumerate(zip(b["cells"], final)):
            if text is None:
                assert cell is None
                continue
            label, call, flags = cell
            out = steps[0].block_start + slot - n0
            in_output = out < trace.n_tokens
            assert bool(flags & scrubber.DROPPED) == (not in_output)
            if in_output:
                assert call == calls[out]
                assert label == token_label(trace.output_texts[out], trace.special_tokens)
            else:
                assert label == token_label(text, trace.special_tokens)
            assert bool(flags & scrubber.GAP) == ((b["block"], slot, call) in fills)
    return blocks


def test_every_piece_is_present_and_the_pieces_cover_the_slider(step_map):
    data = scrubber.payload(step_map, 0.5, ntp_text=None)
    json.dumps(data, allow_nan=False)  # plain JSON: no infinity, no objects
    assert len(data["pieces"]) == len(step_map.pieces) > 1
    for row, piece in zip(data["pieces"], step_map.pieces):
        assert (row["lo"], row["hi"], row["lo_closed"], row["hi_closed"], row["decoded"]) == (
            piece.lo, piece.hi, piece.lo_closed, piece.hi_closed, piece.decoded)
    first, last = data["pieces"][0], data["pieces"][-1]
    assert (first["lo"], first["lo_closed"], last["hi"], last["hi_closed"]) == (0.0, True, 2.0, True)
    assert data["complete"] is True and (data["lo"], data["hi"], data["step"], data["gamma"]) == (0.0, 2.0, 0.01, 0.5)
    for a, b in zip(data["pieces"], data["pieces"][1:]):  # each starts where the last ends: no gap, no overlap
        assert b["lo"] == a["hi"] and a["hi_closed"] != b["lo_closed"]
    for g in _slider_positions(0.0, 2.0, 0.01, False):  # every slider position: one piece, decoded
        inside = [p for p in data["pieces"] if holds(p, g)]
        assert len(inside) == 1 and inside[0]["decoded"], g
        trace = step_map.decoded_trace_at(g)
        assert (inside[0]["calls"], inside[0]["tokens"], inside[0]["text"]) == (trace.nfe, trace.n_tokens, trace.text)


def test_a_pieces_numbers_and_cells_are_the_decode_at_its_gamma(sharp, step_map):
    data = scrubber.payload(step_map, ntp_text=sv.decode_ntp(sharp, PROMPT, max_new_tokens=N).text)
    rng = random.Random(0)
    for g in rng.sample(_slider_positions(0.0, 2.0, 0.01, False), 4):  # independent decodes, not the map's
        trace = sv.decode(sharp, PROMPT, gamma=g, max_new_tokens=N)
        row = next(p for p in data["pieces"] if holds(p, g))
        assert (row["calls"], row["tokens"], row["text"]) == (trace.nfe, trace.n_tokens, trace.text)
        assert row["tpc"] == round(trace.tokens_per_call, 4)
        assert row["gap_fills"] == len(trace.kept_gap_fills())
        assert row["blocks"] == check_cells(trace)
    assert {p["ntp"] for p in data["pieces"] if p["decoded"]} <= {True, False}
    assert len(data["shades"]) == max(len(p.trace.block_steps(b)) for p in step_map.pieces if p.decoded
                                      for b in {s.block for s in p.trace.steps})


def test_cells_mark_gap_fills_commits_after_the_stop_and_verified_rollbacks():
    blocks = check_cells(hand_trace(stop_at=13))  # block 2's slot 3 gap fill is after the stop
    assert blocks[0]["cells"][5] == ["f", 0, scrubber.GAP]  # committed in call 0 with five slots open to its left
    assert blocks[2]["cells"][3][2] == scrubber.GAP | scrubber.DROPPED
    verified = sv.load_trace(ROOT / "tests" / "data" / "trace_verified.json")
    assert verified.rollbacks()
    cells = check_cells(verified)
    assert any(c[2] & scrubber.NTP_TOKEN for b in cells for c in b["cells"] if c)


def test_a_map_still_building_and_stretches_not_decoded():
    trace = hand_trace([("abcd", [{0, 1}, {2, 3}])])
    building = GammaMap("go: ", "entropy_bounded", 0.0, 2.0, 0.01, {},
                        pieces=[Piece(0.0, 0.5, trace), Piece(0.5, 0.505, None, True, False)])
    data = scrubber.payload(building)
    assert data["complete"] is False and data["gamma"] is None
    assert [p["decoded"] for p in data["pieces"]] == [True, False]
    assert "calls" not in data["pieces"][1] and data["pieces"][0]["ntp"] is None  # no NTP given: nothing claimed
    assert data["pieces"][0]["range"] == "[0, 0.5)"


class _Maps:
    """``GammaMaps.current`` over one session's map."""

    def __init__(self, gamma_map, state="done"):
        self.map, self.state = gamma_map, state

    def current(self, session):
        return None if session != "s" or self.map is None else (self.map, self.state)


def skipped(value) -> bool:
    return value == gr.skip()


def test_the_feed_sends_each_map_to_its_page_once(step_map):
    feed = scrubber.Feed(_Maps(step_map))
    trace = step_map.decoded_trace_at(0.73)
    session = Session(trace=dataclasses.replace(trace, config={**trace.config, "gamma": 0.73}), map_id="s")
    sent = json.loads(feed.scrubber(session))
    assert sent["gamma"] == 0.73 and sent["building"] is False
    assert sent["pieces"] == json.loads(json.dumps(scrubber.payload(step_map)["pieces"]))
    moved = dataclasses.replace(session, trace=step_map.decoded_trace_at(1.5))  # another release, from the same map
    assert skipped(feed.scrubber(moved))  # the page holds this map: nothing sent
    # nothing decoded, another session's page, a failed map: no map on the page
    assert feed.scrubber(None) == feed.scrubber(Session()) == feed.scrubber(dataclasses.replace(session, map_id="t")) == ""
    assert scrubber.Feed(_Maps(step_map, "failed")).scrubber(session) == ""
    assert json.loads(scrubber.Feed(_Maps(step_map, "building")).scrubber(session))["building"] is True


def test_the_feed_sends_a_map_again_when_it_grows_or_learns_ntps_text():
    one = hand_trace([("abcd", [{0, 1}, {2, 3}])])
    growing = GammaMap("go: ", "entropy_bounded", 0.0, 2.0, 0.01, {}, pieces=[Piece(0.0, 0.5, one)])
    maps = _Maps(growing, "building")
    feed = scrubber.Feed(maps)
    session = Session(trace=one, map_id="s")
    assert len(json.loads(feed.scrubber(session))["pieces"]) == 1
    assert skipped(feed.scrubber(session))
    growing.pieces.append(Piece(0.5, 2.0, hand_trace([("abce", [{0}, {1}, {2, 3}])]), True, True))
    maps.state = "done"
    data = json.loads(feed.scrubber(session))
    assert len(data["pieces"]) == 2 and data["complete"] is True and data["pieces"][1]["text"] == "abce"
    assert json.loads(feed.scrubber(dataclasses.replace(session, ntp=one)))["pieces"][0]["ntp"] is True  # NTP known: marked
    maps.map = None  # a decode without a map (Jacobi): the page's map goes, and comes back whole after
    assert feed.scrubber(session) == ""
    maps.map = growing
    assert len(json.loads(feed.scrubber(session))["pieces"]) == 2


def test_step_shades_run_light_to_dark_and_the_component_names_a_bad_slider():
    shades = scrubber.step_shades(5)
    dark = [sum(int(f[i:i + 2], 16) for i in (1, 3, 5)) for f, _ in shades]
    assert dark == sorted(dark, reverse=True) and len(set(dark)) == 5  # never repeats, lighter first
    assert scrubber.step_shades(1)[0][0] == "#DCEBF7"
    with pytest.raises(ValueError, match="slider_id"):
        scrubber.component("sbd gamma'); alert(1); ('")
    assert "const SLIDER = 'my-gamma';" in scrubber.component("my-gamma").js_on_load  # it follows that slider
    assert "'sbd-scrub-my-gamma'" in scrubber.follow_js("my-gamma")  # and the server's moves of it
    with pytest.raises(ValueError, match="slider_id"):
        scrubber.follow_js("x y")


def test_the_scrubbers_numbers_name_the_count_as_every_view_does(step_map):
    """The live numbers say which tokens-per-call count they show, in the words of ``sv.COUNT_LABELS`` (the block
    fill's and the figures' too), and ``tpc`` is that count of the piece's decode."""
    data = scrubber.payload(step_map)
    assert data["count_label"] == sv.COUNT_LABELS[(True, True)]
    piece = next(p for p in step_map.pieces if p.decoded)
    row = next(r for r in data["pieces"] if r["decoded"])
    assert row["tpc"] == pytest.approx(sv.tokens_per_call(piece.trace, end_token=True, prefill=True), abs=1e-4)
    assert "data.count_label" in scrubber.JS and "tokens/call" not in scrubber.JS
