"""Verified SBD drafting a token tree (``tree_widths``): tree drafting (``sbd_viz.decoders.verified.single``) with several
candidates a slot.

A chain holds one candidate a slot, and a call that rejects it stops there. A token tree (as Medusa and EAGLE
draft) holds the best ``tree_widths[s - 1]`` candidates at slot s after each candidate before it (a sampler head
reads each candidate's token; ``SBDModel.draft_tree``). A call (``SBDModel.draft_tree_call``) feeds x and the
tree's tokens, each seeing its own path (``sbd_viz.models.token_tree.token_tree_mask``), with a block after each; NTP's
verdicts walk down the tree as far as a child holds NTP's token, and the cache keeps x and that path
(``CacheCut.keep``). The rule with γ cuts the chain of best candidates, as in tree drafting, and the tree to the
chain's depth; widths of all ones are tree drafting's chain, call for call. How it is recorded:

- a step's commits are the chain's drafts, as in tree drafting; the other candidates are its ``alternatives``;
- where the path leaves the chain (NTP wanted another token than the chain's draft) the chain's draft is a
  rejection (``checks``, ``Rollback``) and the step opens its block there: the alternatives NTP took, each NTP's
  token from its parent's row (commits with ``ntp=True``), then NTP's next token, then the new drafts. Its block
  is longer than the block size by the alternatives it took.

Fewer blocks a call (``tree_blocks``): most of a call's rows are its blocks, one after every fed token, though the
path ends at only one of them. With ``tree_blocks=n`` a call feeds blocks after the ``n`` fed tokens the path most
likely ends at, by the drafter's probabilities (a node's path probability less its children's; x's path is 1);
widths of all ones make it the chain with fewer blocks. A path that ends where no block follows writes NTP's token
there as a step of one slot with no drafts, and the next call feeds that token alone with a block after it.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable, Generator, NamedTuple

import torch

from ...models.sbd_model import CacheCut, DraftTreeCall, SBDModel
from ..base import Reply, find_stop, greedy, propose
from ..steps import exact_commit, slot_views
from .single import Rows, TreeDecode
from ...trace.data import Alternative, Check, Rollback, Step


MAX_TREE_WIDTH = 16  # candidates at a slot: a call feeds a block after each, so wider trees cost rows fast


def check_tree_widths(widths, drafting: str) -> tuple[int, ...] | None:
    """``tree_widths`` (whole numbers, or their text as the CLI gives it: ``"3,1,1"``) as a decode drafting
    ``drafting`` can run it (a tuple, or None for the chain), else a ``ValueError`` naming it."""
    if widths is None:
        return None
    if isinstance(widths, str) and all(part.strip().isdigit() for part in widths.split(",")):
        widths = [int(part) for part in widths.split(",")]
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise ValueError(f"tree_widths: must be a list of whole numbers, one per slot after slot 0, got {widths!r}")
    widths = tuple(widths)
    if not widths or any(isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_TREE_WIDTH
                         for w in widths):
        raise ValueError(f"tree_widths: must be whole numbers in [1, {MAX_TREE_WIDTH}], one per slot after slot 0, "
                         f"got {list(widths)!r}")
    if drafting != "tree":
        raise ValueError(f"tree_widths: a token tree is a way of tree drafting; pass drafting='tree', "
                         f"got drafting={drafting!r}")
    return widths


def check_tree_blocks(blocks, drafting: str) -> int | None:
    """``tree_blocks`` (a whole number >= 1, or its text as the CLI gives it) as a decode drafting ``drafting`` can
    run it, or None (a block after every fed node), else a ``ValueError`` naming it."""
    if blocks is None:
        return None
    if isinstance(blocks, str) and blocks.strip().isdigit():
        blocks = int(blocks)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ValueError(f"tree_blocks: must be a whole number >= 1 (the most blocks a call feeds), got {blocks!r}")
    if drafting != "tree":
        raise ValueError(f"tree_blocks: it limits tree drafting's blocks; pass drafting='tree', "
                         f"got drafting={drafting!r}")
    return blocks


class _Node(NamedTuple):
    """A drafted token of the tree the next call checks: its slot in ``last``'s block, its parent (a node's number,
    -1 for the exact token before the tree), whether its path ends the output (a stop or the length limit: no
    block after it), its ``Alternative``'s number in ``last``'s step (-1 on the chain), and its depth (1 right
    after the exact token)."""

    slot: int
    token_id: int
    parent: int
    ends: bool
    alternative: int
    depth: int
    prob: float = 1.0  # the drafter's probability of the node's path: each node's own, multiplied down the tree


class _TokenTree(NamedTuple):
    """One token-tree call's plan: the request, the nodes it checks, and the fed row of x and of each node."""

    request: DraftTreeCall
    nodes: list[_Node]
    rows: dict[int, int]  # node (-1: x, the last accepted token) -> its fed row; a node that ends the output is
    # not fed: NTP's verdict on it is its parent's row, and no block follows it
    blocks: tuple[int, ...] | None = None  # the roots a block follows, by their numbers (None: every root)

    @property
    def n_input(self) -> int:
        n_blocks = len(self.rows) if self.blocks is None else len(self.blocks)
        return len(self.request.new_ids) + n_blocks * self.request.block_size

    def blocked(self, node: int) -> bool:
        """Whether a block follows ``node`` (-1: x) in this call."""
        return self.blocks is None or self.root(node) in self.blocks

    def root(self, node: int) -> int:
        """The number among the roots of the block after ``node`` (-1: x): its row's logits are NTP's next token."""
        return list(self.rows).index(node)  # the roots are the fed rows, in the order fed


