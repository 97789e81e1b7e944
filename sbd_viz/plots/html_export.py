"""A trace as one self-contained HTML file for papers and slides: the block fill and the calls timeline, in one palette.

``save_page(trace, path)`` writes one file that needs no network: plotly.js is inlined once (about 4.5 MB), no
script, font or style is fetched from anywhere. The colours are the figures' own palette, ``STATE_COLORS``
(Okabe-Ito, readable with any colour vision), unless ``palette`` gives others: a dict from state names
(``STATE_COLORS``' keys: ``"done"``, ``"now"``, ``"gap"``, ...) to ``#RRGGBB`` colours. ``recolor`` applies such a
palette to a figure's plain data; ``sbd_viz.plots.animation.save_animation(..., palette=...)`` applies the same one
to the GIF, so the page and the GIF of one trace match.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from ..trace.checks import check_trace
from ..trace.data import Trace
from .blocks import block_fill
from .charts import calls_timeline
from .style import STATE_COLORS, esc, settings_line

# The Okabe-Ito colours (Okabe & Ito 2008), told apart with any colour vision; STATE_COLORS draws on them.
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000")
_HEX = re.compile(r"#[0-9A-Fa-f]{6}\Z")


def check_palette(palette) -> dict[str, str]:
    """``palette`` as a full state -> colour dict (``STATE_COLORS`` where it says nothing); None is
    ``STATE_COLORS``. States that share a colour in ``STATE_COLORS`` must get one colour (a figure cannot tell them
    apart to recolour them differently)."""
    if palette is None:
        return dict(STATE_COLORS)
    if not isinstance(palette, dict):
        raise ValueError(f"palette: must be a dict state -> '#RRGGBB', got {type(palette).__name__}")
    unknown = sorted(set(palette) - set(STATE_COLORS))
    if unknown:
        raise ValueError(f"palette: unknown state {unknown[0]!r}; the states are {', '.join(STATE_COLORS)}")
    for state, color in palette.items():
        if not isinstance(color, str) or not _HEX.match(color):
            raise ValueError(f"palette: {state!r} must be a colour '#RRGGBB', got {color!r}")
    full = {**STATE_COLORS, **palette}
    for a in STATE_COLORS:
        for b in STATE_COLORS:
            if a < b and STATE_COLORS[a].upper() == STATE_COLORS[b].upper() and full[a].upper() != full[b].upper():
                raise ValueError(
                    f"palette: {a!r} and {b!r} share a colour in the figures, so they must get one "
                    f"colour, got {full[a]} and {full[b]}"
                )
    return full


def recolor(data: Any, palette) -> Any:
    """A copy of ``data`` (a figure's plain data: dicts, lists, strings) with every ``STATE_COLORS`` colour replaced
    by ``palette``'s colour for that state; ``palette`` None returns ``data`` unchanged."""
    if palette is None:
        return data
    full = check_palette(palette)
    swap = {STATE_COLORS[s].upper(): full[s] for s in STATE_COLORS if STATE_COLORS[s].upper() != full[s].upper()}
    if not swap:
        return data
    pattern = re.compile("|".join(re.escape(c) for c in swap), re.IGNORECASE)

    def walk(value):
        if isinstance(value, str):
            return pattern.sub(lambda m: swap[m.group(0).upper()], value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(data)


def _figure(fig: go.Figure, palette) -> go.Figure:
    return go.Figure(recolor(fig.to_dict(), palette)) if palette is not None else fig


def save_page(
    trace: Trace, path: str | Path | None = None, palette: dict | None = None, title: str | None = None
) -> str:
    """One offline HTML file of ``trace``: its settings, the block fill (one frame per call) and the calls timeline,
    plotly.js inlined once, in ``palette`` (default ``STATE_COLORS``, Okabe-Ito). Written to ``path`` if given;
    returns the HTML."""
    trace = check_trace(trace)
    if not trace.steps:
        raise ValueError("trace: has no calls to draw")
    palette = None if palette is None else check_palette(palette)
    fill, timeline = _figure(block_fill(trace), palette), _figure(calls_timeline(trace), palette)
    title = title or f"{trace.config['decoder']} decode"
    parts = [
        fill.to_html(full_html=False, include_plotlyjs=True, auto_play=False, include_mathjax=False),
        timeline.to_html(full_html=False, include_plotlyjs=False, include_mathjax=False),
    ]
    page = (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{esc(title)}</title></head>\n<body style="
        f"'font-family:DejaVu Sans Mono,Menlo,Consolas,monospace'><h3>{esc(title)}</h3>"
        f"<p>{esc(settings_line(trace))}</p><b>prompt</b><pre style='white-space:pre-wrap'>{esc(trace.prompt)}</pre>"
        f"<b>output</b><pre style='white-space:pre-wrap'>{esc(trace.text)}</pre>{''.join(parts)}</body></html>\n"
    )
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page
