"""The γ map: every distinct greedy decode of one prompt across a commit rule's knob.

``gamma_map(model, prompt, rule=..., lo=None, hi=None, step=None, **settings)`` returns a ``GammaMap`` (its
``pieces``, ``piece_at(γ)``, ``trace_at(γ)``, ``frame()``); ``GammaMapWalk`` is the same work as a generator. How the
walk finds every piece, the step map and prefix reuse: docs/gamma_map.md.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from bisect import bisect_right
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from ..decoders.door import start
from ..decoders.registry import decoders, default_decoder, get_decoder
from ..decoders.rules import COMMIT_RULES, DEFAULT_RULE, RULES, Interval
from ..decoders.run import serve
from ..models.call import CacheCut
from ..models.checks import check_model
from ..trace.checks import check_prompt
from ..trace.data import Trace
from .divergence import DIVERGENCE_COLUMNS, divergence_columns
from .signature import same_signature

MAP_COLUMNS = (
    "lo",
    "hi",
    "lo_closed",
    "hi_closed",
    "range",
    "decoded",
    "calls",
    "tokens",
    "tokens_per_call",
    "text",
    "same_as_ntp",
    *DIVERGENCE_COLUMNS,
)


def format_end(value: float) -> str:
    """A range's end exactly: the shortest decimal that reads back as the same float (``repr``), ``inf`` for an
    unbounded end, a whole number without a point."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def format_range(lo: float, hi: float, lo_closed: bool, hi_closed: bool) -> str:
    """``[0.0301873..., 1.69745...)``: exact ends, brackets for closed, parentheses for open."""
    if lo == hi and lo_closed and hi_closed:
        return f"{{{format_end(lo)}}}"
    return f"{'[' if lo_closed else '('}{format_end(lo)}, {format_end(hi)}{']' if hi_closed else ')'}"


@dataclass(frozen=True)
class Piece:
    """The knob values from ``lo`` to ``hi`` (each end included if closed) at which the decode is ``trace``; a
    stretch a step map did not decode has ``trace=None`` (exact ends, possibly several pieces inside). ``whole``:
    only whole numbers (``top_k``)."""

    lo: float
    hi: float
    trace: Trace | None
    lo_closed: bool = True
    hi_closed: bool = False
    whole: bool = False

    @property
    def decoded(self) -> bool:
        return self.trace is not None

    @property
    def interval(self) -> Interval:
        return Interval(self.lo, self.hi, self.lo_closed, self.hi_closed, self.whole)

    def __contains__(self, gamma) -> bool:
        return gamma in self.interval

    def __str__(self) -> str:
        return format_range(self.lo, self.hi, self.lo_closed, self.hi_closed)


def _ends(piece: Piece) -> dict:
    """A piece's range as a row's or a text run's ``lo``, ``hi``, ``lo_closed`` and ``hi_closed``."""
    return dict(lo=piece.lo, hi=piece.hi, lo_closed=piece.lo_closed, hi_closed=piece.hi_closed)


def _meets(a: Piece, b_lo: float, b_lo_closed: bool, whole: bool) -> bool:
    """Whether a range starting at ``b_lo`` begins exactly where piece ``a`` ends (no gap, no overlap)."""
    if whole:
        return b_lo == (a.hi + 1 if a.hi_closed else a.hi)
    return b_lo == a.hi and a.hi_closed != b_lo_closed


def _after(interval: Interval) -> float:
    """The first knob value above ``interval``: its open top, the next float past a closed one, or the next whole
    number."""
    if interval.whole:
        return int(interval.hi) + 1 if interval.hi_closed else int(interval.hi)
    return math.nextafter(interval.hi, math.inf) if interval.hi_closed else interval.hi


