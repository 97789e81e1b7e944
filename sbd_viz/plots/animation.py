"""The block-fill animation as a GIF: one frame per model call, for slides, papers and posts.

The frames are drawn with Pillow from ``block_fill_spec(trace)``, the block-fill view as plain data: the very
data the Plotly animation and the tests read. Its cells (colour from each heatmap's own colour scale, text), gap-fill
outlines, row and slot labels, the call counter (each frame's title), the settings, prompt and legend lines, and the
entropy colour bar. No browser, no screenshot, nothing downloaded: it works on a Space and in CI. The text is set
in DejaVu Sans Mono where the system or matplotlib has it, else in Pillow's own default font.

Every frame carries its call number in the counter, so no two frames are alike and a GIF of a trace with ``n``
calls has exactly ``n`` frames.
"""

from __future__ import annotations

import functools
import html
import json
import re
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from ..trace.checks import check_whole
from ..trace.data import Trace
from .blocks import block_fill_spec
from .html_export import recolor

if TYPE_CHECKING:  # Pillow is imported where a frame is drawn
    from PIL import Image

WIDTH = 1280  # pixels: a 16:9 slide's width at 720p
FRAME_MS = 700  # each call's frame
LAST_FRAME_MS = 2500  # the finished decode stays up before the loop starts again
TEXT, NOTE_TEXT = "#111111", "#444444"  # the counter; the notes, axis labels and colour bar
BASE_FONT_PX = 12  # the font size the spec's markup is written for (its spans scale from it)
_FONT_FILES = {False: ("DejaVuSansMono.ttf",), True: ("DejaVuSansMono-Bold.ttf", "DejaVuSansMono.ttf")}


# -- fonts -------------------------------------------------------------------------------
def _font_dirs() -> list[Path]:
    dirs = [
        Path("/usr/share/fonts/truetype/dejavu"),
        Path("/usr/share/fonts/dejavu"),
        Path("/usr/share/fonts/TTF"),
        Path("/Library/Fonts"),
    ]
    try:  # matplotlib ships DejaVu: a Space with it installed has the font even without system fonts
        import matplotlib

        dirs.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf")
    except ImportError:
        pass
    return dirs


@functools.lru_cache(maxsize=64)
def _font(size: int, bold: bool = False):
    from PIL import ImageFont

    size = max(6, int(size))
    for name in _FONT_FILES[bold]:
        for folder in [None] + _font_dirs():
            try:  # a bare name lets Pillow search the system's font folders
                return ImageFont.truetype(name if folder is None else str(folder / name), size)
            except OSError:
                continue
    return ImageFont.load_default(size)


# -- the spec's markup: <b>, <br>, <span style='color:...;font-size:...px'> ---------------------
_TAG = re.compile(r"<(/?)(b|br|span)((?:\s[^>]*)?)/?>", re.IGNORECASE)


def _markup_lines(markup: str, color: str) -> list[list[tuple[str, str, bool, float]]]:
    """Lines of runs ``(text, colour, bold, size factor)`` from the small HTML subset Plotly text uses."""
    lines, runs = [], []
    styles = [(color, False, 1.0)]  # a stack: spans and <b> nest
    pos = 0
    for m in _TAG.finditer(markup):
        if m.start() > pos:
            runs.append((html.unescape(markup[pos : m.start()]), *styles[-1]))
        pos = m.end()
        closing, tag, attrs = m.group(1), m.group(2).lower(), m.group(3)
        if tag == "br":
            lines.append(runs)
            runs = []
        elif closing:
            if len(styles) > 1:
                styles.pop()
        else:
            c, bold, scale = styles[-1]
            if tag == "b":
                bold = True
            hit = re.search(r"color:\s*(#[0-9a-fA-F]{3,6})", attrs)
            c = hit.group(1) if hit else c
            hit = re.search(r"font-size:\s*([\d.]+)px", attrs)
            scale = float(hit.group(1)) / BASE_FONT_PX if hit else scale
            styles.append((c, bold, scale))
    if pos < len(markup):
        runs.append((html.unescape(markup[pos:]), *styles[-1]))
    lines.append(runs)
    return lines


