"""The argument checks every entry point shares: each returns its argument, or raises naming it.

``name`` is the argument's name as the caller's user wrote it (``"ntp_trace"``, ``"traces[3]"``), so the
error points at the argument that was wrong, not at this module.
"""

from __future__ import annotations

import math

from .data import Trace


def _bounds(lo, hi, unit: str = "") -> str:
    unit = f" {unit}" if unit else ""
    if lo is not None and hi is not None:
        return f"{unit} in [{lo}, {hi}]"
    if lo is not None:
        return f"{unit} >= {lo}"
    return f"{unit} <= {hi}" if hi is not None else unit


def check_whole(value, name: str, lo: int | None = None, hi: int | None = None, unit: str = "", note: str = "") -> int:
    """A whole number (an ``int``, not a ``bool``) in [``lo``, ``hi``] (a bound of None is open). ``unit`` names
    what it counts ("pixels"); ``note`` ends the error (" (model 'x')")."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (lo is not None and value < lo)
        or (hi is not None and value > hi)
    ):
        of = f" of {unit}" if unit else ""
        raise ValueError(f"{name}: must be a whole number{of}{_bounds(lo, hi)}, got {value!r}{note}")
    return value


def check_number(
    value, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False, note: str = ""
) -> float:
    """A finite real number (not a ``bool``) in [``lo``, ``hi``] (``lo_open``: > ``lo``); returned as a float.
    ``note`` ends the error."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (lo is not None and (value <= lo if lo_open else value < lo))
        or (hi is not None and value > hi)
    ):
        bounds = f" > {lo}" if lo_open and hi is None else _bounds(lo, hi)
        raise ValueError(f"{name}: must be a finite number{bounds}, got {value!r}{note}")
    return float(value)


def check_probability(value, name: str) -> float:
    """A probability: a finite number in [0, 1]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ValueError(f"{name}: must be a probability in [0, 1], got {value!r}")
    return float(value)


def check_trace(trace, name: str = "trace") -> Trace:
    if not isinstance(trace, Trace):
        raise TypeError(f"{name}: expected an sbd_viz.Trace, got {type(trace).__name__}")
    return trace


def check_prompt(prompt, name: str = "prompt") -> str:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"{name}: must be a non-empty string, got {prompt!r}")
    return prompt


def check_traces(traces, items=None) -> tuple[list[Trace], list | None]:
    """``traces`` (one ``Trace`` or several) as a list, each checked, and ``items`` (suite items or ``None``
    entries, one per trace, as the reports take them) as a list of the same length, or ``None``."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    for i, t in enumerate(traces):
        check_trace(t, f"traces[{i}]")
    if items is not None:
        items = list(items)
        if len(items) != len(traces):
            raise ValueError(f"items: got {len(items)} items for {len(traces)} traces; pass one per trace")
    return traces, items
