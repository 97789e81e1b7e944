"""The trace: plain data recorded by the decoder, one ``Step`` per model call.

No model, tokenizer or tensor lives here: a trace round-trips through JSON, so it can be
saved, shared, loaded without torch, and rendered by pure functions.

``Trace``, ``Step``, ``Commit``, ``Check``, ``Rollback``, ``Draft``, ``Interval``; ``Trace.save`` / ``to_json`` /
``to_dict`` write a trace's file, ``sbd_viz.trace.file`` (``sv.load_trace``) reads one. The vocabulary (block, slot,
call, step, commit, gap fill; verified decoding's; a canvas's; the γ range): docs/trace.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .labels import render_state

SCHEMA = "sbd_viz.trace"
SCHEMA_VERSION = 3  # the one version this sbd_viz writes and reads
DRAFTS_CHECKED = {"drafts": "checked"}  # in a config: each call fed drafts causally, NTP checked them (greedy's text)


def drafts_checked(config: dict) -> bool:
    """Whether a trace's decoder fed drafts causally and kept what greedy NTP accepted (Jacobi, prompt lookup, ...)."""
    return config.get("drafts") == "checked"


@dataclass(frozen=True)
class Interval:
    """Knob values from ``lo`` to ``hi``, each end included if ``lo_closed`` / ``hi_closed``; only the whole
    numbers among them if ``whole`` (a whole-number knob: ``top_k``'s ``[3, 3]`` is k = 3 alone, ``[6, inf]``
    every k >= 6). An infinite end is closed when the knob takes that value (an entropy budget of inf is valid)."""

    lo: float
    hi: float
    lo_closed: bool = True
    hi_closed: bool = True
    whole: bool = False

    def __contains__(self, value: float) -> bool:
        above = value >= self.lo if self.lo_closed else value > self.lo
        below = value <= self.hi if self.hi_closed else value < self.hi
        return above and below and (not self.whole or (math.isfinite(value) and value == int(value)))

    def __iter__(self):
        """``lo, hi = interval``: the ends (whether each is closed is ``lo_closed`` / ``hi_closed``)."""
        return iter((self.lo, self.hi))

    def __and__(self, other: Interval) -> Interval:
        """The values in both (a decode's γ range is its calls' intervals intersected). At a shared end, the end
        is closed only if both are; may be empty (``lo > hi``, or ``lo == hi`` with an open end)."""
        if self.lo != other.lo:
            lo, lo_closed = max((self.lo, self.lo_closed), (other.lo, other.lo_closed), key=lambda e: e[0])
        else:
            lo, lo_closed = self.lo, self.lo_closed and other.lo_closed
        if self.hi != other.hi:
            hi, hi_closed = min((self.hi, self.hi_closed), (other.hi, other.hi_closed), key=lambda e: e[0])
        else:
            hi, hi_closed = self.hi, self.hi_closed and other.hi_closed
        return Interval(lo, hi, lo_closed, hi_closed, self.whole or other.whole)

    def __str__(self) -> str:
        ends = f"{'[' if self.lo_closed else '('}{self.lo:g}, {self.hi:g}{']' if self.hi_closed else ')'}"
        return f"whole numbers in {ends}" if self.whole else ends


class TraceFormatError(ValueError):
    """A file or dict that is not a valid ``sbd_viz`` trace."""


@dataclass(frozen=True)
class Candidate:
    """One of the model's top proposals for a slot."""

    token_id: int
    text: str
    prob: float


@dataclass(frozen=True)
class SlotView:
    """What the model predicted for one masked slot at one step."""

    slot: int
    entropy: float  # nats, of the model's (untempered) distribution
    top: tuple[Candidate, ...]  # most probable first


@dataclass(frozen=True)
class Commit:
    """A slot fixed to a token at a step."""

    slot: int
    token_id: int
    text: str
    prob: float  # model probability of the committed token
    entropy: float  # nats, of the slot's distribution when it was committed
    gap: int  # slots left of this one in the block still masked after the step
    ntp: bool = False  # verified decoding: written from NTP's causal prediction (exact greedy), not drafted;
    #                    prob/entropy are then NTP's


@dataclass(frozen=True)
class Check:
    """Verified decoding's verdict on one drafted token: NTP's greedy choice at its position."""

    block: int
    slot: int
    position: int  # absolute (prompt + generated), like ``Step.block_start``
    token_id: int  # the draft
    text: str
    ntp_token_id: int  # NTP's greedy token given the accepted text before it
    ntp_text: str
    ntp_prob: float  # NTP's probability of its own token
    draft_prob: float  # NTP's probability of the draft (the teacher-forced score of the draft)
    accepted: bool


