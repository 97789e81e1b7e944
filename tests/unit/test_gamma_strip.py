"""``plots.gamma_strip``: a γ map as an HTML strip, read back from its data attributes (a pure function of the map).

On a hand-made map: each piece where its ends lie on the knob, shaded darker with more tokens per call, a text change
marked on the piece after it (never across a stretch not decoded), NTP's text marked, stretches not decoded hatched
and not clickable, the part not walked yet drawn as pending, the current γ marked, and a click position inside each
decoded piece on the slider's step.
"""

import re

from conftest import hand_trace
from sbd_viz import plots
from sbd_viz.analysis.gamma_map import GammaMap, Piece

ONE_CALL = hand_trace([("abcd", [{0, 1, 2, 3}])])  # 4 tokens per call
TWO_CALLS = hand_trace([("abcd", [{0, 1}, {2, 3}])])  # the same text, 2 per call
FOUR_CALLS = hand_trace([("abcd", [{0}, {1}, {2}, {3}])])  # the same text, 1 per call
OTHER = hand_trace([("abce", [{0, 1}, {2, 3}])])  # another text


def _map(pieces) -> GammaMap:
    """A step map over the entropy-bounded slider's [0, 2] holding ``pieces``."""
    return GammaMap("go: ", "entropy_bounded", 0.0, 2.0, 0.01, {}, pieces=list(pieces), seconds=1.5, calls=9)


PIECES = [Piece(0.0, 0.5, FOUR_CALLS), Piece(0.5, 0.8, TWO_CALLS), Piece(0.8, 0.805, None, True, False),
          Piece(0.805, 1.2, OTHER), Piece(1.2, 2.0, ONE_CALL, True, True)]


def _pieces(strip: str) -> list[dict]:
    return [dict(re.findall(r"data-([a-z-]+)='([^']*)'", m), style=re.search(r"style='([^']*)'", m).group(1))
            for m in re.findall(r"<div class='piece' ([^>]*)>", strip)]


def _darkness(style: str) -> int:
    colour = re.search(r"background:#([0-9A-F]{6})", style).group(1)
    return -sum(int(colour[i:i + 2], 16) for i in (0, 2, 4))


WIDE = [Piece(0.0, 0.5, FOUR_CALLS), Piece(0.5, 0.8, TWO_CALLS), Piece(0.8, 1.2, OTHER),
        Piece(1.2, 2.0, ONE_CALL, True, True)]


def _spans(strip: str) -> list[tuple[float, float]]:
    return [(float(re.search(r"left:([0-9.]+)%", p["style"]).group(1)), float(re.search(r"width:([0-9.]+)%",
                                                                                         p["style"]).group(1)))
            for p in _pieces(strip)]


def test_each_piece_is_drawn_where_it_lies_and_shaded_by_tokens_per_call():
    wide = plots.gamma_strip(_map(WIDE), current_gamma=1.0)
    assert [left for left, _ in _spans(wide)] == [0.0, 25.0, 40.0, 60.0]  # (lo - 0) / 2 of the width: to scale
    assert "data-widened='0'" in wide and "not to scale" not in wide
    assert "left:calc(50.0000% - 1px)" in wide  # γ = 1 halfway along
    strip = plots.gamma_strip(_map(PIECES), current_gamma=1.0, ntp_text="abcd")
    pieces = _pieces(strip)
    assert [p["kind"] for p in pieces] == ["decoded", "decoded", "gap", "decoded", "decoded"]
    assert [float(p["lo"]) for p in pieces] == [p.lo for p in PIECES]
    spans = _spans(strip)
    assert [p["widened"] for p in pieces] == ["0", "0", "1", "0", "0"]  # the 0.25 % stretch is drawn at 1 %
    assert spans[2][1] == 1.0 and all(abs(a + w - b) < 1e-3 for (a, w), (b, _) in zip(spans, spans[1:]))
    scale = {w / (piece.hi - piece.lo) for (_, w), piece, p in zip(spans, PIECES, pieces) if p["widened"] == "0"}
    assert max(scale) - min(scale) < 1e-3  # the others keep their proportions
    assert "data-complete='true'" in strip and "data-decoded='4'" in strip
    dark = {p["tpc"]: _darkness(p["style"]) for p in pieces if p["kind"] == "decoded"}
    assert dark["1.0000"] < dark["2.0000"] < dark["4.0000"]  # more tokens per call: darker


def test_text_changes_ntps_text_and_stretches_not_decoded_are_marked():
    pieces = _pieces(plots.gamma_strip(_map(PIECES), ntp_text="abcd"))
    assert [p.get("text-change") for p in pieces] == ["0", "0", None, "0", "1"]  # not across the stretch
    assert [p.get("ntp") for p in pieces] == ["same", "same", None, "differs", "same"]
    gap = pieces[2]
    assert "gamma" not in gap and "repeating-linear-gradient" in gap["style"]  # not clickable, hatched
    without = _pieces(plots.gamma_strip(_map(PIECES)))
    assert {p.get("ntp") for p in without} == {"unknown", None}  # no NTP given: nothing claimed


def test_a_click_position_is_a_slider_step_inside_each_decoded_piece_and_the_current_one_is_marked():
    strip = plots.gamma_strip(_map(PIECES), current_gamma=1.0)
    pieces = _pieces(strip)
    for piece, drawn in zip(PIECES, pieces):
        if piece.decoded:
            g = float(drawn["gamma"])
            assert g in piece and abs(g * 100 - round(g * 100)) < 1e-9
    assert [p["current"] for p in pieces] == ["0", "0", "0", "1", "0"]
    left, width = _spans(strip)[3]
    now = float(re.search(r"class='now' data-gamma='1.0' style='[^']*left:calc\(([0-9.]+)% - 1px\)", strip).group(1))
    assert left < now < left + width  # the line is inside the piece holding γ, at its place along it
    moved = _pieces(plots.gamma_strip(_map(PIECES), current_gamma=0.2))
    assert [p["current"] for p in moved] == ["1", "0", "0", "0", "0"]


