"""What every ``sbd_viz`` figure shares: one colour legend (Okabe-Ito, colour-blind safe), the block-fill
state bands, and small HTML and layout helpers. The figures themselves are in ``sbd_viz.plots`` (the public face)
and the sibling modules it gathers (``plots.blocks``, ``plots.charts``, ...)."""

from __future__ import annotations

import html
import re
from typing import Any

import plotly.graph_objects as go

from ..trace.data import Step, Trace, drafts_checked
from ..trace.labels import REPLACEMENT, token_label, visible

STATES = ("done", "now", "masked", "future")
STATE_COLORS = {
    "done": "#56B4E9",  # sky blue: committed by an earlier call
    "now": "#E69F00",  # orange: committed by this call
    "masked": "#A6A6A6",  # grey (legend swatch); cells are shaded with ENTROPY_SCALE
    "future": "#F2F2F2",  # near white: block not started yet
    "gap": "#000000",  # outline of a gap-fill commit
    "diff": "#D55E00",  # vermillion: where two runs first differ
    "corrected": "#CC79A7",  # reddish purple: verified decoding wrote NTP's token over a rejected draft
    "dropped": "#F3D3E5",  # pale of the same: a draft a rollback discarded (built on the rejected one)
    "rollback": "#D55E00",  # timeline marker of a call that rejected a draft
    "check_only": "#009E73",  # timeline marker of a call spent only on checking drafts
    "renoised": "#CC79A7",  # reddish purple: outline of a canvas slot whose accepted token was taken back
}
VERIFIED_STATES = STATES + ("corrected", "dropped")  # the block-fill states of a verified trace
CANVAS_STATES = STATES + ("renoised",)  # a canvas trace's: a renoised cell is grey again, outlined
STATE_LABELS = {
    "done": "committed before",
    "now": "committed in this call",
    "masked": "still masked",
    "future": "not started",
    "corrected": "NTP's token over a rejected draft",
    "dropped": "draft dropped by a rollback",
    "renoised": "accepted, then renoised (outlined)",
}
ColorScale = list[list[Any]]  # Plotly's colour scale: [[position, colour], ...]
ENTROPY_SCALE: ColorScale = [[0.0, "#E3E3E3"], [1.0, "#4A4A4A"]]  # masked slots: lighter = lower entropy
CALL_SCALE: ColorScale = [[0.0, "#DCEBF7"], [1.0, "#0072B2"]]  # tokens committed by a token's call: 1 = lightest
# calls in order, on one scale for every decoder of a comparison: the first call lightest (yellow), the last darkest
# (purple); Viridis, perceptually even and readable without colour vision, never repeating a shade
STEP_SCALE = [
    [i / 9, c]
    for i, c in enumerate(
        ("#FDE725", "#B5DE2B", "#6ECE58", "#35B779", "#1F9E89", "#26828E", "#31688E", "#3E4989", "#482878", "#440154")
    )
]
RULE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#F0E442")
VERIFIED_COLOR = "#000000"  # the verified line: black like NTP (its text is NTP's), dashed, diamond markers
VERIFIED_DASHES = ("dash", "dot", "dashdot", "longdash")  # several verified lines (e.g. one per block size)
VERIFIED_LABEL = "verified (lossless)"
MASK_GLYPH = "▒"
ROLLBACK_MARK = "↺"  # verified decoding: a call that rejected a draft (frame titles, the slider's call labels)
CHECK_ONLY_MARK = "✓"  # verified decoding: a call spent only on checking drafts
MARK_LABELS = {
    ROLLBACK_MARK: "a call that rejected a draft (rollback)",
    CHECK_ONLY_MARK: "a call that only checked drafts",
}
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
FIT_WIDTH = 880  # the widest a figure is drawn (pixels): JupyterLab's output area is about 900 to 1000 px wide
MIN_CELL = 30  # the narrowest a token cell is drawn (pixels); a row needing narrower cells wraps


def text_px(text: str, size: int = 12) -> float:
    """About how wide ``text`` is drawn in ``FONT`` at ``size`` px (a monospace glyph is 0.6 em wide)."""
    return 0.61 * size * len(text)


# Block-fill cells encode their state as a band of z (one colour per band, entropy inside the masked band).
Z = {"future": 0.5, "done": 1.5, "now": 2.5}
STATE_SCALE: ColorScale = [
    [0.0, STATE_COLORS["future"]],
    [0.25, STATE_COLORS["future"]],
    [0.25, STATE_COLORS["done"]],
    [0.5, STATE_COLORS["done"]],
    [0.5, STATE_COLORS["now"]],
    [0.75, STATE_COLORS["now"]],
    [0.75, ENTROPY_SCALE[0][1]],
    [1.0, ENTROPY_SCALE[1][1]],
]


