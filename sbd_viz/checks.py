"""The argument checks every entry point shares: each returns its argument, or raises naming it.

``name`` is the argument's name as the caller's user wrote it (``"ntp_trace"``, ``"traces[3]"``), so the
error points at the argument that was wrong, not at this module.
"""

from __future__ import annotations

from .model import SBDModel
from .trace import Trace


def check_model(model, name: str = "model") -> SBDModel:
    if not isinstance(model, SBDModel):
        raise TypeError(f"{name}: expected an sbd_viz.SBDModel (see sv.load_model), got {type(model).__name__}")
    return model


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
