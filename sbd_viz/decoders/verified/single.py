"""Verified SBD decoding: the commit rule drafts, greedy NTP on the same weights checks every draft.

The output is exactly greedy NTP's (``decode_ntp``'s). The checks ride on the calls SBD makes anyway: a call
feeds the newly drafted tokens causally, and the causal logits at them are NTP's verdict on each. Only the end
of the output needs a call of its own (checking-only).

Invariant between calls: the cache holds exactly the accepted text but its last token ``x``, NTP's greedy
choice there (exact, never a draft). Each call feeds causally ``x`` and the drafts after it up to the block's
first open slot, then the block from that slot on. The causal logits accept or reject each fed draft; with all
accepted, the last causal row is NTP's exact token for the open slot, written in instead of drafted, and the
rule drafts among the other open slots from the block's logits. The first rejection keeps the accepted prefix,
writes NTP's token there, cuts the cache back and redrafts the block's slots after it. Once the drafts reach a
stop or the length limit, a checking-only call verifies the rest.

``Decoding`` with ``DecodeConfig(verify=True)`` runs a ``VerifiedDecode``; this module is its loop.

Tree drafting (``drafting="tree"``, ``TreeDecode``; "single" above is the default). With drafts made in fixed
blocks, a call that rejects a draft in the previous block's tail throws away the block it predicted: those
predictions sat on the rejected draft. Tree drafting (as TiDAR and Apple's "Your LLM Knows the Future") drafts
after every possible accepted length in the same call, so no call is wasted. The cache holds the accepted text
but its last token ``x``; a call (``SBDModel.tree_call``) feeds ``x`` and the m drafts d1..dm causally (row r is
NTP's verdict on d(r+1)), and for each j in 0..m a block of k mask slots after d1..dj that sees the text up to
dj only. With a = the drafts NTP accepted (leading ones), row a is NTP's exact next token, block a's slots
1..k-1 are the new drafts (its slot 0 is the position row a just wrote), and the cache is cut back to ``x``,
d1..da: every call writes a + 1 exact tokens. The commit rule with γ chooses how many drafts to keep, as a
prefix (the rule made gap-free: a draft after an undrafted slot could never be checked, as the next call feeds
fresh masks, so ``gap_free`` changes nothing here). Drafts are cut at a stop and at ``max_new_tokens``; the
call after drafts that reach one predicts no block after the last draft (if every draft holds, the output is
done), and the blocks near the length limit are cut so no slot lies past it. Greedy only (temperature 0).

How a tree call is recorded (the ``Step`` fields are block-structured; this is the closest honest mapping):

- the call's step opens a block of its own at the position row a wrote (``block_start``), of the call's block
  size: slot 0 is NTP's exact token (a commit with ``ntp=True``), slots 1.. the new drafts (commits, gap 0);
  ``masked`` is every slot and ``slots`` block a's predictions, as the chosen branch predicted them. The other
  branches' predictions are not recorded;
- ``checks`` are NTP's verdicts on the fed drafts, up to the first rejection; a check names the block and slot
  where its draft was committed (the previous step's block, slots 1..m);
- a rejection of d(a+1) is a ``Rollback`` at slot 0 of the new block (the rejected draft's position, where NTP's
  token goes), ``dropped`` empty (the dropped drafts d(a+2).. live in the previous step's block; a later commit
  at their positions supersedes them), ``n_discarded`` the slot predictions of the branches that sat on the
  rejected draft ((branches after a) * k);
- a call whose drafts reach the end and are all accepted commits nothing: it is recorded as a checking-only step
  of the previous step's block (``check_only``), though it predicted the branches a rejection would have needed;
- ``n_input`` counts every row fed: x, the drafts and every branch's slots.

The trace's config says ``"drafting": "tree"`` (a trace without the key drafted "single"). Tree drafting with several
candidates a slot, a token tree (``tree_widths``), is ``sbd_viz.decoders.verified.tree``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Callable, Generator, NamedTuple

import torch

from ...models.sbd_model import CacheCut, DraftTreeCall, ModelCall, SBDModel, TreeCall
from ..base import Block, Reply, Stop, find_stop, greedy, live_slots, propose
from ..steps import draft, exact_commit, slot_views
from ...trace.data import Check, Commit, Rollback, Step

DRAFTING = ("single", "tree")  # how verified SBD drafts: one block per call, or a block per possible accepted length


def check_drafting(drafting, config) -> str:
    """``drafting`` as a decode with ``config`` (a ``DecodeConfig``) can run it, else a ``ValueError`` naming it."""
    if not isinstance(drafting, str) or drafting not in DRAFTING:
        raise ValueError(f"drafting: must be one of {', '.join(map(repr, DRAFTING))}, got {drafting!r}")
    if drafting == "tree" and config.temperature != 0:
        raise ValueError(f"drafting: tree drafting picks each branch by NTP's greedy verdicts, so it needs "
                         f"temperature 0, got temperature={config.temperature!r}")
    if drafting == "tree" and not config.verify:
        raise ValueError("drafting: tree drafting is a mode of verified SBD (NTP's verdicts choose the branch); "
                         "pass verify=True, or drafting='single'")
    return drafting


class Place(NamedTuple):
    """Where a step belongs: its block's number, first generated position and size, and the step's number there."""

    block: int
    start: int
    size: int
    step: int


def _place(block: Block) -> Place:
    """The place of the block's next step."""
    return Place(block.index, block.start, block.size, block.steps)


