"""Several decoders on one prompt, side by side: ``compare_decoders`` (a block-fill panel per decoder, then their
calls, tokens per call and whether each wrote greedy NTP's text) and ``decoder_rows``, its numbers as plain rows.

A panel is the decode's blocks after its last call: one row per block, one column per slot, each cell the token
the output holds there, shaded by the step of its block that wrote it (first call of the block darkest). Rows
with many blocks show the first ``max_blocks``. Reading the figure without a browser: ``fig.layout.meta["rows"]``
is ``decoder_rows``' output, and ``fig.data[i]`` (i < number of decoders) is panel i's heatmap.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import cell_label, common_layout, esc
from ..trace import Trace, output_labels


def label_of(trace: Trace) -> str:
    """A decoder's name as the comparison shows it: the config's decoder, ``verified sbd`` for a verified SBD."""
    decoder = str(trace.config.get("decoder", "sbd"))
    return f"verified {decoder}" if trace.verified else decoder


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
        ntp = next((t for _, t in pairs if t.config.get("decoder") == "ntp"), None)
    return [{"label": label, "decoder": t.config.get("decoder", "sbd"), "calls": t.nfe, "tokens": t.n_tokens,
             "tokens_per_call": round(t.tokens_per_call, 4),
             "equals_greedy": None if ntp is None else t.text == ntp.text,
             "renoised": sum(len(s.renoised) for s in t.steps), "rollbacks": len(t.rollbacks())}
            for label, t in pairs]


def _panel(trace: Trace, max_blocks: int):
    """(z, text, hover) of the blocks after the last call: z = the block's step that wrote the output's token."""
    blocks = sorted({s.block for s in trace.steps})[:max_blocks]
    width = max(s.block_size for s in trace.steps)
    start, labels = len(trace.prompt_ids), output_labels(trace)
    z, text, hover = [], [], []
    for b in blocks:
        steps = trace.block_steps(b)
        written: dict[int, int] = {}
        for s in steps:
            for c in s.commits:
                written[c.slot] = s.step
            for slot in s.renoised:
                written.pop(slot, None)
        row_z, row_t, row_h = [], [], []
        for slot in range(width):
            pos = steps[0].block_start + slot - start
            inside = slot < steps[0].block_size and 0 <= pos < trace.n_tokens and slot in written
            row_z.append(written[slot] if inside else None)
            label, note = labels[pos] if inside else ("", "")
            row_t.append(cell_label(label, 6) if inside else "")
            row_h.append(f"block {b} slot {slot}: {esc(label)}" + (f" ({esc(note)})" if note else "")
                         + f", written at step {written[slot]} of its block" if inside else "")
        z.append(row_z), text.append(row_t), hover.append(row_h)
    return z, text, hover


def compare_decoders(traces: Sequence[Trace] | Mapping[str, Trace], ntp: Trace | None = None,
                     max_blocks: int = 12) -> go.Figure:
    """One prompt through several decoders: a block-fill panel per decoder, then calls, tokens per call and
    "equals greedy?" side by side (``decoder_rows``). ``traces``: a list (labelled by ``label_of``) or a dict."""
    pairs = _labelled(traces)
    rows = decoder_rows(dict(pairs), ntp)
    heights = [min(max_blocks, t.n_blocks) + 1 for _, t in pairs] + [max(4, len(pairs) + 1)]
    fig = make_subplots(rows=len(pairs) + 1, cols=1, row_heights=heights, vertical_spacing=0.25 / len(heights),
                        subplot_titles=[f"{esc(r['label'])}: {r['calls']} calls · {r['tokens']} tokens · "
                                        f"{r['tokens_per_call']:.2f} per call"
                                        + (f" · {r['renoised']} remasked" if r["renoised"] else "")
                                        for r in rows] + ["calls (fewer is faster); tokens per call; equals greedy?"])
    width = max(s.block_size for _, t in pairs for s in t.steps)  # one cell size in every panel
    for i, (label, t) in enumerate(pairs, start=1):
        z, text, hover = _panel(t, max_blocks)
        fig.add_trace(go.Heatmap(z=z, text=text, texttemplate="%{text}", hovertext=hover, hoverinfo="text",
                                 coloraxis="coloraxis", xgap=2, ygap=2, name=label), row=i, col=1)
        fig.update_yaxes(autorange="reversed", showticklabels=False, fixedrange=True, row=i, col=1)
        fig.update_xaxes(showticklabels=False, fixedrange=True, range=[-0.5, width - 0.5], row=i, col=1)
    marks = {True: "= greedy", False: "≠ greedy", None: ""}
    fig.add_trace(go.Bar(y=[r["label"] for r in rows], x=[r["calls"] for r in rows], orientation="h",
                         text=[f"{r['calls']} calls · {r['tokens_per_call']:.2f} tok/call · "
                               f"{marks[r['equals_greedy']]}" for r in rows], textposition="auto", marker_color="#4C78A8", showlegend=False),
                  row=len(pairs) + 1, col=1)
    fig.update_yaxes(autorange="reversed", row=len(pairs) + 1, col=1)
    fig.update_layout(**common_layout(
        title=dict(text=f"one prompt, {len(pairs)} decoders", font=dict(size=14)), width=760,
        height=140 + 26 * sum(heights), margin=dict(l=120, r=30, t=80, b=40),
        coloraxis=dict(colorscale="Blues_r", cmin=0, colorbar=dict(title=dict(text="step of<br>its block"),
                                                                   thickness=12, len=0.5)),
        meta=dict(rows=rows)))
    for note in fig.layout.annotations:
        note.update(x=0, xanchor="left", font=dict(size=12))
    return fig