def _fitted(markup: str, size: float, max_width: float, color: str = TEXT) -> list[tuple[float, list]]:
    """Each line of ``markup`` with its font size: ``size``, or smaller where the line would be wider than
    ``max_width`` (a long counter or legend shrinks to fit instead of running off the frame)."""
    out = []
    for runs in _markup_lines(markup, color):
        wide = sum(_font(round(size * scale), bold).getlength(text) for text, _, bold, scale in runs if text)
        out.append((size * min(1.0, max_width / wide) if wide else size, runs))
    return out


def _markup_height(markup: str, size: float, max_width: float) -> float:
    return sum(
        max([line * scale for *_, scale in runs] + [line]) * 1.3 for line, runs in _fitted(markup, size, max_width)
    )


def _draw_markup(draw, xy: tuple[float, float], markup: str, size: float, max_width: float, color: str = TEXT) -> float:
    """Draw ``markup`` with its top-left at ``xy``, each line at most ``max_width`` wide; returns the height used."""
    x0, y = xy
    for line, runs in _fitted(markup, size, max_width, color):
        height = max([line * scale for *_, scale in runs] + [line]) * 1.3
        x = x0
        for text, c, bold, scale in runs:
            if not text:
                continue
            font = _font(round(line * scale), bold)
            draw.text((x, y + height * 0.8), text, font=font, fill=c, anchor="ls")
            x += draw.textlength(text, font=font)
        y += height
    return y - xy[1]


# -- colours ---------------------------------------------------------------------------------
def _rgb(color: str) -> tuple[int, int, int]:
    color = color.lstrip("#")
    if len(color) == 3:
        color = "".join(ch * 2 for ch in color)
    return int(color[0:2], 16), int(color[2:4], 16), int(color[4:6], 16)


def _scale_color(scale: list, t: float) -> tuple[int, int, int]:
    """The colour at ``t`` in [0, 1] of a Plotly colour scale (``[[position, colour], ...]``; a repeated position
    is a hard edge between two bands)."""
    t = min(1.0, max(0.0, t))
    for (p0, c0), (p1, c1) in pairwise(scale):
        if p0 <= t <= p1 and p1 > p0:
            f = (t - p0) / (p1 - p0)
            a, b = _rgb(c0), _rgb(c1)
            return tuple(round(x + (y - x) * f) for x, y in zip(a, b))
    return _rgb(scale[-1][1] if t >= scale[-1][0] else scale[0][1])


def _ink(fill: tuple[int, int, int]) -> str:
    """Black text on a light cell, white on a dark one."""
    r, g, b = fill
    return TEXT if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#FFFFFF"


# -- the frames --------------------------------------------------------------------------------
def _resolved_frames(spec: dict) -> list[tuple[str, list]]:
    """Each frame's title and full list of row traces: frame 0 holds every row, a later frame only the rows its
    call changed (``traces`` gives their indices), so each frame is the one before with those replaced."""
    current: dict[int, dict] = {}
    out = []
    for frame in spec["frames"]:
        for index, data in zip(frame["traces"], frame["data"]):
            current[index] = data
        out.append((frame["layout"]["title"]["text"], [current[i] for i in sorted(current)]))
    return out


class _Canvas:
    """Where everything sits on a frame, from the spec's grid and the chosen width."""

    def __init__(self, spec: dict, width: int, titles: list[str]):
        layout = spec["layout"]
        self.rows = layout["meta"]["rows"]
        self.cols = len(layout["xaxis"]["tickvals"])
        self.row_labels = layout["yaxis"]["ticktext"]
        self.titles = titles
        self.slot_title = layout["xaxis"].get("title", {}).get("text", "slot")
        self.notes = [a["text"] for a in layout.get("annotations", [])]  # settings, prompt, legend
        self.bar = spec["data"][-1]["marker"]  # the entropy colour bar
        self.boundaries = [s["x0"] for s in layout.get("shapes", ())]  # between blocks sharing a row
        s = self.s = width / WIDTH
        self.width = width
        self.font = 20 * s
        self.left, right = 250 * s, 190 * s
        self.cell_w = min(120 * s, (width - self.left - right) / self.cols)
        self.row_h = min(76 * s, max(44 * s, self.cell_w))
        # counter (the tallest of the frames' titles), the notes, then room for the slot numbers
        self.text_width = width - 48 * s
        self.top = (
            22 * s
            + max(_markup_height(t, 30 * s, self.text_width) for t in titles)
            + 10 * s
            + sum(_markup_height(n, self.font, self.text_width) for n in self.notes)
            + 56 * s
        )
        self.bar_top, self.bar_length = self.top + 44 * s, min(max(self.rows * self.row_h, 120 * s), 220 * s)
        bottom = max(self.top + self.rows * self.row_h, self.bar_top + self.bar_length + 16 * s)
        self.height = int(bottom + 30 * s + 1) // 2 * 2

    def x(self, col: float) -> float:
        return self.left + (col + 0.5) * self.cell_w

    def y(self, row: float) -> float:
        return self.top + (row + 0.5) * self.row_h


