"""The trace: plain data recorded by the decoder, one ``Step`` per model call.

No model, tokenizer or tensor lives here: a trace round-trips through JSON, so it can be
saved, shared, loaded without torch, and rendered by pure functions.

Vocabulary: a *block* is ``block_size`` future positions decoded together; a *slot* is an
index inside a block (0..k-1); a *call* is one model forward; a *step* is one call plus the
commit decision it led to; a *commit* fixes a masked slot to a token; a commit's *gap* is
the number of slots to its left in its block that are still masked after the step
(``PREFIX <m> <m> TOKEN`` has gap 2). A commit with gap > 0 is a *gap fill*; it is *kept* if
it is in the final output (a stop can cut the output before it, and then it was discarded).

Verified decoding (``verify=True``) adds: a commit from the block is a *draft*; a call that feeds
drafts causally *verifies* them against NTP's greedy choice at each position (a ``Check``), which
*accepts* or *rejects* each; the first rejection is a *rollback*: the drafts from there on are
discarded, the cache is cut back to the accepted text, and NTP's token is committed in the
rejected slot (a commit with ``ntp=True``, as is each block's first open slot, written exactly
from the causal prediction instead of drafted). A *checking-only* call feeds drafts and no block.

Block decoders whose slots can change after a commit (block diffusion such as DiffusionGemma, masked diffusion
with remasking) add a *canvas* to each step: every slot's *draft* (the argmax, with entropy, confidence and top
candidates) and whether the slot holds an *accepted* token after the step. A slot accepted before the step and
open after it was *renoised* (taken back). A step's commits are the slots it newly accepted; its
uncounted *passes* (an encoder pass extending the cache) are recorded but not counted in ``nfe``.
A trace is written as version 3 only when a step has a canvas or passes; any other trace as version 2.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

SCHEMA = "sbd_viz.trace"
SCHEMA_VERSION = 3  # 2: verified decoding (Commit.ntp, Step.checks / ...); 3: Step.canvas / renoised / passes
READS_VERSIONS = (1, 2, 3)  # older traces load with the newer fields at their defaults
CANVAS_FIELDS = ("canvas", "renoised", "passes")  # version 3's step fields, left out of files that do not use them
MASK_TEXT = "<m>"
DRAFT_AND_CHECK = ("jacobi", "prompt_lookup")  # decoders whose calls feed drafts that NTP checks: greedy's text


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

    @property
    def accepted(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.accepted)

    @property
    def rejected(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.accepted)

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

    @cached_property  # not a field; the pictures ask it per cell
    def has_canvas(self) -> bool:
        """Recorded from a decoder whose slots can change after a commit (steps carry canvases)."""
        return any(s.canvas for s in self.steps)

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
        at, last = {}, {}
        for s in self.steps:
            for c in s.commits:
                at[s.block_start + c.slot] = s.call
            for slot in s.renoised:
                at.pop(s.block_start + slot, None)
            last.update({s.block_start + i: s.call for i in range(s.block_size)})
        start = len(self.prompt_ids)
        return [at.get(start + i, last.get(start + i)) for i in range(self.n_tokens)]

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
        return self.prompt + "".join(self.output_texts[:max(0, n)])

    def kept(self, step: Step, slot: int) -> bool:
        """Whether ``step``'s commit to ``slot`` is in the output: a stop cuts the output (commits past it are
        discarded), and in verified decoding a later commit at the same position (NTP's correction, or a
        block opened after a rollback) replaces a rejected or discarded draft."""
        position = step.block_start + slot
        if position >= len(self.prompt_ids) + self.n_tokens:
            return False
        return self._last_commit_call.get(position) == step.call

    @cached_property  # not a field: JSON, equality and repr never see it
    def _last_commit_call(self) -> dict[int, int]:
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
                    events.append(GapFill(
                        call=s.call, block=s.block, step=s.step, slot=c.slot, gap=c.gap,
                        token_id=c.token_id, text=c.text, entropy=c.entropy, prob=c.prob,
                        state=render_state(state[: c.slot + 1], prefix), kept=self.kept(s, c.slot)))
        return events

    def kept_gap_fills(self) -> list[GapFill]:
        """The gap fills in the final output: commits made while slots to their left in the block were
        still masked, and not discarded by a stop. Only these can change the answer, so every count of
        gap fills (``evaluate``'s ``gap_fills`` and ``gap_fill_rate``, ``sweep``'s, the app's, the
        summaries') is this one."""
        return [g for g in self.gap_fills() if g.kept]

    def summary(self) -> str:
        """One screen: the text with each token's call number, and the headline measures."""
        from .summary import trace_summary  # formatting lives beside the CLI

        return trace_summary(self)

    # -- JSON -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if any(s.canvas or s.renoised or s.passes for s in self.steps):
            return {"schema": SCHEMA, "version": SCHEMA_VERSION, **d}
        for step in d["steps"]:  # the version 2 file, byte for byte
            for key in CANVAS_FIELDS:
                del step[key]
        return {"schema": SCHEMA, "version": 2, **d}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json())
        return path

    @classmethod
    def from_dict(cls, d: Any) -> "Trace":
        return _trace_from_dict(d)

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"not a trace: invalid JSON ({exc})") from None
        return _trace_from_dict(d)

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        path = Path(path)
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise TraceFormatError(f"path: {path} is not a text file, so not a trace") from None
        try:
            return cls.from_json(text)
        except TraceFormatError as exc:
            raise TraceFormatError(f"path: {path}: {exc}") from None

    def to_html(self, path: str | Path | None = None) -> str:
        """A self-contained, offline page with the block-fill animation; written to ``path`` if given."""
        from . import plots

        return plots.save_html(self, path)

    def _repr_html_(self) -> str:
        from . import plots

        return plots.trace_html(self)


