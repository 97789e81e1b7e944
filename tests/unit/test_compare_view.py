"""The compare view (plots.compare_decoders): one row per decoder, output token i in column i for
every decoder, each cell shaded by the call that wrote it, calls and "equals greedy?" at the row's end; every token
drawn (no cut at 12 blocks), spaces as the main view shows them (␣), no colour bar, two-decimal numbers. Hand-made
traces, no model."""

import html

import pytest

from sbd_viz import plots
from sbd_viz.plots.side_by_side import CALL_SHADES

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


def test_a_run_of_one_shade_is_one_call():
    fig = plots.compare_decoders({"NTP": ntp(), "SBD": sbd()})
    calls = fig.layout.meta["calls"]
    assert calls["SBD"] == sbd().token_calls() and calls["NTP"] == list(range(len(TEXT)))
    for i, label in enumerate(("NTP", "SBD")):
        shades = _shades(fig, i)
        assert shades == [c % len(CALL_SHADES) for c in calls[label]]
        # neighbouring tokens written by different calls never share a shade
        for a, b, ca, cb in zip(shades, shades[1:], calls[label], calls[label][1:]):
            assert (a == b) == (ca == cb) or abs(ca - cb) >= len(CALL_SHADES)
    assert not any(getattr(t, "showscale", False) for t in fig.data)  # no colour bar (it started at -0.4)


def test_numbers_at_the_rows_end_and_in_the_rows_have_two_decimals():
    greedy = ntp()
    fig = plots.compare_decoders({"NTP": greedy, "SBD": sbd()}, ntp=greedy)
    rows = fig.layout.meta["rows"]
    assert [r["tokens_per_call"] for r in rows] == [1.0, 2.89]  # 26 tokens in 9 calls: 2.888…
    ends = [a.text for a in fig.layout.annotations if "calls ·" in (a.text or "")]
    assert ends[0] == "26 calls · 1.00/call · = greedy" and ends[1] == "9 calls · 2.89/call · = greedy"
    assert fig.data[2].x == (26, 9)  # the bar of calls below


def test_bad_line_is_refused_by_name():
    with pytest.raises(ValueError, match="line"):
        plots.compare_decoders([ntp()], line=0)
