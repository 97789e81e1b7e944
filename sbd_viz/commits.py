"""The commits an output holds: one per output token, the last commit at its position.

What the decode-order measures (``sbd_viz.analysis.order``) and the peer formats (``sbd_viz.peer_formats``) both
read: a plain function of the trace, beside it at the package's top so both layers may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_trace
from .trace import Commit, Step, Trace


@dataclass(frozen=True)
class KeptCommit:
    """The commit an output token comes from: its output index, the step that made it, and the commit."""

    index: int  # position in the output, from 0
    step: Step
    commit: Commit


def kept_commits(trace: Trace) -> list[KeptCommit]:
    """The commit each output token comes from, in output order: the last commit at its position (a verified
    decode's correction replaces the rejected draft; a canvas slot renoised after a commit is not counted until
    it is accepted again). Output tokens no commit wrote (a canvas block that ended with a slot open) are left
    out."""
    trace = check_trace(trace)
    n0, last = len(trace.prompt_ids), {}
    for s in trace.steps:
        for c in s.commits:
            last[s.block_start + c.slot] = (s, c)
        for slot in s.renoised:
            last.pop(s.block_start + slot, None)
    return [KeptCommit(i, *last[n0 + i]) for i in range(trace.n_tokens) if n0 + i in last]
