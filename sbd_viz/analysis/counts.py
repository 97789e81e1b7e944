"""Tokens per call as peers count them: with and without the end token, with and without the prefill call.

Papers and leaderboards divide different things. ``Trace.tokens_per_call`` divides every output token (the end
token included) by every counted call (the prefill included). d3LLM's tokens per forward (TPF) counts the tokens of
the decoded text, so an end-of-sequence token, which decodes to nothing, is not counted (d3LLM issue #1): counting it
inflates TPF. Speculative-decoding papers usually count the decode phase alone: the calls after the prefill, and the
tokens those calls wrote.

Here:

- the *end token* is the output's last token when the decode ended on the model's end-of-sequence token
  (``stop_reason == "eos"``), or when that last token is one of the trace's special tokens (a chat template's
  ``<|im_end|>`` given as a stop). A stop string that is ordinary text (a newline) is text, not an end token.
- the *prefill call* is call 0, the call that reads the prompt (``n_input`` holds the prompt and the first block);
  it commits tokens too, and "without the prefill" leaves out the call and the tokens it committed. A verified
  decode's drafts are tokens only once checked, so they count at the call that checked them
  (``sbd_viz.trace.commits.output_calls``), as speculative-decoding papers count accepted drafts: call 0 of a verified
  decode commits NTP's one token.

``call_counts(trace)`` returns the counts and the four ratios, each under the label ``COUNT_LABELS`` gives it, so
every view and page names them alike; ``tokens_per_call(trace, end_token=..., prefill=...)`` one of the ratios.
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


def tokens_per_call(trace: Trace, end_token: bool = True, prefill: bool = True) -> float:
    """Output tokens per counted call, the end token counted or not (``end_token``), the prefill call and its
    tokens counted or not (``prefill``); NaN when no call is left to divide by. ``end_token=True, prefill=True`` is
    ``Trace.tokens_per_call``."""
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
    return tokens / calls if calls else float("nan")


def call_counts(trace: Trace) -> dict:
    """The counts behind every convention and the four ratios: ``tokens`` (every output token), ``end_tokens``
    (0 or 1), ``calls`` (every counted call), ``prefill_calls`` (1, or 0 for an empty trace), ``prefill_tokens``,
    and each ``COUNT_LABELS`` label mapped to its ratio."""
    trace = check_trace(trace)
    counts = {"tokens": trace.n_tokens, "end_tokens": int(has_end_token(trace)), "calls": trace.nfe,
              "prefill_calls": int(trace.nfe > 0), "prefill_tokens": prefill_tokens(trace)}
    for (end, pre), label in COUNT_LABELS.items():
        counts[label] = tokens_per_call(trace, end_token=end, prefill=pre)
    return counts
