"""Figures beside the block fill: the calls timeline, two runs compared token by token, and the roofline
(what a call would cost on other hardware)."""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..trace.checks import check_whole
from ..trace.data import Step, Trace
from ..trace.labels import COUNT_LABELS, first_difference, output_labels
from .style import (
    CALL_SCALE,
    FIT_WIDTH,
    FONT,
    RULE_COLORS,
    STATE_COLORS,
    block_size_of,
    cell_grid,
    cell_label,
    common_layout,
    esc,
    outline_trace,
    settings_line,
    text_px,
    token_html,
)


def per_call_counts(trace: Trace) -> tuple[list[int], list[int]]:
    """Output tokens committed per call, split into in-order commits and gap fills. On a canvas, a token
    counts at the call since which its slot held an accepted token (``token_calls``), with no gap split."""
    if trace.has_canvas:
        calls = trace.token_calls()
        return [calls.count(c) for c in range(trace.nfe)], [0] * trace.nfe
    in_order, gap = [], []
    for s in trace.steps:
        kept = [c for c in s.commits if trace.kept(s, c.slot)]
        gap.append(sum(1 for c in kept if c.gap))
        in_order.append(len(kept) - gap[-1])
    return in_order, gap


def _so_far(trace: Trace) -> list[int]:
    """Tokens so far after 0, 1, ..., nfe calls."""
    totals = [0]
    for a, b in zip(*per_call_counts(trace)):
        totals.append(totals[-1] + a + b)
    return totals


def _rollback_hover(step: Step) -> str:
    check = step.rejected[0] if step.rejected else None
    said = (
        ""
        if check is None
        else (
            f": draft {token_html(check.text)} rejected, NTP wanted "
            f"{token_html(check.ntp_text)} (p = {check.ntp_prob:.3f})"
        )
    )
    assert step.rollback is not None, "a call with a rollback"
    return f"call {step.call}: rollback at block {step.block} slot {step.rollback.slot}{said}"


