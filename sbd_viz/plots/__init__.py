"""Plotly pictures of traces: pure functions of plain trace data, returning figures or HTML strings.

The figures live in sibling modules and are all reached from here (``block_fill``, ``calls_timeline``,
``compare_decoders``, ``tradeoff``, ...). This module adds the offline HTML export: ``save_html`` and ``trace_html``
(a trace's Jupyter view). Which module draws which figure: docs/figures.md.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from ..trace.data import Trace
from ..trace.labels import first_difference
from ..trace.words import measures
from .animation import save_animation
from .blocks import block_fill, block_fill_spec, entropy_heatmap
from .charts import calls_timeline, compare, per_call_counts, roofline
from .gamma_strip import gamma_strip
from .html_export import save_page
from .ladder_figure import gamma_ladder_figure as gamma_ladder
from .masks import attention_mask
from .order import commit_order
from .side_by_side import compare_decoders, decoder_rows
from .style import (
    CALL_SCALE,
    ENTROPY_SCALE,
    FONT,
    MASK_GLYPH,
    RULE_COLORS,
    STATE_COLORS,
    STATE_LABELS,
    STATES,
    VERIFIED_COLOR,
    VERIFIED_DASHES,
    VERIFIED_LABEL,
    VERIFIED_STATES,
    esc,
    settings_line,
)
from .tradeoff import decoder_tradeoff, sweep_frame, tradeoff

__all__ = [
    "CALL_SCALE",
    "ENTROPY_SCALE",
    "FONT",
    "MASK_GLYPH",
    "RULE_COLORS",
    "STATES",
    "STATE_COLORS",
    "STATE_LABELS",
    "VERIFIED_COLOR",
    "VERIFIED_DASHES",
    "VERIFIED_LABEL",
    "VERIFIED_STATES",
    "attention_mask",
    "block_fill",
    "block_fill_spec",
    "calls_timeline",
    "commit_order",
    "compare",
    "compare_decoders",
    "decoder_rows",
    "decoder_tradeoff",
    "entropy_heatmap",
    "first_difference",
    "gamma_ladder",
    "gamma_strip",
    "per_call_counts",
    "roofline",
    "save_animation",
    "save_html",
    "save_page",
    "sweep_frame",
    "trace_html",
    "tradeoff",
]


# -- HTML export ------------------------------------------------------------------------
_CSS = (
    "<style>.sbd-trace{font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;font-size:13px;color:#222}"
    ".sbd-trace pre{white-space:pre-wrap;background:#F6F6F6;padding:6px;margin:4px 0;max-height:9em;"
    "overflow:auto}.sbd-trace td{padding:1px 10px 1px 0;vertical-align:top}</style>"
)


def _header_html(trace: Trace) -> str:
    """The page's head: the settings, then the decode's measures (``summary.measures``), the gap fills listed."""
    fills = trace.gap_fills()
    kept = sum(g.kept for g in fills)
    listed = "".join(
        f"<br>call {g.call}, block {g.block}, slot {g.slot} (gap {g.gap}): {esc(g.state)}"
        + ("" if g.kept else " (after the stop: discarded)")
        for g in fills[:8]
    )
    listed += "<br>…" if len(fills) > 8 else ""
    rows = [("settings", esc(settings_line(trace)))]
    for m in measures(trace):
        text = esc(m.value) + (f" · {esc(m.note)}" if m.note else "")
        if m.label == "gap fills":
            text += (f" ({len(fills) - kept} more discarded by the stop)" if len(fills) > kept else "") + listed
        rows.append((m.label, text))
    table = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    prompt = trace.prompt if len(trace.prompt) <= 2000 else trace.prompt[:2000] + "…"
    return (
        f"{_CSS}<div class='sbd-trace'><b>prompt</b><pre>{esc(prompt)}</pre>"
        f"<b>output</b><pre>{esc(trace.text)}</pre><table>{table}</table></div>"
    )


def _figure_html(fig: go.Figure) -> str:
    # plotly.js inline, never from a CDN: the page must work offline.
    return fig.to_html(full_html=False, include_plotlyjs=True, auto_play=False, include_mathjax=False)


def save_html(trace_or_fig: Trace | go.Figure, path: str | Path | None = None) -> str:
    """A self-contained offline page (plotly.js inline); written to ``path`` if given; returns the HTML."""
    if isinstance(trace_or_fig, Trace):
        header, fig, title = _header_html(trace_or_fig), block_fill(trace_or_fig), "SBD trace"
    elif isinstance(trace_or_fig, go.Figure):
        header, fig, title = "", trace_or_fig, "sbd_viz figure"
    else:
        raise ValueError(f"trace_or_fig: must be a Trace or a plotly Figure, got {type(trace_or_fig).__name__}")
    page = (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
        f"<body>{header}{_figure_html(fig)}</body></html>\n"
    )
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page


def trace_html(trace: Trace) -> str:
    """HTML fragment for Jupyter: header plus the block-fill animation, with one inline plotly.js copy."""
    figure = _figure_html(block_fill(trace)) if trace.steps else ""  # a repr must not raise
    return f"<div>{_header_html(trace)}{figure}</div>"
