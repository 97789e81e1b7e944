"""The block-fill animation as a GIF: one frame per call, drawn with Pillow from block_fill_spec's plain data."""

import numpy as np
import pytest
from PIL import Image

import sbd_viz as sv
from sbd_viz.plots import animation as plot_animation
from sbd_viz import plots
from sbd_viz.cli import main as cli_main
from sbd_viz.plots.animation import animation_frames, save_animation

from conftest import hand_trace, sharp_model


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i: i + 2], 16) for i in (1, 3, 5))


def _colors(image: Image.Image) -> set:
    return {c for _, c in image.getcolors(maxcolors=1 << 20)}


def _frames(path) -> list[np.ndarray]:
    with Image.open(path) as gif:
        out = []
        for i in range(gif.n_frames):
            gif.seek(i)
            out.append(np.asarray(gif.convert("RGB")))
        return out


@pytest.mark.parametrize("stop_at", [None, 13])
@pytest.mark.heavy
def test_a_gif_has_one_frame_per_call(tmp_path, stop_at):
    trace = hand_trace(stop_at=stop_at)
    path = save_animation(trace, tmp_path / "t.gif")
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == trace.nfe == 9
        assert gif.size[0] == plot_animation.WIDTH
        gif.seek(0)
        assert gif.info["duration"] == plot_animation.FRAME_MS
        gif.seek(gif.n_frames - 1)
        assert gif.info["duration"] == plot_animation.LAST_FRAME_MS
    frames = _frames(path)
    # every call is its own picture: the counter alone already differs from one call to the next
    assert all((a != b).any() for a, b in zip(frames, frames[1:]))


@pytest.mark.heavy
def test_decoded_traces_sbd_ntp_and_verified_give_one_frame_per_call(tmp_path):
    model = sharp_model()
    prompt = "assert 12 + 7 == "
    for name, trace in (("sbd", sv.decode(model, prompt, gamma=1.0, max_new_tokens=12)),
                        ("ntp", sv.decode_ntp(model, prompt, max_new_tokens=12)),
                        ("verified", sv.decode(model, prompt, gamma=1.0, max_new_tokens=12, verify=True))):
        with Image.open(save_animation(trace, tmp_path / f"{name}.gif")) as gif:
            assert gif.n_frames == trace.nfe, name


def _cell_pixels(trace, frames):
    """Per frame, per drawn cell: (pixel colour just inside the cell's left edge, the colour its z maps to)."""
    spec = plots.block_fill_spec(trace)
    resolved = plot_animation._resolved_frames(spec)
    canvas = plot_animation._Canvas(spec, frames[0].size[0], [title for title, _ in resolved])
    out = []
    for image, (_, rows) in zip(frames, resolved):
        pairs = []
        for hm in (d for d in rows if d["type"] == "heatmap"):
            row = hm["y"][0]
            for col, z in enumerate(hm["z"][0]):
                if z is not None:
                    want = plot_animation._scale_color(hm["colorscale"], (z - hm["zmin"]) / (hm["zmax"] - hm["zmin"]))
                    x, y = canvas.left + col * canvas.cell_w + 6, canvas.y(row)
                    pairs.append((image.getpixel((int(x), int(y)))[:3], want))
        out.append(pairs)
    return out


@pytest.mark.heavy
def test_every_cell_has_its_block_fill_colour_in_every_frame(tmp_path):
    trace = hand_trace(stop_at=13)
    for pairs in _cell_pixels(trace, animation_frames(trace)):
        assert pairs and all(got == want for got, want in pairs)
    # the GIF keeps the state colours exactly (one palette for all frames, no dithering)
    with Image.open(save_animation(trace, tmp_path / "t.gif")) as gif:
        gif_frames = []
        for i in range(gif.n_frames):
            gif.seek(i)
            gif_frames.append(gif.convert("RGB"))
    states = {_rgb(plots.STATE_COLORS[s]) for s in ("done", "now", "future")}
    for pairs in _cell_pixels(trace, gif_frames):
        assert all(got == want for got, want in pairs if want in states)


