"""Score a decoder on the verifiable suite: accuracy, model calls per token, and speed vs NTP.

Wall-clock speedups are measured in the same run: for every item the SBD decode and the
NTP decode (HF ``generate``, greedy, same weights) run back to back, alternating which
goes first, so drift on a noisy machine hits both alike.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Iterable

from .decoder import decode, decode_ntp
from .model import SBDModel
from .objective import masked_slot_accuracy  # noqa: F401  (the MATP probe, long read from here)
from .solvers import DEFAULT_GAMMA, DEFAULT_RULE
from .tasks import LONG_FAMILIES, SuiteItem, score

STOP = ("\n",)  # an assert's answer ends at the end of its line


def _summarise(rows: list[dict], prefix: str = "") -> dict:
    calls = sum(r[prefix + "nfe"] for r in rows)
    tokens = sum(r[prefix + "n_tokens"] for r in rows)
    return {"accuracy": sum(r[prefix + "correct"] for r in rows) / len(rows) if rows else float("nan"),
            "calls": calls, "tokens": tokens,
            "calls_per_token": calls / tokens if tokens else float("nan"),
            "tokens_per_call": tokens / calls if calls else float("nan"),
            "wall_time": sum(r[prefix + "wall_time"] for r in rows)}


def evaluate(model: SBDModel, suite: Iterable[SuiteItem], solver: str = DEFAULT_RULE, gamma: float = DEFAULT_GAMMA,
             block_size: int = 16, gap_free: bool = False, decoder: str = "sbd", max_new_tokens: int = 64,
             measure_speedup: bool = True, progress: bool = False, keep_traces: bool = False,
             stop: tuple[str, ...] = STOP, verify: bool = False) -> dict:
    """Decode every suite item and score it.

    ``stop``: stop strings (default: the end of the line, where an assert's answer ends).
    ``verify``: decode with verified SBD (``decode(..., verify=True)``): every draft is checked
    against NTP greedy in the same calls, so each output is exactly NTP's.
    Returns a dict: ``accuracy``, ``by_family`` (accuracy per family), ``calls_per_token``,
    ``tokens_per_call``, ``calls``, ``tokens``, ``long`` / ``short`` (the same measures on the
    long- and short-answer families), ``gap_fill_rate`` (kept gap fills, ``Trace.kept_gap_fills``,
    per output token), ``rows`` (one dict per item, ``gap_fills`` its kept gap fills) and, with
    ``measure_speedup``, ``ntp`` (NTP's measures on the same items), ``speedup_calls`` (NTP
    calls / SBD calls) and ``speedup_wall`` (NTP seconds / SBD seconds).
    """
    if decoder not in ("sbd", "ntp"):
        raise ValueError(f"decoder: must be 'sbd' or 'ntp', got {decoder!r}")
    if not isinstance(verify, bool):
        raise ValueError(f"verify: must be True or False, got {verify!r}")
    items = list(suite)
    if not items:
        raise ValueError("suite: no items to evaluate")
    for i, item in enumerate(items):  # every item checked against the trained context before any decode
        try:
            model.check_fits(len(model.encode(item.prompt)), max_new_tokens)
        except ValueError as exc:
            raise ValueError(f"{exc} (suite item {i}, family {item.family!r})") from None
    paired = measure_speedup and decoder == "sbd"

    def run_sbd(item):
        return decode(model, item.prompt, solver=solver, gamma=gamma, block_size=block_size, gap_free=gap_free,
                      max_new_tokens=max_new_tokens, stop=stop, verify=verify)

    def run_ntp(item):
        return decode_ntp(model, item.prompt, max_new_tokens=max_new_tokens, stop=stop)

    main_run = run_sbd if decoder == "sbd" else run_ntp
    rows = []
    iterator = items
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(items, desc=f"{decoder} {solver} gamma={gamma:g}{' verified' if verify else ''}"
                        if decoder == "sbd" else "ntp")
    for i, item in enumerate(iterator):
        order = [("", main_run), ("ntp_", run_ntp)] if paired else [("", main_run)]
        if i % 2:
            order.reverse()
        row = {"prompt": item.prompt, "answer": item.answer, "family": item.family}
        for prefix, run in order:
            t0 = time.perf_counter()
            trace = run(item)
            row[prefix + "wall_time"] = time.perf_counter() - t0
            row[prefix + "output"] = trace.text
            row[prefix + "correct"] = score(item, trace.text)
            row[prefix + "nfe"] = trace.nfe
            row[prefix + "n_tokens"] = trace.n_tokens
            row[prefix + "gap_fills"] = len(trace.kept_gap_fills())
            if keep_traces:
                row[prefix + "trace"] = trace
        rows.append(row)

    result = _summarise(rows)
    families = defaultdict(list)
    for r in rows:
        families[r["family"]].append(r)
    result["by_family"] = {f: _summarise(rs)["accuracy"] for f, rs in families.items()}
    result["by_family_calls_per_token"] = {f: _summarise(rs)["calls_per_token"] for f, rs in families.items()}
    result["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES])
    result["short"] = _summarise([r for r in rows if r["family"] not in LONG_FAMILIES])
    result["gap_fill_rate"] = (sum(r["gap_fills"] for r in rows) / result["tokens"] if result["tokens"]
                               else float("nan"))
    if paired:
        ntp = _summarise(rows, "ntp_")
        ntp["by_family"] = {f: _summarise(rs, "ntp_")["accuracy"] for f, rs in families.items()}
        ntp["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES], "ntp_")
        long = result["long"]
        long["speedup_calls"] = ntp["long"]["calls"] / max(1, long["calls"])
        long["speedup_wall"] = ntp["long"]["wall_time"] / max(1e-9, long["wall_time"])
        result["ntp"] = ntp
        result["speedup_calls"] = ntp["calls"] / result["calls"]
        result["speedup_wall"] = ntp["wall_time"] / result["wall_time"]
    result["rows"] = rows
    result["settings"] = {"decoder": decoder, "solver": solver if decoder == "sbd" else "ntp", "gamma": gamma,
                          "block_size": block_size, "gap_free": gap_free, "verify": verify and decoder == "sbd",
                          "max_new_tokens": max_new_tokens, "n_items": len(items)}
    return result
