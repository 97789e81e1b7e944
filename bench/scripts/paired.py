"""Paired, warmed, interleaved wall clock for the ``bench/`` pages.

On a shared CPU one run's time says as much about the machine's other work as about the method. So every method
runs on the same item in each of several rounds, in an order that rotates from round to round (and item to item),
after one warm-up run each. A greedy decode is the same work every round, so a run that took more than ``guard``
times its own fastest on the item was slowed by something else: it is marked disturbed, and a pair of methods
counts in a ratio only from the rounds where neither run was disturbed.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Callable, Sequence

Method = tuple[str, Callable[[], object]]


def rounds(methods: Sequence[Method], n_rounds: int, guard: float, shift: int = 0) -> list[dict]:
    """``n_rounds`` rounds of every method once, the order rotated by ``shift + r`` in round r. Each round:
    ``{"load": 1-minute load average at its start, name: seconds, ..., "disturbed": [names]}``."""
    if n_rounds < 1:
        raise ValueError(f"n_rounds: need at least 1, got {n_rounds}")
    if guard <= 1:
        raise ValueError(f"guard: must be > 1 (a multiple of the fastest run), got {guard}")
    out = []
    for r in range(n_rounds):
        s = (shift + r) % len(methods)
        spent = {"load": round(os.getloadavg()[0], 2)}
        for name, fn in list(methods[s:]) + list(methods[:s]):
            t0 = time.perf_counter()
            fn()
            spent[name] = round(time.perf_counter() - t0, 4)
        out.append(spent)
    names = [name for name, _ in methods]
    fastest = {name: min(r[name] for r in out) for name in names}
    for r in out:
        r["disturbed"] = [name for name in names if r[name] > guard * fastest[name]]
    return out


def add_timing_arguments(parser, items: int, rounds: int, alternating: str) -> None:
    """The options of a page timed item by item (``time_items``): how many items (``alternating`` says which kinds
    take turns), how many rounds each, and the guard that marks a disturbed run."""
    parser.add_argument("--timing-items", type=int, default=items, help=f"items timed ({alternating}; 0: none)")
    parser.add_argument("--timing-rounds", type=int, default=rounds, help="rounds per timed item")
    parser.add_argument("--guard", type=float, default=1.25,
                        help="mark a run disturbed when it took more than this x its method's fastest on the item")


def time_items(items: Sequence, methods: Callable[[object], Sequence[Method]], n_rounds: int,
               guard: float) -> list[list[dict]]:
    """Each item's ``rounds`` of ``methods(item)``, after one warm-up run of the first item's methods; item i's
    order starts rotated by i. Says on stderr how far it got and how many runs each round had disturbed."""
    warm_up(methods(items[0]))
    out = []
    for i, item in enumerate(items):
        out.append(rounds(methods(item), n_rounds, guard, shift=i))
        print(f"  timed {i + 1}/{len(items)}: disturbed runs {[len(r['disturbed']) for r in out[-1]]} a round",
              file=sys.stderr, flush=True)
    return out


def warm_up(methods: Sequence[Method]) -> None:
    """One run of each method: the first calls pay one-time costs (allocations, kernels' first dispatch)."""
    for _, fn in methods:
        fn()


def median_seconds(item_rounds: list[dict], name: str) -> float:
    """A method's seconds on one item: the median over its undisturbed runs (its fastest run never is)."""
    return statistics.median(r[name] for r in item_rounds if name not in r["disturbed"])


def ratio(item_rounds: list[dict], slow: str, fast: str) -> dict:
    """``slow``'s time over ``fast``'s (> 1: ``fast`` is faster) in the rounds where neither was disturbed:
    ``{"pairs", "of", "median", "lo", "hi"}`` (``None`` where no pair was kept)."""
    kept = [r[slow] / r[fast] for r in item_rounds if slow not in r["disturbed"] and fast not in r["disturbed"]]
    return {"pairs": len(kept), "of": len(item_rounds), "median": statistics.median(kept) if kept else None,
            "lo": min(kept, default=None), "hi": max(kept, default=None)}
