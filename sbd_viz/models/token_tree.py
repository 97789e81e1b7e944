"""Token trees: the shapes a model call feeds and drafts (``sbd_viz.models.call.ModelCall``; verified SBD's tree
drafting, ``sbd_viz.decoders.verified.tree``), and the attention masks of a call.

A token tree's fed tokens each name a parent among the earlier ones (-1: the token right after the cache); each sees
the cache, its ancestors and itself (``token_tree_mask``), at the position after its parent's (``depths``). A block
of mask slots after a fed token (a root) sees that token's path and its own slots. ``grow_tree`` drafts the next
tree from a block's slot logits: the best few tokens at each slot after each candidate before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


def check_parents(parents, n: int) -> list[int]:
    """``parents`` as a token tree of ``n`` fed tokens can take it, else a ``ValueError`` naming it: each fed token's
    parent is an earlier fed token's number, or -1 for a token that follows the cache directly."""
    if len(parents) != n or any(
        isinstance(p, bool) or not isinstance(p, int) or not -1 <= p < i for i, p in enumerate(parents)
    ):
        raise ValueError(
            f"parents: must give each of the {n} fed tokens an earlier fed token's number or -1, got {list(parents)!r}"
        )
    return list(parents)


def chain(n: int, n_branches) -> tuple[list[int], list[int]]:
    """The parents and roots of tree drafting's shape (a tree-drafting call): ``n`` fed tokens in a chain, the last
    ``n_branches`` of them roots; a bad ``n_branches`` is a ``ValueError`` naming it."""
    if isinstance(n_branches, bool) or not isinstance(n_branches, int) or not 1 <= n_branches <= n:
        raise ValueError(f"n_branches: must be a whole number in [1, {n}] (the tokens fed), got {n_branches!r}")
    return list(range(-1, n - 1)), list(range(n - n_branches, n))


def depths(parents: list[int]) -> list[int]:
    """Each fed token's distance from the cache in a token tree: 0 for a token that follows the cache directly."""
    out: list[int] = []
    for p in parents:
        out.append(0 if p < 0 else out[p] + 1)
    return out


def token_tree_mask(past: int, parents: list[int], roots: list[int], k: int) -> torch.Tensor:
    """The mask of one token-tree call: (q, past + q) bool, True = attend, q = len(parents) + len(roots) * k.

    Rows are the call's inputs: the fed tokens, a tree (``parents``: each one's parent among them, -1 after the
    cache), each seeing the ``past`` cached positions, its ancestors and itself; then one block of ``k`` slots
    after each fed token in ``roots``, which sees the cache, its root and the root's ancestors, and its own slots
    both ways. A chain (each token's parent the one before it) with the last tokens as roots is
    ``tree_call_mask``."""
    n = len(parents)
    lineage = torch.zeros(n, n, dtype=torch.bool)  # lineage[i, j]: fed token j is i or an ancestor of i
    for i, p in enumerate(parents):
        if p >= 0:
            lineage[i] = lineage[p]
        lineage[i, i] = True
    q = n + len(roots) * k
    allowed = torch.zeros(q, past + q, dtype=torch.bool)
    allowed[:, :past] = True
    allowed[:n, past : past + n] = lineage
    for j, root in enumerate(roots):
        rows = slice(n + j * k, n + (j + 1) * k)
        if root >= 0:  # -1: a block right after the cache sees no fed token
            allowed[rows, past : past + n] = lineage[root]
        allowed[rows, past + n + j * k : past + n + (j + 1) * k] = True
    return allowed


@dataclass(frozen=True)
class DraftNode:
    """A drafted token of a token tree: its ``slot`` in the block (1 for a token right after slot 0, NTP's exact
    token), its ``token_id`` and ``prob`` (the slot's probability of it, as the drafter read it) and its
    ``parent``: the node before it, by its number in the tree's list, or -1 for slot 0."""

    slot: int
    token_id: int
    prob: float
    parent: int


def grow_tree(
    block: torch.Tensor, widths: tuple[int, ...], children: Callable[[int, list[int]], torch.Tensor] | None = None
) -> list[DraftNode]:
    """A token tree drafted from a block's slot logits ``block`` (k, V), slot 0 the exact token: slot s holds the
    best ``widths[s - 1]`` tokens (1 past the end of ``widths``) after each node at slot s - 1.

    ``block`` gives the chain's rows (slot s's logits after the chain's drafts before it); ``children(s, tokens)``
    (len(tokens), V) slot s's logits after each of ``tokens`` at slot s - 1 off the chain (None: ``block``'s row,
    for a model whose slots do not read each other). The nodes come depth first, best first, so the first k - 1 are
    the chain of best tokens."""
    k, chain = block.shape[0], {-1}  # chain: the nodes of the best path (-1: slot 0)
    nodes: list[DraftNode] = []
    frontier = [-1]
    for s in range(1, k):
        width = widths[s - 1] if s - 1 < len(widths) else 1
        off = [f for f in frontier if f not in chain]
        rows = {f: block[s] for f in frontier if f in chain}
        if off:
            found = block[s].expand(len(off), -1) if children is None else children(s, [nodes[f].token_id for f in off])
            rows.update(zip(off, found))
        grown = []
        for f in frontier:
            probs = torch.softmax(rows[f].float(), -1)
            top = probs.topk(min(width, probs.shape[-1]))
            for rank, (p, t) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
                nodes.append(DraftNode(s, int(t), float(p), f))
                grown.append(len(nodes) - 1)
                if rank == 0 and f in chain:
                    chain.add(len(nodes) - 1)
        frontier = grown
    below: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        below.setdefault(node.parent, []).append(i)
    order: list[int] = []
    stack = list(reversed(below.get(-1, [])))
    while stack:  # depth first, best first
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(below.get(i, [])))
    number = {old: new for new, old in enumerate(order)}
    return [DraftNode(nodes[i].slot, nodes[i].token_id, nodes[i].prob, number.get(nodes[i].parent, -1)) for i in order]


def block_call_mask(past: int, n_causal: int, n_block: int) -> torch.Tensor:
    """The Fig. 10 inference mask of one block call: (q, past + q) bool, True = attend, q = n_causal + n_block.

    Rows are the call's inputs: ``n_causal`` newly final tokens (causal over the ``past`` cached positions and
    each other), then ``n_block`` slots, which see every position, the block's own slots included."""
    q = n_causal + n_block
    rows = torch.arange(q)[:, None]
    cols = torch.arange(past + q)[None, :]
    return (cols <= past + rows) | (rows >= n_causal)


def tree_call_mask(past: int, n_causal: int, n_branches: int, k: int) -> torch.Tensor:
    """The mask of one tree call: (q, past + q) bool, True = attend, q = n_causal + n_branches * k.

    Rows are the call's inputs: ``n_causal`` tokens fed causally (each sees the ``past`` cached positions and the
    fed tokens up to itself), whose last ``n_branches`` are the branches' roots; then ``n_branches`` blocks of ``k``
    slots. Block j sees the cache, the fed tokens up to root j (fed row ``n_causal - n_branches + j``) and its own
    slots, both ways: not the fed drafts after its root (it drafts as if they were rejected) nor another block. It is
    the ``token_tree_mask`` of a chain."""
    return token_tree_mask(past, *chain(n_causal, n_branches), k)
