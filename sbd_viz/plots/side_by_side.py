"""Several decoders on one prompt, side by side: ``compare_decoders`` (one row per decoder, its output token by
token in the same columns for every decoder, each cell shaded by the call that wrote it; below, calls, tokens per call
and whether each wrote greedy NTP's text) and ``decoder_rows``, its numbers as plain rows.

Every output token is drawn, in lines of ``line`` tokens (each line stacks the decoders' rows). Reading the figure
without a browser: ``fig.layout.meta["rows"]`` is ``decoder_rows``' output, ``fig.layout.meta["calls"]`` each
decoder's call per output token, ``fig.data[i]`` (i < number of decoders) is decoder i's heatmap (its cells' texts,
read row by row, spell its output; its z, the call that wrote each), ``fig.data[n]`` the bars of calls and
``fig.data[n + 1]`` the lines that end each call's run (``meta["role"] == "call_edges"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..decoders.ntp import NTP
from ..decoders.registry import get_decoder
from ..trace.data import Trace
from ..trace.labels import COUNT_LABELS, output_labels
from .style import FIT_WIDTH, MIN_CELL, STEP_SCALE, cell_label, common_layout, esc, text_px


def label_of(trace: Trace) -> str:
    """A decoder's name as the comparison shows it: its spec's label, or its variant's (SBD's "verified SBD"); the
    config's decoder name for a decoder this process has not registered."""
    decoder = str(trace.config.get("decoder"))
    try:
        return get_decoder(decoder).label_of(trace.config)
    except ValueError:
        return decoder


def _labelled(traces) -> list[tuple[str, Trace]]:
    pairs = list(traces.items()) if isinstance(traces, Mapping) else [(label_of(t), t) for t in traces]
    if not pairs or not all(isinstance(t, Trace) for _, t in pairs):
        raise ValueError("traces: need one or more sbd_viz Traces (a list, or a dict label -> Trace)")
    if len({t.prompt for _, t in pairs}) != 1:
        raise ValueError("traces: must all decode the same prompt")
    return pairs


def decoder_rows(traces: Sequence[Trace] | Mapping[str, Trace], ntp: Trace | None = None) -> list[dict]:
    """One row per decoder: label, decoder, calls, tokens, tokens per call, ``equals_greedy`` (the text equals
    ``ntp``'s, the trace among ``traces`` whose decoder is ``ntp`` when not given; None without one), slots
    remasked (``renoised``) and rollbacks."""
    pairs = _labelled(traces)
    if ntp is None:
        ntp = next((t for _, t in pairs if t.config.get("decoder") == NTP.name), None)
    return [
        {
            "label": label,
            "decoder": t.config.get("decoder"),
            "calls": t.nfe,
            "tokens": t.n_tokens,
            "tokens_per_call": round(t.tokens_per_call, 2),
            "equals_greedy": None if ntp is None else t.text == ntp.text,
            "renoised": sum(len(s.renoised) for s in t.steps),
            "rollbacks": len(t.rollbacks()),
        }
        for label, t in pairs
    ]


LABEL_CHARS = 8  # the longest cell label drawn whole (a longer token ends in …; its hover has it all)
CELL_FONT = 11


