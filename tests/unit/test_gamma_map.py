"""The γ range of a greedy decode (``Trace.gamma_range``) and the γ map (``sv.gamma_map``), each checked against
independent ``sv.decode`` calls: at points inside every range and at its closed ends the decode is the same, and
just past an end it is another."""

import json
import math
import random

import pytest

import sbd_viz as sv
from sbd_viz.analysis.gamma_map import GammaMap, Piece, _slider_positions, gamma_map
from sbd_viz.decoders.rules import COMMIT_RULES, Interval

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = "assert 12 + 7 == "
N = 12  # tokens per tiny decode


def same_decode(a, b) -> bool:
    """The same decode: output, calls, and every call's commits (and verified / remasking records)."""
    def key(t):
        return (t.output_ids, t.nfe, [(s.block, s.masked, s.commits, s.checks, s.rollback, s.renoised,
                                       tuple((d.slot, d.token_id, d.accepted) for d in s.canvas)) for s in t.steps])
    return key(a) == key(b)


def inside(interval: Interval, rng: random.Random, n: int = 3) -> list[float]:
    """Points of ``interval`` (finite part): its closed ends and ``n`` random ones strictly inside."""
    lo = interval.lo if math.isfinite(interval.lo) else interval.hi - 1
    hi = interval.hi if math.isfinite(interval.hi) else lo + 3
    points = [lo + (hi - lo) * rng.random() for _ in range(n)]
    points += [e for e, closed in ((interval.lo, interval.lo_closed), (interval.hi, interval.hi_closed))
               if closed and math.isfinite(e)]
    return [p for p in points if p in interval]


def just_outside(interval: Interval, valid) -> list[float]:
    """The first knob values past each end that are still valid knob values (an open end itself)."""
    out = []
    for end, closed, way in ((interval.lo, interval.lo_closed, -math.inf), (interval.hi, interval.hi_closed, math.inf)):
        if math.isfinite(end):
            g = math.nextafter(end, way) if closed else end
            if g in valid:
                out.append(g)
    return out


# -- item 2: a trace's γ range ----------------------------------------------------------------------------
@pytest.mark.parametrize("settings", [dict(), dict(verify=True), dict(decoder="remask"), dict(gap_free=True),
                                      dict(rule="entropy_threshold"), dict(rule="confidence_threshold"),
                                      dict(rule="factor")])
@pytest.mark.heavy
def test_a_decode_is_the_same_across_its_range_and_changes_just_past_it(sharp, settings):
    rng = random.Random(0)
    rule = settings.get("rule", "entropy_bounded")
    valid = COMMIT_RULES[rule].valid
    lo, hi, _ = COMMIT_RULES[rule].slider
    kw = dict(max_new_tokens=N, **settings)
    changed = 0
    for gamma in [lo, lo + (hi - lo) * 0.1, lo + (hi - lo) * 0.3, hi]:
        trace = sv.decode(sharp, PROMPT, gamma=gamma, **kw)
        r = trace.gamma_range
        assert isinstance(r, Interval) and gamma in r
        for g in inside(r, rng):
            assert same_decode(sv.decode(sharp, PROMPT, gamma=g, **kw), trace), (settings, gamma, r, g)
        for g in just_outside(r, valid):
            assert not same_decode(sv.decode(sharp, PROMPT, gamma=g, **kw), trace), (settings, gamma, r, g)
            changed += 1
    assert changed  # some range ends inside the valid range


@pytest.mark.heavy
def test_verified_ranges_cover_rejected_drafts(sharp):
    """A rejected draft's choice shaped the calls after it: ranges of decodes with rollbacks are still exact."""
    seen = 0
    for gamma in (0.2, 0.5, 1.0, 2.0):
        trace = sv.decode(sharp, PROMPT, gamma=gamma, max_new_tokens=N, verify=True)
        if not trace.rollbacks():
            continue
        seen += 1
        for g in just_outside(trace.gamma_range, COMMIT_RULES["entropy_bounded"].valid):
            assert not same_decode(sv.decode(sharp, PROMPT, gamma=g, max_new_tokens=N, verify=True), trace)
    assert seen


def test_top_k_ranges_are_whole_numbers(sharp):
    trace = sv.decode(sharp, PROMPT, rule="top_k", gamma=2, max_new_tokens=N)
    assert trace.gamma_range.whole and 2 in trace.gamma_range and 2.5 not in trace.gamma_range
    assert sv.trace_from_json(trace.to_json()).to_json() == trace.to_json()  # whole ends stay whole in the file


