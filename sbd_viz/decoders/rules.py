"""Commit rules: which masked slots to fix after a call.

``COMMIT_RULES`` is the one registry of the rules (function, knob interval, what the knob means, its valid range,
default and slider range); ``CommitRule`` is a rule with its knob, and ``CommitRule.knob_interval`` every knob value
that commits the same slots. The rules, their knobs and how each knob interval is derived: docs/commit_rules.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..trace.data import Interval

EB_TOLERANCE = 1e-12  # entropy_bounded's slack: earlier entropies summing to gamma + 1e-12 nats still fit


def _steps(values: torch.Tensor, gamma: float) -> Interval:
    """Where ``#{v in values: v <= gamma}`` stays what it is at ``gamma``: from the largest value <= gamma
    (closed) to the smallest value > gamma (open); ``-inf`` / ``inf`` (closed) where there is none."""
    below, above = values[values <= gamma], values[values > gamma]
    lo = float(below.max()) if len(below) else -math.inf
    return Interval(lo, float(above.min()), True, False) if len(above) else Interval(lo, math.inf)


# Each rule is two functions of (entropy (m,), confidence (m,), gamma), both given float64 tensors:
# ``_<rule>`` returns the indices it commits, ``_<rule>_interval`` an ``Interval`` of knob values around gamma
# that commit the same indices (before clipping to the valid range; it may be narrower than the widest such
# interval: ``CommitRule.knob_interval`` joins neighbouring ones that choose the same).


def _eb_joins(sorted_entropy):
    """For entropies sorted ascending, the budget from which each slot fits: the sum of the entropies before
    it (spent_j = e_1 + ... + e_{j-1}) less the tolerance. spent_1 is e_1 - e_1 = 0 exactly."""
    return torch.cumsum(sorted_entropy, 0) - sorted_entropy - EB_TOLERANCE


def _entropy_bounded(entropy, confidence, gamma):
    order = torch.argsort(entropy, stable=True)
    # s = the number of slots whose earlier entropies sum to <= gamma + 1e-12 (the s-th is free).
    # The first slot's join is -1e-12 and gamma >= 0, so s >= 1.
    return order[: int((_eb_joins(entropy[order]) <= gamma).sum())]


def _entropy_bounded_interval(entropy, confidence, gamma):
    # s is the same from the largest join <= gamma (closed) to the next join (open): [spent_s, spent_{s+1}) less
    # the tolerance, and [spent_m - 1e-12, inf] once every slot fits
    return _steps(_eb_joins(entropy[torch.argsort(entropy, stable=True)]), gamma)


def _entropy_threshold(entropy, confidence, gamma):
    chosen = torch.nonzero(entropy < gamma).flatten()
    return chosen if len(chosen) else torch.argmin(entropy)[None]


def _entropy_threshold_interval(entropy, confidence, gamma):
    # {e < gamma} holds for gamma in (its largest entropy, the smallest entropy outside it]; the fallback (no
    # e < gamma, the lowest slot alone) for every gamma <= min e
    chosen = entropy < gamma
    lo = float(entropy[chosen].max()) if chosen.any() else -math.inf
    hi = float(entropy[~chosen].min()) if not chosen.all() else math.inf
    return Interval(lo, hi, lo_closed=not chosen.any(), hi_closed=True)


def _confidence_threshold(entropy, confidence, gamma):
    chosen = torch.nonzero(confidence > gamma).flatten()
    return chosen if len(chosen) else torch.argmax(confidence)[None]


def _confidence_threshold_interval(entropy, confidence, gamma):
    # {c > gamma} holds for gamma in [the largest confidence outside it, its smallest confidence); the fallback
    # (no c > gamma, the top slot alone) for every gamma >= max c
    chosen = confidence > gamma
    lo = float(confidence[~chosen].max()) if not chosen.all() else -math.inf
    hi = float(confidence[chosen].min()) if chosen.any() else math.inf
    return Interval(lo, hi, lo_closed=True, hi_closed=not chosen.any())


def _factor_reach(confidence):
    """The slots, most confident first (ties: leftmost first), and per rank n the smallest f at which ranks
    2..n all pass, i.e. max over 2 <= i <= n of (i + 1)(1 - c_i) (-inf for rank 1, which never has to pass)."""
    order = torch.argsort(confidence, descending=True, stable=True)
    n = torch.arange(1, len(order) + 1, dtype=confidence.dtype)
    need = (n + 1) * (1 - confidence[order])
    need[0] = -math.inf
    return order, torch.cummax(need, 0).values


def _factor_count(passed, m):
    # Fast-dLLM's get_transfer_index_dynamic stops at the first rank n >= 2 with (n + 1)(1 - c_n) > f (they
    # write c_n < 1 - f / (n + 1)) and commits the ranks before it, except that when the first to fail is the
    # last rank it commits all m, as when none fails (its `top_i == len(threshs) - 1` case). We follow that
    # published code: so a 2-slot block is always committed whole. Rank 1 always commits: at least one.
    return passed if passed <= m - 2 else m


def _factor(entropy, confidence, gamma):
    order, reach = _factor_reach(confidence)
    return order[: _factor_count(int((reach <= gamma).sum()), len(order))]


def _factor_interval(entropy, confidence, gamma):
    # the count of passing ranks changes where f passes a reach value; every count >= m - 1 commits all m
    order, reach = _factor_reach(confidence)
    m = len(order)
    if int((reach <= gamma).sum()) >= m - 1:
        return Interval(float(reach[m - 2]) if m >= 2 else -math.inf, math.inf)
    return _steps(reach, gamma)


def _top_k(entropy, confidence, gamma):
    return torch.argsort(entropy, stable=True)[: int(gamma)]  # gamma >= 1: at least one


def _top_k_interval(entropy, confidence, gamma):
    # k below m: k alone (another k commits another number of slots); k >= m: every k from m up commits all m
    m, k = len(entropy), int(gamma)
    return Interval(m, math.inf, whole=True) if k >= m else Interval(k, k, whole=True)


def _left_to_right(entropy, confidence, gamma):
    return torch.zeros(1, dtype=torch.long)


def _left_to_right_interval(entropy, confidence, gamma):
    return Interval(-math.inf, math.inf)  # the knob is ignored


@dataclass(frozen=True)
class Range:
    """The values a knob accepts: ``lo`` to ``hi`` inclusive (``lo`` excluded if ``lo_open``), whole if ``whole``."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    whole: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.lo if self.lo_open else value >= self.lo
        return above and value <= self.hi and (not self.whole or (math.isfinite(value) and value == int(value)))

    def clip(self, interval: Interval) -> Interval:
        """The part of ``interval`` this range accepts (``interval`` must meet it)."""
        lo, lo_closed, hi, hi_closed = interval.lo, interval.lo_closed, interval.hi, interval.hi_closed
        if lo <= self.lo:
            lo, lo_closed = self.lo, not self.lo_open and (lo < self.lo or lo_closed)
        if hi >= self.hi:
            hi, hi_closed = self.hi, hi > self.hi or hi_closed
        return Interval(lo, hi, lo_closed, hi_closed, interval.whole or self.whole)

    def __str__(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if math.isinf(self.lo) and math.isinf(self.hi):
            return kind
        if math.isinf(self.hi):
            return f"{kind} {'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{kind} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class Rule:
    """One commit rule: its functions and everything a UI needs to know about its knob (``gamma``)."""

    select: Callable  # (entropy (m,), confidence (m,), gamma) -> indices into the m masked slots
    interval: Callable  # (entropy (m,), confidence (m,), gamma) -> Interval around gamma choosing the same
    symbol: str  # short slider name, e.g. "γ (nats)"
    label: str  # the slider's full label: what the knob does
    meaning: str  # for errors: "gamma: for <rule> it is <meaning> and must be ..."
    valid: Range  # what CommitRule accepts
    default: float
    slider: tuple[float, float, float]  # (lo, hi, step): a useful range, inside ``valid``
    tunable: bool = True  # False: the rule ignores its knob (a UI greys the slider out)


COMMIT_RULES: dict[str, Rule] = {
    "entropy_bounded": Rule(
        _entropy_bounded,
        _entropy_bounded_interval,
        "γ (nats)",
        "γ · entropy budget per call (nats); higher = more slots per call",
        "the entropy budget per call in nats",
        Range(lo=0.0),
        0.1,
        (0.0, 2.0, 0.01),
    ),
    "entropy_threshold": Rule(
        _entropy_threshold,
        _entropy_threshold_interval,
        "γ (nats)",
        "γ · commit every slot with entropy below this (nats)",
        "the per-slot entropy threshold in nats",
        Range(lo=0.0),
        0.5,
        (0.0, 2.0, 0.01),
    ),
    "confidence_threshold": Rule(
        _confidence_threshold,
        _confidence_threshold_interval,
        "γ (prob.)",
        "γ · commit every slot more probable than this (probability)",
        "a probability threshold",
        Range(0.0, 1.0),
        0.9,
        (0.0, 1.0, 0.01),
    ),
    "factor": Rule(
        _factor,
        _factor_interval,
        "f",
        "f · Fast-dLLM factor (> 0); higher = more slots per call",
        "the Fast-dLLM factor f",
        Range(lo=0.0, lo_open=True),
        1.0,
        (0.01, 2.0, 0.01),
    ),
    "top_k": Rule(
        _top_k,
        _top_k_interval,
        "k (slots/call)",
        "k · slots committed per call",
        "the number of slots committed per call",
        Range(lo=1, whole=True),
        4,
        (1, 16, 1),
    ),
    "left_to_right": Rule(
        _left_to_right,
        _left_to_right_interval,
        "(ignored)",
        "(ignored: left to right commits one slot per call)",
        "ignored, but still checked",
        Range(),
        0.0,
        (0.0, 1.0, 0.01),
        tunable=False,
    ),
}
RULES = tuple(COMMIT_RULES)
DEFAULT_RULE = "entropy_bounded"  # the paper's sampler
DEFAULT_GAMMA = COMMIT_RULES[DEFAULT_RULE].default


def _checked(entropy: torch.Tensor, confidence: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The scores as float64, after checking them."""
    if entropy.ndim != 1 or entropy.shape != confidence.shape or len(entropy) == 0:
        raise ValueError("entropy/confidence: need two 1-D tensors of the same non-zero length")
    # every rule's "at least one" argument compares finite numbers (inf - inf or NaN would break it)
    if not (torch.isfinite(entropy).all() and torch.isfinite(confidence).all()):
        raise ValueError("entropy/confidence: must be finite")
    return entropy.double(), confidence.double()


def _next_above(interval: Interval, valid: Range) -> float | None:
    """The first knob value above ``interval``, or None if it reaches the top of ``valid``."""
    if interval.hi == math.inf:
        return None
    if interval.whole:
        g = interval.hi + 1
    else:
        g = math.nextafter(interval.hi, math.inf) if interval.hi_closed else interval.hi
    return g if g in valid else None


def _next_below(interval: Interval, valid: Range) -> float | None:
    """The first knob value below ``interval``, or None if it reaches the bottom of ``valid``."""
    if interval.lo == -math.inf:
        return None
    if interval.whole:
        g = interval.lo - 1
    else:
        g = math.nextafter(interval.lo, -math.inf) if interval.lo_closed else interval.lo
    return g if g in valid else None


@dataclass(frozen=True)
class CommitRule:
    """A commit rule with its knob: ``CommitRule("entropy_bounded", 0.1)``."""

    name: str = DEFAULT_RULE
    gamma: float = DEFAULT_GAMMA
    gap_free: bool = False

    def __post_init__(self):
        rule = COMMIT_RULES.get(self.name)
        if rule is None:
            raise ValueError(f"rule: unknown rule {self.name!r}; choose from {', '.join(RULES)}")
        g = self.gamma
        if isinstance(g, bool) or not isinstance(g, (int, float)) or math.isnan(g):
            raise ValueError(f"gamma: must be a number, got {g!r}")
        if g not in rule.valid:
            raise ValueError(f"gamma: for {self.name} it is {rule.meaning} and must be {rule.valid}, got {g}")

    def select(self, entropy: torch.Tensor, confidence: torch.Tensor) -> list[int]:
        """Indices (ascending) into the masked slots, given their entropies and confidences (m,); never empty.
        The rule computes in float64."""
        return self._choose(*_checked(entropy, confidence), self.gamma)

    def knob_interval(self, entropy: torch.Tensor, confidence: torch.Tensor) -> Interval:
        """The widest interval of knob values around ``gamma``, inside the rule's valid range, at which this rule
        (``gap_free`` included) commits exactly the slots ``select(entropy, confidence)`` commits. Every value in
        it gives that choice; the value just past an end that is not the valid range's (an open end itself, the
        next float past a closed one, the next whole number for ``top_k``) gives another. For whole-number knobs
        it is ``whole``: its whole members. ``left_to_right`` ignores its knob: the whole valid range."""
        entropy, confidence = _checked(entropy, confidence)
        rule = COMMIT_RULES[self.name]
        choice = self._choose(entropy, confidence, self.gamma)

        def piece(g):  # the rule's own interval around g: the same unwrapped choice throughout
            found = rule.valid.clip(rule.interval(entropy, confidence, g))
            if g not in found:  # a broken interval function would otherwise walk on the spot forever
                raise RuntimeError(f"{self.name}: its interval at gamma={g!r} is {found}, without gamma")
            return found

        def same(g):
            return g is not None and self._choose(entropy, confidence, g) == choice

        # join neighbouring pieces while they choose the same (a rule's piece may be narrower than the widest
        # interval, e.g. entropy_threshold's fallback and {the lowest slot}; and gap_free merges more)
        low = high = piece(self.gamma)
        while same(g := _next_above(high, rule.valid)):
            high = piece(g)
        while same(g := _next_below(low, rule.valid)):
            low = piece(g)
        return Interval(low.lo, high.hi, low.lo_closed, high.hi_closed, low.whole)

    def _choose(self, entropy: torch.Tensor, confidence: torch.Tensor, gamma: float) -> list[int]:
        chosen = sorted({int(i) for i in COMMIT_RULES[self.name].select(entropy, confidence, gamma)})
        if self.gap_free:
            run = 0
            while run < len(chosen) and chosen[run] == run:
                run += 1
            chosen = list(range(max(run, 1)))
        return chosen

    def __str__(self) -> str:
        return f"{self.name}{'+gap_free' if self.gap_free else ''}(gamma={self.gamma:g})"
