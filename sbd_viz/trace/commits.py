"""The commits an output holds: one per output token, the last commit at its position; and the call from which each
output token is in the output for good.

What the decode-order measures (``sbd_viz.analysis.order``), the counts (``sbd_viz.analysis.counts``) and the peer
formats (``sbd_viz.trace.peer_formats``) read: plain functions of the trace, beside it at the package's top so every
layer may use them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_trace
from .data import Commit, Step, Trace


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


def output_calls(trace: Trace) -> list[int]:
    """For each output token, the call from which it is in the output for good: the call that committed it, except a
    verified decode's drafted token, which is a token only once a check accepted it, so it counts at the checking
    call (as the block fill's running count does). Otherwise ``Trace.token_calls``: a canvas slot a block ended with
    open counts at the block's last call."""
    trace = check_trace(trace)
    calls = trace.token_calls()
    if not trace.verified:
        return calls
    verdicts = trace.verdicts()
    for kept in kept_commits(trace):
        if not kept.commit.ntp:
            checked = verdicts.get((kept.step.call, kept.step.block_start + kept.commit.slot))
            if checked is not None:
                calls[kept.index] = checked[0]
    return calls