class _Walk(NamedTuple):
    """What NTP's verdicts accept of a token tree: the nodes on the accepted path, the node it ends at (-1: x),
    NTP's token after it (-1 if the path ends the output), and the node it rejected there (its best candidate,
    None if it had none)."""

    path: list[int]
    at: int
    ntp: int
    rejected: int | None

    @property
    def ends(self) -> bool:
        return self.ntp < 0


class TokenTreeDecode(TreeDecode):
    """Tree drafting that drafts a token tree (``tree_widths``; see the module's docstring)."""

    def __init__(self, model: SBDModel, config, prompt_ids: list[int], record: Callable[[Step], None],
                 intervals: list | None = None, widths: tuple[int, ...] = (1,), blocks: int | None = None):
        super().__init__(model, config, prompt_ids, record, intervals)
        self.widths = tuple(widths)
        self.max_blocks = blocks  # the most blocks a call feeds (``tree_blocks``); None: one after each fed node
        self.nodes: list[_Node] = []

    def _read(self, plan: _TokenTree, rows: Rows, reply: Reply, started: float) -> Generator[CacheCut, None, None]:
        """NTP's verdicts walk down the tree: keep x and the accepted path in the cache, record the call."""
        walk = self._walk(plan, rows.ntp)
        kept = [plan.rows[i] for i in walk.path if i in plan.rows]
        if len(kept) < len(plan.rows) - 1:  # every other fed node goes
            base = self.n_prompt + len(self.out)  # the cache's length up to x; fed row r + 1 is x's r-th after
            x = plan.rows[-1]
            yield CacheCut(base, tuple(base + r - x - 1 for r in kept))
        self._grow(plan, rows, reply, walk, started)

    def _plan(self) -> _TokenTree:
        """Feed x and the tree's nodes that do not end the output (x's parent the cache, each node's its parent's
        row), with a block after each of them."""
        x = self.prompt_ids if self.call == 0 else self.out[-1:]
        rows = {-1: len(x) - 1}
        parents = list(range(-1, len(x) - 1))
        for i, n in enumerate(self.nodes):
            if not n.ends:
                rows[i] = len(parents)
                parents.append(rows[n.parent])
        fed = [n.depth for i, n in enumerate(self.nodes) if i in rows]
        # every block's last slot stays inside the length limit (and so inside the context check_fits allowed)
        k = min(self.config.block_size, self.config.max_new_tokens - len(self.out) - max([0] + fed))
        new_ids = x + [n.token_id for i, n in enumerate(self.nodes) if i in rows]
        plan = _TokenTree(None, self.nodes, rows, self._blocks(rows))
        request = DraftTreeCall(new_ids, parents, sorted(rows.values()), k, pick=partial(self._taken_root, plan),
                                widths=self.widths, blocks=plan.blocks)
        return plan._replace(request=request)

    def _blocks(self, rows: dict[int, int]) -> tuple[int, ...] | None:
        """The roots (by number, in ``rows``' order) that get a block when a call may feed at most ``max_blocks``:
        those the path most likely ends at, by the drafter's probabilities: a node's path probability less its
        children's (x's is 1). None: a block after every root."""
        if self.max_blocks is None or self.max_blocks >= len(rows):
            return None
        ends_at = {i: 1.0 if i < 0 else self.nodes[i].prob for i in rows}
        for n in self.nodes:
            if n.parent in ends_at:
                ends_at[n.parent] -= n.prob
        likeliest = sorted(range(len(rows)), key=[-ends_at[i] for i in rows].__getitem__)  # stable: x first on ties
        return tuple(sorted(likeliest[: self.max_blocks]))

    def _taken_root(self, plan: _TokenTree, logits: torch.Tensor) -> int:
        """The root whose block NTP's verdicts take (``_walk``); the call drafts from that block alone. A path that
        ends the output needs no block: then x's."""
        walk = self._walk(plan, greedy(self.model, logits).tolist())
        return 0 if walk.ends else plan.root(walk.at)

    def _walk(self, plan: _TokenTree, ntp: list[int]) -> _Walk:
        """Follow NTP's greedy tokens (``ntp[j]``: root j's) from x down the tree, as far as a child holds it."""
        below: dict[int, list[int]] = {}
        for i, n in enumerate(plan.nodes):
            below.setdefault(n.parent, []).append(i)
        path, at = [], -1  # at: the node the path ends at (-1: x)
        while True:
            if at >= 0 and plan.nodes[at].ends:  # the accepted text reaches a stop or the length limit
                return _Walk(path, at, -1, None)
            want = ntp[plan.root(at)]
            children = below.get(at, [])
            hit = next((i for i in children if plan.nodes[i].token_id == want), None)
            if hit is None:
                return _Walk(path, at, want, children[0] if children else None)
            path.append(hit)
            at = hit

    def _tree_checks(self, plan: _TokenTree, rows: Rows, walk: _Walk, on: list[int]) -> list[Check]:
        """NTP's verdicts on the chain's drafts the path accepted (``on``) and on the chain's first draft it did not
        take (rejected, whether the path left the chain through an alternative or stopped), each at its block and
        slot: the drafts the previous step committed."""
        chain = [i for i, n in enumerate(plan.nodes) if n.alternative < 0]
        first_off = next((i for i in chain if i not in on), None)
        checks = []
        for i in on + ([] if first_off is None else [first_off]):  # an end node has no child: none after it
            node = plan.nodes[i]
            r = plan.root(node.parent)  # NTP's verdict on a node is its parent's row
            want = rows.ntp[r]
            position = self.last.block_start + node.slot
            checks.append(Check(self.last.block, node.slot, position, node.token_id,
                                self.model.token_text(node.token_id), want, self.model.token_text(want),
                                float(rows.probs[r, want]), float(rows.probs[r, node.token_id]),
                                accepted=want == node.token_id))
        return checks

    def _grow(self, plan: _TokenTree, rows: Rows, reply: Reply, walk: _Walk, started: float) -> None:
        """Record the call. The chain's drafts the path accepted stay where the previous step committed them; where
        the path leaves the chain (a rejection, or an alternative NTP wanted) a block opens: the alternatives it
        took, then NTP's exact token from the path's last row, then the picked block's drafts, which become the
        next tree. An alternative NTP took is its own token there, so the block writes it as NTP's (``ntp``), and
        the chain's draft it replaced is a rejection (``Rollback``) like any other."""
        on = [i for i in walk.path if plan.nodes[i].alternative < 0]  # the path is the chain's, then off it
        off = walk.path[len(on):]
        checks = self._tree_checks(plan, rows, walk, on)
        self.out += [plan.nodes[i].token_id for i in on]
        start = len(self.out)  # generated position of the new block's slot 0
        if walk.ends and not off:  # the chain's drafts end the output: a checking-only step of their block
            self.nodes, self.drafts, self.ends = [], [], False
            last = self.last
            self._record(plan, started, block=last.block, block_start=last.block_start, block_size=last.block_size,
                         step=last.step + 1, masked=(), slots=(), commits=(), checks=tuple(checks), check_only=True)
            return
        commits, views = [], []
        for s, i in enumerate(off):  # each taken alternative is NTP's token from its parent's row
            r, token = plan.root(plan.nodes[i].parent), plan.nodes[i].token_id
            commits.append(exact_commit(self.model, s, token, rows.probs[r], rows.logp[r], ntp=True))
            views += slot_views(self.model, [s], propose(self.model, reply.causal[r:r + 1], 0.0, None),
                                self.config.top_n)
        self.out += [plan.nodes[i].token_id for i in off]
        k, alternatives = 0, []
        if walk.ends:  # the alternatives end the output
            self.nodes, self.drafts, self.ends = [], [], False
        else:
            r = plan.root(walk.at)
            self.out.append(walk.ntp)
            commits.append(exact_commit(self.model, len(off), walk.ntp, rows.probs[r], rows.logp[r], ntp=True))
            if reply.block is None:  # no block after the path's end (``tree_blocks``): NTP's token, no drafts
                k = 1
                views += slot_views(self.model, [len(off)], propose(self.model, reply.causal[r:r + 1], 0.0, None),
                                    self.config.top_n)
                self.nodes, self.drafts, self.ends = [], [], False
            else:
                k = plan.request.block_size
                proposal = propose(self.model, reply.block, 0.0, None)  # (k, V)
                commits += [replace(c, slot=c.slot + len(off)) for c in self._new_drafts(proposal, k)]
                views += slot_views(self.model, range(len(off), len(off) + k), proposal, self.config.top_n)
                self.nodes, alternatives = self._next_tree(list(reply.tree), len(off))
        rollback = None
        if any(not c.accepted for c in checks):  # NTP's token is written at the rejected draft's position, slot 0
            kept = set(walk.path)
            # the blocks after fed nodes off the accepted path
            discarded = sum(1 for i in plan.rows if i >= 0 and i not in kept and plan.blocked(i))
            rollback = Rollback(0, self.n_prompt + start, (), discarded * plan.request.block_size)
        size = len(off) + k
        self._record(plan, started, block=self.n_blocks, block_start=self.n_prompt + start, block_size=size, step=0,
                     masked=tuple(range(size)), slots=tuple(views), commits=tuple(commits), checks=tuple(checks),
                     rollback=rollback, alternatives=tuple(alternatives))
        self.n_blocks += 1

    def _next_tree(self, tree: list, shift: int) -> tuple[list[_Node], list[Alternative]]:
        """The drafted tree (``DraftNode``s, the chain of best tokens first) cut to the rule's drafts: the chain to
        their number, every other candidate to their depth, each path cut after a stop (a node whose path holds a
        stop or reaches the length limit ends the output). Its slots in the step's block are ``shift`` further
        right (the alternatives the step wrote before its exact token)."""
        m = len(self.drafts)
        if m == 0:
            return [], []
        nodes: list[_Node] = []
        number: dict[int, int] = {}  # the tree's node -> its number here
        alternatives: list[Alternative] = []
        paths: dict[int, list[int]] = {-1: []}
        for i, d in enumerate(tree):
            if d.slot > m or d.parent not in paths or (d.parent >= 0 and nodes[number[d.parent]].ends):
                continue
            on_chain = i == d.slot - 1  # the first nodes, depth first, are the chain (cut to m above)
            token = self.drafts[d.slot - 1] if on_chain else d.token_id
            path = paths[d.parent] + [token]
            found = find_stop(self.model, self.out + path, len(self.out) + 1, self.config.stop)
            ends = bool(found) or len(self.out) + len(path) == self.config.max_new_tokens
            if found and found.index < len(self.out) + len(path):
                continue  # a stop before this token: past the end of the output
            alt = -1
            if not on_chain:
                parent = -1 if d.parent < 0 else nodes[number[d.parent]].alternative  # -1 on the chain too
                alternatives.append(Alternative(d.slot + shift, token, self.model.token_text(token), d.prob, parent))
                alt = len(alternatives) - 1
            number[i] = len(nodes)
            paths[i] = path
            above = 1.0 if d.parent < 0 else nodes[number[d.parent]].prob
            nodes.append(_Node(d.slot + shift, token, -1 if d.parent < 0 else number[d.parent], ends, alt, d.slot,
                               above * d.prob))
        return nodes, alternatives
