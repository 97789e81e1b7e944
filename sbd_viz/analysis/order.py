"""Decode order: in which order a decode committed its output, measured the way decode-order analyses report it.

``decode_order(trace)`` returns the three measures together (a ``DecodeOrder``: ``kendall_tau``,
``out_of_order_rate``, ``commit_lag``); ``order_rows(traces)`` one plain row per decode, for a table. The picture is
``sbd_viz.plots.order.commit_order``. Each measure defined: docs/measures.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..trace.commits import KeptCommit, kept_commits  # noqa: F401  (KeptCommit: read from here too)
from ..trace.data import Trace


@dataclass(frozen=True)
class DecodeOrder:
    """A decode's order measures (see docs/measures.md)."""

    kendall_tau: float  # τ-b between commit call and position; NaN if undefined
    out_of_order_rate: float  # kept commits with a gap / kept commits; NaN if the output is empty
    commit_lag: tuple[float, ...]  # per slot index: mean block step of its kept commits (NaN: no commit there)
    n_commits: int  # kept commits measured
    n_out_of_order: int  # of which gap fills


def kendall_tau(x, y) -> float:
    """Kendall's τ-b of two equally long sequences of numbers: (concordant − discordant pairs) /
    sqrt((pairs − pairs tied in x) · (pairs − pairs tied in y)), as ``scipy.stats.kendalltau`` computes it by
    default; NaN when a sequence is constant or shorter than 2."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"x, y: must be two flat sequences of one length, got shapes {x.shape} and {y.shape}")
    n = len(x)
    if n < 2:
        return float("nan")
    score = tied_x = tied_y = 0
    for i in range(n - 1):  # every pair i < j once, a row at a time (memory stays linear in n)
        sx, sy = np.sign(x[i + 1 :] - x[i]), np.sign(y[i + 1 :] - y[i])
        score += int((sx * sy).sum())
        tied_x += int((sx == 0).sum())
        tied_y += int((sy == 0).sum())
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
    return score / denominator if denominator else float("nan")


def decode_order(trace: Trace) -> DecodeOrder:
    """Kendall τ against left to right, the out-of-order commit rate and the mean commit lag per slot of one
    decode (docs/measures.md defines each)."""
    kept = kept_commits(trace)
    calls = [k.step.call for k in kept]
    tau = kendall_tau(calls, [k.index for k in kept])
    gaps = sum(1 for k in kept if k.commit.gap > 0)
    width = max((k.step.block_size for k in kept), default=0)
    lags: list[list[int]] = [[] for _ in range(width)]
    for k in kept:
        lags[k.commit.slot].append(k.step.step)
    return DecodeOrder(
        kendall_tau=tau,
        out_of_order_rate=gaps / len(kept) if kept else float("nan"),
        commit_lag=tuple(float(np.mean(v)) if v else float("nan") for v in lags),
        n_commits=len(kept),
        n_out_of_order=gaps,
    )


def order_rows(traces, labels=None) -> list[dict]:
    """One row per decode: ``label``, ``kendall_tau``, ``out_of_order_rate``, ``mean_commit_lag`` (over every kept
    commit), ``commits``. ``labels`` default to each trace's decoder name."""
    traces = list(traces)
    labels = [trace_label(t) for t in traces] if labels is None else list(labels)
    if len(labels) != len(traces):
        raise ValueError(f"labels: need one per trace ({len(traces)}), got {len(labels)}")
    rows = []
    for label, trace in zip(labels, traces):
        order, kept = decode_order(trace), kept_commits(trace)
        rows.append(
            {
                "label": label,
                "kendall_tau": order.kendall_tau,
                "out_of_order_rate": order.out_of_order_rate,
                "mean_commit_lag": float(np.mean([k.step.step for k in kept])) if kept else float("nan"),
                "commits": order.n_commits,
            }
        )
    return rows


def trace_label(trace: Trace) -> str:
    """A decode's name in a legend or a table: its decoder, ``verified`` before a verified one, and its γ if it
    has one (e.g. ``sbd γ=0.1``)."""
    decoder = str(trace.config["decoder"])
    name = f"verified {decoder}" if trace.verified else decoder
    return f"{name} γ={trace.config['gamma']}" if "gamma" in trace.config else name
