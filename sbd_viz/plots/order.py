"""The decode-order picture: commit step against position, several decodes on one shared step axis.

``commit_order(traces)`` draws, for each decode, a point per output token at (its position in the output, the call
that committed it): left to right one token per call is the diagonal (drawn grey, dashed), a call that commits
several tokens is a horizontal run, and a gap fill (a commit made right of a still-masked slot) is an open marker.
Every decode shares the step axis, so a faster decode sits lower. Each legend entry names the decode with its
Kendall τ and out-of-order rate (``sbd_viz.analysis.order``).

Reading it without a browser: ``fig.data[i]`` (i < number of decodes) is decode i's points, ``x`` the output index,
``y`` the call, ``customdata`` each point's gap; ``fig.layout.meta["order"]`` holds ``order_rows``' rows.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..analysis.order import kept_commits, order_rows, trace_label
from ..trace.data import Trace
from ..trace.labels import output_labels
from .style import RULE_COLORS, common_layout, token_html


def _labelled(traces, labels) -> list[tuple[str, Trace]]:
    if isinstance(traces, Trace):
        traces = [traces]
    if isinstance(traces, dict):
        labels, traces = list(traces), list(traces.values())
    traces = list(traces)
    if not traces or not all(isinstance(t, Trace) for t in traces):
        raise ValueError("traces: need one or more sbd_viz Traces (a Trace, a list, or a dict label -> Trace)")
    labels = [trace_label(t) for t in traces] if labels is None else list(labels)
    if len(labels) != len(traces):
        raise ValueError(f"labels: need one per trace ({len(traces)}), got {len(labels)}")
    return list(zip(labels, traces))


def commit_order(traces, labels=None) -> go.Figure:
    """Commit step (the call) against output position for each of ``traces`` (a Trace, a list, or a dict label ->
    Trace), all on one step axis; gap fills are open markers; the grey diagonal is one token per call, left to
    right. ``labels`` name the decodes (default: the decoder and its γ)."""
    pairs = _labelled(traces, labels)
    rows = order_rows([t for _, t in pairs], [label for label, _ in pairs])
    fig = go.Figure()
    for i, ((label, trace), row) in enumerate(zip(pairs, rows)):
        kept, shown = kept_commits(trace), output_labels(trace)
        tau = "n/a" if row["kendall_tau"] != row["kendall_tau"] else f"{row['kendall_tau']:.2f}"
        rate = "n/a" if row["out_of_order_rate"] != row["out_of_order_rate"] else f"{row['out_of_order_rate']:.0%}"
        color = RULE_COLORS[i % len(RULE_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=[k.index for k in kept],
                y=[k.step.call for k in kept],
                customdata=[k.commit.gap for k in kept],
                mode="lines+markers",
                name=f"{label}: τ = {tau}, {rate} out of order",
                line=dict(color=color, width=1),
                marker=dict(
                    color=color,
                    size=8,
                    line=dict(color=color, width=2),
                    symbol=["circle-open" if k.commit.gap else "circle" for k in kept],
                ),
                hovertext=[
                    f"{label} · output token {k.index}: {token_html(shown[k.index][0])}<br>committed by call "
                    f"{k.step.call} (block {k.step.block}, slot {k.commit.slot}"
                    + (f", gap {k.commit.gap}: a gap fill)" if k.commit.gap else ")")
                    for k in kept
                ],
                hovertemplate="%{hovertext}<extra></extra>",
            )
        )
    longest = max((t.n_tokens for _, t in pairs), default=0)
    fig.add_trace(
        go.Scatter(
            x=[0, max(longest - 1, 0)],
            y=[0, max(longest - 1, 0)],
            mode="lines",
            name="left to right, one token per call",
            hoverinfo="skip",
            line=dict(color="#999999", width=1, dash="dash"),
        )
    )
    fig.update_layout(
        **common_layout(
            title=dict(text="Decode order: which call committed each output token (open marker: gap fill)"),
            xaxis=dict(title=dict(text="position in the output"), gridcolor="#EEEEEE", zeroline=False),
            yaxis=dict(
                title=dict(text="call (commit step)"),
                gridcolor="#EEEEEE",
                zeroline=False,
                range=[-0.8, max((t.nfe for _, t in pairs), default=1) - 0.2],
            ),  # room for markers on call 0
            legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
            height=420 + 22 * len(pairs),
            margin=dict(l=60, r=20, t=50, b=80),
            meta=dict(order=rows),
        )
    )
    return fig
