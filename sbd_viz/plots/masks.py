"""Pictures of SBD's two attention masks, drawn from the functions that build them for the model.

- ``kind="training"`` draws ``objective.sbd_attention_mask(n, block_size)``, the mask of the training
  input ``[clean ; masked]`` (the paper's Fig. 9);
- ``kind="inference"`` draws ``sbd_viz.models.token_tree.block_call_mask(past, n_causal, n_block)``, the mask of one
  block call (the paper's Fig. 10), which a model call passes to the model at every plain decoding call.

The figure asks those functions for the mask, so it cannot drift from what training and decoding use.
Rows are queries (the positions doing the looking), columns are keys (the positions looked at).
Reading cells without a browser: ``fig.data[0].z[q][kv]`` is 0 where query ``q`` may not attend to key
``kv``, else the ``REGIONS`` code of the part of the layout the pair lies in; ``fig.layout.meta`` holds
the arguments and the axis labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch

from ..models.token_tree import block_call_mask
from ..trace.checks import check_whole
from ..trace.labels import drawable
from ..training.objective import sbd_attention_mask
from .style import CALL_SCALE, FIT_WIDTH, FONT, MASK_GLYPH, STATE_COLORS, cell_grid

KINDS = ("training", "inference")
# The same three parts in both masks: the inference call is the training layout's last block.
REGIONS = {
    1: ("causal: text sees the text before it", STATE_COLORS["done"]),
    2: ("a block's slots see each other (both ways)", STATE_COLORS["now"]),
    3: ("a block's slots see the text before the block", CALL_SCALE[-1][1]),
}
BLOCKED = STATE_COLORS["future"]


def training_mask(n: int, block_size: int) -> torch.Tensor:
    """``objective.sbd_attention_mask``, checked: (2n, 2n) bool for ``[clean ; masked]``, True = attend."""
    _check_int("n", n, 1, 64)
    _check_int("block_size", block_size, 1, n)
    return sbd_attention_mask(n, block_size)


def inference_mask(past: int, n_causal: int, n_block: int) -> torch.Tensor:
    """``model.block_call_mask``, checked: (n_causal + n_block, past + n_causal + n_block) bool, True = attend."""
    _check_int("past", past, 0, 64)
    _check_int("n_causal", n_causal, 0, 64)
    _check_int("n_block", n_block, 1, 64)
    return block_call_mask(past, n_causal, n_block)


def attention_mask(
    kind: str = "training",
    *,
    n: int = 8,
    block_size: int = 4,
    past: int = 4,
    n_causal: int = 4,
    labels: Sequence[str] | None = None,
) -> go.Figure:
    """The training mask (``n``, ``block_size``) or one block call's mask (``past``, ``n_causal``, ``block_size``).

    ``labels``, optional: one text per position of the sequence (``n`` for training, whose masked copy reuses
    them; ``past + n_causal`` for inference, whose block slots show the mask glyph, as in ``block_fill``).
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    if kind == "training":
        mask = training_mask(n, block_size)
        text = _labels(labels, n, "x")
        keys = text + [f"{t}'" for t in text]
        queries, causal_rows, key_region = keys, n, n  # clean rows are causal; masked rows see clean keys < n
        cols = [n] + [n + b for b in range(block_size, n, block_size)]  # the copies, then the blocks
        rows = cols
        title = (
            f"Training mask (paper Fig. 9): [clean ; masked], n = {n}, blocks of {block_size}"
            f"<br><sup>first half: the clean copy x; second half: the masked copy x'<br>"
            f"(the same positions, some of its tokens masked)</sup>"
        )
    else:
        mask = inference_mask(past, n_causal, block_size)
        text = _labels(labels, past + n_causal, "t")
        keys = text + [MASK_GLYPH] * block_size
        queries, causal_rows, key_region = keys[past:], n_causal, past + n_causal
        cols, rows = [past, past + n_causal], [n_causal]
        title = (
            f"One block call's mask (paper Fig. 10): {past} cached, {n_causal} fed causally, "
            f"{block_size} slots<br><sup>rows: the call's inputs; columns: the KV cache, then the same inputs"
            f"<br>(the slots' keys and values are dropped after the call)</sup>"
        )
    z, hover = _cells(mask, queries, keys, causal_rows, key_region)
    return _figure(
        z,
        hover,
        queries,
        keys,
        title,
        [c for c in cols if 0 < c < len(keys)],
        [r for r in rows if 0 < r < len(queries)],
        dict(kind=kind, n=n, block_size=block_size, past=past, n_causal=n_causal, queries=queries, keys=keys),
    )


