"""ParallelBench's closed-form accuracy of list operations under parallel decoding (arXiv 2510.04767, Section 4.2
and Table 1): what an ideal model (each slot's logits the task's own, plus noise without bias) gets right when it
commits several list items per step, each sampled independently of the others in the same step.

``CLOSED_FORMS`` holds each task's functions, ``closed_form_curve`` a task's points. The tasks, ``k`` and ``gamma``,
and where these functions depart from the paper: docs/list_tasks.md.
"""

from __future__ import annotations

import math


def _check(n, k=None):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: need a whole number of items >= 1, got {n!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n):
        raise ValueError(f"k: need a whole number of items per step from 1 to n ({n}), got {k!r}")


def _steps(n: int, k: int) -> list[int]:
    """The step sizes of top-k decoding of n slots: k each, the last one what is left."""
    return [k] * (n // k) + ([n % k] if n % k else [])


def copy_accuracy(n: int, k: int) -> float:
    """Copy (and replace at a given index): 1 for every k, greedy or sampled, and for every confidence threshold
    (Table 1: C(Y|X) = 0, no dependence between slots)."""
    _check(n, k)
    return 1.0


def shuffle_accuracy(n: int, k: int) -> float:
    """Shuffle under top-k, greedy or sampled alike: Eq. (5), the product over steps of P(m, s) / m^s, the chance
    that the s slots of a step with m items left draw s different items (P(m, s) = m! / (m - s)!). Eq. (5) has
    s = k at every step (k divides n); here the last step has s = n mod k when k does not divide n. k = n gives
    n!/n^n, k = 1 gives 1."""
    _check(n, k)
    acc, left = 1.0, n
    for s in _steps(n, k):
        acc *= math.perm(left, s) / left**s
        left -= s
    return acc


def shuffle_threshold_accuracy(n: int, gamma: float) -> float:
    """Shuffle under a confidence threshold (Section 4.2.2): for gamma > 0.5 no slot with two or more items left is
    confident enough, so one slot is committed per step and the shuffle is always right: 1. The paper gives no
    value for gamma <= 0.5 (it depends on the noise), so that is a ``ValueError``."""
    _check(n)
    if not 0.5 < gamma <= 1:
        raise ValueError(f"gamma: Section 4.2.2 covers a threshold in (0.5, 1], got {gamma!r}")
    return 1.0


def replace_random_accuracy(n: int, k: int, temperature: float = 0.0) -> float:
    """Replace random under top-k (Section 4.2.1, Table 1).

    Greedy (``temperature`` 0): every step before the last keeps its items (keeping is the likelier choice while
    three or more slots are masked). At the last step with s slots: s = 1 replaces (the one slot left must take the
    new item): 1; s = 2 is a tie between keep and replace in each slot, broken at random: 1/2 ([keep, replace] or
    [replace, keep]); s > 2 keeps every slot: 0. The paper states it for k dividing n (s = k): 1 for k = 1, 0.5 for
    k = 2, 0 for k > 2.

    Sampled (``temperature`` 1), one step (k = n): each slot keeps its item with probability (n - 1)/n, so exactly
    one is replaced with probability ((n - 1)/n)^(n - 1), which tends to 1/e; k = 1 is always right. The paper
    gives no other k for sampling, so that is a ``ValueError``."""
    _check(n, k)
    if temperature == 0:
        last = _steps(n, k)[-1]
        return 1.0 if last == 1 else 0.5 if last == 2 else 0.0
    if temperature != 1:
        raise ValueError(f"temperature: Section 4.2.1 covers greedy (0) and sampling at 1, got {temperature!r}")
    if k == 1:
        return 1.0
    if k != n:
        raise ValueError(f"k: under sampling Section 4.2.1 gives one-step generation (k = n = {n}) only, got {k}")
    return ((n - 1) / n) ** (n - 1)


def replace_random_threshold_accuracy(n: int, gamma: float) -> float:
    """Replace random under a greedy confidence threshold (Section 4.2.2, n > 2): if (n - 1)/n > gamma every slot
    is confident in keeping its item, all are committed at once and nothing is replaced: 0; if gamma >= (n - 1)/n no
    slot passes, one is committed per step, and the last one takes the new item: 1."""
    _check(n)
    if n <= 2:
        raise ValueError(f"n: Section 4.2.2 covers lists of more than 2 items, got {n}")
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma: a confidence threshold in [0, 1], got {gamma!r}")
    return 1.0 if gamma >= (n - 1) / n else 0.0


# The list tasks (``sbd_viz.tasks.lists``) a closed form covers, and which: ``copy`` and ``replace`` (at a given
# position) are Table 1's copy, right at every k; ``shuffle`` is Eq. (5)'s shuffle, where any order of the items is
# right. The suite's shuffle gives the order (positions that restore the list), so it has one right answer and an
# ideal model gets it at every k, as copy: Eq. (5) is drawn beside it as ParallelBench's own shuffle, for reference.
CLOSED_FORMS = {"copy": copy_accuracy, "replace": copy_accuracy, "shuffle": shuffle_accuracy}


def closed_form_curve(task: str, n: int, tokens_per_item: float = 1.0) -> list[tuple[float, float]]:
    """The closed form of ``task`` on ``n`` items as ``(tokens per call, accuracy %)`` points, one per k from 1 to
    n: n items in ceil(n / k) calls of top-k decoding, each item ``tokens_per_item`` tokens (a list item is several
    tokens: digits and a separator), so ``n * tokens_per_item / ceil(n / k)`` tokens per call. No prefill call and
    no end token are counted: an ideal decode of the list alone. Several k that take the same number of calls give
    one point, the smallest k's (its steps are the most even: for shuffle the most accurate)."""
    if task not in CLOSED_FORMS:
        raise ValueError(f"task: a closed form covers {', '.join(CLOSED_FORMS)}, got {task!r}")
    _check(n)
    if isinstance(tokens_per_item, bool) or not isinstance(tokens_per_item, (int, float)) or not tokens_per_item > 0:
        raise ValueError(f"tokens_per_item: need a number > 0, got {tokens_per_item!r}")
    form = CLOSED_FORMS[task]
    points: dict[int, tuple[float, float]] = {}
    for k in range(1, n + 1):
        points.setdefault(math.ceil(n / k), (n * tokens_per_item / math.ceil(n / k), 100.0 * form(n, k)))
    return sorted(points.values())
