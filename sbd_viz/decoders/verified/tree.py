"""Verified SBD with tree drafting (``TreeDecode``): each call checks the drafted chain or token tree and drafts a
block after every fed token (or after the ``tree_blocks`` likeliest ends of the accepted path), so a rejection
wastes no call; the chain is a token tree of width one. How it drafts, checks and records: docs/verified_sbd.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import NamedTuple

import torch

from ...models.call import CacheCut, Model, ModelCall, Reply
from ...trace.data import Alternative, Check, Commit, Rollback, SlotView, Step
from ..base import Stop, find_stop, greedy, propose
from ..steps import draft, exact_commit, slot_views
from .verdicts import Rows, read_rows


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

    request: ModelCall
    nodes: list[_Node]
    rows: dict[int, int]  # node (-1: x, the last accepted token) -> its fed row; a node that ends the output is
    # not fed: NTP's verdict on it is its parent's row, and no block follows it
    blocks: tuple[int, ...] | None = None  # the roots a block follows, by their numbers (None: every root)

    @property
    def n_input(self) -> int:
        n_blocks = len(self.rows) if self.blocks is None else len(self.blocks)
        return len(self.request.new_ids) + n_blocks * len(self.request.block_ids)

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


class TreeDecode:
    """One verified decode with tree drafting: the chain (``widths`` (1,)) or a token tree (``tree_widths``), with a
    block after every fed token or after the ``blocks`` likeliest ends; ``requests()`` runs it. Each call's ``Step``
    goes to ``record`` as soon as the call is done. How it drafts, checks and records: docs/verified_sbd.md."""

    def __init__(
        self,
        model: Model,
        config,
        prompt_ids: list[int],
        record: Callable[[Step], None],
        intervals: list | None = None,
        widths: tuple[int, ...] = (1,),
        blocks: int | None = None,
    ):
        self.model, self.config, self.prompt_ids, self.record = model, config, list(prompt_ids), record
        self.intervals = intervals  # each draft's knob interval is appended here (``draft``), rejected ones too
        self.n_prompt = len(prompt_ids)
        self.rule = replace(config.commit_rule, gap_free=True)  # drafts are kept as a prefix (docs/verified_sbd.md)
        self.widths = tuple(widths)  # candidates per slot after slot 0: (1,) is the chain
        self.max_blocks = blocks  # the most blocks a call feeds (``tree_blocks``); None: one after each fed node
        self.out: list[int] = []  # the accepted text (NTP's; all but its last token in the cache)
        self.nodes: list[_Node] = []  # the tree the next call checks
        self.drafts: list[int] = []  # the chain's unchecked drafts after ``out``
        self.ends = False  # the drafts reach a stop or the length limit
        self.clean = 0  # accepted tokens known to hold no stop
        self.call = 0
        self.n_blocks = 0
        self.last: Step | None = None  # the step whose block holds the drafts

    def requests(self) -> Generator[ModelCall | CacheCut, Reply | None, tuple[list[int], Stop]]:
        """Yield ``ModelCall``s (send back a ``Reply``) and ``CacheCut``s (send back None); return the output ids and
        their ``Stop``."""
        n_max = self.config.max_new_tokens
        while True:
            found = find_stop(self.model, self.out, self.clean + 1, self.config.stop)
            if found:
                break  # the accepted text holds a stop
            if len(self.out) >= n_max:
                found = Stop(n_max, "length")
                break
            self.clean = len(self.out)
            plan = self._plan()
            reply = yield plan.request  # causal (roots, V), block (k, V): the block the verdicts pick
            assert isinstance(reply, Reply), "a ModelCall is answered with a Reply"
            started = time.perf_counter() - reply.seconds  # a step's wall time: the forward plus this decode's own work
            yield from self._read(plan, read_rows(self.model, reply.causal), reply, started)
            self.call += 1
        return self.out[: found.index], found

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
        blocks = self._blocks(rows)
        roots = sorted(rows.values())

        def pick(logits: torch.Tensor) -> int:  # the call reads the plan it is part of
            return self._taken_root(plan, logits)

        request = ModelCall(
            new_ids,
            [self.model.mask_token_id] * k,
            logits_at=roots,
            parents=parents,
            blocks_after=roots if blocks is None else [roots[j] for j in blocks],
            pick=pick,
            widths=self.widths,
            chained=True,
        )
        plan = _TokenTree(request, self.nodes, rows, blocks)
        return plan

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
        path: list[int] = []
        at = -1  # the node the path ends at (-1: x)
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
        last = self.last
        for i in on + ([] if first_off is None else [first_off]):  # an end node has no child: none after it
            assert last is not None, "a tree's drafts were committed by the step before"
            node = plan.nodes[i]
            r = plan.root(node.parent)  # NTP's verdict on a node is its parent's row
            want = rows.ntp[r]
            position = last.block_start + node.slot
            checks.append(
                Check(
                    last.block,
                    node.slot,
                    position,
                    node.token_id,
                    self.model.token_text(node.token_id),
                    want,
                    self.model.token_text(want),
                    float(rows.probs[r, want]),
                    float(rows.probs[r, node.token_id]),
                    accepted=want == node.token_id,
                )
            )
        return checks

    def _grow(self, plan: _TokenTree, rows: Rows, reply: Reply, walk: _Walk, started: float) -> None:
        """Record the call. The chain's drafts the path accepted stay where the previous step committed them; where
        the path leaves the chain (a rejection, or an alternative NTP wanted) a block opens: the alternatives it
        took, then NTP's exact token from the path's last row, then the picked block's drafts, which become the
        next tree. An alternative NTP took is its own token there, so the block writes it as NTP's (``ntp``), and
        the chain's draft it replaced is a rejection (``Rollback``) like any other."""
        on = [i for i in walk.path if plan.nodes[i].alternative < 0]  # the path is the chain's, then off it
        off = walk.path[len(on) :]
        checks = self._tree_checks(plan, rows, walk, on)
        self.out += [plan.nodes[i].token_id for i in on]
        start = len(self.out)  # generated position of the new block's slot 0
        if walk.ends and not off:  # the chain's drafts end the output: a checking-only step of their block
            self.nodes, self.drafts, self.ends = [], [], False
            last = self.last
            assert last is not None, "the drafts' block is the step before's"
            self._record(
                plan,
                started,
                block=last.block,
                block_start=last.block_start,
                block_size=last.block_size,
                step=last.step + 1,
                masked=(),
                slots=(),
                commits=(),
                checks=tuple(checks),
                check_only=True,
            )
            return
        commits: list[Commit] = []
        views: list[SlotView] = []
        for s, i in enumerate(off):  # each taken alternative is NTP's token from its parent's row
            r, token = plan.root(plan.nodes[i].parent), plan.nodes[i].token_id
            commits.append(exact_commit(self.model, s, token, rows.probs[r], rows.logp[r], ntp=True))
            views += slot_views(
                self.model, [s], propose(self.model, reply.causal[r : r + 1], 0.0, None), self.config.top_n
            )
        self.out += [plan.nodes[i].token_id for i in off]
        k = 0
        alternatives: list[Alternative] = []
        if walk.ends:  # the alternatives end the output
            self.nodes, self.drafts, self.ends = [], [], False
        else:
            r = plan.root(walk.at)
            self.out.append(walk.ntp)
            commits.append(exact_commit(self.model, len(off), walk.ntp, rows.probs[r], rows.logp[r], ntp=True))
            if not len(reply.blocks):  # no block after the path's end (``tree_blocks``): NTP's token, no drafts
                k = 1
                views += slot_views(
                    self.model, [len(off)], propose(self.model, reply.causal[r : r + 1], 0.0, None), self.config.top_n
                )
                self.nodes, self.drafts, self.ends = [], [], False
            else:
                k = len(plan.request.block_ids)
                proposal = propose(self.model, reply.blocks[0], 0.0, None)  # (k, V)
                commits += [replace(c, slot=c.slot + len(off)) for c in self._new_drafts(proposal, k)]
                views += slot_views(self.model, range(len(off), len(off) + k), proposal, self.config.top_n)
                self.nodes, alternatives = self._next_tree(list(reply.tree), len(off))
        rollback = None
        if any(not c.accepted for c in checks):  # NTP's token is written at the rejected draft's position, slot 0
            kept = set(walk.path)
            # the blocks after fed nodes off the accepted path
            discarded = sum(1 for i in plan.rows if i >= 0 and i not in kept and plan.blocked(i))
            rollback = Rollback(0, self.n_prompt + start, (), discarded * len(plan.request.block_ids))
        size = len(off) + k
        self._record(
            plan,
            started,
            block=self.n_blocks,
            block_start=self.n_prompt + start,
            block_size=size,
            step=0,
            masked=tuple(range(size)),
            slots=tuple(views),
            commits=tuple(commits),
            checks=tuple(checks),
            rollback=rollback,
            alternatives=tuple(alternatives),
        )
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
            nodes.append(
                _Node(
                    d.slot + shift, token, -1 if d.parent < 0 else number[d.parent], ends, alt, d.slot, above * d.prob
                )
            )
        return nodes, alternatives

    def _new_drafts(self, proposal, k: int) -> list[Commit]:
        """The rule's prefix of slots 1..k-1, cut after a stop; sets ``drafts`` and ``ends``."""
        self.drafts, self.ends = [], False
        if k < 2 or find_stop(self.model, self.out, self.clean + 1, self.config.stop):
            return []  # nothing to draft, or the exact token ended the output
        commits, _ = draft(self.model, self.rule, list(range(1, k)), proposal.rows(range(1, k)), self.intervals)
        tokens = [c.token_id for c in commits]
        found = find_stop(self.model, self.out + tokens, len(self.out) + 1, self.config.stop)
        if found:  # drafts past a stop could never be in the output
            commits = commits[: found.index - len(self.out)]
        self.drafts = [c.token_id for c in commits]
        self.ends = bool(found) or len(self.out) + len(self.drafts) == self.config.max_new_tokens
        return commits

    def _record(self, plan: _TokenTree, started: float, **parts) -> None:
        """Append the call's step (``started``: when its forward began, by ``time.perf_counter``)."""
        self.last = Step(call=self.call, wall_time=time.perf_counter() - started, n_input=plan.n_input, **parts)
        self.record(self.last)