@dataclass(frozen=True)
class Rollback:
    """The first rejected draft of a call: the text is cut there and NTP's token written in its slot."""

    slot: int  # in the step's block; the step commits NTP's token here
    position: int  # absolute; the KV cache is cut back to this length (exactly the accepted text)
    dropped: tuple[int, ...]  # slots of the step's block whose drafts were discarded with it (right of ``slot``)
    n_discarded: int  # slot predictions of this call thrown away (made after the rejected draft)


@dataclass(frozen=True)
class Alternative:
    """A drafted token off the chain of a verified decode's token tree (``tree_widths``): a candidate the next call
    also checks at ``slot``, after ``parent``: -1 for the step's own token at ``slot - 1`` (its commit there, or
    slot 0's exact token), else the number of the alternative it follows in the step's ``alternatives``."""

    slot: int
    token_id: int
    text: str
    prob: float  # the drafter's probability of it there, after its parent
    parent: int


@dataclass(frozen=True)
class Draft:
    """One canvas slot after a step: the model's draft (argmax) and whether the slot holds an accepted token."""

    slot: int
    token_id: int  # the draft: the most probable token
    text: str
    prob: float  # the draft's probability (its confidence)
    entropy: float  # nats, of the distribution the decoder's acceptance rule read
    top: tuple[Candidate, ...]  # most probable first
    accepted: bool  # holds an accepted token after the step; otherwise renoised or remasked
    held_id: int | None = None  # the accepted token (a sample: it may differ from the draft); None if open
    held_text: str | None = None


@dataclass(frozen=True)
class Pass:
    """A model pass recorded but not counted in ``nfe`` (an encoder pass that extends the cache)."""

    kind: str  # e.g. 'encoder'
    n_input: int  # tokens fed
    wall_time: float


@dataclass(frozen=True)
class Step:
    """One model call and the commits it led to."""

    call: int  # global call index, from 0
    block: int  # block index, from 0
    block_start: int  # absolute position (in prompt + generated tokens) of slot 0
    block_size: int
    step: int  # step index inside the block, from 0
    masked: tuple[int, ...]  # slots masked before the call, ascending
    slots: tuple[SlotView, ...]  # predictions for the masked slots, same order as ``masked``
    commits: tuple[Commit, ...]  # ascending by slot; never empty
    wall_time: float  # seconds spent in this call (model forward + commit decision)
    n_input: int = 0  # tokens fed to the model in this call (prefill / fused / block-only)
    checks: tuple[Check, ...] = ()  # verified decoding: the drafts this call verified, by position
    rollback: Rollback | None = None  # verified decoding: set when this call rejected a draft
    check_only: bool = False  # verified decoding: the call fed drafts to check them and predicted no block
    canvas: tuple[Draft, ...] = ()  # canvas decoders: every slot of the block after the step, by slot
    renoised: tuple[int, ...] = ()  # canvas decoders: slots accepted before the step and open after it
    passes: tuple[Pass, ...] = ()  # uncounted passes run before this call, in order
    alternatives: tuple[Alternative, ...] = ()  # verified token trees: the drafts off the chain the next call checks

    @property
    def accepted(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.accepted)

    @property
    def rejected(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.accepted)

    @property
    def alternatives_taken(self) -> int:
        """A verified token tree's step writes the alternatives NTP took, each NTP's token (``ntp``), before its exact
        token: how many (0 for any other step, which writes one token of NTP's at most)."""
        return max(0, sum(c.ntp for c in self.commits) - 1)

    @property
    def committed_slots(self) -> tuple[int, ...]:
        return tuple(c.slot for c in self.commits)

    @property
    def masked_after(self) -> tuple[int, ...]:
        done = set(self.committed_slots)
        return tuple(s for s in self.masked if s not in done)

    def slot_view(self, slot: int) -> SlotView | None:
        for view in self.slots:
            if view.slot == slot:
                return view
        return None


@dataclass(frozen=True)
class GapFill:
    """A commit made while slots to its left in the block were still masked."""

    call: int
    block: int
    step: int
    slot: int
    gap: int
    token_id: int
    text: str
    entropy: float
    prob: float
    state: str  # the block after the step, e.g. 'PREFIX <m> <m> TOKEN' (committed text, <m> for masks)
    kept: bool  # in the final output; False if a stop later cut the output before this slot