# A verified trace adds two bands above the masked one; an unverified trace keeps the scale above unchanged.
Z_VERIFIED = {**Z, "corrected": 4.5, "dropped": 5.5}
VERIFIED_SCALE: ColorScale = [
    [round(z / 6, 6), color]
    for z, color in (
        (0, STATE_COLORS["future"]),
        (1, STATE_COLORS["future"]),
        (1, STATE_COLORS["done"]),
        (2, STATE_COLORS["done"]),
        (2, STATE_COLORS["now"]),
        (3, STATE_COLORS["now"]),
        (3, ENTROPY_SCALE[0][1]),
        (4, ENTROPY_SCALE[1][1]),
        (4, STATE_COLORS["corrected"]),
        (5, STATE_COLORS["corrected"]),
        (5, STATE_COLORS["dropped"]),
        (6, STATE_COLORS["dropped"]),
    )
]


def masked_z(entropy: float, emax: float) -> float:
    """z of a masked cell: inside the masked band (3, 4), darker with more entropy."""
    return 3.02 + 0.96 * min(entropy / emax, 1.0)


# -- small helpers ----------------------------------------------------------------------
def esc(text: str) -> str:
    return html.escape(text, quote=False)


def token_html(text: str, special=frozenset()) -> str:
    """A token in a hover: whitespace visible (a space is ␣), a special token (one of ``special``) marked, HTML
    escaped."""
    return esc(token_label(text, special))


def cell_label(text: str, n: int) -> str:
    """A cell label: whitespace visible, at most ``n`` characters, HTML escaped."""
    text = visible(text, spaces=True)
    return esc(text if len(text) <= n else text[: max(1, n - 1)] + "…")


def settings_line(trace: Trace) -> str:
    c = trace.config
    parts = [c.get("decoder", "?")]
    if "gamma" in c:  # a commit rule and its knob; NTP and the draft-and-check decoders write no γ
        parts += [f"rule {c.get('rule', '?')}", f"γ = {c.get('gamma', '?')}"]
    model = trace.model_id + (f" ({trace.model_kind})" if trace.model_kind else "")
    return " · ".join(str(p) for p in parts + [f"k = {c.get('block_size', block_size_of(trace))}", model])


def block_size_of(trace: Trace) -> int:
    return max((s.block_size for s in trace.steps), default=1)


def candidates_hover(step: Step | None, slot: int, n: int = 5, special=frozenset()) -> str:
    """A slot's top candidates, one per line: the token (special ones marked; a byte piece, which decodes alone to
    U+FFFD, with its id, so two of them can be told apart) and its probability."""
    view = step.slot_view(slot) if step else None
    if view is None:
        return ""
    return "<br>top candidates:" + "".join(
        f"<br>  {token_html(c.text, special)}{f' (id {c.token_id})' if REPLACEMENT in c.text else ''}  {c.prob:.3f}"
        for c in view.top[:n]
    )


def _outline(cells: list[tuple[float, float, Any]], inset: float = 0.1) -> dict[str, list]:
    """Rectangle paths around heatmap cells (x, y, tag), in data units so they scale with the figure."""
    xs: list[float | None] = [None]
    ys: list[float | None] = [None]
    tags: list[Any] = [None]
    for x, y, tag in cells:
        x0, x1, y0, y1 = x - 0.5 + inset, x + 0.5 - inset, y - 0.5 + inset, y + 0.5 - inset
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
        tags += [tag] * 5 + [None]
    return dict(x=xs, y=ys, customdata=tags)


def outline_trace(cells: list, color: str, **kw: Any) -> go.Scatter:
    return go.Scatter(outline_spec(cells, color, **kw))


def outline_spec(cells: list, color: str, **kw: Any) -> dict:
    """The outline trace as plain data (``block_fill_spec`` builds no graph objects)."""
    return dict(
        type="scatter",
        **_outline(cells, kw.pop("inset", 0.1)),
        mode="lines",
        hoverinfo="skip",
        line=dict(color=color, width=3),
        **{"showlegend": False, **kw},
    )


def open_slot_label(trace: Trace) -> str:
    """What an open slot is: a mask for SBD, a position not written yet for a decoder that feeds drafts causally
    (Jacobi, prompt lookup), whose input holds no mask token."""
    return "not written yet" if drafts_checked(trace.config) else STATE_LABELS["masked"]