@pytest.mark.heavy
def test_frames_show_each_call_s_states():
    """Frame 0: block 0's first commit orange ("now"), blocks 1-2 not started; the last frame: every block
    started, the last call's commits orange and the earlier ones sky blue."""
    trace = hand_trace()
    frames = animation_frames(trace)
    first, last = _cell_pixels(trace, frames)[0], _cell_pixels(trace, frames)[-1]
    colors = {name: _rgb(plots.STATE_COLORS[name]) for name in ("done", "now", "future")}
    assert {got for got, _ in first} >= {colors["now"], colors["future"]} and colors["done"] not in dict(first)
    last_colors = {got for got, _ in last}
    assert last_colors >= {colors["done"], colors["now"]} and colors["future"] not in last_colors


def test_the_colour_scale_is_read_as_plotly_reads_it():
    from sbd_viz.plots.style import STATE_SCALE as scale

    assert plot_animation._scale_color(scale, 1.5 / 4) == _rgb(plots.STATE_COLORS["done"])
    assert plot_animation._scale_color(scale, 2.5 / 4) == _rgb(plots.STATE_COLORS["now"])
    assert plot_animation._scale_color(scale, 0.5 / 4) == _rgb(plots.STATE_COLORS["future"])
    lo, hi = _rgb(plots.ENTROPY_SCALE[0][1]), _rgb(plots.ENTROPY_SCALE[1][1])
    mid = plot_animation._scale_color(scale, 0.875)  # halfway through the masked band
    assert all(min(a, b) < m < max(a, b) for a, b, m in zip(lo, hi, mid))


def test_the_markup_of_titles_and_legend_is_parsed():
    lines = plot_animation._markup_lines(
        "<b>call 3</b> · 4 tokens<br><span style='color:#56B4E9;font-size:17px'>■</span> a &amp; b", "#222222")
    assert lines == [[("call 3", "#222222", True, 1.0), (" · 4 tokens", "#222222", False, 1.0)],
                     [("■", "#56B4E9", False, 17 / 12), (" a & b", "#222222", False, 1.0)]]


@pytest.mark.heavy
def test_width_and_long_traces(tmp_path):
    trace = hand_trace()
    frames = animation_frames(trace, width=640)
    assert frames[0].size[0] == 640 and len(frames) == trace.nfe
    shown = animation_frames(trace, max_blocks=1)  # one block row drawn, every call still a frame
    assert len(shown) == trace.nfe and shown[0].size[1] < frames[0].size[1] * 2


@pytest.mark.heavy
def test_without_dejavu_it_falls_back_to_pillows_font(tmp_path, monkeypatch):
    from PIL import ImageFont

    real = ImageFont.truetype

    def no_font_files(font=None, *args, **kwargs):  # Pillow's own default font is read from memory, not a file
        if isinstance(font, str):
            raise OSError("cannot open resource")
        return real(font, *args, **kwargs)

    monkeypatch.setattr(ImageFont, "truetype", no_font_files)
    plot_animation._font.cache_clear()
    try:
        assert plot_animation._font(20).getname()[0] != "DejaVu Sans Mono"
        with Image.open(save_animation(hand_trace(), tmp_path / "t.gif")) as gif:
            assert gif.n_frames == 9
    finally:
        plot_animation._font.cache_clear()


@pytest.mark.parametrize("kwargs, match", [
    (dict(path="t.png"), "path: must end in .gif"),
    (dict(width=100), "width:"),
    (dict(width=True), "width:"),
    (dict(frame_ms=0), "frame_ms:"),
    (dict(last_frame_ms=1.5), "last_frame_ms:"),
    (dict(max_blocks=0), "max_blocks:"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, match):
    path = tmp_path / kwargs.pop("path", "t.gif")
    with pytest.raises(ValueError, match=match):
        save_animation(hand_trace(), path, **kwargs)
    assert not path.exists()


def test_a_non_trace_is_named(tmp_path):
    with pytest.raises(ValueError, match="trace:"):
        save_animation("not a trace", tmp_path / "t.gif")


@pytest.mark.heavy
def test_cli_trace_writes_a_gif(tmp_path, capsys):
    path = tmp_path / "t.gif"
    assert cli_main(["trace", "assert 3 + 4 == ", "--max-new-tokens", "6", "--gif", str(path)]) == 0
    out = capsys.readouterr().out
    assert "GIF written to" in out
    calls = int(out.split("GIF written to")[1].split("(")[1].split()[0])
    with Image.open(path) as gif:
        assert gif.n_frames == calls
    assert cli_main(["trace", "assert 3 + 4 == ", "--max-new-tokens", "2", "--gif", str(tmp_path / "t.mp4")]) == 2
    assert "path: must end in .gif" in capsys.readouterr().err