def calls_timeline(trace: Trace, ntp_trace: Trace | None = None) -> go.Figure:
    """Tokens so far vs calls (line) against next-token prediction, and tokens committed per call (bars).

    A verified trace adds markers above the bars (``trace.meta["role"]``): ``"rollback"`` at each call that
    rejected a draft, ``"check_only"`` at each call spent only on checking drafts."""
    in_order, gap = per_call_counts(trace)
    calls, grey = list(range(trace.nfe)), dict(color="#777777", width=2, dash="dash")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
    fig.add_trace(
        go.Scatter(
            x=list(range(trace.nfe + 1)),
            y=_so_far(trace),
            name="tokens so far",
            mode="lines+markers",
            line=dict(color=RULE_COLORS[0], width=3),
            marker=dict(size=5),
            hovertemplate="%{x} calls: %{y} tokens<extra></extra>",
        ),
        row=1,
        col=1,
    )
    if ntp_trace is not None:  # the NTP line: its run, else next-token prediction's one token per call
        ntp_hover = "NTP, %{x} calls: %{y} tokens<extra></extra>"
        ntp = dict(x=list(range(ntp_trace.nfe + 1)), y=_so_far(ntp_trace), name="NTP run", hovertemplate=ntp_hover)
    else:
        ntp = dict(x=[0, trace.nfe], y=[0, trace.nfe], name="NTP: 1 token per call", hoverinfo="skip")
    fig.add_trace(go.Scatter(mode="lines", line=grey, **ntp), row=1, col=1)
    first = "accepted (in the output)" if trace.has_canvas else "committed in order"
    fig.add_trace(
        go.Bar(
            x=calls,
            y=in_order,
            name=first,
            marker=dict(color=STATE_COLORS["now"]),
            hovertemplate="call %{x}: %{y} in order<extra></extra>",
        ),
        row=2,
        col=1,
    )
    # None, not 0: a zero-height bar would still draw its outline.
    fig.add_trace(
        go.Bar(
            x=calls,
            y=[g or None for g in gap],
            name="gap fills",
            marker=dict(
                color=STATE_COLORS["now"], line=dict(color=STATE_COLORS["gap"], width=2), pattern=dict(shape="/")
            ),
            hovertemplate="call %{x}: %{y} gap fills<extra></extra>",
        ),
        row=2,
        col=1,
    )
    # Verified decoding: mark, above each call's bar, the calls that rejected a draft and those spent only on checking.
    for role, name, calls_of, symbol in (
        ("rollback", "rollback (a draft rejected)", [s.call for s in trace.rollbacks()], "x"),
        ("check_only", "checking only (no block)", [s.call for s in trace.steps if s.check_only], "diamond-open"),
    ):
        if calls_of:
            hover = [
                _rollback_hover(trace.steps[c])
                if role == "rollback"
                else f"call {c}: checking only, {len(trace.steps[c].checks)} draft(s) checked"
                for c in calls_of
            ]
            fig.add_trace(
                go.Scatter(
                    x=calls_of,
                    y=[in_order[c] + gap[c] + 0.35 for c in calls_of],
                    name=name,
                    mode="markers",
                    meta=dict(role=role),
                    hovertext=hover,
                    hovertemplate="%{hovertext}<extra></extra>",
                    marker=dict(
                        symbol=symbol, size=10, color=STATE_COLORS[role], line=dict(width=2, color=STATE_COLORS[role])
                    ),
                ),
                row=2,
                col=1,
            )
    renoised = [len(s.renoised) for s in trace.steps]
    if any(renoised):  # a canvas trace: the accepted slots each call took back, below the axis
        fig.add_trace(
            go.Bar(
                x=calls,
                y=[-n or None for n in renoised],
                name="renoised (taken back)",
                marker=dict(color="#FFFFFF", line=dict(color=STATE_COLORS["renoised"], width=2)),
                customdata=renoised,
                meta=dict(role="renoised"),
                hovertemplate="call %{x}: %{customdata} accepted slot(s) renoised<extra></extra>",
            ),
            row=2,
            col=1,
        )
    k = block_size_of(trace)
    for s in trace.steps if k > 1 else ():  # where a block starts, the per-call counts restart
        if s.step == 0 and s.call:
            fig.add_vline(x=s.call - 0.5, line=dict(color="#CCCCCC", width=1, dash="dot"), row=2, col=1)
    fig.update_layout(
        **common_layout(
            barmode="stack",
            width=820,
            height=520,
            margin=dict(l=70, r=30, t=75, b=90),
            # the settings on a line of their own: on one line with the counts they ran past the figure's edge
            title=dict(
                text=f"{trace.n_tokens} tokens in {trace.nfe} calls · {trace.tokens_per_call:.2f} "
                f"{COUNT_LABELS[(True, True)]}<br><sup>{esc(settings_line(trace))}</sup>",
                font=dict(size=13),
            ),
            legend=dict(orientation="h", x=0, y=-0.12, yanchor="top", traceorder="normal"),
        )
    )
    fig.update_yaxes(title_text="tokens so far", gridcolor="#EEEEEE", row=1, col=1)
    fig.update_yaxes(
        title_text="tokens the call wrote",
        gridcolor="#EEEEEE",
        row=2,
        col=1,
        range=[-max(renoised) - 0.5 if any(renoised) else 0, k + 0.5],
    )
    fig.update_xaxes(title_text="model calls", row=2, col=1)
    return fig


# -- two runs side by side --------------------------------------------------------------
def _token_at(texts: tuple[str, ...], char: int) -> int | None:
    """Index of the token holding character ``char`` of the joined texts (the last token if past the end)."""
    ends = list(accumulate(len(t) for t in texts))
    return min(bisect_right(ends, char), len(texts) - 1) if texts else None


def _token_row(label: str, trace: Trace, width: int, n_lines: int, chars: int = 5) -> go.Heatmap:
    """A run's output as wrapped cells, each shaded by how many tokens its call committed."""
    calls = trace.token_calls()
    size = {c: calls.count(c) for c in set(calls)}
    z: list[list[int | None]] = [[None] * width for _ in range(n_lines)]
    text, hover = [[""] * width for _ in range(n_lines)], [[""] * width for _ in range(n_lines)]
    for i, ((tok, note), call) in enumerate(zip(output_labels(trace), calls)):
        row, col = divmod(i, width)
        z[row][col], text[row][col] = size[call], cell_label(tok, chars)
        hover[row][col] = (
            f"<b>{esc(label)}</b> token {i}: <b>{esc(tok)}</b>"
            + (f" ({esc(note)})" if note else "")
            + f"<br>committed in call {call} with {size[call] - 1} other token(s)"
        )
    font = dict(family=FONT, size=11)
    return cell_grid(z, hover, (2, 4), text, coloraxis="coloraxis", hoverongaps=False, name=label, textfont=font)


