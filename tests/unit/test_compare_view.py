"""The compare view (plots.compare_decoders): one row per decoder, output token i in column i for
every decoder, each cell shaded by the call that wrote it on one sequential scale, calls and "equals greedy?" in the
bars below; every token drawn (no cut at 12 blocks), every row labelled, spaces as the main view shows them (␣), no
colour bar, two-decimal numbers, at most FIT_WIDTH wide with whole token labels. Hand-made traces, no model."""

import html

import pytest

import sbd_viz as sv
from sbd_viz import plots
from sbd_viz.plots.style import FIT_WIDTH, STEP_SCALE

from conftest import hand_trace

TEXT = "ab cd ef gh ij kl mn op q\n"  # 26 tokens, spaces among them


def ntp() -> object:
    return hand_trace([(c, [{0}]) for c in TEXT])  # one token per call and per block: 26 blocks


def sbd() -> object:
    return hand_trace([(TEXT[:8], [{0, 1, 2}, {3, 4}, {5, 6, 7}]), (TEXT[8:16], [{0, 1, 2, 3}, {4, 5, 6, 7}]),
                       (TEXT[16:24], [{0}, {1, 2, 3, 4, 5, 6, 7}]), (TEXT[24:], [{0}, {1}])])


def _cells(fig, i: int) -> list[str]:
    """Decoder i's cell texts, read row by row (its output, in order), blanks dropped."""
    return [html.unescape(x) for row in fig.data[i].text for x in row if x]


def _shades(fig, i: int) -> list[int]:
    return [z for row in fig.data[i].z for z in row if z is not None]


def test_every_token_is_drawn_in_the_same_columns_for_every_decoder():
    fig = plots.compare_decoders({"NTP": ntp(), "SBD": sbd()}, line=10)
    for i in (0, 1):
        assert _cells(fig, i) == [c.replace(" ", "␣").replace("\n", "⏎") for c in TEXT]  # 26 blocks: all drawn
    # token j of each decoder sits in column j % 10, on its own row of line j // 10
    for i in (0, 1):
        where = [(r, c) for r, row in enumerate(fig.data[i].text) for c, x in enumerate(row) if x]
        assert [c for _, c in where] == [j % 10 for j in range(len(TEXT))]
        assert [r for r, _ in where] == [(j // 10) * 3 + i for j in range(len(TEXT))]
    assert fig.layout.meta["line"] == 10


def _lightness(color: str) -> float:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_each_call_has_its_own_shade_on_one_sequential_scale():
    """The shades cycled through 6 colours, so neighbouring calls could share one: now a cell's shade is its call's
    number on one sequential scale for every decoder (lighter = earlier), and a line ends each call's run."""
    fig = plots.compare_decoders({"NTP": ntp(), "SBD": sbd()})
    calls = fig.layout.meta["calls"]
    assert calls["SBD"] == sbd().token_calls() and calls["NTP"] == list(range(len(TEXT)))
    for i, label in enumerate(("NTP", "SBD")):
        assert _shades(fig, i) == calls[label]  # the call itself: no two calls share a shade
        assert (fig.data[i].zmin, fig.data[i].zmax) == (0, len(TEXT) - 1)  # one scale: NTP's last call is the darkest
        assert fig.data[i].colorscale == tuple(tuple(c) for c in STEP_SCALE)
    light = [_lightness(c) for _, c in STEP_SCALE]
    assert all(a > b for a, b in zip(light, light[1:]))  # sequential: every step darker than the one before
    edges = next(t for t in fig.data if t.meta and t.meta["role"] == "call_edges")
    line = fig.layout.meta["line"]
    drawn = {(x + 0.5, round(y + 0.42)) for x, y in zip(edges.x[::3], edges.y[::3])}
    expected = {(j % line, (j // line) * 3 + i) for i, label in enumerate(("NTP", "SBD"))
                for j in range(1, len(TEXT)) if calls[label][j] != calls[label][j - 1] and j % line}
    assert drawn == expected
    assert not any(getattr(t, "showscale", False) for t in fig.data)  # no colour bar (it started at -0.4)


def test_numbers_in_the_bars_have_two_decimals_and_name_the_count():
    greedy = ntp()
    fig = plots.compare_decoders({"NTP": greedy, "SBD": sbd()}, ntp=greedy)
    rows = fig.layout.meta["rows"]
    assert [r["tokens_per_call"] for r in rows] == [1.0, 2.89]  # 26 tokens in 9 calls: 2.888…
    bars = fig.data[2]
    assert bars.x == (26, 9)  # the bar of calls below
    assert bars.text == ("26 calls · 1.00 per call · = greedy", "9 calls · 2.89 per call · = greedy")
    titles = [a.text for a in fig.layout.annotations]
    assert any(sv.COUNT_LABELS[(True, True)] in t for t in titles)  # the count named as every view names it


def test_every_row_is_labelled_and_the_figure_fits_a_notebook():
    """A wrapped line's rows were unlabelled and the figure was 1180 px wide: every row of every line carries its
    decoder's label, and the figure is at most FIT_WIDTH wide."""
    words = "␣refract ed␣when ␣light␣is".replace("␣", " ")
    long = hand_trace([(words * 3, [set(range(len(words) * 3))])])
    fig = plots.compare_decoders({"NTP": ntp(), "SBD": sbd(), "long": long})
    layout = fig.layout
    assert layout.width <= FIT_WIDTH
    line = layout.meta["line"]
    lines = -(-len(words * 3) // line)
    assert lines > 1 and list(layout.yaxis.ticktext) == ["NTP", "SBD", "long"] * lines
    assert list(layout.yaxis.tickvals) == [k * 4 + i for k in range(lines) for i in range(3)]
    wide = plots.compare_decoders({"words": hand_trace([(TEXT, [set(range(len(TEXT)))])])}, line=10)
    assert wide.layout.width <= FIT_WIDTH


def test_a_long_token_label_is_drawn_whole():
    """SmolLM2's tokens were cut to 5 characters ("␣ref…"): a token of up to 8 is drawn whole."""
    from dataclasses import replace

    trace = sbd()
    trace = replace(trace, output_texts=tuple(" refract" if i == 3 else c for i, c in enumerate(trace.output_texts)))
    fig = plots.compare_decoders({"SBD": trace})
    assert "␣refract" in _cells(fig, 0) and fig.layout.width <= FIT_WIDTH


def test_bad_line_is_refused_by_name():
    with pytest.raises(ValueError, match="line"):
        plots.compare_decoders([ntp()], line=0)
