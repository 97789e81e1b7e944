"""The trace file: reading one, every field checked as strictly as an argument, nothing executed.

``load(path)``, ``from_json(text)`` and ``from_dict(d)`` (``sv.load_trace`` and ``sv.trace_from_json`` at the
package's top) read a file ``Trace.save`` / ``Trace.to_json`` wrote. A file is a trace only if a decode could have
written it. Beyond types, the loader checks ranges (probabilities in [0, 1]; entropies, token ids, positions, wall
times and counts >= 0), the facts that tie fields together (a slot lies inside its block; a commit's gap is the
number of slots left of it still masked after the step, so at most its slot; calls are numbered 0, 1, 2, ... and
blocks in order; a block keeps its start and size; the output is no longer than ``max_new_tokens``), and the
settings: the door's with the checks ``sv.decode`` runs on its arguments (``DecodeConfig``: commit rule and γ,
block size, length, temperature, seed, stop strings, ...), a registered decoder's own settings by its
``DecoderSpec`` (each of the kind of its default; its knob's low end, if the knob moves it). Anything else raises
``TraceFormatError`` naming the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import data
from .data import SCHEMA, SCHEMA_VERSION, Interval, Step, Trace, TraceFormatError

STOP_REASONS = ("stop", "eos", "length")
DECODER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*\Z")  # a registered name, or a plug-in's 'my-decoder'
MAX_BLOCK = 4096  # no block or canvas is longer than the longest decode (DecodeConfig's max_new_tokens)


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise TraceFormatError(f"not a trace: {where} {what}")


def _int(v, where, lo: int = 0):
    """A whole number >= ``lo`` (ids, slots, positions and counts are never negative)."""
    _need(isinstance(v, int) and not isinstance(v, bool), where, f"must be an integer, got {type(v).__name__}")
    if v < lo:
        _need(False, where, f"must be >= {lo}, got {v}")
    return v


def _num(v, where, lo: float | None = 0.0, hi: float | None = None):
    """A finite number in [lo, hi] (``None``: unbounded on that side)."""
    _need(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        where,
        f"must be a finite number, got {v!r}",
    )
    if not ((lo is None or v >= lo) and (hi is None or v <= hi)):
        _need(
            False,
            where,
            f"must be in [{-math.inf if lo is None else lo:g}, {math.inf if hi is None else hi:g}], got {v!r}",
        )
    return float(v)


def _prob(v, where):
    return _num(v, where, 0.0, 1.0)


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


def _ascending(values, where, what):
    _need(list(values) == sorted(set(values)), where, f"must list its {what} once each, ascending, got {list(values)}")


def _plain(v, where):
    """Free-form data (``meta``, a plug-in decoder's settings): JSON's own values, numbers finite, so the trace
    saves again."""
    if isinstance(v, dict):
        for key, value in v.items():
            _need(isinstance(key, str), where, f"must have string keys, got {key!r}")
            _plain(value, f"{where}.{key}")
    elif isinstance(v, list):
        for i, value in enumerate(v):
            _plain(value, f"{where}[{i}]")
    else:
        _need(
            v is None or isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v)),
            where,
            f"must be plain JSON data with finite numbers, got {v!r}",
        )
    return v


def _least(lo: int) -> Callable[[Any, str], int]:
    """The reader of a whole number >= ``lo``."""
    return lambda v, where: _int(v, where, lo=lo)


def _ints(v, where) -> tuple[int, ...]:
    """A list of whole numbers >= 0 (slots, token ids), as a tuple."""
    return tuple(_int(x, where) for x in _list(v, where))


def _each(read: Callable[[Any, str], Any]) -> Callable[[Any, str], tuple]:
    """The reader of a list of records, each read by ``read`` at ``where[i]``, as a tuple."""
    return lambda v, where: tuple(read(x, f"{where}[{i}]") for i, x in enumerate(_list(v, where)))


def _record(
    cls: type,
    fields: dict[str, Callable[[Any, str], Any]],
    optional: dict[str, tuple[Callable[[Any, str], Any], Any]] | None = None,
    facts: Callable[[Any, str], None] | None = None,
) -> Callable[[Any, str], Any]:
    """The reader of one record of a trace file, a ``cls``: an object holding every key of ``fields`` (each value
    read by its reader, at ``where.key``), and maybe those of ``optional`` ({key: (reader, default)}; left out, one
    reads as its default, and one whose default is None may be null); ``facts(record, where)`` then checks what ties
    its fields together."""

    def read(d, where):
        _keys(d, where, tuple(fields))
        values = {key: field(d[key], f"{where}.{key}") for key, field in fields.items()}
        for key, (field, default) in (optional or {}).items():
            value = d.get(key, default)
            values[key] = None if value is None and default is None else field(value, f"{where}.{key}")
        record = cls(**values)
        if facts is not None:
            facts(record, where)
        return record

    return read


def _draft_facts(draft: data.Draft, where: str) -> None:
    _need(draft.accepted == (draft.held_id is not None), where, "must hold a token (held_id) exactly when accepted")


_candidate = _record(data.Candidate, {"token_id": _int, "text": _str, "prob": _prob})
_slot_view = _record(data.SlotView, {"slot": _int, "entropy": _num, "top": _each(_candidate)})
_commit = _record(
    data.Commit,
    {"slot": _int, "token_id": _int, "text": _str, "prob": _prob, "entropy": _num, "gap": _int},
    {"ntp": (_bool, False)},
)
_check = _record(
    data.Check,
    {
        "block": _int,
        "slot": _int,
        "position": _int,
        "token_id": _int,
        "text": _str,
        "ntp_token_id": _int,
        "ntp_text": _str,
        "ntp_prob": _prob,
        "draft_prob": _prob,
        "accepted": _bool,
    },
)
_rollback = _record(data.Rollback, {"slot": _int, "position": _int, "dropped": _ints, "n_discarded": _int})
_alternative = _record(
    data.Alternative, {"slot": _least(1), "token_id": _int, "text": _str, "prob": _prob, "parent": _least(-1)}
)
_draft = _record(
    data.Draft,
    {
        "slot": _int,
        "token_id": _int,
        "text": _str,
        "prob": _prob,
        "entropy": _num,
        "top": _each(_candidate),
        "accepted": _bool,
    },
    {"held_id": (_int, None), "held_text": (_str, None)},
    _draft_facts,
)
_pass = _record(data.Pass, {"kind": _str, "n_input": _int, "wall_time": _num})


def _step_facts(step: Step, where: str) -> None:
    """What ties one step's fields together."""
    k, rollback = step.block_size, step.rollback
    _need(k <= MAX_BLOCK, where, f"has block_size {k}, more than any decoder writes ({MAX_BLOCK})")
    inside = range(k)
    # a checking-only call that accepts every draft commits nothing, and a canvas step may accept no new slot;
    # any other call commits at least one slot
    _need(
        bool(step.commits) or (step.check_only and not rollback) or bool(step.canvas),
        where,
        "commits nothing (every step commits at least one slot)",
    )
    _need(all(s in inside for s in step.masked), where, f"has a slot outside the block of {k}")
    _ascending(step.masked, where + ".masked", "slots")
    views = [v.slot for v in step.slots]
    _need(
        [s for s in step.masked if s in set(views)] == views,
        where + ".slots",
        "must be predictions for masked slots, in the order of masked",
    )
    _need(
        not step.canvas or (len(step.canvas) == k and all(v.slot == i for i, v in enumerate(step.canvas))),
        where,
        "has a canvas that is not one draft per slot, in order",
    )
    _need(all(s in inside for s in step.renoised), where, "renoises a slot outside the block")
    _ascending(step.renoised, where + ".renoised", "slots")
    # NTP's correction overwrites the rejected draft's slot; every other commit fills a masked slot
    fixed = {rollback.slot} if rollback else set()
    _need({c.slot for c in step.commits} <= set(step.masked) | fixed, where, "commits a slot that was not masked")
    _ascending([c.slot for c in step.commits], where + ".commits", "slots")
    if rollback is not None:
        _need(rollback.slot in inside, where + ".rollback", f"has a slot outside the block of {k}")
    after = step.masked_after
    for i, c in enumerate(step.commits):
        _need(c.gap <= c.slot, f"{where}.commits[{i}].gap", f"must be at most its slot ({c.slot}), got {c.gap}")
        # a canvas can renoise or hold slots to the left, so there the recorder's gap is only bounded
        _need(
            bool(step.canvas) or c.gap == sum(1 for s in after if s < c.slot),
            f"{where}.commits[{i}].gap",
            f"must count the slots left of slot {c.slot} still masked after the step, got {c.gap}",
        )
    if rollback is not None:
        _need(
            rollback.position == step.block_start + rollback.slot,
            where + ".rollback",
            "position must be the block's start plus its slot",
        )
        _need(
            all(rollback.slot < s < k for s in rollback.dropped),
            where,
            "drops a slot outside the block (or not right of the rejected one)",
        )
    for i, alt in enumerate(step.alternatives):
        placed = alt.parent < 0 or (alt.parent < i and step.alternatives[alt.parent].slot == alt.slot - 1)
        _need(
            alt.slot < k and placed,
            f"{where}.alternatives[{i}]",
            "must sit in the block after an earlier alternative one slot before it",
        )
    for i, check in enumerate(step.checks):
        _need(
            check.block <= step.block and check.position < step.block_start + k,
            f"{where}.checks[{i}]",
            "checks a draft the decode has not written yet",
        )
    _need(
        sum(not c.accepted for c in step.checks) == (rollback is not None),
        where,
        "must have a rollback exactly when a check rejected a draft",
    )


_step = _record(  # after _step_facts, which it runs on every step
    Step,
    {
        "call": _int,
        "block": _int,
        "block_start": _int,
        "block_size": _least(1),
        "step": _int,
        "masked": _ints,
        "slots": _each(_slot_view),
        "commits": _each(_commit),
        "wall_time": _num,
    },
    {
        "n_input": (_int, 0),
        "checks": (_each(_check), []),
        "rollback": (_rollback, None),
        "check_only": (_bool, False),
        "canvas": (_each(_draft), []),
        "renoised": (_ints, []),
        "passes": (_each(_pass), []),
        "alternatives": (_each(_alternative), []),
    },
    _step_facts,
)


def _steps_facts(steps: tuple[Step, ...], n_prompt: int) -> None:
    """What ties the steps together: calls numbered 0, 1, 2, ...; blocks numbered in order, each keeping its
    start and size and numbering its steps 0, 1, 2, ...; no block starts inside the prompt."""
    _need([s.call for s in steps] == list(range(len(steps))), "trace.steps", "calls must be numbered 0, 1, 2, ...")
    previous = None
    for i, s in enumerate(steps):
        where = f"steps[{i}]"
        _need(
            s.block_start >= n_prompt, where, f"block_start must be past the prompt ({n_prompt}), got {s.block_start}"
        )
        if previous is not None and s.block == previous.block:
            _need(
                (s.block_start, s.block_size) == (previous.block_start, previous.block_size),
                where,
                "must keep its block's block_start and block_size",
            )
            _need(s.step == previous.step + 1, where, f"step must be {previous.step + 1}, got {s.step}")
        else:
            first = 0 if previous is None else previous.block + 1
            _need(s.block == first, where, f"block must be {first}, got {s.block}")
            _need(s.step == 0, where, f"step must be 0 (the block's first), got {s.step}")
        previous = s


# What a trace's settings are checked against beyond their kinds (``settings_check``): the decoders', installed by
# ``sbd_viz.decoders.door`` when the package is imported, so every reader of a trace file has it.
SETTINGS_CHECK: Callable[[dict, bool], dict[str, tuple[Any, float | None]]] | None = None


def install_settings_check(check: Callable[[dict, bool], dict[str, tuple[Any, float | None]]]) -> None:
    """``check(config, canvas)`` raises ``ValueError`` or ``TypeError`` for settings ``sv.decode`` refuses and returns
    the trace's decoder's own settings as {name: (default, lowest value or None)}: each is checked to be of its
    default's kind (``canvas``: the decoder writes a canvas, whose block is its model's)."""
    global SETTINGS_CHECK
    SETTINGS_CHECK = check


def _config(config: Any, where: str = "trace.config", canvas: bool = False) -> dict:
    """A trace's settings, checked as ``sv.decode`` checks its arguments, and its decoder's own by its spec."""
    _keys(config, where, ("decoder",))
    _plain(config, where)
    decoder = config["decoder"]
    _need(
        isinstance(decoder, str) and bool(DECODER_NAME.match(decoder)),
        where + ".decoder",
        f"must be a decoder's name, got {decoder!r}",
    )
    for key, value in config.items():  # the door's settings, by what they are
        w = f"{where}.{key}"
        if key in ("rule", "drafts"):  # drafts: the trace's own mark (DRAFTS_CHECKED)
            _need(isinstance(value, str) and bool(value), w, f"must be a non-empty string, got {value!r}")
        elif key in ("gap_free", "verify"):
            _bool(value, w)
        elif key == "stop":
            _need(
                isinstance(value, list) and all(isinstance(s, str) and s for s in value),
                w,
                f"must be a list of non-empty strings, got {value!r}",
            )
        elif key == "seed":
            _int(value, w)
        elif key in ("block_size", "max_new_tokens", "top_n"):
            _int(value, w, lo=1)
        elif key in ("gamma", "temperature"):
            _num(value, w)
    if SETTINGS_CHECK is not None:  # the decoders' own settings and sv.decode's checks
        try:
            own = SETTINGS_CHECK(config, canvas)
        except (TypeError, ValueError) as exc:
            raise TraceFormatError(f"not a trace: {where} has settings sv.decode refuses: {exc}") from None
        for key, (default, low) in own.items():
            if key in config:
                _own_setting(config[key], default, low, f"{where}.{key}")
    return config


def _own_setting(value: Any, default: Any, low: float | None, where: str) -> None:
    """A decoder's own setting, of the kind of its default (``DecoderSpec.own``): true or false, a whole number, a
    number, a string; at least 0, or ``low`` (its knob's low end) when the knob moves it. A default of None says nothing
    of its kind: any plain value."""
    if isinstance(default, bool):
        _bool(value, where)
    elif isinstance(default, int):
        _int(value, where, lo=0 if low is None else math.ceil(low))
    elif isinstance(default, float):
        _num(value, where, lo=0.0 if low is None else low)
    elif isinstance(default, str):
        _need(isinstance(value, str) and bool(value), where, f"must be a non-empty string, got {value!r}")


def _trace_facts(trace: Trace) -> None:
    """What ties the steps to the settings and the output."""
    config = trace.config
    covered = {s.block_start + i for s in trace.steps for i in range(s.block_size)}
    start = len(trace.prompt_ids)
    outside = [g for g in range(trace.n_tokens) if start + g not in covered]
    _need(not outside, "trace.output_ids", f"token(s) {outside[:5]} lie in no step's block: no call wrote them")
    if isinstance(config.get("max_new_tokens"), int):
        _need(
            trace.n_tokens <= config["max_new_tokens"],
            "trace.output_ids",
            f"holds {trace.n_tokens} tokens, more than max_new_tokens={config['max_new_tokens']}",
        )
    if isinstance(config.get("block_size"), int):
        # a token tree's block also holds the alternatives it took before its exact token (``alternatives_taken``)
        took: dict[int, int] = {}
        for s in trace.steps:
            took[s.block] = max(took.get(s.block, 0), s.alternatives_taken)
        big = [s.call for s in trace.steps if s.block_size - took[s.block] > config["block_size"]]
        _need(
            not big,
            f"steps[{big[0] if big else 0}]",
            f"has a block larger than block_size={config['block_size']} "
            "(with the alternatives a token tree took before its exact token)",
        )
    if isinstance(config.get("top_n"), int):
        for s in trace.steps:
            for v in s.slots + s.canvas:
                _need(
                    len(v.top) <= config["top_n"],
                    f"steps[{s.call}]",
                    f"records more candidates for slot {v.slot} than top_n={config['top_n']}",
                )


def _gamma_range(v: Any, config: dict):
    """A decode's γ range (``Trace.gamma_range``): an ``Interval`` holding the trace's own γ; null ends unbounded.
    Null (sampled decodes, decoders without a commit rule's knob): None."""
    if v is None:
        return None
    w = "trace.gamma_range"
    _keys(v, w, ("lo", "hi", "lo_closed", "hi_closed"))

    def end(x, where, unbounded):  # null: unbounded; a whole number stays one (top_k's ends), so it saves again alike
        if x is None:
            return unbounded
        number = _num(x, where, lo=None)
        return x if isinstance(x, int) else number

    lo, hi = end(v["lo"], w + ".lo", -math.inf), end(v["hi"], w + ".hi", math.inf)
    found = Interval(
        lo,
        hi,
        _bool(v["lo_closed"], w + ".lo_closed"),
        _bool(v["hi_closed"], w + ".hi_closed"),
        _bool(v.get("whole", False), w + ".whole"),
    )
    _need(config.get("temperature", 0) == 0, w, "belongs to a greedy decode (temperature 0); a sampled one has none")
    gamma = config.get("gamma")
    _need(
        isinstance(gamma, (int, float)) and gamma in found,
        w,
        f"is {found}, which does not hold the trace's gamma {gamma!r}",
    )
    return found


def load(path: str | Path) -> Trace:
    """The trace saved at ``path`` (``Trace.save``), every field checked; else ``TraceFormatError`` naming the path
    and the field."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise TraceFormatError(f"path: {path} is not a text file, so not a trace") from None
    try:
        return from_json(text)
    except TraceFormatError as exc:
        raise TraceFormatError(f"path: {path}: {exc}") from None


def from_json(text: str) -> Trace:
    """The trace a JSON text holds (``Trace.to_json``), every field checked; else ``TraceFormatError``."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"not a trace: invalid JSON ({exc})") from None
    except RecursionError:
        raise TraceFormatError("not a trace: JSON nested too deeply") from None
    return from_dict(d)


def from_dict(d: Any) -> Trace:
    """The ``Trace`` a JSON object holds (``Trace.to_dict``), every field checked; else ``TraceFormatError`` naming
    the field."""
    try:
        return _trace_from_dict(d)
    except RecursionError:  # free-form data (meta, settings) nested past Python's stack
        raise TraceFormatError("not a trace: nested too deeply") from None


def _trace_from_dict(d: Any) -> Trace:
    _need(isinstance(d, dict), "file", f"must hold a JSON object, got {type(d).__name__}")
    _need(d.get("schema") == SCHEMA, "file", f"has schema {d.get('schema')!r}, expected {SCHEMA!r}")
    version = d.get("version")
    _need(
        version == SCHEMA_VERSION and not isinstance(version, bool),
        "file",
        f"has version {version!r}; this sbd_viz reads version {SCHEMA_VERSION}",
    )
    _keys(
        d,
        "trace",
        ("prompt", "prompt_ids", "config", "model_id", "steps", "output_ids", "output_texts", "text", "stop_reason"),
    )
    raw_steps = d["steps"] if isinstance(d["steps"], list) else []
    config = _config(d["config"], canvas=any(isinstance(s, dict) and s.get("canvas") for s in raw_steps))
    meta = d.get("meta", {})
    _need(isinstance(meta, dict), "trace.meta", "must be an object")
    _plain(meta, "trace.meta")
    prompt_ids = _ints(d["prompt_ids"], "trace.prompt_ids")
    steps = tuple(_step(s, f"steps[{i}]") for i, s in enumerate(_list(d["steps"], "trace.steps")))
    _steps_facts(steps, len(prompt_ids))
    out_ids = _ints(d["output_ids"], "trace.output_ids")
    out_texts = tuple(_str(t, "trace.output_texts") for t in _list(d["output_texts"], "trace.output_texts"))
    _need(len(out_ids) == len(out_texts), "trace", "output_ids and output_texts differ in length")
    stop_reason = _str(d["stop_reason"], "trace.stop_reason")
    _need(stop_reason in STOP_REASONS, "trace.stop_reason", f"must be one of {STOP_REASONS}, got {stop_reason!r}")
    trace = Trace(
        prompt=_str(d["prompt"], "trace.prompt"),
        prompt_ids=prompt_ids,
        config=config,
        model_id=_str(d["model_id"], "trace.model_id"),
        steps=steps,
        output_ids=out_ids,
        output_texts=out_texts,
        text=_str(d["text"], "trace.text"),
        stop_reason=stop_reason,
        meta=meta,
        gamma_range=_gamma_range(d.get("gamma_range"), config),
    )
    _trace_facts(trace)
    return trace