def test_no_range_for_sampling_or_decoders_without_the_knob(sharp):
    assert sv.decode(sharp, PROMPT, gamma=0.3, temperature=0.8, max_new_tokens=N).gamma_range is None
    assert sv.decode_ntp(sharp, PROMPT, max_new_tokens=N).gamma_range is None
    assert sv.decode(sharp, PROMPT, decoder="jacobi", max_new_tokens=N).gamma_range is None


def test_the_range_round_trips_and_a_decode_without_one_writes_null(sharp, tmp_path):
    trace = sv.decode(sharp, PROMPT, gamma=5.0, max_new_tokens=N)  # every slot fits: the range reaches inf
    assert trace.gamma_range.hi == math.inf
    d = json.loads(trace.to_json())
    assert d["gamma_range"]["hi"] is None and d["gamma_range"]["lo"] == trace.gamma_range.lo
    assert sv.trace_from_json(trace.to_json()) == trace
    assert sv.trace_from_dict({**d, "gamma_range": None}).gamma_range is None
    ntp = sv.decode_ntp(sharp, PROMPT, max_new_tokens=N)
    assert json.loads(ntp.to_json())["gamma_range"] is None and sv.trace_from_json(ntp.to_json()) == ntp
    bad = json.loads(json.dumps(d))
    bad["gamma_range"]["lo"] = 6.0  # no longer holds the trace's γ
    with pytest.raises(sv.TraceFormatError, match="trace.gamma_range"):
        sv.trace_from_dict(bad)
    bad["gamma_range"] = {"lo": 0.0}
    with pytest.raises(sv.TraceFormatError, match="trace.gamma_range"):
        sv.trace_from_dict(bad)


def test_interval_intersection():
    a, b = Interval(0.0, 1.0, True, False), Interval(0.5, 1.0, False, True)
    assert a & b == Interval(0.5, 1.0, False, False)
    assert (a & Interval(-1, 2)) == a and (Interval(1, 3, whole=True) & Interval(2, 5)).whole
    lo, hi = b
    assert (lo, hi) == (0.5, 1.0)


# -- item 3: the map -----------------------------------------------------------------------------------------
def contiguous(m: GammaMap) -> None:
    pieces = m.pieces
    assert pieces[0].lo == m.lo and pieces[0].lo_closed and pieces[-1].hi == m.hi and pieces[-1].hi_closed
    for a, b in zip(pieces, pieces[1:]):
        assert a.hi == b.lo and a.hi_closed != b.lo_closed, (a, b)


def brute_force_points(m: GammaMap, rng: random.Random, grid: int = 60) -> list[float]:
    """A grid over the range, random points, and every piece's ends and the floats beside them."""
    points = [m.lo + (m.hi - m.lo) * i / grid for i in range(grid + 1)]
    points += [m.lo + (m.hi - m.lo) * rng.random() for _ in range(20)]
    for p in m.pieces:
        for e in (p.lo, p.hi):
            points += [e, math.nextafter(e, -math.inf), math.nextafter(e, math.inf)]
    return sorted({g for g in points if m.lo <= g <= m.hi})


@pytest.mark.parametrize("rule, settings", [("entropy_bounded", {}), ("entropy_threshold", {}),
                                            ("entropy_bounded", dict(verify=True)),
                                            ("entropy_bounded", dict(decoder="remask"))])
@pytest.mark.heavy
def test_the_exact_map_equals_decodes_at_every_gamma(sharp, rule, settings):
    kw = dict(max_new_tokens=N, **settings)
    m = gamma_map(sharp, PROMPT, rule=rule, **kw)
    contiguous(m)
    for p in m.pieces:  # the settings reach every decode
        assert (p.trace.config["rule"], p.trace.config["decoder"], p.trace.verified) == (
            rule, settings.get("decoder", "sbd"), settings.get("verify", False))
    assert m.exact and len(m.pieces) > 2 and m.decodes == len(m.pieces)
    for a, b in zip(m.pieces, m.pieces[1:]):
        assert not same_decode(a.trace, b.trace)  # every piece is a distinct decode
    for g in brute_force_points(m, random.Random(1)):
        piece = m.piece_at(g)
        assert g in piece and same_decode(sv.decode(sharp, PROMPT, rule=rule, gamma=g, **kw), piece.trace), (g, piece)


