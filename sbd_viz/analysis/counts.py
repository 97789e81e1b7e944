"""Tokens per call as peers count them: with and without the end token, with and without the prefill call.

``call_counts(trace)`` returns the counts and the four ratios, each under the label ``COUNT_LABELS`` gives it, so
every view and page names them alike; ``tokens_per_call(trace, end_token=..., prefill=...)`` one of the ratios, and
``counted`` its tokens and calls (what pooling over traces sums).
What peers count, and what the end token and the prefill call are: docs/measures.md.
"""

from __future__ import annotations

from ..trace.checks import check_trace
from ..trace.commits import output_calls
from ..trace.data import Trace
from ..trace.labels import COUNT_LABELS


def has_end_token(trace: Trace) -> bool:
    """Whether the output's last token is an end token (see docs/measures.md)."""
    trace = check_trace(trace)
    if not trace.n_tokens:
        return False
    return trace.stop_reason == "eos" or trace.output_texts[-1] in trace.special_tokens


def prefill_tokens(trace: Trace) -> int:
    """Output tokens the prefill call (call 0) committed: those in the output for good from call 0 on
    (``output_calls``; a verified draft counts at the call that checked it)."""
    return sum(1 for call in output_calls(trace) if call == 0)


def counted(trace: Trace, end_token: bool = True, prefill: bool = True) -> tuple[int, int]:
    """(output tokens, calls) as one convention counts them: the end token counted or not (``end_token``), the
    prefill call and its tokens counted or not (``prefill``). Pooling several traces sums these, not their ratios."""
    trace = check_trace(trace)
    for name, value in (("end_token", end_token), ("prefill", prefill)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be True or False, got {value!r}")
    tokens, calls = trace.n_tokens, trace.nfe
    if not end_token and has_end_token(trace):
        tokens -= 1
    if not prefill and calls:
        at = output_calls(trace)
        calls -= 1
        tokens -= at.count(0)  # prefill_tokens
        if has_end_token(trace) and not end_token and at[-1] == 0:
            tokens += 1  # the end token came from the prefill: it was taken off once already
    return tokens, calls


def tokens_per_call(trace: Trace, end_token: bool = True, prefill: bool = True) -> float:
    """Output tokens per counted call as ``counted`` counts them; NaN when no call is left to divide by.
    ``end_token=True, prefill=True`` is ``Trace.tokens_per_call``."""
    tokens, calls = counted(trace, end_token, prefill)
    return tokens / calls if calls else float("nan")


def call_counts(trace: Trace) -> dict:
    """The counts behind every convention and the four ratios: ``tokens`` (every output token), ``end_tokens``
    (0 or 1), ``calls`` (every counted call), ``prefill_calls`` (1, or 0 for an empty trace), ``prefill_tokens``,
    and each ``COUNT_LABELS`` label mapped to its ratio."""
    trace = check_trace(trace)
    counts: dict[str, float] = {
        "tokens": trace.n_tokens,
        "end_tokens": int(has_end_token(trace)),
        "calls": trace.nfe,
        "prefill_calls": int(trace.nfe > 0),
        "prefill_tokens": prefill_tokens(trace),
    }
    for (end, pre), label in COUNT_LABELS.items():
        counts[label] = tokens_per_call(trace, end_token=end, prefill=pre)
    return counts