def render_state(slots: list[str | None], prefix: str = "", tail: int = 24) -> str:
    """Render a block as text: the last ``tail`` characters of ``prefix``, then each slot's text
    or ``<m>`` where masked, e.g. ``'max([3, 9]) == <m><m>9'``. Whitespace as ``visible`` shows it."""
    return visible(prefix[-tail:] + "".join(MASK_TEXT if s is None else s for s in slots))


def visible(text: str, spaces: bool = False) -> str:
    """``text`` with its whitespace made visible: a newline shows as ⏎ and a tab as ⇥, so a token that is a
    line break is seen, not obeyed. ``spaces=True`` (a token alone in a cell, a prompt whose trailing space
    matters) also shows a space as ␣ and an empty text as ∅: it never looks blank."""
    text = text.replace("\n", "⏎").replace("\t", "⇥")
    return (text.replace(" ", "␣") or "∅") if spaces else text


def first_difference(a, b) -> int | None:
    """Index of the first place where two sequences (texts, or token id lists) differ: the shorter one's length
    if one continues the other; ``None`` if they are equal."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, (str, list, tuple)):
            raise ValueError(f"{name}: must be a string or a list of token ids, got {type(value).__name__}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


# -- validation on load: every field checked, nothing executed ----------------------
def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceFormatError(f"not a trace: {where} {what}")


def _int(v, where):
    _need(isinstance(v, int) and not isinstance(v, bool), where, f"must be an integer, got {type(v).__name__}")
    return v


def _num(v, where):
    _need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), where,
          f"must be a finite number, got {v!r}")
    return float(v)


def _str(v, where):
    _need(isinstance(v, str), where, f"must be a string, got {type(v).__name__}")
    return v


def _bool(v, where):
    _need(isinstance(v, bool), where, f"must be true or false, got {v!r}")
    return v


def _list(v, where):
    _need(isinstance(v, list), where, f"must be a list, got {type(v).__name__}")
    return v


def _keys(d, where, keys):
    _need(isinstance(d, dict), where, f"must be an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    _need(not missing, where, f"is missing {missing}")
    return d


def _candidate(d, where):
    _keys(d, where, ("token_id", "text", "prob"))
    return Candidate(_int(d["token_id"], where + ".token_id"), _str(d["text"], where + ".text"),
                     _num(d["prob"], where + ".prob"))


def _draft(d, where):
    _keys(d, where, ("slot", "token_id", "text", "prob", "entropy", "top", "accepted"))
    held = d.get("held_id")
    return Draft(_int(d["slot"], where), _int(d["token_id"], where), _str(d["text"], where), _num(d["prob"], where),
                 _num(d["entropy"], where), tuple(_candidate(c, f"{where}.top[{j}]") for j, c in
                                                  enumerate(_list(d["top"], where))),
                 _bool(d["accepted"], where + ".accepted"), None if held is None else _int(held, where + ".held_id"),
                 None if d.get("held_text") is None else _str(d["held_text"], where + ".held_text"))


def _step(d, where):
    _keys(d, where, ("call", "block", "block_start", "block_size", "step", "masked", "slots", "commits",
                     "wall_time"))
    slots = tuple(
        SlotView(_int(_keys(v, f"{where}.slots[{i}]", ("slot", "entropy", "top"))["slot"], where),
                 _num(v["entropy"], f"{where}.slots[{i}].entropy"),
                 tuple(_candidate(c, f"{where}.slots[{i}].top[{j}]") for j, c in
                       enumerate(_list(v["top"], where))))
        for i, v in enumerate(_list(d["slots"], where + ".slots")))
    commits = []
    for i, c in enumerate(_list(d["commits"], where + ".commits")):
        w = f"{where}.commits[{i}]"
        _keys(c, w, ("slot", "token_id", "text", "prob", "entropy", "gap"))
        commits.append(Commit(_int(c["slot"], w), _int(c["token_id"], w), _str(c["text"], w),
                              _num(c["prob"], w), _num(c["entropy"], w), _int(c["gap"], w),
                              ntp=_bool(c.get("ntp", False), w + ".ntp")))
    checks = []
    for i, c in enumerate(_list(d.get("checks", []), where + ".checks")):
        w = f"{where}.checks[{i}]"
        _keys(c, w, ("block", "slot", "position", "token_id", "text", "ntp_token_id", "ntp_text", "ntp_prob",
                     "draft_prob", "accepted"))
        checks.append(Check(_int(c["block"], w), _int(c["slot"], w), _int(c["position"], w),
                            _int(c["token_id"], w), _str(c["text"], w), _int(c["ntp_token_id"], w),
                            _str(c["ntp_text"], w), _num(c["ntp_prob"], w), _num(c["draft_prob"], w),
                            _bool(c["accepted"], w + ".accepted")))
    rollback = d.get("rollback")
    if rollback is not None:
        w = where + ".rollback"
        _keys(rollback, w, ("slot", "position", "dropped", "n_discarded"))
        rollback = Rollback(_int(rollback["slot"], w), _int(rollback["position"], w),
                            tuple(_int(x, w + ".dropped") for x in _list(rollback["dropped"], w + ".dropped")),
                            _int(rollback["n_discarded"], w))
    canvas = tuple(_draft(v, f"{where}.canvas[{i}]") for i, v in enumerate(_list(d.get("canvas", []), where)))
    passes = tuple(Pass(_str(_keys(p, f"{where}.passes[{i}]", ("kind", "n_input", "wall_time"))["kind"], where),
                        _int(p["n_input"], where), _num(p["wall_time"], where))
                   for i, p in enumerate(_list(d.get("passes", []), where + ".passes")))
    step = Step(call=_int(d["call"], where + ".call"), block=_int(d["block"], where + ".block"),
                block_start=_int(d["block_start"], where + ".block_start"),
                block_size=_int(d["block_size"], where + ".block_size"), step=_int(d["step"], where + ".step"),
                masked=tuple(_int(s, where + ".masked") for s in _list(d["masked"], where + ".masked")),
                slots=slots, commits=tuple(commits), wall_time=_num(d["wall_time"], where + ".wall_time"),
                n_input=_int(d.get("n_input", 0), where + ".n_input"), checks=tuple(checks), rollback=rollback,
                check_only=_bool(d.get("check_only", False), where + ".check_only"), canvas=canvas,
                renoised=tuple(_int(s, where + ".renoised") for s in _list(d.get("renoised", []), where)),
                passes=passes)
    _need(step.block_size >= 1, where, "has block_size < 1")
    # a checking-only call that accepts every draft commits nothing, and a canvas step may accept no new slot;
    # any other call commits at least one slot
    _need(bool(step.commits) or (step.check_only and not step.rollback) or bool(step.canvas), where,
          "commits nothing (every step commits at least one slot)")
    _need(not canvas or [v.slot for v in canvas] == list(range(step.block_size)), where,
          "has a canvas that is not one draft per slot, in order")
    _need(all(0 <= s < step.block_size for s in step.renoised), where, "renoises a slot outside the block")
    # NTP's correction overwrites the rejected draft's slot; every other commit fills a masked slot
    fixed = {rollback.slot} if rollback else set()
    _need({c.slot for c in step.commits} <= set(step.masked) | fixed, where, "commits a slot that was not masked")
    _need(all(0 <= s < step.block_size for s in step.masked), where, "has a slot outside the block")
    _need(all(0 <= s < step.block_size for s in (rollback.dropped if rollback else ())), where,
          "drops a slot outside the block")
    _need(sum(not c.accepted for c in step.checks) == (rollback is not None), where,
          "must have a rollback exactly when a check rejected a draft")
    return step


def _config(config: dict) -> dict:
    """A trace's config as this version names it: files saved before the commit rule was called ``rule``
    name it ``solver``."""
    if "solver" in config and "rule" not in config:
        config = {("rule" if key == "solver" else key): value for key, value in config.items()}
    return config


def _trace_from_dict(d: Any) -> Trace:
    _need(isinstance(d, dict), "file", f"must hold a JSON object, got {type(d).__name__}")
    _need(d.get("schema") == SCHEMA, "file", f"has schema {d.get('schema')!r}, expected {SCHEMA!r}")
    version = d.get("version")
    _need(version in READS_VERSIONS, "file",
          f"has version {version!r}; this sbd_viz reads versions {', '.join(map(str, READS_VERSIONS))}")
    _keys(d, "trace", ("prompt", "prompt_ids", "config", "model_id", "steps", "output_ids", "output_texts",
                       "text", "stop_reason"))
    _need(isinstance(d["config"], dict), "trace.config", "must be an object")
    meta = d.get("meta", {})
    _need(isinstance(meta, dict), "trace.meta", "must be an object")
    steps = tuple(_step(s, f"steps[{i}]") for i, s in enumerate(_list(d["steps"], "trace.steps")))
    _need([s.call for s in steps] == list(range(len(steps))), "trace.steps", "calls must be numbered 0, 1, 2, ...")
    out_ids = tuple(_int(t, "trace.output_ids") for t in _list(d["output_ids"], "trace.output_ids"))
    out_texts = tuple(_str(t, "trace.output_texts") for t in _list(d["output_texts"], "trace.output_texts"))
    _need(len(out_ids) == len(out_texts), "trace", "output_ids and output_texts differ in length")
    return Trace(prompt=_str(d["prompt"], "trace.prompt"),
                 prompt_ids=tuple(_int(t, "trace.prompt_ids") for t in _list(d["prompt_ids"], "trace.prompt_ids")),
                 config=_config(d["config"]), model_id=_str(d["model_id"], "trace.model_id"), steps=steps,
                 output_ids=out_ids, output_texts=out_texts, text=_str(d["text"], "trace.text"),
                 stop_reason=_str(d["stop_reason"], "trace.stop_reason"), meta=meta)
