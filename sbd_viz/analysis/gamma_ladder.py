"""One prompt across γ: which knob values keep NTP's text, and what each one costs in calls.

``gamma_ladder(model, prompt, rule=...)`` decodes the prompt once with NTP and once at each γ of a ladder, and
returns a frame with one row per γ; ``Ladder`` is the same work as a generator (``Ladder.rows()``). The largest safe
γ, the exact ladder and other decoders' knobs: docs/gamma_map.md.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from ..decoders.door import decode, start
from ..decoders.ntp import decode_ntp
from ..decoders.registry import check_serves, decoders, default_decoder, get_decoder
from ..decoders.rules import COMMIT_RULES, DEFAULT_RULE, RULES, CommitRule, Interval
from ..models.checks import check_model
from ..trace.checks import check_prompt, check_whole
from ..trace.data import Trace
from .divergence import DIVERGENCE_COLUMNS, divergence_columns
from .gamma_map import GammaMapWalk, format_end, format_range, walks_gamma
from .signature import same_signature

REUSE_PREFIX = True  # an exact ladder's map replays shared prefixes: fewer calls, less time (bench/GAMMA_MAP.md)
LADDER_POINTS = 9  # default γ values spread over a rule's slider range (its ends included)
LADDER_COLUMNS = (
    "gamma",
    "calls",
    "tokens",
    "tokens_per_call",
    "speedup_calls",
    "same_as_ntp",
    "text",
    *DIVERGENCE_COLUMNS,
    "gap_fills",
)


def ladder_gammas(rule: str = DEFAULT_RULE, points: int = LADDER_POINTS) -> list[float]:
    """The default γ ladder of ``rule``: ``points`` values spread evenly over its slider range ``(lo, hi, step)``,
    both ends included, each rounded to the slider's step (a value the slider can show), plus the rule's default
    unless a point already lies within a step and a half of it; ascending, without repeats. (Every slider step
    would be too many decodes: 201 for ``entropy_bounded``.)

    ``entropy_bounded`` (slider 0 to 2 by 0.01, default 0.1): 0, 0.1, 0.25, 0.5, ..., 2. A rule that ignores its
    knob (``left_to_right``) has one value: its default.
    """
    spec = COMMIT_RULES.get(rule)
    if spec is None:
        raise ValueError(f"rule: unknown rule {rule!r}; choose from {', '.join(RULES)}")
    check_whole(points, "points", 2)
    if not spec.tunable:
        return [spec.default]
    lo, hi, step = spec.slider
    values = []
    for i in range(points):
        snapped = lo + round((hi - lo) * i / (points - 1) / step) * step
        values.append(float(f"{min(hi, snapped):.10g}"))  # 0.30000000000000004 -> 0.3
    if all(abs(v - spec.default) > step * 1.5 for v in values):  # the default, unless a point is a step away
        values.append(spec.default)
    return sorted({int(v) if spec.valid.whole else v for v in values})


def _as_list(values) -> list:
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return [values]
    if isinstance(values, str) or not isinstance(values, Iterable) or not list(values):
        raise ValueError(f"gammas: must be a non-empty list of knob values or None, got {values!r}")
    return list(values)


def _check_gammas(rule: str, gammas) -> list[float]:
    if gammas is None:
        return ladder_gammas(rule)
    if isinstance(gammas, (int, float)) and not isinstance(gammas, bool):
        gammas = [gammas]
    if isinstance(gammas, str) or not isinstance(gammas, Iterable):
        raise ValueError(f"gammas: must be a list of numbers or None, got {gammas!r}")
    gammas = list(gammas)
    if not gammas:
        raise ValueError("gammas: must not be empty (None takes the rule's slider range)")
    # numpy numbers (np.linspace, np.arange) are numbers too; the rules want Python ones
    gammas = [
        (int(g) if isinstance(g, numbers.Integral) else float(g))
        if isinstance(g, numbers.Real) and not isinstance(g, bool)
        else g
        for g in gammas
    ]
    for g in gammas:
        try:
            CommitRule(rule, g)
        except ValueError as exc:  # CommitRule names ``gamma``; here the argument is the list
            raise ValueError(f"gammas: {g!r} is not a valid knob value: {exc}") from None
    return sorted(set(gammas))


def largest_safe_gamma(frame) -> float | None:
    """The largest knob value (γ) of a ladder frame reached by climbing from the smallest value whose text equals
    NTP's while the text stays NTP's: at every row on the way, and, in an exact ladder (``attrs["safe_ranges"]``),
    at every γ between them, so a sliver between two rows that leaves NTP's text ends the climb. Rows below the
    first that writes NTP's text are skipped: where even γ 0 leaves NTP's text (it commits each call's surest slot,
    not its leftmost), the safe γ start above it. ``None`` if no row writes NTP's text (or the frame is empty)."""
    ranges = [_interval(r) for r in frame.attrs.get("safe_ranges") or ()] if frame.attrs.get("exact") else None
    safe, within = None, None
    for value, same in sorted(zip(frame[frame.attrs.get("knob", "gamma")], frame["same_as_ntp"])):
        if safe is None:
            if same:
                safe = value
                within = next((r for r in ranges if value in r), None) if ranges is not None else None
            continue
        if not same or (within is not None and value not in within):
            break
        safe = value
    return safe