@pytest.mark.heavy
def test_prefix_reuse_gives_the_same_map_with_fewer_calls(sharp):
    plain = gamma_map(sharp, PROMPT, max_new_tokens=N, reuse_prefix=False)
    reused = gamma_map(sharp, PROMPT, max_new_tokens=N)  # the default replays shared prefixes
    assert [str(p) for p in plain.pieces] == [str(p) for p in reused.pieces]
    assert all(same_decode(a.trace, b.trace) for a, b in zip(plain.pieces, reused.pieces))
    assert plain.replayed == 0 and plain.calls == sum(p.trace.nfe for p in plain.pieces)
    assert reused.replayed > 0 and reused.calls + reused.replayed == plain.calls
    verified = gamma_map(sharp, PROMPT, max_new_tokens=N, verify=True, reuse_prefix=True)  # with cache cuts
    for p in verified.pieces:
        assert same_decode(p.trace, sv.decode(sharp, PROMPT, gamma=p.lo, max_new_tokens=N, verify=True))


@pytest.mark.heavy
def test_the_step_map_decodes_the_pieces_holding_a_slider_position(sharp):
    exact = gamma_map(sharp, PROMPT, max_new_tokens=N)
    coarse = gamma_map(sharp, PROMPT, max_new_tokens=N, step=0.25)
    contiguous(coarse)
    positions = _slider_positions(0.0, 2.0, 0.25, False)
    assert positions == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    holding = [p for p in exact.pieces if any(g in p for g in positions)]
    assert [str(p) for p in coarse.decoded()] == [str(p) for p in holding]
    for p in coarse.pieces:
        if not p.decoded:  # exact ends, no slider position inside, and at least one exact piece inside
            assert not any(g in p for g in positions)
            assert any(e.lo == p.lo for e in exact.pieces) and any(e.hi == p.hi for e in exact.pieces)
        for g in positions:
            if g in p:
                assert same_decode(coarse.trace_at(g), exact.trace_at(g))
    finer = gamma_map(sharp, PROMPT, max_new_tokens=N, step=0.01)
    assert len(finer.decoded()) > len(coarse.decoded()) and coarse.calls < exact.calls
    assert _slider_positions(0.0, 2.0, 0.01, False)[7] == 0.07  # the float a slider sends


@pytest.mark.heavy
def test_lo_and_hi_bound_the_map(sharp):
    exact = gamma_map(sharp, PROMPT, max_new_tokens=N)
    part = gamma_map(sharp, PROMPT, max_new_tokens=N, lo=0.2, hi=0.6)
    contiguous(part)
    assert part.lo == 0.2 and part.hi == 0.6
    inner = [p for p in exact.pieces if p.hi > 0.2 and p.lo < 0.6]
    assert len(part.pieces) == len(inner) < len(exact.pieces)
    assert all(same_decode(a.trace, b.trace) for a, b in zip(part.pieces, inner))


@pytest.mark.heavy
def test_other_knobs_and_settings_change_the_map(sharp):
    base = gamma_map(sharp, PROMPT, max_new_tokens=N)
    small = gamma_map(sharp, PROMPT, max_new_tokens=N, block_size=2)
    assert all(s.block_size <= 2 for p in small.pieces for s in p.trace.steps)
    assert [str(p) for p in small.pieces] != [str(p) for p in base.pieces]
    top_k = gamma_map(sharp, PROMPT, rule="top_k", max_new_tokens=N)
    contiguous_whole = all(b.lo == a.hi + 1 for a, b in zip(top_k.pieces, top_k.pieces[1:]))
    assert contiguous_whole and top_k.pieces[0].lo == 1 and top_k.pieces[-1].hi == 16
    for k in range(1, 17):
        assert same_decode(top_k.trace_at(k), sv.decode(sharp, PROMPT, rule="top_k", gamma=k, max_new_tokens=N))