def _draw_base(c: _Canvas, rows: list) -> Image.Image:
    """What every frame shares: the notes, the slot numbers, the row labels and the colour bar (the call counter
    above them and the cells are each frame's own)."""
    from PIL import Image, ImageDraw

    s = c.s
    image = Image.new("RGB", (c.width, c.height), "white")
    draw = ImageDraw.Draw(image)
    y = 22 * s + max(_markup_height(t, 30 * s, c.text_width) for t in c.titles) + 10 * s
    for note in c.notes:
        y += _draw_markup(draw, (24 * s, y), note, c.font, c.text_width, NOTE_TEXT)
    # slot numbers above the grid, the axis title to their left
    tick_y = c.top - 14 * s
    small = _font(round(c.font * 0.9))
    ((size, _runs),) = _fitted(c.slot_title, c.font * 0.9, c.left - 38 * s)
    draw.text((c.left - 14 * s, tick_y), c.slot_title, font=_font(round(size)), fill=NOTE_TEXT, anchor="rs")
    for col in range(c.cols):
        draw.text((c.x(col), tick_y), str(col), font=small, fill=NOTE_TEXT, anchor="ms")
    for row in sorted({d["y"][0] for d in rows if d.get("type") == "heatmap"}):
        draw.text((c.left - 14 * s, c.y(row)), c.row_labels[row], font=small, fill=NOTE_TEXT, anchor="rm")
    _draw_bar(draw, c)
    return image


def _draw_row(c: _Canvas, hm: dict) -> Image.Image:
    """One heatmap row's cells on a transparent strip as wide as the grid (blocks sharing a row each leave the
    others' cells clear)."""
    from PIL import Image, ImageDraw

    s = c.s
    strip = Image.new("RGBA", (int(c.cols * c.cell_w + 1), int(c.row_h + 1)), (255, 255, 255, 0))
    draw = ImageDraw.Draw(strip)
    zmin, zmax, scale = hm["zmin"], hm["zmax"], hm["colorscale"]
    gap_x, gap_y = 3 * s, 10 * s
    for col, (z, text) in enumerate(zip(hm["z"][0], hm["text"][0])):
        if z is None:  # padding right of a row's last block
            continue
        fill = _scale_color(scale, (z - zmin) / (zmax - zmin))
        x0, y0 = col * c.cell_w + gap_x / 2, gap_y / 2
        draw.rectangle((x0, y0, x0 + c.cell_w - gap_x, y0 + c.row_h - gap_y), fill=fill)
        label = html.unescape(text or "")
        if label:
            size = min(34 * s, c.row_h * 0.5)
            while size > 8 and draw.textlength(label, font=_font(round(size))) > c.cell_w - 10 * s:
                size -= 1
            draw.text(
                ((col + 0.5) * c.cell_w, c.row_h / 2), label, font=_font(round(size)), fill=_ink(fill), anchor="mm"
            )
    return strip


