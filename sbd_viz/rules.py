"""Commit rules: which masked slots to fix after a call.

A rule sees, for the masked slots of a block in ascending slot order, each slot's
entropy (nats) and confidence (probability of its proposed token), and returns the
indices (into that list) to commit. Rules are pure, validated at construction, and commit
at least one slot of any non-empty block (each rule's comment says why). Each has one knob,
passed as ``gamma`` through ``decode``:

| rule                   | knob (``gamma``)             | commits                                              |
| ---------------------- | ---------------------------- | ---------------------------------------------------- |
| ``entropy_bounded``    | entropy budget, nats, >= 0   | paper eq. 8: lowest-entropy slots while the sum of   |
|                        |                              | all but the last stays <= gamma (EB-Sampler)         |
| ``entropy_threshold``  | entropy threshold, nats, >= 0| every slot with entropy < gamma, else the lowest one |
| ``confidence_threshold``| probability in [0, 1]       | every slot with confidence > gamma, else the top one |
| ``factor``             | f > 0 (Fast-dLLM)            | the n most confident with (n + 1)(1 - c_n) < f       |
| ``top_k``              | count k >= 1                 | the k lowest-entropy slots                           |
| ``left_to_right``      | ignored                      | the leftmost masked slot (NTP order, one per call)   |

``COMMIT_RULES`` is the one registry of the rules: function, what the knob means, its valid
range, default and slider range. ``CommitRule``, the CLI, the explorer and the app all read it, so a
new rule is one function and one entry here.

``gap_free=True`` turns any rule into one that commits only a contiguous run starting at
the leftmost masked slot (the rule's choices, cut at the first slot it did not choose;
the leftmost slot alone if the rule did not choose it): the ablation of gap fills.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch


def _entropy_bounded(entropy, confidence, gamma):
    order = torch.argsort(entropy, stable=True)
    # s = largest count whose first s-1 sorted entropies sum to <= gamma (the s-th is free).
    # spent[0] is e - e = 0 exactly and gamma >= 0, so s >= 1.
    spent = torch.cumsum(entropy[order], 0) - entropy[order]
    return order[: int((spent <= gamma + 1e-12).sum())]


def _entropy_threshold(entropy, confidence, gamma):
    chosen = torch.nonzero(entropy < gamma).flatten()
    return chosen if len(chosen) else torch.argmin(entropy)[None]


def _confidence_threshold(entropy, confidence, gamma):
    chosen = torch.nonzero(confidence > gamma).flatten()
    return chosen if len(chosen) else torch.argmax(confidence)[None]


def _factor(entropy, confidence, gamma):
    order = torch.argsort(confidence, descending=True, stable=True)
    n = torch.arange(1, len(order) + 1, dtype=confidence.dtype)
    ok = (n + 1) * (1 - confidence[order]) < gamma
    # the largest n for which the rule holds (it need not hold for every smaller n); else the top one
    count = int(torch.nonzero(ok).max()) + 1 if ok.any() else 1
    return order[:count]


def _top_k(entropy, confidence, gamma):
    return torch.argsort(entropy, stable=True)[: int(gamma)]  # gamma >= 1: at least one


def _left_to_right(entropy, confidence, gamma):
    return torch.zeros(1, dtype=torch.long)


@dataclass(frozen=True)
class Range:
    """The values a knob accepts: ``lo`` to ``hi`` inclusive (``lo`` excluded if ``lo_open``), whole if ``whole``."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    whole: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.lo if self.lo_open else value >= self.lo
        return above and value <= self.hi and (not self.whole or value == int(value))

    def __str__(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if math.isinf(self.lo) and math.isinf(self.hi):
            return kind
        if math.isinf(self.hi):
            return f"{kind} {'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{kind} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class Rule:
    """One commit rule: its function and everything a UI needs to know about its knob (``gamma``)."""

    select: Callable  # (entropy (m,), confidence (m,), gamma) -> indices into the m masked slots
    symbol: str  # short slider name, e.g. "γ (nats)"
    label: str  # the slider's full label: what the knob does
    meaning: str  # for errors: "gamma: for <rule> it is <meaning> and must be ..."
    valid: Range  # what CommitRule accepts
    default: float
    slider: tuple[float, float, float]  # (lo, hi, step): a useful range, inside ``valid``
    tunable: bool = True  # False: the rule ignores its knob (a UI greys the slider out)


COMMIT_RULES: dict[str, Rule] = {
    "entropy_bounded": Rule(
        _entropy_bounded, "γ (nats)", "γ · entropy budget per call (nats); higher = more slots per call",
        "the entropy budget per call in nats", Range(lo=0.0), 0.1, (0.0, 2.0, 0.01)),
    "entropy_threshold": Rule(
        _entropy_threshold, "γ (nats)", "γ · commit every slot with entropy below this (nats)",
        "the per-slot entropy threshold in nats", Range(lo=0.0), 0.5, (0.0, 2.0, 0.01)),
    "confidence_threshold": Rule(
        _confidence_threshold, "γ (prob.)", "γ · commit every slot more probable than this (probability)",
        "a probability threshold", Range(0.0, 1.0), 0.9, (0.0, 1.0, 0.01)),
    "factor": Rule(
        _factor, "f", "f · Fast-dLLM factor (> 0); higher = more slots per call", "the Fast-dLLM factor f",
        Range(lo=0.0, lo_open=True), 1.0, (0.01, 2.0, 0.01)),
    "top_k": Rule(
        _top_k, "k (slots/call)", "k · slots committed per call", "the number of slots committed per call",
        Range(lo=1, whole=True), 4, (1, 16, 1)),
    "left_to_right": Rule(
        _left_to_right, "(ignored)", "(ignored: left to right commits one slot per call)",
        "ignored, but still checked", Range(), 0.0, (0.0, 1.0, 0.01), tunable=False),
}
RULES = tuple(COMMIT_RULES)
DEFAULT_RULE = "entropy_bounded"  # the paper's sampler
DEFAULT_GAMMA = COMMIT_RULES[DEFAULT_RULE].default


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
        """Indices (ascending) into the masked slots, given their entropies and confidences (m,); never empty."""
        if entropy.ndim != 1 or entropy.shape != confidence.shape or len(entropy) == 0:
            raise ValueError("entropy/confidence: need two 1-D tensors of the same non-zero length")
        # every rule's "at least one" argument compares finite numbers (inf - inf or NaN would break it)
        if not (torch.isfinite(entropy).all() and torch.isfinite(confidence).all()):
            raise ValueError("entropy/confidence: must be finite")
        chosen = sorted(set(int(i) for i in COMMIT_RULES[self.name].select(entropy, confidence, self.gamma)))
        if self.gap_free:
            run = 0
            while run < len(chosen) and chosen[run] == run:
                run += 1
            chosen = list(range(max(run, 1)))
        return chosen

    def __str__(self) -> str:
        return f"{self.name}{'+gap_free' if self.gap_free else ''}(gamma={self.gamma:g})"