def _interval(r: dict) -> Interval:
    return Interval(r["lo"], r["hi"], r["lo_closed"], r["hi_closed"])


def safe_words(runs: list[dict], lo: float, hi: float) -> str:
    """The exact safe γ in a sentence, from a map's text runs (``GammaMap.text_runs``)."""
    safe = [format_range(r["lo"], r["hi"], r["lo_closed"], r["hi_closed"]) for r in runs if r["same_as_ntp"]]
    if not safe:
        return f"no γ in [{format_end(lo)}, {format_end(hi)}] writes NTP's text"
    head = ""
    if not runs[0]["same_as_ntp"]:
        head = (
            f"γ {format_end(lo)} already leaves NTP's text (even at its smallest γ the rule commits each call's "
            "surest slot, not its leftmost, so it is not next-token decoding); "
        )
    rest = "" if len(runs) == 1 else f", and at no other γ in [{format_end(lo)}, {format_end(hi)}]"
    return head + f"NTP's text at every γ in {' and '.join(safe)}{rest}"


class Ladder:
    """Decode one prompt with NTP and at each γ (or ``decoder``'s knob value) of a ladder; see ``gamma_ladder``.

    ``rows()`` decodes NTP first, then yields one row (a dict of ``LADDER_COLUMNS``, its first key the knob's
    name) per value, ascending, as each decode finishes; ``ntp`` and ``traces`` (value -> its ``Trace``) fill in as
    it goes; ``frame()`` gives the frame of the rows so far.
    """

    def __init__(
        self,
        model,
        prompt: str,
        rule: str = DEFAULT_RULE,
        gammas: Sequence[float] | None = None,
        block_size: int | None = None,
        max_new_tokens: int = 64,
        stop: str | Iterable[str] | None = None,
        gap_free: bool = False,
        decoder=None,
        exact: bool = True,
        **own,
    ):
        self.spec = spec = default_decoder(model) if decoder is None else get_decoder(decoder)
        self.model = check_model(model)
        check_serves(spec, model)
        if spec.knob is None:
            raise ValueError(
                f"decoder: {spec.name!r} has no knob to climb; choose one of "
                f"{', '.join(s.name for s in decoders(model) if s.knob)}"
            )
        self.knob = spec.knob.name
        if not isinstance(rule, str) or rule not in COMMIT_RULES:
            raise ValueError(f"rule: unknown rule {rule!r}; choose from {', '.join(RULES)}")
        self.prompt, self.rule = prompt, rule
        check_prompt(prompt)
        if self.knob == "gamma":
            self.gammas = _check_gammas(rule, gammas)
        else:
            whole = all(float(v).is_integer() for v in spec.knob.slider(rule))  # a whole-number knob, e.g. a block
            self.gammas = (
                spec.knob.values(rule)
                if gammas is None
                else sorted(
                    {
                        int(g)
                        if isinstance(g, numbers.Integral) or (whole and isinstance(g, float) and g.is_integer())
                        else g
                        for g in _as_list(gammas)
                    }
                )
            )
        settings = dict(rule=rule, block_size=block_size, gap_free=gap_free, **own)
        self.decode_kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens, stop=stop, **{k: v for k, v in settings.items() if k != self.knob}
        )
        # every decode's settings checked before the first slow one (errors name the argument)
        first: dict[str, Any] = {self.knob: self.gammas[0]}
        start(self.model, prompt, spec.name, **self.decode_kwargs, **first)
        self.ntp: Trace | None = None
        self.traces: dict[float, Trace] = {}
        self._rows: list[dict] = []
        self.map_walk: GammaMapWalk | None = (
            None  # an exact ladder's γ map (``GammaMapWalk``): its rows are read off the map's pieces
        )
        if exact and walks_gamma(spec):  # a decoder whose traces carry a γ range: the ladder reads the exact map
            lo, hi, _ = COMMIT_RULES[rule].slider
            kw = {k: v for k, v in self.decode_kwargs.items() if k != "rule"}
            # the pieces holding the ladder's γ first (one decode each at most, so the rows come as fast as before),
            # then the stretches between them, until the map is exact
            self.map_walk = GammaMapWalk(
                self.model,
                prompt,
                rule,
                min(lo, self.gammas[0]),
                max(hi, self.gammas[-1]),
                None,
                spec.name,
                REUSE_PREFIX,
                points=self.gammas,
                **kw,
            )
            self._pieces = self.map_walk.walk()

    def rows(self) -> Generator[dict, None, None]:
        """Yield one row per γ, ascending, as each decode finishes (NTP is decoded first)."""
        kw = self.decode_kwargs
        if self.ntp is None:
            self.ntp = decode_ntp(self.model, self.prompt, max_new_tokens=kw["max_new_tokens"], stop=kw["stop"])
        if self.map_walk is not None:
            yield from self._map_rows()
            return
        for value in self.gammas[len(self._rows) :]:
            at: dict[str, Any] = {self.knob: value}
            trace = decode(self.model, self.prompt, self.spec.name, **kw, **at)
            self.traces[value] = trace
            row = ladder_row(value, trace, self.ntp, self.knob)
            self._rows.append(row)
            yield row

    def _map_rows(self) -> Generator[dict, None, None]:
        """An exact ladder's rows: each γ's trace is the map piece holding it, yielded as the walk reaches it. The
        last row waits until the map is exact, so the frame a consumer reads with it states the exact safe ranges."""
        assert self.map_walk is not None and self.ntp is not None  # rows() decoded NTP, __init__ started the walk
        while len(self._rows) < len(self.gammas):
            value = self.gammas[len(self._rows)]
            trace = self.map_walk.map.decoded_trace_at(value)
            if trace is None:
                next(self._pieces)  # the walk has not reached it yet
                continue
            if len(self._rows) == len(self.gammas) - 1:
                for _ in self._pieces:  # the stretches between the rows' pieces, decoded exactly
                    pass
            self.traces[value] = trace
            row = ladder_row(value, trace, self.ntp, self.knob)
            self._rows.append(row)
            yield row
        for _ in self._pieces:  # the rest of the map: the exact safe ranges need every piece
            pass

    def frame(self):
        """The rows decoded so far as a ``pandas.DataFrame`` (``LADDER_COLUMNS``); ``attrs`` hold ``rule``,
        ``prompt``, ``ntp_calls``, ``ntp_text`` and ``largest_safe_gamma``."""
        import pandas as pd

        df = pd.DataFrame(self._rows, columns=[self.knob] + list(LADDER_COLUMNS[1:]))
        for col in ("divergence_call", "divergence_block", "divergence_slot"):
            df[col] = df[col].astype("Int64")  # whole numbers, <NA> where the text never left NTP's
        df["same_as_ntp"] = df["same_as_ntp"].astype(bool)
        df.attrs.update(knob=self.knob, decoder=self.spec.name)
        df.attrs.update(
            rule=self.rule,
            prompt=self.prompt,
            ntp_calls=self.ntp.nfe if self.ntp else None,
            ntp_text=self.ntp.text if self.ntp else None,
            exact=False,
        )
        m = self.map_walk.map if self.map_walk is not None else None
        if (
            m is not None
            and self.ntp is not None
            and m.pieces
            and m.exact
            and m.pieces[-1].hi == m.hi
            and m.pieces[-1].hi_closed
        ):
            runs = m.text_runs(self.ntp)  # the whole map is known: the exact breakpoints and safe ranges
            df.attrs.update(
                exact=True,
                pieces=len(m.pieces),
                map_calls=m.calls,
                text_runs=runs,
                breakpoints=[r["lo"] for r in runs[1:]],
                safe=safe_words(runs, m.lo, m.hi),
                safe_ranges=[
                    {k: r[k] for k in ("lo", "hi", "lo_closed", "hi_closed")} for r in runs if r["same_as_ntp"]
                ],
            )
        df.attrs["largest_safe_gamma"] = largest_safe_gamma(df)
        return df


