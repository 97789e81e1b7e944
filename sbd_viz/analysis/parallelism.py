"""Accuracy against parallelism from exact γ maps: the curve, ParallelBench's PBx and d3LLM's AUP.

``curve`` gives one ``Segment`` per stretch of γ where no item's decode changes; ``grid_points`` the points a sampled
γ grid sees and ``compare_grid`` where it differs; ``pbx``, ``aup`` and ``summary`` the numbers. Why the curve is
exact, and PBx and AUP as their leaderboards compute them: docs/parallelism.md.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

PB_LEVELS = (90, 80, 70, 60)  # ParallelBench's x in PBx
AUP_ALPHA = 3.0  # d3LLM's penalty factor
AUP_OFFSET = 5.0  # d3LLM's y_min = y_1 - 5 (accuracy points)


@dataclass(frozen=True)
class Outcome:
    """One item's decode over a γ range: right or wrong, with its tokens and calls."""

    lo: float
    hi: float
    correct: bool
    tokens: int
    calls: int
    lo_closed: bool = True
    hi_closed: bool = False

    def __post_init__(self):
        if not (self.lo < self.hi or (self.lo == self.hi and self.lo_closed and self.hi_closed)):
            raise ValueError(f"outcome: empty γ range {self.lo!r}..{self.hi!r}")
        if self.calls < 1 or self.tokens < 0:
            raise ValueError(f"outcome: need calls >= 1 and tokens >= 0, got {self.calls} and {self.tokens}")

    @property
    def start(self) -> tuple[float, int]:
        return _cut(self.lo, not self.lo_closed)

    @property
    def end(self) -> tuple[float, int]:
        return _cut(self.hi, self.hi_closed)

    def __contains__(self, gamma: float) -> bool:
        return self.start <= _cut(gamma, False) and _cut(gamma, True) <= self.end


def _cut(value: float, after: bool) -> tuple[float, int]:
    """A place between knob values: just before ``value`` (``after`` False) or just after it. Ranges are spans
    between two cuts, so ``[a, b)`` is ``(a, 0)..(b, 0)`` and ``{a}`` is ``(a, 0)..(a, 1)``."""
    return (value, 1 if after else 0)


@dataclass(frozen=True)
class Segment:
    """A stretch of γ where no item's decode changes: the items' accuracy (percent) and pooled tokens per call."""

    lo: float
    hi: float
    lo_closed: bool
    hi_closed: bool
    accuracy: float
    tokens: int
    calls: int

    @property
    def parallelism(self) -> float:
        return self.tokens / self.calls

    @property
    def point(self) -> tuple[float, float]:
        return (self.parallelism, self.accuracy)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def __contains__(self, gamma: float) -> bool:
        return _cut(self.lo, not self.lo_closed) <= _cut(gamma, False) and _cut(gamma, True) <= _cut(
            self.hi, self.hi_closed
        )

    def __str__(self) -> str:
        from .gamma_map import format_range

        return format_range(self.lo, self.hi, self.lo_closed, self.hi_closed)


def outcomes(gmap, correct: Callable[[str], bool]) -> list[Outcome]:
    """An exact ``GammaMap``'s pieces as ``Outcome`` s, each scored by ``correct(text)``."""
    if not gmap.exact:
        raise ValueError("gmap: a step map leaves stretches undecoded; build the exact map (step=None) or refine() it")
    if any(p.whole for p in gmap.pieces):
        raise ValueError(f"gmap: {gmap.rule}'s knob takes whole numbers; the curve is for a continuous γ")
    return [
        Outcome(p.lo, p.hi, bool(correct(p.trace.text)), p.trace.n_tokens, p.trace.nfe, p.lo_closed, p.hi_closed)
        for p in gmap.pieces
    ]


def _check_items(items: Sequence[Sequence[Outcome]]) -> list[list[Outcome]]:
    lists = [list(item) for item in items]
    if not lists or not all(lists):
        raise ValueError("items: need one or more items, each with one or more outcomes")
    first = lists[0]
    for i, item in enumerate(lists):
        for a, b in pairwise(item):
            if a.end != b.start:
                raise ValueError(f"items: item {i}'s outcomes are not contiguous and ascending ({a.hi!r}, {b.lo!r})")
        if (item[0].start, item[-1].end) != (first[0].start, first[-1].end):
            raise ValueError(f"items: item {i} covers another γ range than item 0")
    return lists