@pytest.mark.heavy
def test_the_frame_and_lookups(sharp):
    m = gamma_map(sharp, PROMPT, max_new_tokens=N)
    ntp = sv.decode_ntp(sharp, PROMPT, max_new_tokens=N)
    df = m.frame()
    assert len(df) == len(m.pieces) and list(df["range"]) == [str(p) for p in m.pieces]
    assert list(df["calls"]) == [p.trace.nfe for p in m.pieces]
    assert list(df["same_as_ntp"]) == [p.trace.text == ntp.text for p in m.pieces]
    for row, p in zip(df.itertuples(), m.pieces):
        where = sv.first_divergence(p.trace, ntp)
        assert (row.divergence_call if where else None) == (where["call"] if where else None) or (
            where is not None and where["call"] is None)
        assert row.tokens_per_call == pytest.approx(p.trace.tokens_per_call)
    assert df.attrs["ntp_text"] == ntp.text and df.attrs["calls"] == m.calls
    second = m.pieces[1]
    assert m.piece_at(second.lo) is (second if second.lo_closed else m.pieces[0])
    with pytest.raises(ValueError, match="gamma:"):
        m.piece_at(2.5)
    runs = m.text_runs()
    assert sum(r["pieces"] for r in runs) == len(m.pieces)
    assert all(a["text"] != b["text"] for a, b in zip(runs, runs[1:]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(temperature=0.7), "temperature:"), (dict(gamma=0.1), "gamma:"), (dict(lo=1.0, hi=0.5), "hi:"),
    (dict(lo=-1.0), "lo:"), (dict(step=0), "step:"), (dict(decoder="jacobi"), "decoder:"),
    (dict(rule="nope"), "rule:"), (dict(block_size=0), "block_size:"), (dict(reuse_prefix=1), "reuse_prefix:"),
    (dict(rule="top_k", step=0.5), "step:"),
])
def test_errors_name_the_argument(sharp, kwargs, match):
    with pytest.raises(ValueError, match=match):
        gamma_map(sharp, PROMPT, max_new_tokens=N, **kwargs)


def test_piece_strings_are_exact():
    p = Piece(0.1, 0.30000000000000004, None, True, False)
    assert str(p) == "[0.1, 0.30000000000000004)" and 0.1 in p and 0.30000000000000004 not in p


# -- the shipped model ---------------------------------------------------------------------------------------
@pytest.mark.heavy
def test_shipped_map_of_a_held_out_prompt_against_every_slider_position(shipped):
    item = next(i for i in sv.tasks.load_suite(split="test") if i.prompt.endswith('"[::-1] == '))
    m = gamma_map(shipped, item.prompt, stop="\n")
    contiguous(m)
    points = _slider_positions(0.0, 2.0, 0.01, False)
    for p in m.pieces:
        points += [p.lo, math.nextafter(p.lo, math.inf), math.nextafter(p.hi, -math.inf)]
    for g in sorted({g for g in points if 0 <= g <= 2}):
        assert same_decode(sv.decode(shipped, item.prompt, gamma=g, stop="\n"), m.trace_at(g)), g


# -- item 4: the exact ladder ----------------------------------------------------------------------------------
@pytest.mark.heavy
def test_the_exact_ladder_reads_the_map(sharp):
    from sbd_viz.analysis.gamma_ladder import Ladder, largest_safe_gamma

    df = sv.gamma_ladder(sharp, PROMPT, max_new_tokens=N)
    m = gamma_map(sharp, PROMPT, max_new_tokens=N)
    ntp = sv.decode_ntp(sharp, PROMPT, max_new_tokens=N)
    runs = m.text_runs(ntp)
    assert df.attrs["exact"] and df.attrs["pieces"] == len(m.pieces) and df.attrs["text_runs"] == runs
    assert df.attrs["breakpoints"] == [r["lo"] for r in runs[1:]]
    # the safe ranges, from independent decodes: every γ in them writes NTP's text, just past them not
    assert df.attrs["safe_ranges"] == [{k: r[k] for k in ("lo", "hi", "lo_closed", "hi_closed")}
                                       for r in runs if r["same_as_ntp"]]
    for r in df.attrs["safe_ranges"]:
        interval = Interval(r["lo"], r["hi"], r["lo_closed"], r["hi_closed"])
        for g in inside(interval, random.Random(2)):
            assert sv.decode(sharp, PROMPT, gamma=g, max_new_tokens=N).text == ntp.text
        for g in just_outside(interval, COMMIT_RULES["entropy_bounded"].valid):
            if 0 <= g <= 2:
                assert sv.decode(sharp, PROMPT, gamma=g, max_new_tokens=N).text != ntp.text
    for row in df.itertuples():  # each row is still the decode at its γ
        assert row.calls == sv.decode(sharp, PROMPT, gamma=row.gamma, max_new_tokens=N).nfe
    assert df.attrs["largest_safe_gamma"] == largest_safe_gamma(df)
    rough = sv.gamma_ladder(sharp, PROMPT, max_new_tokens=N, exact=False)  # the control: no map, no exact attrs
    assert not rough.attrs["exact"] and "safe_ranges" not in rough.attrs
    assert list(rough["calls"]) == list(df["calls"])
    ladder = Ladder(sharp, PROMPT, gammas=[0.0, 2.0], max_new_tokens=N)
    rows = ladder.rows()
    next(rows)
    assert not ladder.frame().attrs["exact"]  # mid-walk: the map is not complete yet
    list(rows)
    assert ladder.frame().attrs["exact"] and ladder.map_walk.map.exact