@dataclass(frozen=True)
class Trace:
    """A whole decode: the prompt, the settings, every step, and the final tokens."""

    prompt: str
    prompt_ids: tuple[int, ...]
    config: dict[str, Any]  # decoder ('sbd' or 'ntp'), rule, gamma, block_size, ... as plain values
    model_id: str
    steps: tuple[Step, ...]
    output_ids: tuple[int, ...]  # generated tokens, truncated after the stop
    output_texts: tuple[str, ...]  # text of each output token
    text: str  # the generated text (special tokens removed)
    stop_reason: str  # 'stop', 'eos' or 'length'
    meta: dict[str, Any] = field(default_factory=dict)
    # the knob values (γ) at which this exact greedy decode results: ``sbd_viz.decoders.rules.Interval``, the
    # intersection of its calls' knob intervals, computed from the unrounded scores while decoding (plain, verified and
    # remasking SBD at temperature 0); None for sampling and decoders without a commit rule's knob
    gamma_range: Interval | None = None

    # -- derived measures ------------------------------------------------------------
    @property
    def nfe(self) -> int:
        """Number of counted model calls (function evaluations), the prompt prefill included; a block
        decoder's uncounted passes (``Step.passes``, e.g. encoder passes) are not."""
        return len(self.steps)

    @property
    def n_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def tokens_per_call(self) -> float:
        return self.n_tokens / self.nfe if self.nfe else 0.0

    @property
    def calls_per_token(self) -> float:
        return self.nfe / self.n_tokens if self.n_tokens else float("nan")

    @property
    def wall_time(self) -> float:
        return sum(s.wall_time for s in self.steps)

    @property
    def n_blocks(self) -> int:
        return len({s.block for s in self.steps})

    @property
    def verified(self) -> bool:
        """Decoded with ``verify=True``: every output token is NTP's greedy choice."""
        return bool(self.config.get("verify", False))

    @property
    def tree_drafted(self) -> bool:
        """Verified SBD that drafted a tree (``drafting="tree"``): each call fed a block after several of its fed
        tokens."""
        return self.config.get("drafting") == "tree"

    @property
    def tree_block_cap(self) -> int | None:
        """The most blocks a tree-drafting call fed (``tree_blocks``), None for a block after every fed token."""
        cap = self.config.get("tree_blocks")
        return None if cap is None else int(cap)

    @property
    def is_greedy(self) -> bool:
        """Greedy NTP's own decode (``sv.decode_ntp``: one token a call): its config names its decoder as its rule and
        checked no drafts."""
        named = self.config.get("decoder") is not None and self.config.get("rule") == self.config.get("decoder")
        return named and not drafts_checked(self.config)  # a draft-and-check decoder names its rule so too

    @cached_property  # not a field; the pictures ask it per cell
    def has_canvas(self) -> bool:
        """Recorded from a decoder whose slots can change after a commit (steps carry canvases)."""
        return any(s.canvas for s in self.steps)

    @property
    def special_tokens(self) -> frozenset[str]:
        """The texts of the model's special tokens, as its decode recorded them (``meta["special_tokens"]``; a
        chat template's ``<|im_start|>``), so a picture marks them without a tokenizer. Empty if none recorded."""
        return frozenset(t for t in self.meta.get("special_tokens") or () if isinstance(t, str))

    @property
    def model_kind(self) -> str:
        """What kind of model wrote it, if its decode recorded that (``"pretrained LM, not SBD-trained"``)."""
        return str(self.meta.get("model_kind") or "")

    def checks(self) -> list[Check]:
        """Every verdict on a drafted token, in call order (empty unless verified)."""
        return [c for s in self.steps for c in s.checks]

    def rollbacks(self) -> list[Step]:
        """The calls that rejected a draft (each cut the text back and wrote NTP's token)."""
        return [s for s in self.steps if s.rollback is not None]

    def verdicts(self) -> dict[tuple[int, int], tuple[int, Check]]:
        """Each checked draft's verdict: ``(call that committed the draft, absolute position) -> (call that checked
        it, its Check)``. A check's draft is the last commit at its position before the checking call; a draft a
        rollback dropped before it was fed is never checked, so it has no entry. Empty unless verified."""
        last: dict[int, int] = {}
        verdicts = {}
        for s in self.steps:
            for check in s.checks:
                if check.position in last:
                    verdicts[(last[check.position], check.position)] = (s.call, check)
            for c in s.commits:
                last[s.block_start + c.slot] = s.call
        return verdicts

    @property
    def n_check_only(self) -> int:
        """Calls spent only on checking drafts (the final check; no block predicted)."""
        return sum(1 for s in self.steps if s.check_only)

    @property
    def accepted_fraction(self) -> float:
        """Of the drafts verified, the fraction NTP agreed with; NaN if none was checked."""
        checks = self.checks()
        return sum(c.accepted for c in checks) / len(checks) if checks else float("nan")

    def block_steps(self, block: int) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.block == block)

    def calls_per_block(self) -> list[int]:
        counts: dict[int, int] = {}
        for s in self.steps:
            counts[s.block] = counts.get(s.block, 0) + 1
        return [counts[b] for b in sorted(counts)]

    def token_calls(self) -> list[int]:
        """For each output token, the index of the call that committed it (on a canvas, that last accepted its
        slot; a slot the block ended with open, the block's last call)."""
        at: dict[int, int] = {}
        last: dict[int, int] = {}
        for s in self.steps:
            for c in s.commits:
                at[s.block_start + c.slot] = s.call
            for slot in s.renoised:
                at.pop(s.block_start + slot, None)
            last.update({s.block_start + i: s.call for i in range(s.block_size)})
        start = len(self.prompt_ids)
        return [at[p] if p in at else last[p] for p in range(start, start + self.n_tokens)]  # every token is in a block

    def block_state(self, step: Step, after: bool = True) -> list[str | None]:
        """The texts of a block's slots before/after ``step``; ``None`` where masked (or open, on a canvas)."""
        if step.canvas:
            before = [s for s in self.block_steps(step.block) if s.call < step.call]
            shown = step if after else (before[-1] if before else None)
            return [d.held_text if d.accepted else None for d in shown.canvas] if shown else [None] * step.block_size
        state: list[str | None] = [None] * step.block_size
        for s in self.block_steps(step.block):
            if s.call > step.call or (s.call == step.call and not after):
                break
            for c in s.commits:
                state[c.slot] = c.text
            if s.rollback is not None:
                for slot in s.rollback.dropped:
                    state[slot] = None
        return state

    def text_before(self, step: Step) -> str:
        """The prompt and generated text before ``step``'s block."""
        n = step.block_start - len(self.prompt_ids)
        return self.prompt + "".join(self.output_texts[: max(0, n)])

    def kept(self, step: Step, slot: int) -> bool:
        """Whether ``step``'s commit to ``slot`` is in the output: a stop cuts the output (commits past it are
        discarded), and in verified decoding a later commit at the same position (NTP's correction, or a
        block opened after a rollback) replaces a rejected or discarded draft."""
        position = step.block_start + slot
        if position >= len(self.prompt_ids) + self.n_tokens:
            return False
        return self.last_commit_calls.get(position) == step.call

    @cached_property  # not a field: JSON, equality and repr never see it
    def last_commit_calls(self) -> dict[int, int]:
        """Absolute position -> the call of the last commit there (the one the output holds)."""
        return {s.block_start + c.slot: s.call for s in self.steps for c in s.commits}

    def gap_fills(self) -> list[GapFill]:
        """Every commit that left masked slots to its left in its block, in call order, kept or not.

        What happened during decoding (the pictures show all of them); for a measure, count
        ``kept_gap_fills``."""
        events = []
        for s in self.steps:
            if not any(c.gap for c in s.commits):
                continue
            state = self.block_state(s, after=True)
            prefix = self.text_before(s)
            for c in s.commits:
                if c.gap:
                    events.append(
                        GapFill(
                            call=s.call,
                            block=s.block,
                            step=s.step,
                            slot=c.slot,
                            gap=c.gap,
                            token_id=c.token_id,
                            text=c.text,
                            entropy=c.entropy,
                            prob=c.prob,
                            state=render_state(state[: c.slot + 1], prefix),
                            kept=self.kept(s, c.slot),
                        )
                    )
        return events

    def kept_gap_fills(self) -> list[GapFill]:
        """The gap fills in the final output: commits made while slots to their left in the block were
        still masked, and not discarded by a stop. Only these can change the answer, so every count of
        gap fills (``evaluate``'s ``gap_fills`` and ``gap_fill_rate``, ``sweep``'s, the app's, the
        summaries') is this one."""
        return [g for g in self.gap_fills() if g.kept]

    # -- JSON -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object: the schema, its version and every field (JSON has no infinity: an unbounded end
        of ``gamma_range`` is null). ``sbd_viz.trace.file.from_dict`` reads it back."""
        d = asdict(self)
        for step in d["steps"]:  # only a token tree's steps have alternatives: any other trace is the file it was
            if not step["alternatives"]:
                del step["alternatives"]
        if self.gamma_range is not None:
            d["gamma_range"] = {
                k: (None if isinstance(v, float) and abs(v) == float("inf") else v) for k, v in d["gamma_range"].items()
            }
        return {"schema": SCHEMA, "version": SCHEMA_VERSION, **d}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        """Write the trace's file (``to_json``) to ``path``; ``sv.load_trace(path)`` reads it back."""
        path = Path(path)
        path.write_text(self.to_json())
        return path