class _Call(NamedTuple):
    """One call's plan: the request, the open slots its block logits predict, and how far its checks go."""

    request: ModelCall
    masked: list[int]  # the block's open slots the call predicts; none for a checking-only call
    first_open: int | None  # generated position of the slot NTP's last causal row fills; None: checking only
    target: int = 0  # a checking-only call's drafts end at this generated length

    @property
    def checking(self) -> bool:
        return self.first_open is None

    @property
    def n_input(self) -> int:
        return len(self.request.new_ids) + len(self.request.block_ids)


class Rows(NamedTuple):
    """A call's causal rows as NTP reads them: row r predicts generated position ``n_ok + r``."""

    probs: torch.Tensor  # (n_causal, V)
    logp: torch.Tensor  # (n_causal, V)
    ntp: list[int]  # each row's greedy token


def _read_rows(model: SBDModel, causal: torch.Tensor) -> Rows:
    logp = torch.log_softmax(causal, -1)
    probs = logp.exp()
    return Rows(probs, logp, greedy(model, probs).tolist())


class VerifiedDecode:
    """One verified decode's state between calls; ``requests()`` runs it (see the module's docstring).

    ``config`` is the decode's ``DecodeConfig``; each call's ``Step`` goes to ``record`` as soon as the call is
    done, so a caller streams them while the decode runs."""

    def __init__(self, model: SBDModel, config, prompt_ids: list[int], record: Callable[[Step], None],
                 intervals: list | None = None):
        self.model, self.config, self.prompt_ids, self.record = model, config, list(prompt_ids), record
        self.intervals = intervals  # each draft's knob interval is appended here (``draft``), rejected ones too
        self.n_prompt = len(prompt_ids)
        self.line: list[int] = []  # generated tokens before the current block; its tail may hold unchecked drafts
        self.n_ok = 0  # generated tokens known to be NTP's; all but the last are in the cache
        self.clean = 0  # generated tokens known to hold no stop
        self.call = 0
        self.block = self._block(0, 0)
        self.prev = Place(-1, 0, 0, 0)  # the previous block, whose tail this block's first call checks

    def requests(self) -> Generator[ModelCall | CacheCut, Reply | None, tuple[list[int], Stop]]:
        """Yield ``ModelCall``s (send back a ``Reply``) and ``CacheCut``s (send back None); return the output ids
        and their ``Stop``."""
        n_max = self.config.max_new_tokens
        while True:
            found = find_stop(self.model, self.line + self.block.tokens[: self.block.prefix], self.clean + 1,
                              self.config.stop)
            if found and found.index <= self.n_ok:
                break  # the accepted text holds a stop
            if self.n_ok >= n_max:
                found = Stop(n_max, "length")
                break
            self.clean = self.n_ok
            masked = self._open_slots()
            checking = bool(found) or (not masked and self.block.start + self.block.size == n_max)
            if not checking and not masked:
                self._next_block()
                continue
            plan = self._checking_call(found) if checking else self._drafting_call(masked)
            reply = yield plan.request  # causal (n_causal, V), block (len(block_ids), V)
            started = time.perf_counter() - reply.seconds  # a step's wall time: the forward plus this decode's own work
            rows = _read_rows(self.model, reply.causal)
            checks, rejected = self._verdicts(plan, rows)
            if rejected is not None:
                yield CacheCut(self.n_prompt + self.n_ok + rejected)
                self._roll_back(plan, rows, rejected, checks, started)
            elif plan.checking:
                self._accept_all(plan, checks, started)
            else:
                self._fill_and_draft(plan, rows, reply.block, checks, started)
            self.call += 1
        return (self.line + self.block.tokens)[: found.index], found

    # -- where things are ----------------------------------------------------------------
    def _block(self, index: int, start: int) -> Block:
        """An empty block at generated position ``start``, cut short by ``max_new_tokens``."""
        size = max(0, min(self.config.block_size, self.config.max_new_tokens - start))
        return Block.empty(index, start, size, self.model.mask_token_id)

    def _at(self, g: int) -> int:
        """The token at generated position ``g`` (accepted, exact or drafted)."""
        return self.line[g] if g < self.block.start else self.block.tokens[g - self.block.start]

    def _locate(self, g: int) -> tuple[int, int]:
        """(block, slot) of generated position ``g``: in the current block, or in the previous block's tail."""
        if g >= self.block.start:
            return self.block.index, g - self.block.start
        return self.prev.block, g - self.prev.start

    def _open_slots(self) -> list[int]:
        """The open slots a call predicts: ``live_slots``, as in plain decoding ("generate until")."""
        return live_slots(self.model, self.block.tokens, self.block.final, self.config.stop)

    def _next_block(self) -> None:
        """The block is complete: it joins the line (its tail still unchecked) and the next block opens after it."""
        b = self.block
        self.line, self.prev = self.line + b.tokens, _place(b)
        self.block = self._block(b.index + 1, b.start + b.size)

    # -- the call ------------------------------------------------------------------------
    def _drafting_call(self, masked: list[int]) -> _Call:
        """Feed the last accepted token and the drafts after it up to the first open slot, then the block from
        there: the causal rows check the drafts and predict the open slot exactly, the block drafts the rest."""
        b, p = self.block, masked[0]
        new_ids = ((self.prompt_ids if self.call == 0 else [])
                   + [self._at(g) for g in range(max(self.n_ok - 1, 0), b.start + p)])
        return _Call(ModelCall(new_ids, b.tokens[p:], self._n_causal(new_ids)), masked, b.start + p)

    def _checking_call(self, found: Stop | None) -> _Call:
        """The drafts reach a stop (``found``) or the length limit: feed them all to be checked, and predict no block."""
        target = found.index if found else self.config.max_new_tokens
        new_ids = [self._at(g) for g in range(self.n_ok - 1, target - 1)]
        return _Call(ModelCall(new_ids, [], self._n_causal(new_ids)), [], None, target)

    def _n_causal(self, new_ids: list[int]) -> int:
        # causal rows predict positions n_ok, n_ok + 1, ...; of the prompt only its last row is needed
        return len(new_ids) if self.call else 1

    def _verdicts(self, plan: _Call, rows: Rows) -> tuple[list[Check], int | None]:
        """NTP's verdict on each fed draft, in order, up to the first rejection; and that rejection's row."""
        checks = []
        for r, want in enumerate(rows.ntp):
            g = self.n_ok + r
            if g == plan.first_open:
                break  # not a draft: NTP's token for the open slot
            token = self._at(g)
            block, slot = self._locate(g)
            checks.append(Check(block, slot, self.n_prompt + g, token, self.model.token_text(token), want,
                                self.model.token_text(want), float(rows.probs[r, want]), float(rows.probs[r, token]),
                                accepted=want == token))
            if want != token:
                return checks, r
        return checks, None

    # -- what the verdicts do ------------------------------------------------------------
    def _roll_back(self, plan: _Call, rows: Rows, r: int, checks: list[Check], started: float) -> None:
        """Row ``r`` rejected its draft: keep the accepted text before it, write NTP's token there, and open
        again what was drafted after it (the cache was just cut back to the same point)."""
        g, fix = self.n_ok + r, rows.ntp[r]
        self.n_ok = g + 1
        b = self.block
        if g >= b.start:  # in this block: its drafts right of the rejected one were built on it
            slot, place = g - b.start, _place(b)
            dropped = b.reopen_after(slot)
            b.write(slot, fix)
            b.steps += 1
            masked = plan.masked
        else:  # in the previous block's tail, found by this block's first call: this block restarts after it
            slot, place = g - self.prev.start, self.prev
            dropped = tuple(range(slot + 1, self.prev.size))
            self.line = self.line[:g] + [fix]
            self.block = self._block(b.index, g + 1)
            masked = []  # the call's slot predictions were for the block just abandoned
        commit = exact_commit(self.model, slot, fix, rows.probs[r], rows.logp[r], ntp=True)
        self._record(place, plan, checks, started, masked=tuple(masked), slots=(), commits=(commit,),
                     rollback=Rollback(slot, self.n_prompt + g, dropped, len(plan.masked)), check_only=plan.checking)

    def _accept_all(self, plan: _Call, checks: list[Check], started: float) -> None:
        """A checking-only call accepted every draft up to its target."""
        self.n_ok = plan.target
        self._record(_place(self.block), plan, checks, started, masked=(), slots=(), commits=(), check_only=True)
        self.block.steps += 1

    def _fill_and_draft(self, plan: _Call, rows: Rows, logits: torch.Tensor, checks: list[Check],
                        started: float) -> None:
        """Every fed draft accepted: the last causal row is NTP's exact token for the first open slot, and the
        rule drafts among the other open slots from the block's logits."""
        b, masked = self.block, plan.masked
        p, exact = masked[0], rows.ntp[-1]
        b.write(p, exact)
        self.n_ok = plan.first_open + 1
        commits: list[Commit] = [exact_commit(self.model, p, exact, rows.probs[-1], rows.logp[-1], ntp=True)]
        proposal = propose(self.model, logits[[s - p for s in masked]], 0.0, None)  # (m, V) for the open slots
        if len(masked) > 1:  # the slot NTP just filled is not the rule's to draft
            drafts, _ = draft(self.model, self.config.commit_rule, masked[1:], proposal.rows(range(1, len(masked))),
                              self.intervals)
            for c in drafts:
                b.write(c.slot, c.token_id)
            commits += drafts
        self._record(_place(b), plan, checks, started, masked=tuple(masked),
                     slots=slot_views(self.model, masked, proposal, self.config.top_n),
                     commits=tuple(sorted(commits, key=lambda c: c.slot)))
        b.steps += 1

    def _record(self, place: Place, plan: _Call, checks: list[Check], started: float, **parts) -> None:
        """Append the call's step at ``place`` (``started``: when its forward began, by ``time.perf_counter``)."""
        self.record(Step(call=self.call, block=place.block, block_start=self.n_prompt + place.start,
                         block_size=place.size, step=place.step, wall_time=time.perf_counter() - started,
                         n_input=plan.n_input, checks=tuple(checks), **parts))