def test_largest_safe_gamma_stops_at_a_sliver_between_rows():
    import pandas as pd

    from sbd_viz.analysis.gamma_ladder import largest_safe_gamma

    frame = pd.DataFrame({"gamma": [0.0, 0.1, 0.25, 0.5, 1.0], "same_as_ntp": [False, True, True, True, True]})
    assert largest_safe_gamma(frame) == 1.0  # γ 0 leaves NTP's text; every other row keeps it
    frame.attrs.update(exact=True, safe_ranges=[dict(lo=0.05, hi=0.3, lo_closed=True, hi_closed=False),
                                                dict(lo=0.31, hi=2.0, lo_closed=True, hi_closed=True)])
    assert largest_safe_gamma(frame) == 0.25  # the sliver [0.3, 0.31) leaves NTP's text between 0.25 and 0.5


def test_safe_words_say_when_gamma_zero_leaves_ntp():
    from sbd_viz.analysis.gamma_ladder import safe_words

    runs = [dict(lo=0.0, hi=0.05, lo_closed=True, hi_closed=False, text="a", same_as_ntp=False, pieces=2),
            dict(lo=0.05, hi=2.0, lo_closed=True, hi_closed=True, text="b", same_as_ntp=True, pieces=3)]
    words = safe_words(runs, 0.0, 2.0)
    assert "γ 0 already leaves NTP's text" in words and "surest slot" in words and "[0.05, 2]" in words
    assert safe_words(runs[1:], 0.05, 2.0) == "NTP's text at every γ in [0.05, 2]"
    assert "at no other γ in [0, 2]" in words
    assert safe_words(runs[:1], 0.0, 0.05).startswith("no γ")


@pytest.mark.heavy
def test_the_app_ladder_states_the_exact_safe_ranges(sharp):
    from sbd_viz.app.panels import stream_ladder

    settings = dict(rule="entropy_bounded", block_size=None, max_new_tokens=N, stop=None, gap_free=False)
    *_, (rows, figure, status, frame) = stream_ladder(sharp, PROMPT, settings)
    assert frame.attrs["exact"] and frame.attrs["safe"] in status
    assert figure.layout.meta["safe_ranges"] == frame.attrs["safe_ranges"]
    assert len([s for s in figure.layout.shapes if s.name == "safe"]) == len(frame.attrs["safe_ranges"])


@pytest.mark.heavy
def test_shipped_safe_reversal_is_safe_above_gamma_zero(shipped):
    """``assert "safe"[::-1] == `` keeps NTP's text at every γ from 0.1 to 2 but not at γ 0: it has a safe γ."""
    prompt = 'assert "safe"[::-1] == '
    df = sv.gamma_ladder(shipped, prompt, stop="\n")
    ntp = sv.decode_ntp(shipped, prompt, stop="\n")
    assert not df["same_as_ntp"].iloc[0] and df["same_as_ntp"].iloc[1:].all()
    assert df.attrs["largest_safe_gamma"] == 2.0 and "already leaves" in df.attrs["safe"]
    top = df.attrs["safe_ranges"][-1]
    assert top["hi"] == 2.0 and top["lo"] <= 0.1
    assert sv.decode(shipped, prompt, gamma=top["lo"], stop="\n").text == ntp.text


