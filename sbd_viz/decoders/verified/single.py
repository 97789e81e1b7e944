"""Verified SBD with single drafting (``VerifiedDecode``): the commit rule drafts a block, greedy NTP on the same
weights checks every draft in the next calls; the text is exactly greedy NTP's. How: docs/verified_sbd.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import NamedTuple

import torch

from ...models.call import CacheCut, Model, ModelCall, Reply
from ...trace.data import Check, Commit, Rollback, Step
from ..base import Block, Stop, find_stop, live_slots, propose
from ..steps import draft, exact_commit, slot_views
from .verdicts import Rows, read_rows


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


class VerifiedDecode:
    """One verified decode's state between calls; ``requests()`` runs it (see the module's docstring).

    ``config`` is the decode's ``DecodeConfig``; each call's ``Step`` goes to ``record`` as soon as the call is
    done, so a caller streams them while the decode runs."""

    def __init__(
        self, model: Model, config, prompt_ids: list[int], record: Callable[[Step], None], intervals: list | None = None
    ):
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
            found = find_stop(
                self.model, self.line + self.block.tokens[: self.block.prefix], self.clean + 1, self.config.stop
            )
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
            assert isinstance(reply, Reply), "a ModelCall is answered with a Reply"
            started = time.perf_counter() - reply.seconds  # a step's wall time: the forward plus this decode's own work
            rows = read_rows(self.model, reply.causal)
            checks, rejected = self._verdicts(plan, rows)
            if rejected is not None:
                yield CacheCut(self.n_prompt + self.n_ok + rejected)
                self._roll_back(plan, rows, rejected, checks, started)
            elif plan.checking:
                self._accept_all(plan, checks, started)
            else:
                self._fill_and_draft(plan, rows, reply.blocks[0], checks, started)
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
        new_ids = (self.prompt_ids if self.call == 0 else []) + [
            self._at(g) for g in range(max(self.n_ok - 1, 0), b.start + p)
        ]
        return _Call(ModelCall.fused(new_ids, b.tokens[p:], self._n_causal(new_ids)), masked, b.start + p)

    def _checking_call(self, found: Stop | None) -> _Call:
        """The drafts reach a stop (``found``) or the length limit: feed them all to be checked, predict no block."""
        target = found.index if found else self.config.max_new_tokens
        new_ids = [self._at(g) for g in range(self.n_ok - 1, target - 1)]
        return _Call(ModelCall.fused(new_ids, [], self._n_causal(new_ids)), [], None, target)

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
            checks.append(
                Check(
                    block,
                    slot,
                    self.n_prompt + g,
                    token,
                    self.model.token_text(token),
                    want,
                    self.model.token_text(want),
                    float(rows.probs[r, want]),
                    float(rows.probs[r, token]),
                    accepted=want == token,
                )
            )
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
        self._record(
            place,
            plan,
            checks,
            started,
            masked=tuple(masked),
            slots=(),
            commits=(commit,),
            rollback=Rollback(slot, self.n_prompt + g, dropped, len(plan.masked)),
            check_only=plan.checking,
        )

    def _accept_all(self, plan: _Call, checks: list[Check], started: float) -> None:
        """A checking-only call accepted every draft up to its target."""
        self.n_ok = plan.target
        self._record(_place(self.block), plan, checks, started, masked=(), slots=(), commits=(), check_only=True)
        self.block.steps += 1

    def _fill_and_draft(
        self, plan: _Call, rows: Rows, logits: torch.Tensor, checks: list[Check], started: float
    ) -> None:
        """Every fed draft accepted: the last causal row is NTP's exact token for the first open slot, and the
        rule drafts among the other open slots from the block's logits."""
        b, masked = self.block, plan.masked
        p, exact = masked[0], rows.ntp[-1]
        b.write(p, exact)
        assert plan.first_open is not None, "a drafting call fills its first open slot"
        self.n_ok = plan.first_open + 1
        commits: list[Commit] = [exact_commit(self.model, p, exact, rows.probs[-1], rows.logp[-1], ntp=True)]
        proposal = propose(self.model, logits[[s - p for s in masked]], 0.0, None)  # (m, V) for the open slots
        if len(masked) > 1:  # the slot NTP just filled is not the rule's to draft
            drafts, _ = draft(
                self.model, self.config.commit_rule, masked[1:], proposal.rows(range(1, len(masked))), self.intervals
            )
            for c in drafts:
                b.write(c.slot, c.token_id)
            commits += drafts
        self._record(
            _place(b),
            plan,
            checks,
            started,
            masked=tuple(masked),
            slots=slot_views(self.model, masked, proposal, self.config.top_n),
            commits=tuple(sorted(commits, key=lambda c: c.slot)),
        )
        b.steps += 1

    def _record(self, place: Place, plan: _Call, checks: list[Check], started: float, **parts) -> None:
        """Append the call's step at ``place`` (``started``: when its forward began, by ``time.perf_counter``)."""
        self.record(
            Step(
                call=self.call,
                block=place.block,
                block_start=self.n_prompt + place.start,
                block_size=place.size,
                step=place.step,
                wall_time=time.perf_counter() - started,
                n_input=plan.n_input,
                checks=tuple(checks),
                **parts,
            )
        )