def curve(items: Sequence[Sequence[Outcome]]) -> list[Segment]:
    """The exact accuracy-parallelism curve over γ: one ``Segment`` per stretch where no item's outcome changes, in
    γ order (neighbours with the same accuracy, tokens and calls joined)."""
    items = _check_items(items)
    cuts = sorted({o.start for item in items for o in item} | {item[-1].end for item in items})
    starts = [[o.start for o in item] for item in items]
    out: list[Segment] = []
    for a, b in pairwise(cuts):
        held = [item[bisect_right(s, a) - 1] for item, s in zip(items, starts)]
        acc = 100.0 * sum(o.correct for o in held) / len(held)
        tokens, calls = sum(o.tokens for o in held), sum(o.calls for o in held)
        lo, lo_closed, hi, hi_closed = a[0], a[1] == 0, b[0], b[1] == 1
        if out and (out[-1].accuracy, out[-1].tokens, out[-1].calls) == (acc, tokens, calls):
            prev = out.pop()
            lo, lo_closed = prev.lo, prev.lo_closed
        out.append(Segment(lo, hi, lo_closed, hi_closed, acc, tokens, calls))
    return out


def grid_points(items: Sequence[Sequence[Outcome]], gammas: Iterable[float]) -> list[tuple[float, float]]:
    """The ``(parallelism, accuracy)`` a sampled γ grid measures, one per γ in ascending order, read off the items'
    outcomes (what decoding every item at that γ gives). A γ outside the items' range is a ``ValueError``."""
    items = _check_items(items)
    points = []
    for gamma in sorted(gammas):
        held = []
        for item in items:
            found = next((o for o in item if gamma in o), None)
            if found is None:
                raise ValueError(f"gammas: {gamma!r} is outside the items' γ range")
            held.append(found)
        points.append(
            (sum(o.tokens for o in held) / sum(o.calls for o in held), 100.0 * sum(o.correct for o in held) / len(held))
        )
    return points


def _points(points) -> list[tuple[float, float]]:
    out = [p.point if isinstance(p, Segment) else (float(p[0]), float(p[1])) for p in points]
    if not out:
        raise ValueError("points: need one or more (parallelism, accuracy) points")
    for rho, y in out:
        if not (rho > 0 and math.isfinite(rho)) or not 0 <= y <= 100:
            raise ValueError(f"points: need parallelism > 0 and accuracy in [0, 100] (percent), got {(rho, y)}")
    return out


def pbx(points, x: float, interpolate: bool = False, relative_to: float | None = None) -> float:
    """ParallelBench's PBx: the largest parallelism among ``points`` (``(parallelism, accuracy %)`` pairs or
    ``Segment`` s) whose accuracy is >= ``x`` percent; 0.0 if none is. ``interpolate``: where accuracy crosses ``x``
    between the last point at or above it and the next (by parallelism), the crossing of the straight line between
    them (the leaderboard's reading of a continuous knob); points of equal parallelism are ordered by accuracy,
    highest first, as ParallelBench orders them. ``relative_to``: the threshold is ``x`` percent of this accuracy
    (e.g. NTP's) instead of ``x``."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 100:
        raise ValueError(f"x: must be a percentage in [0, 100], got {x!r}")
    if relative_to is not None and not 0 <= relative_to <= 100:
        raise ValueError(f"relative_to: must be an accuracy in [0, 100], got {relative_to!r}")
    level = x if relative_to is None else x / 100.0 * relative_to
    ordered = sorted(_points(points), key=lambda p: (p[0], -p[1]))  # ParallelBench: a tie's best accuracy first
    above = [i for i, (_, y) in enumerate(ordered) if y >= level]
    if not above:
        return 0.0
    best = max(ordered[i][0] for i in above)
    if interpolate:
        last = above[-1]
        if last + 1 < len(ordered) and ordered[last + 1][1] < level:
            (r0, y0), (r1, y1) = ordered[last], ordered[last + 1]
            best = max(best, r0 + (y0 - level) / (y0 - y1) * (r1 - r0))
    return best


def weight(y: float, y_max: float, alpha: float = AUP_ALPHA) -> float:
    """d3LLM's quality weight ``W(y) = min(exp(-alpha * (1 - y / y_max)), 1)``."""
    return min(math.exp(-alpha * (1 - y / y_max)), 1.0)