def test_refining_a_partial_map_gives_the_exact_map(sharp):
    from sbd_viz.analysis.gamma_map import GammaMapWalk

    exact = gamma_map(sharp, PROMPT, max_new_tokens=N)
    for kw in (dict(step=0.25), dict(points=[0.0, 0.1, 0.5, 2.0]), dict(points=[1.0])):
        walk = GammaMapWalk(sharp, PROMPT, max_new_tokens=N, **kw)
        first = list(walk.pieces())
        assert walk.map.decodes <= 9 and not walk.map.exact  # one decode at most per point
        assert walk.map.decodes < len(exact.pieces)
        list(walk.refine())
        m = walk.map
        assert m.exact and m.step is None and len(first) < len(m.pieces)
        assert [str(p) for p in m.pieces] == [str(p) for p in exact.pieces], kw
        assert all(same_decode(a.trace, b.trace) for a, b in zip(m.pieces, exact.pieces))
    top_k = GammaMapWalk(sharp, PROMPT, rule="top_k", max_new_tokens=N, points=[1, 4])  # the stretch reaches inf
    list(top_k.walk())
    assert [str(p) for p in top_k.map.pieces] == [str(p) for p in gamma_map(sharp, PROMPT, rule="top_k",
                                                                              max_new_tokens=N).pieces]


def test_the_ladder_rows_come_before_the_map_is_refined(sharp):
    from sbd_viz.analysis.gamma_ladder import Ladder

    gammas = [0.0, 0.1, 0.5, 1.0, 2.0]
    ladder = Ladder(sharp, PROMPT, gammas=gammas, max_new_tokens=N)
    rows = ladder.rows()
    for _ in gammas[:-1]:
        next(rows)
    assert ladder.map_walk.map.decodes <= len(gammas) - 1 and not ladder.frame().attrs["exact"]
    next(rows)  # the last row waits for the exact map
    assert ladder.frame().attrs["exact"] and ladder.map_walk.map.exact
    assert ladder.frame().attrs["pieces"] == len(gamma_map(sharp, PROMPT, max_new_tokens=N).pieces)


def test_a_gate_goes_around_each_call_the_walk_runs_and_can_stop_it(sharp):
    """``GammaMapWalk(gate=...)``: entered around every request the walk serves itself (its model calls counted in
    ``map.calls``); the map is the same; an exception raised in it stops the walk there. (The app's background
    builder waits for interactive decodes in it.)"""
    import contextlib

    from sbd_viz.analysis.gamma_map import GammaMapWalk

    entered = []

    @contextlib.contextmanager
    def gate():
        entered.append(1)
        yield

    walk = GammaMapWalk(sharp, PROMPT, step=0.01, max_new_tokens=N, gate=gate)
    built = list(walk.pieces())
    plain = gamma_map(sharp, PROMPT, step=0.01, max_new_tokens=N)
    assert [str(p) for p in built] == [str(p) for p in plain.pieces]  # the same map with a gate
    assert len(entered) >= walk.map.calls > 0  # every model call (and cache cut) it ran went through the gate

    class Stop(Exception):
        pass

    @contextlib.contextmanager
    def stop_after_five():
        if len(entered) >= 5:
            raise Stop
        entered.append(1)
        yield

    entered.clear()
    with pytest.raises(Stop):
        list(GammaMapWalk(sharp, PROMPT, step=0.01, max_new_tokens=N, gate=stop_after_five).pieces())
    assert len(entered) == 5
    with pytest.raises(ValueError, match="gate"):
        GammaMapWalk(sharp, PROMPT, gate="yes")


def test_decoded_trace_at_answers_a_partial_map_without_raising():
    """What the app and the exact ladder ask of a map still being built: the decode where a decoded piece holds γ,
    None in a stretch not decoded and past the pieces built so far (``piece_at`` raises there)."""
    a, b = object(), object()  # stand-ins for the pieces' traces
    m = GammaMap("p", "entropy_bounded", 0.0, 2.0, 0.01, {},
                 pieces=[Piece(0.0, 0.3, a), Piece(0.3, 0.5, None), Piece(0.5, 0.8, b)])
    assert m.decoded_trace_at(0.0) is a and m.decoded_trace_at(0.29) is a
    assert m.decoded_trace_at(0.3) is None and m.decoded_trace_at(0.45) is None  # the undecoded stretch
    assert m.decoded_trace_at(0.5) is b and m.decoded_trace_at(0.8) is None  # b's top is open
    assert m.decoded_trace_at(1.5) is None  # not built yet
    with pytest.raises(ValueError, match="no piece"):
        m.piece_at(1.5)