def compare(trace_a: Trace, trace_b: Trace, labels: tuple[str, str] = ("A", "B"), width: int = 16) -> go.Figure:
    """Two runs stacked: tokens shaded by how many tokens their call committed; the first difference outlined.

    ``fig.layout.meta["first_difference"]`` is the character index where the outputs first differ (or None).
    """
    if len(labels) != 2:
        raise ValueError(f"labels: need two labels, got {labels!r}")
    check_whole(width, "width", 1)
    runs = list(zip(labels, (trace_a, trace_b)))
    diff = first_difference("".join(trace_a.output_texts), "".join(trace_b.output_texts))
    lines = [max(1, math.ceil(t.n_tokens / width)) for _, t in runs]
    cell = min(58.0, (FIT_WIDTH - 120) / width)  # pixels per token: at most FIT_WIDTH wide
    chars = max(1, min(5, int((cell - 4) // text_px("x", 11))))
    fig = make_subplots(
        rows=2,
        cols=1,
        row_heights=lines,
        vertical_spacing=0.1 + 0.2 / sum(lines),
        subplot_titles=[
            f"{esc(label)}: {t.nfe} calls · {t.n_tokens} tokens · {t.tokens_per_call:.2f} {COUNT_LABELS[(True, True)]}"
            for label, t in runs
        ],
    )
    for r, (label, t) in enumerate(runs, start=1):
        fig.add_trace(_token_row(label, t, width, lines[r - 1], chars), row=r, col=1)
        at = _token_at(t.output_texts, diff) if diff is not None else None
        marks = [] if at is None else [(at % width, at // width, (label, at))]
        fig.add_trace(
            outline_trace(
                marks,
                STATE_COLORS["diff"],
                inset=0.04,
                showlegend=r == 1 and bool(marks),
                name=f"texts first differ (char {diff})",
            ),
            row=r,
            col=1,
        )
        fig.update_yaxes(
            range=[lines[r - 1] - 0.5, -0.5],
            tickvals=list(range(lines[r - 1])),
            fixedrange=True,
            ticktext=[f"tok {i * width}" for i in range(lines[r - 1])],
            row=r,
            col=1,
        )
        fig.update_xaxes(range=[-0.5, width - 0.5], showticklabels=False, fixedrange=True, row=r, col=1)
    note = "the texts are identical" if diff is None else f"texts first differ at character {diff}"
    fig.update_layout(
        **common_layout(
            # each run's settings under the title: beside its counts they ran past the figure's edge
            title=dict(
                text=f"{esc(labels[0])} vs {esc(labels[1])}: {note}"
                + "".join(f"<br><sup>{esc(label)}: {esc(settings_line(t))}</sup>" for label, t in runs),
                font=dict(size=14),
            ),
            width=int(120 + width * cell),
            height=220 + 30 * sum(lines),
            margin=dict(l=80, r=40, t=110, b=50),
            coloraxis=dict(
                colorscale=CALL_SCALE,
                cmin=1,
                cmax=max(block_size_of(trace_a), block_size_of(trace_b), 2),
                colorbar=dict(title=dict(text="tokens<br>in its call"), thickness=12, len=0.8),
            ),
            legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"),
            meta=dict(first_difference=diff),
        )
    )
    for note in fig.layout.annotations:  # subplot titles: left aligned, small
        note.update(x=0, xanchor="left", font=dict(size=12))
    return fig


# -- roofline: what a call would cost on other hardware ---------------------------------
def roofline(
    hardware: Any = ("h100-fp8", "h100-bf16", "a100-bf16"),
    model: Any = "paper-8b",
    batches: Any = (1, 16),
    kv_len: int = 16,
    max_tokens: int = 1024,
    mode: str = "corrected",
    measured: Any = None,
    measured_label: str = "measured",
) -> go.Figure:
    """Seconds per model call against tokens in the call (log-log): one line per (hardware, batch).

    ``hardware`` and ``model`` are names or records of ``sbd_viz.analysis.roofline`` (``model`` may also be
    an ``SBDModel`` or a config); every call has ``kv_len`` cached tokens and ``batch`` sequences of
    that many tokens each. A diamond marks each line's knee: the fewest tokens at which compute
    takes over from memory (``roofline.knee_tokens``; absent beyond ``max_tokens``). ``measured``:
    optional ``(tokens, seconds)`` pairs, e.g. block calls timed on this machine, drawn as black
    points. Reading it without a browser: ``trace.meta["role"]`` is ``"line"``, ``"knee"`` or
    ``"measured"``; lines and knees also carry ``hardware``, ``batch`` (and ``tokens`` for a knee).
    """
    from ..analysis import roofline as rf

    asked = [hardware] if isinstance(hardware, (str, rf.Hardware)) else list(hardware)
    if not asked:
        raise ValueError(f"hardware: give at least one of {list(rf.hardware_names())}")
    hws, shape = [rf.get_hardware(h) for h in asked], rf.get_model(model)
    batches = [batches] if isinstance(batches, int) else list(batches)
    if not batches:
        raise ValueError("batches: give at least one batch size")
    check_whole(max_tokens, "max_tokens", 2)
    tokens = sorted({max(1, round(max_tokens ** (i / 60))) for i in range(61)})  # even steps on a log axis
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    fig = go.Figure()
    for i, hw in enumerate(hws):
        color = RULE_COLORS[i % len(RULE_COLORS)]
        for j, b in enumerate(batches):
            name = f"{hw.name} · batch {b}"
            seconds = [rf.forward_time(q, kv_len, b, hw, shape, mode) for q in tokens]
            fig.add_trace(
                go.Scatter(
                    x=tokens,
                    y=seconds,
                    name=name,
                    mode="lines",
                    line=dict(color=color, width=2, dash=dashes[j % 5]),
                    meta=dict(role="line", hardware=hw.name, batch=b),
                    hovertemplate=f"{esc(name)}<br>%{{x}} tokens: %{{y:.3s}}s per call<extra></extra>",
                )
            )
            knee = rf.knee_tokens(b, hw, shape, kv_len, mode, max_tokens)
            if knee is not None:
                fig.add_trace(
                    go.Scatter(
                        x=[knee],
                        y=[rf.forward_time(knee, kv_len, b, hw, shape, mode)],
                        name=f"knee · {name}",
                        mode="markers",
                        showlegend=False,
                        meta=dict(role="knee", hardware=hw.name, batch=b, tokens=knee),
                        marker=dict(symbol="diamond", size=11, color=color, line=dict(color="#000000", width=1)),
                        hovertemplate=f"{esc(name)}: compute-bound from {knee} tokens<extra></extra>",
                    )
                )
    if measured is not None:
        points = list(measured)
        if not points or not all(
            isinstance(p, (tuple, list))
            and len(p) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in p)
            for p in points
        ):
            raise ValueError(f"measured: expected (tokens, seconds) pairs of positive numbers, got {points!r:.200}")
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                name=measured_label,
                mode="markers",
                meta=dict(role="measured"),
                marker=dict(symbol="circle", size=9, color="#000000"),
                hovertemplate=f"{esc(measured_label)}<br>%{{x}} tokens: %{{y:.3s}}s<extra></extra>",
            )
        )
    fig.update_layout(
        **common_layout(
            title=dict(
                text=f"Time per call: {esc(shape.name)}, {kv_len} cached tokens, {mode} shapes · ◆ compute takes over",
                font=dict(size=13),
            ),
            width=820,
            height=520,
            legend=dict(title="hardware · batch"),
            xaxis=dict(title="tokens in the call (per sequence)", type="log", gridcolor="#EEEEEE"),
            yaxis=dict(title="seconds per call", type="log", gridcolor="#EEEEEE"),
        )
    )
    return fig