def _draw_frame(canvas: _Canvas, title: str, rows: list, base, strips: dict) -> Image.Image:
    """One call's frame: the shared ``base``, the counter, each row's strip (``strips`` keeps a row drawn once
    while no call changes it: a call redraws only its own block's row), then the block boundaries and gap-fill
    outlines over the cells."""
    from PIL import ImageDraw

    c, s = canvas, canvas.s
    image = base.copy()
    draw = ImageDraw.Draw(image)
    _draw_markup(draw, (24 * s, 22 * s), title, 30 * s, c.text_width, TEXT)  # the call counter
    for hm in (d for d in rows if d.get("type") == "heatmap"):
        if id(hm) not in strips:
            strips[id(hm)] = (hm, _draw_row(c, hm))  # the row itself is kept too, so its id is not reused
        strip = strips[id(hm)][1]
        image.paste(strip, (round(c.left), round(c.top + hm["y"][0] * c.row_h)), strip)
    for x in c.boundaries:  # white bars between blocks that share a row
        draw.line((c.x(x), c.top, c.x(x), c.top + c.rows * c.row_h), fill="white", width=max(2, round(6 * s)))
    for line in (
        d for d in rows if d.get("type") == "scatter"
    ):  # gap fills: rectangles in data units, paths split by None
        color = line["line"]["color"]
        points: list[tuple[float, float]] = []
        for x, y_ in list(zip(line["x"], line["y"])) + [(None, None)]:
            if x is None:
                if len(points) > 1:
                    draw.line(points, fill=color, width=max(2, round(4 * s)), joint="curve")
                points = []
            else:
                points.append((c.x(x), c.y(y_)))
    return image


def _draw_bar(draw, c: _Canvas) -> None:
    """The entropy colour bar right of the grid: low entropy at the bottom, as Plotly draws it."""
    s, bar = c.s, c.bar
    x0 = c.left + c.cols * c.cell_w + 50 * s
    length, y_top = c.bar_length, c.bar_top
    _draw_markup(
        draw, (x0, c.top - 12 * s), bar["colorbar"]["title"]["text"], c.font * 0.85, c.width - x0 - 4 * s, NOTE_TEXT
    )
    steps = max(2, int(length))
    for i in range(steps):
        color = _scale_color(bar["colorscale"], 1 - i / (steps - 1))
        draw.line((x0, y_top + i * length / steps, x0 + 18 * s, y_top + i * length / steps), fill=color, width=2)
    small = _font(round(c.font * 0.85))
    draw.text((x0 + 26 * s, y_top), f"{bar['cmax']:.2f}", font=small, fill=NOTE_TEXT, anchor="lm")
    draw.text((x0 + 26 * s, y_top + length), f"{bar['cmin']:.2f}", font=small, fill=NOTE_TEXT, anchor="lm")


def _render(trace: Trace, width: int, max_blocks: int | None, last: bool, palette=None) -> tuple[dict, list]:
    check_whole(width, "width", 320, 4096, unit="pixels")
    spec = recolor(block_fill_spec(trace, max_blocks, last), palette)  # checks trace, max_blocks and palette
    frames = _resolved_frames(spec)
    canvas = _Canvas(spec, width, [title for title, _ in frames])
    base = _draw_base(canvas, frames[0][1])
    strips: dict[int, tuple[dict, Image.Image]] = {}  # a heatmap row's id -> the row and its drawn strip
    return spec, [_draw_frame(canvas, title, rows, base, strips) for title, rows in frames]


def animation_frames(
    trace: Trace, width: int = WIDTH, max_blocks: int | None = None, last: bool = False, palette: dict | None = None
) -> list:
    """The GIF's frames as RGB Pillow images, one per call, drawn from ``block_fill_spec(trace, max_blocks, last)``."""
    return _render(trace, width, max_blocks, last, palette)[1]


def _exact_colors(spec: dict) -> list[tuple[int, int, int]]:
    """Every colour the spec names for cells, outlines, the colour bar and the legend (not its template's)."""
    named = json.dumps([spec["data"], spec["frames"], spec["layout"].get("annotations", [])])
    colors = {_rgb(c) for c in re.findall(r"#[0-9A-Fa-f]{6}\b", named)}
    return sorted(colors | {(255, 255, 255), _rgb(TEXT), _rgb(NOTE_TEXT)})


