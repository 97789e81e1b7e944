"""Commit rules: which masked slots to fix after a call.

A rule sees, for the masked slots of a block in ascending slot order, each slot's
entropy (nats) and confidence (probability of its proposed token), and returns the
indices (into that list) to commit. Rules are pure, validated at construction, and always
commit at least one slot. Each has one knob, passed as ``gamma`` through ``decode``:

| rule                   | knob (``gamma``)             | commits                                              |
| ---------------------- | ---------------------------- | ---------------------------------------------------- |
| ``entropy_bounded``    | entropy budget, nats, >= 0   | paper eq. 8: lowest-entropy slots while the sum of   |
|                        |                              | all but the last stays <= gamma (EB-Sampler)         |
| ``entropy_threshold``  | entropy threshold, nats, >= 0| every slot with entropy < gamma, else the lowest one |
| ``confidence_threshold``| probability in [0, 1]       | every slot with confidence > gamma, else the top one |
| ``factor``             | f > 0 (Fast-dLLM)            | the n most confident with (n + 1)(1 - c_n) < f       |
| ``top_k``              | count k >= 1                 | the k lowest-entropy slots                           |
| ``left_to_right``      | ignored                      | the leftmost masked slot (NTP order, one per call)   |

``gap_free=True`` turns any rule into one that commits only a contiguous run starting at
the leftmost masked slot (the rule's choices, cut at the first slot it did not choose;
the leftmost slot alone if the rule did not choose it): the ablation of gap fills.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

RULES = ("entropy_bounded", "entropy_threshold", "confidence_threshold", "factor", "top_k", "left_to_right")


def _entropy_bounded(entropy, confidence, gamma):
    order = torch.argsort(entropy, stable=True)
    # s = largest count whose first s-1 sorted entropies sum to <= gamma (the s-th is free).
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
    # the largest n for which the rule holds (it need not hold for every smaller n)
    count = int(torch.nonzero(ok).max()) + 1 if ok.any() else 1
    return order[:count]


def _top_k(entropy, confidence, gamma):
    return torch.argsort(entropy, stable=True)[: int(gamma)]


def _left_to_right(entropy, confidence, gamma):
    return torch.zeros(1, dtype=torch.long)


_SELECT = {
    "entropy_bounded": _entropy_bounded,
    "entropy_threshold": _entropy_threshold,
    "confidence_threshold": _confidence_threshold,
    "factor": _factor,
    "top_k": _top_k,
    "left_to_right": _left_to_right,
}


@dataclass(frozen=True)
class Solver:
    """A commit rule with its knob: ``Solver("entropy_bounded", 0.1)``."""

    name: str = "entropy_bounded"
    gamma: float = 0.1
    gap_free: bool = False

    def __post_init__(self):
        if self.name not in _SELECT:
            raise ValueError(f"solver: unknown rule {self.name!r}; choose from {', '.join(RULES)}")
        g = self.gamma
        if isinstance(g, bool) or not isinstance(g, (int, float)) or math.isnan(g):
            raise ValueError(f"gamma: must be a number, got {g!r}")
        if self.name in ("entropy_bounded", "entropy_threshold") and g < 0:
            raise ValueError(f"gamma: the {self.name} budget is in nats and must be >= 0, got {g}")
        if self.name == "confidence_threshold" and not 0 <= g <= 1:
            raise ValueError(f"gamma: the confidence threshold must be in [0, 1], got {g}")
        if self.name == "factor" and g <= 0:
            raise ValueError(f"gamma: the factor f must be > 0, got {g}")
        if self.name == "top_k" and (g < 1 or g != int(g)):
            raise ValueError(f"gamma: top_k commits gamma slots per call, a whole number >= 1, got {g}")

    def select(self, entropy: torch.Tensor, confidence: torch.Tensor) -> list[int]:
        """Indices (ascending) into the masked slots, given their entropies and confidences (m,)."""
        if entropy.ndim != 1 or entropy.shape != confidence.shape or len(entropy) == 0:
            raise ValueError("entropy/confidence: need two 1-D tensors of the same non-zero length")
        chosen = sorted(set(int(i) for i in _SELECT[self.name](entropy, confidence, self.gamma)))
        if not chosen:
            chosen = [int(torch.argmin(entropy))]
        if self.gap_free:
            run = 0
            while run < len(chosen) and chosen[run] == run:
                run += 1
            chosen = list(range(max(run, 1)))
        return chosen

    def __str__(self) -> str:
        return f"{self.name}{'+gap_free' if self.gap_free else ''}(gamma={self.gamma:g})"