def ladder_row(gamma: float, trace: Trace, ntp: Trace, knob: str = "gamma") -> dict:
    """One ladder row: ``trace`` (decoded at ``gamma``, the value of ``knob``) measured against ``ntp``
    (``decode_ntp``, same prompt)."""
    return {
        knob: gamma,
        "calls": trace.nfe,
        "tokens": trace.n_tokens,
        "tokens_per_call": trace.tokens_per_call,
        "speedup_calls": ntp.nfe / trace.nfe if trace.nfe else math.nan,
        "same_as_ntp": trace.text == ntp.text,
        "text": trace.text,
        **divergence_columns(trace, ntp),
        "gap_fills": len(trace.kept_gap_fills()),
    }


@same_signature(Ladder)
def gamma_ladder(*args: Any, **kwargs: Any):
    """Decode ``prompt`` at each γ of a ladder and once with NTP; a ``pandas.DataFrame``, one row per γ, ascending.

    ``decoder``: any registered decoder with a knob (``sv.decoders()``; None: SBD); the ladder runs along its knob,
    ``gammas`` are that knob's values (None: spread over its range) and the first column is named after it. ``own``: the
    decoder's own settings.

    ``gammas`` None: ``ladder_gammas(rule)``, nine values spread over the rule's slider range plus its default.
    The other arguments are ``sv.decode``'s (NTP gets ``max_new_tokens`` and ``stop``), so each row is exactly
    what ``sv.decode(model, prompt, rule=rule, gamma=γ, ...)`` gives.

    Columns (``LADDER_COLUMNS``): ``gamma``; ``calls``, ``tokens``, ``tokens_per_call`` and ``speedup_calls``
    (NTP's calls / these); ``same_as_ntp`` (the text equals NTP's) and the ``text``; the first divergence
    from NTP (``divergence.first_divergence``: ``divergence_call``, ``_block``, ``_slot``, ``_token`` and NTP's
    token there, ``divergence_ntp_token``; ``<NA>`` / None where the text is NTP's, or where the output only
    stops early); ``gap_fills`` (kept in the output). ``frame.attrs["largest_safe_gamma"]``: see
    ``largest_safe_gamma``; the attrs also hold ``rule``, ``prompt``, ``ntp_calls`` and ``ntp_text``.

    ``exact`` (SBD, verified SBD, remasking): the rows are read off the prompt's exact γ map over the rule's slider
    range (widened to hold every γ asked for), and the attrs add what the map knows exactly: ``exact`` (True),
    ``pieces`` (distinct decodes), ``text_runs`` (neighbouring γ ranges with one text: ``lo``, ``hi``,
    ``lo_closed``, ``hi_closed``, ``text``, ``same_as_ntp``, ``pieces``), ``breakpoints`` (the γ where the text
    changes), ``safe_ranges`` (every γ range whose text equals NTP's) and ``safe`` (the same in a sentence). Other
    decoders, and ``exact=False``, decode at each γ of the ladder only (``attrs["exact"]`` False).
    """
    ladder = Ladder(*args, **kwargs)
    for _ in ladder.rows():
        pass
    return ladder.frame()