def test_a_map_still_building_shows_the_rest_as_pending():
    strip = plots.gamma_strip(_map(PIECES[:2]))
    pieces = _pieces(strip)
    assert [p["kind"] for p in pieces] == ["decoded", "decoded", "pending"]
    assert float(pieces[-1]["lo"]) == 0.8 and float(pieces[-1]["hi"]) == 2.0 and "gamma" not in pieces[-1]
    assert "data-complete='false'" in strip and "building" in strip
    assert [p["kind"] for p in _pieces(plots.gamma_strip(_map([])))] == ["pending"]  # nothing walked yet
    from sbd_viz.plots.gamma_strip import MIN_PIECE

    first = _spans(plots.gamma_strip(_map([Piece(0.0, 0.01, ONE_CALL, True, False)])))  # a sliver walked so far
    assert first[0] == (0.0, MIN_PIECE) and first[1] == (MIN_PIECE, 100.0 - MIN_PIECE)  # seen; the rest pending


def test_the_slider_position_of_a_piece():
    from sbd_viz.plots.gamma_strip import slider_position

    assert slider_position(Piece(0.3, 0.47, ONE_CALL), 0.01) == 0.38  # the step nearest the middle, as sent
    assert slider_position(Piece(0.301, 0.309, None), 0.01) is None  # no step inside
    assert slider_position(Piece(0.3, 0.31, ONE_CALL, False, True), 0.01) == 0.31  # an open bottom is not in it
    assert slider_position(Piece(3, 5, ONE_CALL, True, True, whole=True), 1) == 4


def test_the_caption_counts_in_words_that_agree_with_their_number():
    one = plots.gamma_strip(_map([Piece(0.0, 2.0, ONE_CALL)]))
    assert "1 piece decoded (1 text)" in one and "1 texts" not in one and "1 pieces" not in one
    many = plots.gamma_strip(_map(PIECES))
    assert "4 pieces decoded (2 texts), 1 stretch not decoded" in many


SEVEN = [Piece(i / 100, (i + 1) / 100, TWO_CALLS if i % 2 else FOUR_CALLS, True, False) for i in range(6)] + \
    [Piece(0.06, 2.0, ONE_CALL, True, True)]


def test_every_piece_is_wide_enough_to_see_and_click():
    """Six pieces in the first 3 % of the range were drawn 15 px wide between them: each decoded piece now takes at
    least MIN_PIECE of the strip, side by side, each with its click position, and the strip says it is not to scale."""
    from sbd_viz.plots.gamma_strip import MIN_PIECE

    strip = plots.gamma_strip(_map(SEVEN), current_gamma=0.03)
    pieces, spans = _pieces(strip), _spans(strip)
    assert len(pieces) == 7 and all(w >= MIN_PIECE for _, w in spans)
    assert all(abs(a + w - b) < 1e-3 for (a, w), (b, _) in zip(spans, spans[1:]))
    assert abs(sum(w for _, w in spans) - 100) < 1e-3
    assert [float(p["gamma"]) for p in pieces[:6]] == [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    assert [p["current"] for p in pieces] == ["0", "0", "0", "1", "0", "0", "0"]
    assert "not to scale: 6 narrow pieces drawn wider" in strip and "data-widened='6'" in strip


def test_many_pieces_share_the_strip_without_overlapping():
    many = [Piece(i / 100, (i + 1) / 100, ONE_CALL, True, False) for i in range(199)]
    many.append(Piece(1.99, 2.0, ONE_CALL, True, True))
    spans = _spans(plots.gamma_strip(_map(many)))
    assert all(w > 0 for _, w in spans) and abs(sum(w for _, w in spans) - 100) < 1e-3
    assert all(a + w <= b + 1e-3 for (a, w), (b, _) in zip(spans, spans[1:]))


def test_clickable_pieces_lie_above_the_hatching():
    pieces = _pieces(plots.gamma_strip(_map(PIECES)))
    z = [int(re.search(r"z-index:(\d+)", p["style"]).group(1)) for p in pieces]
    assert min(z[i] for i, p in enumerate(pieces) if p["kind"] == "decoded") > z[2] and pieces[2]["kind"] == "gap"
    assert "min-width" not in "".join(p["style"] for p in pieces)  # a minimum in pixels would overlap its neighbour


def _legend_marks(strip: str) -> list[str]:
    legend = strip[strip.index("<div class='legend'>"):]
    return re.findall(r"data-mark='([a-z]+)'", legend)


def test_the_legend_explains_every_mark_the_strip_draws():
    building = [Piece(0.0, 0.5, FOUR_CALLS), Piece(0.5, 0.8, OTHER), PIECES[2], Piece(0.805, 1.2, TWO_CALLS)]
    full = plots.gamma_strip(_map(building), current_gamma=1.0, ntp_text="abcd")  # the rest pending
    drawn = _pieces(full)
    assert any(p.get("text-change") == "1" for p in drawn) and any(p.get("ntp") == "same" for p in drawn)
    assert _legend_marks(full) == ["shade", "current", "now", "change", "greedy", "gap", "pending"]
    for said in ("lighter = fewer", "the piece shown", "γ now", "the text changes here", "NTP’s text",
                 "not decoded (no slider position", "not decoded yet"):
        assert said in full
    plain = plots.gamma_strip(_map([Piece(0.0, 2.0, ONE_CALL, True, True)]))
    assert _legend_marks(plain) == ["shade"]  # nothing else drawn, nothing else explained
