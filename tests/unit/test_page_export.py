"""One self-contained HTML file of a trace (block fill + calls timeline, no network) and the palette it shares with
the GIF."""

import re

import pytest
from PIL import Image

from sbd_viz import plots
from sbd_viz.plots.animation import animation_frames, save_animation
from sbd_viz.plots.html_export import OKABE_ITO, check_palette, recolor, save_page
from sbd_viz.plots.style import STATE_COLORS

from conftest import hand_trace

RED = "#FF0000"  # no figure uses pure red by default


def _gif_colors(path) -> set:
    with Image.open(path) as gif:
        colors = set()
        for i in range(gif.n_frames):
            gif.seek(i)
            colors |= {c for _, c in gif.convert("RGB").getcolors(maxcolors=1 << 20)}
        return colors


@pytest.mark.heavy
def test_the_page_is_one_offline_file_with_both_figures(tmp_path):
    trace = hand_trace(stop_at=13)
    page = save_page(trace, tmp_path / "t.html")
    assert (tmp_path / "t.html").read_text(encoding="utf-8") == page
    # nothing is fetched: no external script, stylesheet, font or image; plotly.js is inline, once
    assert not re.search(r"<script[^>]+src=", page) and not re.search(r"<link[^>]+href=", page)
    assert "@import" not in page and "<img" not in page
    assert page.count("plotly.js v") >= 1 and len(page) > 3_000_000
    assert len(re.findall(r"Plotly\.newPlot\(", page)) == 2  # the block fill and the timeline
    assert "tokens so far" in page and "committed in this call" in page  # the timeline's trace, the fill's legend
    assert f"<pre style='white-space:pre-wrap'>{trace.text}</pre>" in page  # its newline kept


@pytest.mark.heavy
def test_the_default_palette_is_okabe_ito():
    for state in ("done", "now", "gap", "diff", "corrected", "rollback", "check_only", "renoised"):
        assert STATE_COLORS[state].upper() in OKABE_ITO, state
    assert check_palette(None) == STATE_COLORS
    page = save_page(hand_trace())
    assert STATE_COLORS["now"] in page and RED not in page.upper()


@pytest.mark.heavy
def test_a_palette_changes_the_page_and_the_gif_alike(tmp_path):
    trace = hand_trace()
    palette = {"now": RED}
    page = save_page(trace, palette=palette)
    default = save_page(trace)
    assert RED in page and page.count(STATE_COLORS["now"]) < default.count(STATE_COLORS["now"])
    red = (255, 0, 0)
    assert red in _gif_colors(save_animation(trace, tmp_path / "p.gif", palette=palette))
    assert red not in _gif_colors(save_animation(trace, tmp_path / "d.gif"))
    # every colour the recoloured block fill names is in the GIF's frames: one palette for both
    spec = recolor(plots.block_fill_spec(trace), palette)
    named = {tuple(int(c[i: i + 2], 16) for i in (1, 3, 5)) for c in re.findall(r"#[0-9A-Fa-f]{6}",
                                                                                 str(spec["data"]))}
    frames = animation_frames(trace, palette=palette)
    drawn = set().union(*({c for _, c in f.getcolors(maxcolors=1 << 20)} for f in frames))
    assert red in named and red in drawn


def test_states_that_share_a_colour_must_keep_sharing_it(tmp_path):
    assert STATE_COLORS["diff"] == STATE_COLORS["rollback"]
    with pytest.raises(ValueError, match="'diff' and 'rollback' share a colour"):
        check_palette({"diff": RED})
    assert check_palette({"diff": RED, "rollback": RED})["rollback"] == RED
    with pytest.raises(ValueError, match="unknown state 'sky'"):
        check_palette({"sky": RED})
    with pytest.raises(ValueError, match="'now' must be a colour"):
        check_palette({"now": "red"})
    with pytest.raises(ValueError, match="palette"):
        save_animation(hand_trace(), tmp_path / "x.gif", palette=["#000000"])
    assert not (tmp_path / "x.gif").exists()