class _Replayer:
    """Serves a decode's requests, replaying the calls it shares with the previous decode.

    Every request of the previous decode is kept with its reply and the KV cache as it stood after it (a shallow
    copy: ``DynamicLayer.update`` concatenates and ``crop`` slices, so an old layer's tensors are never written
    again). While a new decode asks exactly what the previous one asked, the old reply is its answer; at the first
    difference the cache is restored from the snapshot before it and the model runs from there. ``gate``: a context
    manager factory entered around each request it serves itself (``GammaMapWalk``'s)."""

    def __init__(self, model, reuse: bool, gate=None):
        self.model, self.reuse, self.gate = model, reuse, gate or contextlib.nullcontext
        self.previous: list[tuple[Any, Any, Any]] = []  # (request, reply, cache after it)
        self.calls = self.replayed = 0  # forwards run, and forwards answered from the previous decode

    @staticmethod
    def _snapshot(cache):
        snap = copy.copy(cache)
        snap.layers = [copy.copy(layer) for layer in cache.layers]
        return snap

    def run(self, decoding) -> None:
        requests, reply = decoding.requests(), None
        record: list[tuple[Any, Any, Any]] = []
        cache, matching = None, self.reuse
        while True:
            try:
                request = requests.send(reply)
            except StopIteration:
                break
            i = len(record)
            if matching and i < len(self.previous) and self.previous[i][0] == request:
                record.append(self.previous[i])
                reply = self.previous[i][1]
                if not isinstance(request, CacheCut):
                    self.replayed += 1
                continue
            if cache is None:  # the first request this decode asks of the model itself
                cache = self._snapshot(record[-1][2]) if record else self.model.new_cache()
                matching = False
            with self.gate():
                reply = serve(self.model, cache, request)
            if not isinstance(request, CacheCut):
                self.calls += 1
            if self.reuse:
                record.append((request, reply, self._snapshot(cache)))
        self.previous = record


@dataclass
class GammaMap:
    """Every distinct decode of ``prompt`` over ``[lo, hi]`` of ``rule``'s knob (see docs/gamma_map.md).

    ``calls``: model forwards run to build it; ``replayed``: forwards answered from a neighbouring piece's decode
    (prefix reuse); ``decodes``: decodes run; ``seconds``: wall time to build it."""

    prompt: str
    rule: str
    lo: float
    hi: float
    step: float | None
    settings: dict
    pieces: list[Piece] = field(default_factory=list)
    calls: int = 0
    replayed: int = 0
    decodes: int = 0
    seconds: float = 0.0
    ntp: Trace | None = None
    _model: Any = field(default=None, repr=False, compare=False)

    @property
    def exact(self) -> bool:
        """Every piece decoded (a step map may leave stretches between slider positions undecoded)."""
        return all(p.decoded for p in self.pieces)

    def decoded(self) -> list[Piece]:
        return [p for p in self.pieces if p.decoded]

    def piece_at(self, gamma: float) -> Piece:
        """The piece holding ``gamma`` (a stretch not decoded has ``trace=None``)."""
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or math.isnan(gamma):
            raise ValueError(f"gamma: must be a number, got {gamma!r}")
        if not self.pieces or gamma < self.lo or gamma > self.hi:
            raise ValueError(
                f"gamma: {gamma!r} is outside this map's range [{format_end(self.lo)}, {format_end(self.hi)}]"
            )
        i = bisect_right([p.lo for p in self.pieces], gamma)
        for piece in self.pieces[max(0, i - 2) : i + 1]:  # a piece's open bottom belongs to the piece before it
            if gamma in Interval(piece.lo, piece.hi, piece.lo_closed, piece.hi_closed):
                if piece.whole and gamma != int(gamma):
                    raise ValueError(f"gamma: {self.rule}'s knob takes whole numbers, got {gamma!r}")
                return piece
        raise ValueError(f"gamma: {gamma!r} falls in no piece (the map is not contiguous)")

    def trace_at(self, gamma: float) -> Trace | None:
        """The decode at ``gamma``, without decoding; None where a step map did not decode."""
        return self.piece_at(gamma).trace

    def decoded_trace_at(self, gamma: float) -> Trace | None:
        """The decode at ``gamma`` if a decoded piece holds it, else None, never raising: for a map still being built
        (its pieces so far need not cover the range) or a stretch a step map left undecoded. It reads a copy of the
        pieces, so a map another thread is building can be asked."""
        return next((p.trace for p in list(self.pieces) if p.decoded and gamma in p), None)

    def ntp_trace(self) -> Trace:
        """NTP's greedy decode of the prompt with the map's length and stop (decoded once, on first use)."""
        if self.ntp is None:
            from ..decoders.ntp import decode_ntp

            if self._model is None:
                raise ValueError("ntp: this map keeps no model; pass frame(ntp=sv.decode_ntp(...))")
            self.ntp = decode_ntp(
                self._model,
                self.prompt,
                max_new_tokens=self.settings.get("max_new_tokens", 64),
                stop=self.settings.get("stop"),
            )
        return self.ntp

    def text_runs(self, ntp: Trace | None = None) -> list[dict]:
        """Neighbouring decoded pieces with the same text, joined: ``lo``, ``hi``, ``lo_closed``, ``hi_closed``,
        ``text``, ``same_as_ntp``, ``pieces``. A stretch not decoded ends a run (it may hold other texts)."""
        ntp = self.ntp_trace() if ntp is None else ntp
        runs: list[dict] = []
        joinable = False
        for p in self.pieces:
            if p.trace is None:
                joinable = False
                continue
            if joinable and runs[-1]["text"] == p.trace.text:
                runs[-1].update(hi=p.hi, hi_closed=p.hi_closed, pieces=runs[-1]["pieces"] + 1)
            else:
                runs.append({**_ends(p), "text": p.trace.text, "same_as_ntp": p.trace.text == ntp.text, "pieces": 1})
            joinable = True
        return runs

    def frame(self, ntp: Trace | None = None):
        """One row per piece (``MAP_COLUMNS``): its range (exact ends and a ``range`` string), whether it was
        decoded, calls, tokens, tokens per call, text, whether the text is NTP's and the first commit that left it
        (``first_divergence``). ``ntp``: NTP's trace of the same prompt (None: decoded once and kept)."""
        import pandas as pd

        ntp = self.ntp_trace() if ntp is None else ntp
        rows = []
        for p in self.pieces:
            row = {**_ends(p), "range": str(p), "decoded": p.decoded}
            if p.trace is not None:
                t = p.trace
                row.update(
                    calls=t.nfe,
                    tokens=t.n_tokens,
                    tokens_per_call=t.tokens_per_call,
                    text=t.text,
                    same_as_ntp=t.text == ntp.text,
                    **divergence_columns(t, ntp),
                )
            rows.append(row)
        df = pd.DataFrame(rows, columns=list(MAP_COLUMNS))
        for col in ("calls", "tokens", "divergence_call", "divergence_block", "divergence_slot"):
            df[col] = df[col].astype("Int64")
        df["same_as_ntp"] = df["same_as_ntp"].astype("boolean")
        df.attrs.update(
            prompt=self.prompt,
            rule=self.rule,
            lo=self.lo,
            hi=self.hi,
            step=self.step,
            ntp_calls=ntp.nfe,
            ntp_text=ntp.text,
            calls=self.calls,
            replayed=self.replayed,
            decodes=self.decodes,
            seconds=self.seconds,
        )
        return df