def legend_html(
    states: tuple[str, ...] = STATES,
    masked: str = STATE_LABELS["masked"],
    marks: tuple[str, ...] = (),
    width: int = FIT_WIDTH - 40,
) -> str:
    """The state legend as lines of coloured squares: the committed states and gap fills, then the open ones, then
    the call marks the figure shows (``marks``: ``ROLLBACK_MARK``, ``CHECK_ONLY_MARK``), each group wrapped to lines
    of about ``width`` pixels. Drawn as text, not a plotly legend: heatmap cells have no legend entries, and a
    wrapping legend pushes the margins and squashes small grids. ``masked``: the open slots' label
    (``open_slot_label``)."""

    def item(state: str) -> str:
        glyph = "□" if state == "future" else "■"
        color = "#999999" if state == "future" else STATE_COLORS[state]
        label = masked if state == "masked" else STATE_LABELS[state]
        extra = " (darker = higher entropy)" if state == "masked" else ""
        return f"<span style='color:{color};font-size:17px'>{glyph}</span> {label}{extra}"

    gap = "<span style='font-size:17px'><b>□</b></span> gap fill (outlined)"
    first = [item(s) for s in ("done", "now") if s in states] + [gap]
    second = [item(s) for s in ("masked", "future", "corrected", "dropped") if s in states]
    if "renoised" in states:  # a grey cell with a coloured outline
        second.append(
            f"<span style='color:{STATE_COLORS['renoised']};font-size:17px'><b>□</b></span> {STATE_LABELS['renoised']}"
        )
    groups = [first, second] + ([[f"<b>{mark}</b> {MARK_LABELS[mark]}" for mark in marks]] if marks else [])
    return "<br>".join(line for group in groups for line in _packed(group, width))


def _packed(items: list[str], width: int) -> list[str]:
    """Legend items (markup) joined into lines of at most about ``width`` pixels each."""
    lines: list[str] = []
    line: list[str] = []
    used = 0.0
    for item in items:
        shown = text_px(re.sub(r"<[^>]+>", "", item)) + 6  # the glyph is drawn larger than the text
        if line and used + text_px("   ") + shown > width:
            lines.append("   ".join(line))
            line, used = [], 0.0
        used += (text_px("   ") if line else 0) + shown
        line.append(item)
    return lines + (["   ".join(line)] if line else [])


def entropy_bar(emax: float, length: int) -> dict:
    """The entropy colour scale as a colorbar (the cells' own heatmap encodes states, not entropy)."""
    return dict(
        type="scatter",
        x=[None],
        y=[None],
        mode="markers",
        showlegend=False,
        hoverinfo="skip",
        marker=dict(
            color=[0.0],
            colorscale=ENTROPY_SCALE,
            cmin=0.0,
            cmax=emax,
            showscale=True,
            colorbar=dict(
                title=dict(text="entropy<br>(nats)"), thickness=12, lenmode="pixels", len=length, y=1, yanchor="top"
            ),
        ),
    )


def cell_grid(z, hover, gap: tuple[int, int], text=None, **kw: Any) -> go.Heatmap:
    """A grid of cells (a block's slots, a run's tokens, a mask's entries) as a heatmap: each cell's own hover text
    (``hover``, nothing beside it), ``gap`` (x, y) pixels between cells, and ``text`` written in the cells if given;
    ``kw`` are the rest of ``go.Heatmap``'s (its colours, font, name, ...)."""
    written = {} if text is None else dict(text=text, texttemplate="%{text}")
    return go.Heatmap(
        z=z, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", xgap=gap[0], ygap=gap[1], **written, **kw
    )


def max_entropy(trace: Trace) -> float:
    return max([v.entropy for s in trace.steps for v in s.slots] + [1e-6])


def common_layout(**kw: Any) -> dict:
    return dict(
        plot_bgcolor="white",
        font=dict(family=FONT, size=12),
        hoverlabel=dict(font=dict(family=FONT, size=12), align="left"),
        **kw,
    )


def top_note(text: str, pixels_above_plot: int, left: int) -> dict:
    """A line of text a fixed number of pixels above the grid, starting near the figure's left edge."""
    return dict(
        text=text,
        xref="paper",
        yref="paper",
        x=0,
        y=1,
        xanchor="left",
        yanchor="bottom",
        xshift=10 - left,
        yshift=pixels_above_plot,
        showarrow=False,
        align="left",
        font=dict(size=12, color="#444"),
    )