def _row(trace: Trace, label: str, line: int, lines: int, decoders: int, index: int, chars: int):
    """(z, text, hover) of one decoder's heatmap: its output token i in column i % line of the line i // line, on
    the line's row for this decoder, shaded by the call that wrote it; every other row None (transparent), so the
    decoders' heatmaps overlay."""
    labels, calls = output_labels(trace), trace.token_calls()
    n_rows = lines * (decoders + 1)
    z: list[list[int | None]] = [[None] * line for _ in range(n_rows)]
    text = [[""] * line for _ in range(n_rows)]
    hover = [[""] * line for _ in range(n_rows)]
    blocks = {s.call: s.block for s in trace.steps}
    for i, ((shown, note), call) in enumerate(zip(labels, calls)):
        r, c = (i // line) * (decoders + 1) + index, i % line
        z[r][c] = call
        text[r][c] = cell_label(shown, chars)
        hover[r][c] = (
            f"{esc(label)} · output token {i}: {esc(shown)}"
            + (f" ({esc(note)})" if note else "")
            + f"<br>written by call {call} (block {blocks.get(call, '?')})"
        )
    return z, text, hover


def _call_edges(pairs, line: int) -> dict:
    """A dark line between two neighbouring cells of a row written by different calls: where one call's run ends,
    however close their shades."""
    xs, ys, n = [], [], len(pairs)
    for index, (_, t) in enumerate(pairs):
        calls = t.token_calls()
        for i in range(1, len(calls)):
            if calls[i] != calls[i - 1] and i % line:
                row = (i // line) * (n + 1) + index
                xs += [i % line - 0.5, i % line - 0.5, None]
                ys += [row - 0.42, row + 0.42, None]
    return dict(
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color="#222222", width=2),
        hoverinfo="skip",
        showlegend=False,
        meta=dict(role="call_edges"),
    )


def compare_decoders(
    traces: Sequence[Trace] | Mapping[str, Trace], ntp: Trace | None = None, line: int | None = None
) -> go.Figure:
    """One prompt through several decoders, compared at a glance: one row per decoder, output token i in column i
    for every decoder (lines of ``line`` tokens, the decoders' rows stacked in each, every row labelled), each cell
    shaded by the call that wrote it on one sequential scale for all (``STEP_SCALE``: lighter = an earlier call, so
    a decoder that needs fewer calls stays lighter; a dark line where one call's run ends), and below, each decoder's
    calls, tokens per call and "equals greedy?". Every token is drawn; the figure is at most ``FIT_WIDTH`` wide
    (``line``: None fits as many tokens per line as there is room for). ``traces``: a list (labelled by
    ``label_of``) or a dict. ``fig.layout.meta``: ``rows`` (``decoder_rows``), ``line``, and ``calls`` (label ->
    the call that wrote each output token, ``Trace.token_calls``)."""
    if line is not None and (not isinstance(line, int) or isinstance(line, bool) or line < 1):
        raise ValueError(f"line: must be a whole number of at least 1 (or None: as many as fit), got {line!r}")
    pairs = _labelled(traces)
    rows = decoder_rows(dict(pairs), ntp)
    n, longest = len(pairs), max(t.n_tokens for _, t in pairs)
    # Pixel plan: the labels at the left, the cells sized for the longest label (at most LABEL_CHARS), the width
    # at most FIT_WIDTH.
    left = int(min(200, 24 + text_px(max((r["label"] for r in rows), key=len), 12)))
    plot_w = FIT_WIDTH - left - 30
    chars = min(LABEL_CHARS, max([len(shown) for _, t in pairs for shown, _ in output_labels(t)] + [2]))
    if line is None:
        line = max(1, min(longest, int(plot_w // max(MIN_CELL, text_px("x" * chars, CELL_FONT) + 8))))
    chars = max(1, min(chars, int((plot_w / line - 6) // text_px("x", CELL_FONT))))
    lines = max(1, -(-longest // line))
    grid_rows = lines * (n + 1)
    last = max(t.nfe for _, t in pairs) - 1
    fig = make_subplots(
        rows=2,
        cols=1,
        row_heights=[grid_rows, n + 1],
        vertical_spacing=0.3 / (grid_rows + n),
        subplot_titles=[
            "token by token · shade: the call that wrote it, lighter = earlier · dark line: a new call",
            f"calls (fewer is faster) · {COUNT_LABELS[(True, True)]}",
        ],
    )
    marks = {True: "= greedy", False: "≠ greedy", None: ""}
    for i, (label, t) in enumerate(pairs):
        z, text, hover = _row(t, label, line, lines, n, i, chars)
        fig.add_trace(
            go.Heatmap(
                z=z,
                text=text,
                texttemplate="%{text}",
                hovertext=hover,
                hoverinfo="text",
                colorscale=STEP_SCALE,
                zmin=0,
                zmax=max(1, last),
                showscale=False,
                xgap=1,
                ygap=1,
                name=label,
                textfont=dict(size=CELL_FONT),
            ),
            row=1,
            col=1,
        )
    # every line's rows carry their decoder's label at the left
    tickvals = [k * (n + 1) + i for k in range(lines) for i in range(n)]
    ticktext = [esc(rows[i]["label"]) for _ in range(lines) for i in range(n)]
    fig.update_yaxes(
        autorange="reversed",
        tickvals=tickvals,
        ticktext=ticktext,
        fixedrange=True,
        range=[grid_rows - 1.5, -0.5],
        row=1,
        col=1,
    )
    fig.update_xaxes(range=[-0.5, line - 0.5], fixedrange=True, showticklabels=False, row=1, col=1)
    notes = [
        dict(
            x=-0.5,
            y=k * (n + 1) - 0.5,
            xref="x",
            yref="y",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            text=f"tokens {k * line}–{min((k + 1) * line, longest) - 1}",
            font=dict(size=10, color="#666"),
        )
        for k in range(1, lines)
    ]
    calls = max(r["calls"] for r in rows)
    fig.add_trace(
        go.Bar(
            y=[r["label"] for r in rows],
            x=[r["calls"] for r in rows],
            orientation="h",
            text=[
                f"{r['calls']} calls · {r['tokens_per_call']:.2f} per call"
                + (f" · {marks[r['equals_greedy']]}" if marks[r["equals_greedy"]] else "")
                for r in rows
            ],
            textposition="outside",
            cliponaxis=False,
            marker_color="#4C78A8",
            showlegend=False,
        ),
        row=2,
        col=1,
    )
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_xaxes(range=[0, calls * 1.7], row=2, col=1)  # room for the numbers right of the longest bar
    fig.add_trace(go.Scatter(_call_edges(pairs, line)), row=1, col=1)
    cell = 24  # pixels per grid row
    fig.update_layout(
        **common_layout(
            title=dict(text=f"one prompt, {n} decoders", font=dict(size=14)),
            width=FIT_WIDTH,
            height=150 + cell * (grid_rows + n + 1),
            margin=dict(l=left, r=30, t=80, b=40),
            meta=dict(rows=rows, line=line, calls={label: t.token_calls() for label, t in pairs}),
        )
    )
    for note in fig.layout.annotations:  # the subplot titles
        note.update(x=0, xanchor="left", font=dict(size=12))
    for note in notes:
        fig.add_annotation(**note, row=1, col=1)
    return fig