def aup(points, y_max: float | None = None, alpha: float = AUP_ALPHA, y_min_offset: float = AUP_OFFSET) -> float:
    """d3LLM's accuracy under parallelism of ``points`` (``(parallelism, accuracy %)`` pairs or ``Segment`` s; see
    docs/parallelism.md). ``y_max``: the highest accuracy on the task (None: the highest among ``points``)."""
    pts = _points(points)
    if y_max is None:
        y_max = max(y for _, y in pts)
    if not y_max > 0:
        return 0.0  # every point at 0%: nothing to weigh (d3LLM's W divides by y_max)
    pts = sorted(pts, key=lambda p: p[0])  # stable, as d3LLM's sorted(..., key=rho)
    y_min = pts[0][1] - y_min_offset
    kept = [(r, y) for r, y in pts if y >= y_min]
    total = kept[0][0] * kept[0][1]
    for (r0, y0), (r1, y1) in pairwise(kept):
        total += 0.5 * (r1 - r0) * (y1 * weight(y1, y_max, alpha) + y0 * weight(y0, y_max, alpha))
    return total


def summary(
    points,
    levels: Sequence[float] = PB_LEVELS,
    y_max: float | None = None,
    relative_to: float | None = None,
    interpolate: bool = False,
) -> dict:
    """``{"PB90": ..., "PB80": ..., ..., "AUP": ...}`` of ``points`` (see ``pbx`` and ``aup``)."""
    out = {f"PB{x:g}": pbx(points, x, interpolate=interpolate, relative_to=relative_to) for x in levels}
    out["AUP"] = aup(points, y_max=y_max)
    return out


def compare_grid(
    items: Sequence[Sequence[Outcome]],
    gammas: Iterable[float],
    levels: Sequence[float] = PB_LEVELS,
    y_max: float | None = None,
    relative_to: float | None = None,
) -> list[dict]:
    """Each number from the exact curve against the same number from a sampled γ grid: one row per PBx and AUP
    with ``metric``, ``exact``, ``grid`` (the grid's points, like for like), ``grid_interpolated`` (PBx with
    ``interpolate=True``, as ParallelBench's leaderboard reads a continuous knob; None for AUP), ``differs`` and
    ``missed``: the segments no grid γ falls in whose point the grid never measured, as range strings (for PBx only
    the segment that gives the exact value, when the grid missed it). ``y_max`` None: the exact curve's highest
    accuracy, for both."""
    items = _check_items(items)
    gammas = sorted(gammas)
    segments = curve(items)
    grid = grid_points(items, gammas)
    if y_max is None:
        y_max = max(s.accuracy for s in segments)
    seen = set(grid)
    missed = [s for s in segments if not any(g in s for g in gammas) and s.point not in seen]
    rows = []
    for x in levels:
        level = x if relative_to is None else x / 100.0 * relative_to
        exact = pbx(segments, x, relative_to=relative_to)
        deciding = [s for s in missed if s.parallelism == exact and s.accuracy >= level]
        row = dict(
            metric=f"PB{x:g}",
            exact=exact,
            grid=pbx(grid, x, relative_to=relative_to),
            grid_interpolated=pbx(grid, x, interpolate=True, relative_to=relative_to),
        )
        row.update(differs=row["grid"] != exact, missed=[str(s) for s in deciding] if row["grid"] != exact else [])
        rows.append(row)
    exact_aup, grid_aup = aup(segments, y_max=y_max), aup(grid, y_max=y_max)
    rows.append(
        dict(
            metric="AUP",
            exact=exact_aup,
            grid=grid_aup,
            grid_interpolated=None,
            differs=not math.isclose(exact_aup, grid_aup, rel_tol=1e-12, abs_tol=1e-9),
            missed=[str(s) for s in missed],
        )
    )
    return rows
