"""The list tasks' measured accuracy against parallelism beside ParallelBench's closed form
(``sbd_viz.analysis.closed_forms``): one panel per task, each decoder's measured points as a line, the closed form
for each list length dashed. A pure function of plain numbers (the bench page's JSON), so a page can draw it again
without decoding."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from .style import RULE_COLORS, common_layout

CLOSED_DASHES = ("dash", "dot", "dashdot", "longdash")


def closed_form_figure(panels: Sequence[dict], title: str = "") -> go.Figure:
    """One panel per entry of ``panels``, side by side: ``{"task": ..., "measured": [{"label": ..., "points":
    [(tokens per call, accuracy %), ...]}, ...], "closed": [{"label": ..., "points": [...]}, ...]}``. Measured
    lines are solid with markers, in ``RULE_COLORS`` order; closed forms dashed grey. Accuracy in percent,
    0 to 100, on every panel; tokens per call on a shared log scale."""
    from plotly.subplots import make_subplots

    panels = list(panels)
    if not panels:
        raise ValueError("panels: need one or more tasks to draw")
    for p in panels:
        if not isinstance(p, dict) or not {"task", "measured", "closed"} <= set(p):
            raise ValueError("panels: each must be a dict with 'task', 'measured' and 'closed'")
    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=[p["task"] for p in panels], shared_yaxes=True, horizontal_spacing=0.04
    )
    labels = list(dict.fromkeys(m["label"] for p in panels for m in p["measured"]))
    colors = {label: RULE_COLORS[i % len(RULE_COLORS)] for i, label in enumerate(labels)}
    closed_labels = list(dict.fromkeys(c["label"] for p in panels for c in p["closed"]))
    dashes = {label: CLOSED_DASHES[i % len(CLOSED_DASHES)] for i, label in enumerate(closed_labels)}
    shown = set()

    def add_line(col: int, entry: dict, hover: str, **style) -> None:  # one label's points on one panel
        pts = sorted(entry["points"])
        label = entry["label"]
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in pts],
                y=[y for _, y in pts],
                mode="lines+markers",
                name=label,
                legendgroup=label,
                showlegend=label not in shown,
                hovertemplate=hover,
                **style,
            ),
            row=1,
            col=col,
        )
        shown.add(label)

    for col, p in enumerate(panels, start=1):
        for m in p["measured"]:
            line = dict(color=colors[m["label"]], width=2, shape="hv")
            add_line(col, m, "%{x:.2f} tokens/call: %{y:.0f}%", line=line, marker=dict(size=5))
        for c in p["closed"]:
            line, marker = dict(color="#555555", width=1.5, dash=dashes[c["label"]]), dict(size=4, symbol="circle-open")
            add_line(col, c, "closed form, %{x:.2f} tokens/call: %{y:.1f}%", line=line, marker=marker)
        fig.update_xaxes(type="log", title_text="tokens per call", row=1, col=col, gridcolor="#EEEEEE")
    fig.update_yaxes(range=[-3, 103], gridcolor="#EEEEEE")
    fig.update_yaxes(title_text="accuracy (%)", row=1, col=1)
    fig.update_layout(
        **common_layout(
            width=330 * len(panels) + 220,
            height=380,
            title=title or None,
            margin=dict(l=60, r=20, t=70 if title else 40, b=50),
        )
    )
    return fig