def _indexed(frames: list, exact: list[tuple[int, int, int]]) -> list:
    """The frames on one shared 256-colour palette (so nothing flickers from frame to frame) that holds the
    ``exact`` colours as they are and fills the rest from the first, middle and last frames (text edges, entropy
    shades). Each pixel takes its nearest palette colour, found here: Pillow's own palette mapping rounds, and a
    cell's state must read true (#F2F2F2 "not started" would come out #F0F0F0)."""
    import numpy as np
    from PIL import Image

    sample = [frames[0], frames[len(frames) // 2], frames[-1]]
    strip = Image.new("RGB", (frames[0].width, sum(f.height for f in sample)))
    for i, f in enumerate(sample):
        strip.paste(f, (0, i * f.height))
    exact = exact[:128]
    rest = strip.quantize(colors=256 - len(exact), method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    rest_palette = rest.getpalette()
    assert rest_palette is not None  # a quantized image has its palette
    flat = rest_palette[: 3 * (256 - len(exact))]
    palette = np.array(exact + [tuple(flat[i : i + 3]) for i in range(0, len(flat) - 2, 3)], dtype=np.int64)
    out = []
    known, known_index = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint8)  # packed colour -> palette entry
    previous, indices = None, None
    for frame in frames:
        rgb = np.asarray(frame, dtype=np.int32)  # (height, width, 3)
        packed = ((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]).ravel()
        # a call changes a few cells: only the pixels that differ from the previous frame are looked up, and only
        # colours never seen before are matched to the palette
        changed = np.arange(len(packed)) if previous is None else np.flatnonzero(packed != previous)
        pixels = packed[changed]
        at = np.minimum(np.searchsorted(known, pixels), max(len(known) - 1, 0))
        new = np.unique(pixels[known[at] != pixels]) if len(known) else np.unique(pixels)
        if len(new):
            new_rgb = np.stack([new >> 16, (new >> 8) & 255, new & 255], 1).astype(np.int64)  # (n_new, 3)
            nearest = ((new_rgb[:, None, :] - palette[None]) ** 2).sum(-1).argmin(1)  # exact colours: distance 0
            known = np.concatenate([known, new.astype(np.int32)])
            known_index = np.concatenate([known_index, nearest.astype(np.uint8)])
            order = np.argsort(known, kind="stable")
            known, known_index = known[order], known_index[order]
            at = np.searchsorted(known, pixels)
        indices = np.empty(len(packed), dtype=np.uint8) if indices is None else indices.copy()
        indices[changed] = known_index[at]
        previous = packed
        image = Image.frombytes("P", frame.size, indices.tobytes())
        image.putpalette([int(v) for v in palette.flatten()])
        out.append(image)
    return out


def save_animation(
    trace: Trace,
    path: str | Path,
    width: int = WIDTH,
    frame_ms: int = FRAME_MS,
    last_frame_ms: int = LAST_FRAME_MS,
    max_blocks: int | None = None,
    last: bool = False,
    palette: dict | None = None,
) -> Path:
    """Write the block-fill animation of ``trace`` to ``path`` as a looping GIF: one frame per model call.

    ``width`` in pixels (1280 reads well on a slide; the height follows the number of block rows);
    ``frame_ms`` each call's frame, ``last_frame_ms`` the finished decode's; ``max_blocks`` / ``last`` as in
    ``plots.block_fill`` (a long trace's first or last N blocks; the counters still count the whole trace);
    ``palette`` the state colours, as ``plots.html_export.save_page`` takes them (default ``STATE_COLORS``, Okabe-Ito).
    """
    path = Path(path)
    if path.suffix.lower() != ".gif":
        raise ValueError(f"path: must end in .gif, got {str(path)!r}")
    for name, value in (("frame_ms", frame_ms), ("last_frame_ms", last_frame_ms)):
        check_whole(value, name, 20, 60_000, unit="milliseconds")
    spec, frames = _render(trace, width, max_blocks, last, palette)
    indexed = _indexed(frames, _exact_colors(spec))
    durations = [frame_ms] * (len(indexed) - 1) + [last_frame_ms]
    indexed[0].save(path, save_all=True, append_images=indexed[1:], duration=durations, loop=0, optimize=False)
    return path