def _check_int(name: str, value, low: int, high: int) -> None:
    check_whole(value, name, low, high)


def _labels(labels: Sequence[str] | None, count: int, prefix: str) -> list[str]:
    if labels is None:
        return [f"{prefix}{i}" for i in range(count)]
    labels = [str(t) for t in labels]
    if len(labels) != count:
        raise ValueError(f"labels: expected {count} texts (one per position), got {len(labels)}")
    # blanks made visible, as in block_fill; a control picture (␂) named, as no default font draws it
    return [drawable(t.replace(" ", "␣").replace("\n", "⏎")) for t in labels]


def _cells(mask: torch.Tensor, queries: list[str], keys: list[str], causal_rows: int, key_region: int):
    """z codes (0 blocked, else the REGIONS code) and hover texts, from the mask tensor."""
    z, hover = [], []
    for q in range(mask.shape[0]):
        row, row_hover = [], []
        for kv in range(mask.shape[1]):
            region = 0
            if bool(mask[q, kv]):
                region = 1 if q < causal_rows else 3 if kv < key_region else 2
            row.append(region)
            row_hover.append(
                f"query {queries[q]} → key {keys[kv]}: " + (REGIONS[region][0] if region else "not attended")
            )
        z.append(row)
        hover.append(row_hover)
    return z, hover


def _figure(z, hover, queries, keys, title, col_lines, row_lines, meta) -> go.Figure:
    scale = [[0.0, BLOCKED], [0.125, BLOCKED]]
    for code, (_, color) in REGIONS.items():  # one flat band per code: z = 0, 1, 2, 3 on zmin 0 .. zmax 3
        scale += [[max((code - 0.5) / 3, 0.125), color], [min(1.0, (code + 0.5) / 3), color]]
    cell = min(22 if len(keys) <= 24 else 16, (FIT_WIDTH - 150) / len(keys))  # at most FIT_WIDTH wide
    fig = go.Figure(cell_grid(z, hover, (1, 1), colorscale=scale, zmin=0, zmax=3, showscale=False))
    for label, color in REGIONS.values():  # legend entries: heatmap cells have none of their own
        fig.add_trace(
            go.Scatter(
                x=[None], y=[None], mode="markers", name=label, marker=dict(symbol="square", size=12, color=color)
            )
        )
    width, height = max(640, int(150 + cell * len(keys))), int(235 + cell * len(queries))
    line = dict(color="#333333", width=1.5)
    shapes = [dict(type="line", x0=c - 0.5, x1=c - 0.5, y0=-0.5, y1=len(queries) - 0.5, line=line) for c in col_lines]
    shapes += [dict(type="line", x0=-0.5, x1=len(keys) - 0.5, y0=r - 0.5, y1=r - 0.5, line=line) for r in row_lines]
    ticks = dict(tickfont=dict(size=10), fixedrange=True, showgrid=False, zeroline=False)
    fig.update_layout(
        plot_bgcolor="white",
        font=dict(family=FONT, size=11),
        meta=meta,
        shapes=shapes,
        width=width,
        height=height,
        hoverlabel=dict(font=dict(family=FONT, size=12), align="left"),
        title=dict(text=title, font=dict(size=13), x=10 / width, xanchor="left", y=1 - 12 / height, yanchor="top"),
        margin=dict(l=80, r=20, t=125, b=90),
        legend=dict(orientation="v", x=0, y=-0.02, yanchor="top", font=dict(size=11)),
        xaxis=dict(
            title=dict(text="key (attended to)", standoff=4),
            side="top",
            tickangle=0,
            tickvals=list(range(len(keys))),
            ticktext=keys,
            range=[-0.5, len(keys) - 0.5],
            **ticks,
        ),
        yaxis=dict(
            title="query",
            tickvals=list(range(len(queries))),
            ticktext=queries,
            range=[len(queries) - 0.5, -0.5],
            **ticks,
        ),
    )
    return fig