# -- tree drafting ---------------------------------------------------------------------------------------------
class _Tree(NamedTuple):
    """One tree call's plan: the request, the drafts it checks, and whether they end the output if all hold."""

    request: TreeCall
    drafts: list[int]
    ends: bool  # the drafts reach a stop or the length limit: no branch after the last one

    @property
    def n_input(self) -> int:
        return len(self.request.new_ids) + self.request.n_branches * self.request.block_size


def _accepted(drafts: list[int], ntp: list[int]) -> int:
    """How many leading drafts NTP's greedy tokens accept (``ntp[j]`` is its verdict on ``drafts[j]``)."""
    return next((j for j, d in enumerate(drafts) if d != ntp[j]), len(drafts))


class TreeDecode:
    """One verified decode with tree drafting; ``requests()`` runs it (see the module's docstring).

    Between calls: ``out`` is the accepted text (NTP's; all but its last token in the cache), ``drafts`` the
    unchecked drafts after it, committed at slots 1.. of ``last``'s block. Each call's ``Step`` goes to ``record``
    as soon as the call is done."""

    def __init__(self, model: SBDModel, config, prompt_ids: list[int], record: Callable[[Step], None],
                 intervals: list | None = None):
        self.model, self.config, self.prompt_ids, self.record = model, config, list(prompt_ids), record
        self.intervals = intervals  # each draft's knob interval is appended here (``draft``), rejected ones too
        self.n_prompt = len(prompt_ids)
        self.rule = replace(config.commit_rule, gap_free=True)  # drafts are kept as a prefix (module docstring)
        self.out: list[int] = []
        self.drafts: list[int] = []
        self.ends = False  # the drafts reach a stop or the length limit
        self.clean = 0  # accepted tokens known to hold no stop
        self.call = 0
        self.n_blocks = 0
        self.last: Step | None = None  # the step whose block holds the drafts

    def requests(self) -> Generator[TreeCall | DraftTreeCall | CacheCut, Reply | None, tuple[list[int], Stop]]:
        """Yield ``TreeCall``s (``DraftTreeCall``s for a token tree; send back a ``Reply``) and ``CacheCut``s (send
        back None); return the output ids and their ``Stop``."""
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
            started = time.perf_counter() - reply.seconds  # a step's wall time: the forward plus this decode's own work
            yield from self._read(plan, _read_rows(self.model, reply.causal), reply, started)
            self.call += 1
        return self.out[: found.index], found

    def _read(self, plan: _Tree, rows: Rows, reply: Reply, started: float) -> Generator[CacheCut, None, None]:
        """NTP's verdicts on the call's drafts: cut the rejected ones off the cache, record the call."""
        a = _accepted(plan.drafts, rows.ntp)
        if a + 1 < plan.request.n_branches:  # keep x, d1..da: the fed drafts after them were rejected
            yield CacheCut(self.n_prompt + len(self.out) + a)
        checks = self._checks(plan, rows, a)
        if a < plan.request.n_branches:
            self._branch(plan, rows, reply.block, a, checks, started)  # branch a is the one taken
        else:
            self._accept_all(plan, checks, started)

    def _plan(self) -> _Tree:
        """Feed x and the drafts (the last one only if a branch must follow it), with a branch after each."""
        n_max, drafts = self.config.max_new_tokens, self.drafts
        n_branches = len(drafts) + (not self.ends)
        x = self.prompt_ids if self.call == 0 else self.out[-1:]
        # every branch's last slot stays inside the length limit (and so inside the context check_fits allowed)
        k = min(self.config.block_size, n_max - len(self.out) - (n_branches - 1))
        fed = drafts[: n_branches - 1]
        return _Tree(TreeCall(x + fed, n_branches, k, pick=partial(self._taken, fed)), drafts, self.ends)

    def _taken(self, fed: list[int], roots: torch.Tensor) -> int:
        """The branch NTP's verdicts take: after the first fed draft a root's greedy token rejects, else the last.
        The call computes that branch's block alone (``SBDModel.branch_call``); ``requests`` finds the same ``a``
        (a rejection of the unfed last draft is the last branch too)."""
        return _accepted(fed, greedy(self.model, roots).tolist())

    def _checks(self, plan: _Tree, rows: Rows, a: int) -> list[Check]:
        """NTP's verdicts on the drafts up to the first rejection (d(a+1)), each at its block and slot."""
        checks = []
        for j in range(min(a + 1, len(plan.drafts))):
            token, want = plan.drafts[j], rows.ntp[j]
            position = self.n_prompt + len(self.out) + j
            checks.append(Check(self.last.block, position - self.last.block_start, position, token,
                                self.model.token_text(token), want, self.model.token_text(want),
                                float(rows.probs[j, want]), float(rows.probs[j, token]), accepted=want == token))
        return checks

    def _branch(self, plan: _Tree, rows: Rows, logits: torch.Tensor, a: int, checks: list[Check],
                started: float) -> None:
        """Drafts d1..da accepted, then NTP's exact token from row a; block a (``logits``: (k, V)) drafts on."""
        k, start = plan.request.block_size, len(self.out) + a  # generated position of the new block's slot 0
        exact = rows.ntp[a]
        self.out += plan.drafts[:a] + [exact]
        proposal = propose(self.model, logits, 0.0, None)  # (k, V)
        commits = [exact_commit(self.model, 0, exact, rows.probs[a], rows.logp[a], ntp=True)]
        commits += self._new_drafts(proposal, k)
        rollback = None
        if a < len(plan.drafts):  # d(a+1) rejected: NTP's token is written at its position, slot 0
            rollback = Rollback(0, self.n_prompt + start, (), (plan.request.n_branches - 1 - a) * k)
        self._record(plan, started, block=self.n_blocks, block_start=self.n_prompt + start, block_size=k, step=0,
                     masked=tuple(range(k)), slots=slot_views(self.model, range(k), proposal, self.config.top_n),
                     commits=tuple(commits), checks=tuple(checks), rollback=rollback)
        self.n_blocks += 1

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

    def _accept_all(self, plan: _Tree, checks: list[Check], started: float) -> None:
        """Drafts that reach the end, all accepted: the output is complete; a checking-only step of their block."""
        self.out += plan.drafts
        self.drafts, self.ends = [], False
        last = self.last
        self._record(plan, started, block=last.block, block_start=last.block_start, block_size=last.block_size,
                     step=last.step + 1, masked=(), slots=(), commits=(), checks=tuple(checks), check_only=True)

    def _record(self, plan: _Tree, started: float, **parts) -> None:
        """Append the call's step (``started``: when its forward began, by ``time.perf_counter``)."""
        self.last = Step(call=self.call, wall_time=time.perf_counter() - started, n_input=plan.n_input, **parts)
        self.record(self.last)