def walks_gamma(spec) -> bool:
    """Whether a decoder has a γ map: its knob is the commit rule's γ and its decode is a coroutine of cache
    requests the map can serve (SBD, verified SBD and remasking record their γ range)."""
    return spec.knob is not None and spec.knob.name == "gamma" and spec.batchable


def _check_end(value, name: str, rule: str):
    valid = COMMIT_RULES[rule].valid
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value not in valid:
        raise ValueError(f"{name}: for {rule} it must be {valid}, got {value!r}")
    return int(value) if valid.whole else float(value)


def _slider_positions(lo: float, hi: float, step: float, whole: bool) -> list[float]:
    """The multiples of ``step`` in ``[lo, hi]``, each the float a slider sends for it (``0.07``, not
    ``0.07000000000000001``)."""
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    values = []
    for k in range(first, last + 1):
        v = k * step if whole else float(f"{k * step:.12g}")
        if lo <= v <= hi:
            values.append(int(v) if whole else v)
    return values


class GammaMapWalk:
    """``gamma_map``'s work as a generator: ``pieces()`` yields each ``Piece`` (ascending) as soon as it is known;
    ``map`` holds the ``GammaMap`` built so far. Arguments as ``gamma_map``'s, checked on construction.

    ``points``: instead of a ``step``, the knob values whose pieces to decode (a ladder's γ values): each costs at
    most one decode. ``refine()`` then decodes every stretch left undecoded, exactly, so the map becomes the exact
    map (the same pieces as ``step=None``), with the pieces holding the points known first.

    ``gate``: a function returning a context manager, entered around each request the walk serves itself (a model
    call or a cache cut; replayed calls need none). A server that builds maps in the background passes one that
    waits while interactive decodes run, so they wait for at most one call; an exception raised in it stops the
    walk (a map no longer wanted)."""

    def __init__(
        self,
        model,
        prompt: str,
        rule: str = DEFAULT_RULE,
        lo: float | None = None,
        hi: float | None = None,
        step: float | None = None,
        decoder: str | None = None,
        reuse_prefix: bool = True,
        points=None,
        gate=None,
        **settings,
    ):
        self.model = check_model(model)
        check_prompt(prompt)
        if not isinstance(rule, str) or rule not in COMMIT_RULES:
            raise ValueError(f"rule: unknown rule {rule!r}; choose from {', '.join(RULES)}")
        if "gamma" in settings:
            raise ValueError("gamma: the map decodes at every γ itself; give its range as lo and hi")
        temperature = settings.get("temperature", 0.0)
        if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature > 0:
            raise ValueError(
                f"temperature: the γ map needs greedy decoding (temperature 0), got {temperature!r}: a "
                "sampled decode changes with the seed, not only with γ, so it has no γ range"
            )
        spec = default_decoder(model) if decoder is None else get_decoder(decoder)
        if not walks_gamma(spec):
            raise ValueError(
                f"decoder: the γ map walks a commit rule's knob γ; {spec.name!r} has none (choose one "
                f"of {', '.join(s.name for s in decoders(model) if walks_gamma(s))})"
            )
        if not isinstance(reuse_prefix, bool):
            raise ValueError(f"reuse_prefix: must be True or False, got {reuse_prefix!r}")
        spec_rule = COMMIT_RULES[rule]
        s_lo, s_hi, _ = spec_rule.slider
        self.lo = _check_end(s_lo if lo is None else lo, "lo", rule)
        self.hi = _check_end(s_hi if hi is None else hi, "hi", rule)
        if self.lo > self.hi:
            raise ValueError(f"hi: must be >= lo ({self.lo!r}), got {self.hi!r}")
        self.whole = spec_rule.valid.whole
        self.positions = None  # the knob values whose pieces are decoded; None: every piece
        if points is not None:
            if step is not None:
                raise ValueError("points: give points or a step, not both")
            self.positions = sorted({_check_end(g, "points", rule) for g in points if self.lo <= g <= self.hi})
            if not self.positions:
                raise ValueError(f"points: none lies in [{self.lo!r}, {self.hi!r}]")
        elif step is not None:
            if (
                isinstance(step, bool)
                or not isinstance(step, (int, float))
                or not math.isfinite(step)
                or step <= 0
                or (self.whole and step != int(step))
            ):
                raise ValueError(
                    f"step: must be a positive {'whole ' if self.whole else ''}number or None, got {step!r}"
                )
            self.positions = _slider_positions(self.lo, self.hi, step, self.whole)
            if not self.positions:
                raise ValueError(f"step: no multiple of {step!r} lies in [{self.lo!r}, {self.hi!r}]")
        self.step, self.rule, self.prompt, self.decoder = step, rule, prompt, spec.name
        self.settings = dict(settings)
        self.map = GammaMap(prompt, rule, self.lo, self.hi, step, {"decoder": spec.name, **settings}, _model=model)
        if gate is not None and not callable(gate):
            raise ValueError(f"gate: must be a function returning a context manager, or None, got {gate!r}")
        self._server = _Replayer(self.model, reuse_prefix, gate)
        self._decode(self.lo if self.positions is None else self.positions[0], dry=True)  # settings checked up front

    @overload
    def _decode(self, gamma, dry: Literal[False] = False) -> Trace: ...

    @overload
    def _decode(self, gamma, dry: Literal[True]) -> None: ...

    def _decode(self, gamma, dry: bool = False) -> Trace | None:
        spec, decoding = start(self.model, self.prompt, self.decoder, rule=self.rule, gamma=gamma, **self.settings)
        if dry:
            return None
        self._server.run(decoding)
        trace = spec.trace(decoding)
        if trace.gamma_range is None or gamma not in trace.gamma_range:
            raise RuntimeError(
                f"decoder: {spec.name!r} at gamma={gamma!r} recorded the γ range "
                f"{trace.gamma_range}, which does not hold it"
            )
        self.map.decodes += 1
        self.map.calls, self.map.replayed = self._server.calls, self._server.replayed
        return trace

    def _clip(self, r: Interval, trace: Trace) -> Piece:
        lo, lo_closed = (self.lo, True) if r.lo < self.lo else (r.lo, r.lo_closed)
        hi, hi_closed = (self.hi, True) if r.hi > self.hi else (r.hi, r.hi_closed)
        return Piece(lo, hi, trace, lo_closed, hi_closed, self.whole)

    def _ends_map(self, r: Interval) -> bool:
        return r.hi > self.hi or (r.hi == self.hi and r.hi_closed)

    def _gap(self, after: Piece | None, lo: float, lo_closed: bool) -> Piece | None:
        """The stretch not decoded between ``after`` (None: the map's bottom) and a range starting at ``lo``."""
        if after is None:
            if lo == self.lo and lo_closed:
                return None
            return Piece(self.lo, lo, None, True, not lo_closed, self.whole)
        if _meets(after, lo, lo_closed, self.whole):
            return None
        return Piece(after.hi, lo, None, not after.hi_closed, not lo_closed, self.whole)

    def pieces(self) -> Generator[Piece, None, None]:
        started = time.perf_counter()
        last: Piece | None = None
        gamma = self.lo if self.positions is None else self.positions[0]
        while True:
            trace = self._decode(gamma)
            r = trace.gamma_range
            assert r is not None  # _decode checked that it holds gamma
            piece = self._clip(r, trace)
            gap = self._gap(last, piece.lo, piece.lo_closed)
            if gap is not None:
                empty = gap.lo > gap.hi or (gap.lo == gap.hi and not (gap.lo_closed and gap.hi_closed))
                if self.positions is None or empty:
                    raise RuntimeError(
                        f"γ map: the decode at {gamma!r} holds {piece}, which does not start where the "
                        f"last piece ({last}) ends; decodes at the same γ are not repeatable here"
                    )
                self.map.pieces.append(gap)
                yield gap
            self.map.pieces.append(piece)
            self.map.seconds = time.perf_counter() - started
            yield piece
            last = piece
            if self._ends_map(r):
                break
            nxt: float | None = _after(r)
            if self.positions is not None:
                nxt = next((g for g in self.positions if g >= nxt), None)
                if nxt is None:  # no slider position left above: the rest of the range is not decoded
                    gap = Piece(last.hi, self.hi, None, not last.hi_closed, True, self.whole)
                    self.map.pieces.append(gap)
                    yield gap
                    break
            gamma = nxt
        self.map.seconds = time.perf_counter() - started

    def walk(self) -> Generator[Piece, None, None]:
        """``pieces()``, then ``refine()``: the pieces holding the points (or the step's multiples) first, then the
        rest, until the map is exact."""
        yield from self.pieces()
        yield from self.refine()

    def refine(self) -> Generator[Piece, None, None]:
        """Decode every stretch ``pieces()`` left undecoded, walking it exactly as the exact map walks; yield each
        new piece. Afterwards ``map`` is the exact map."""
        started = time.perf_counter() - self.map.seconds
        pieces, i = self.map.pieces, 0
        while i < len(pieces):
            stretch = pieces[i]
            if stretch.decoded:
                i += 1
                continue
            before = pieces[i - 1] if i else None
            new: list[Piece] = []
            gamma = (
                stretch.lo if stretch.lo_closed else _after(Interval(stretch.lo, stretch.lo, True, True, self.whole))
            )
            while True:
                trace = self._decode(gamma)
                r = trace.gamma_range
                assert r is not None  # _decode checked that it holds gamma
                piece = self._clip(r, trace)
                last = new[-1] if new else before
                if not (
                    _meets(last, piece.lo, piece.lo_closed, self.whole)
                    if last is not None
                    else piece.lo == self.lo and piece.lo_closed
                ):
                    raise RuntimeError(
                        f"γ map: the decode at {gamma!r} holds {piece}, which does not start where "
                        f"the last piece ({last}) ends; decodes at the same γ are not repeatable here"
                    )
                new.append(piece)
                yield piece
                if self._ends_map(r):
                    break
                gamma = _after(r)
                if gamma not in stretch.interval:
                    break
            after = pieces[i + 1] if i + 1 < len(pieces) else None
            if not (
                _meets(new[-1], after.lo, after.lo_closed, self.whole)
                if after is not None
                else new[-1].hi == self.hi and new[-1].hi_closed
            ):
                raise RuntimeError(
                    f"γ map: the stretch {stretch} walked to {new[-1]}, which does not end where the "
                    f"next piece ({after}) starts"
                )
            pieces[i : i + 1] = new
            i += len(new)
            self.map.seconds = time.perf_counter() - started
        self.map.step = None  # every piece decoded: the exact map


@same_signature(GammaMapWalk)
def gamma_map(*args: Any, **kwargs: Any) -> GammaMap:
    """Every distinct greedy decode of ``prompt`` over ``[lo, hi]`` of ``rule``'s knob (None: the rule's slider
    range in ``COMMIT_RULES``): a ``GammaMap`` (see docs/gamma_map.md).

    ``step`` None: the exact map, every piece; a number (the slider's, 0.01): only the pieces holding a multiple of
    it are decoded. ``settings``: ``sv.decode``'s (``block_size``, ``max_new_tokens``, ``stop``, ``gap_free``,
    ``verify``, ``top_n``; a decoder's own, e.g. ``remask_threshold``), the same for every piece; ``temperature``
    above 0 is refused. ``decoder``: a registered decoder whose knob is γ (None: the model's first; SBD, verified
    SBD with ``verify=True``, or remasking). ``reuse_prefix`` (default True): replay the calls a
    piece shares with the piece below it instead of running them (the traces are the same; ``bench/GAMMA_MAP.md``
    measures what it saves). ``points`` and ``gate``: as ``GammaMapWalk``'s, whose parameters these are."""
    walk = GammaMapWalk(*args, **kwargs)
    for _ in walk.pieces():
        pass
    return walk.map
