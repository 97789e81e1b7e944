"""Decode order (``sv.decode_order``, ``sv.kendall_tau``, ``sv.commit_order``) and tokens per call by peers'
conventions (``sv.call_counts``, ``sv.tokens_per_call``).

scipy is not in the environment, so Kendall's τ is checked against cases worked by hand and against
``scipy.stats.kendalltau``'s own documented example (its docstring's ``x1``/``x2``, built as its users build it:
two plain lists, τ-b by default)."""

import dataclasses
import math

import pytest

import sbd_viz as sv
from sbd_viz.analysis.counts import COUNT_LABELS, has_end_token, prefill_tokens
from sbd_viz.analysis.order import kept_commits
from sbd_viz.trace.data import Commit, Step, Trace

from conftest import hand_trace


# -- Kendall's τ-b ------------------------------------------------------------------------------------------------
def test_kendall_tau_is_scipys_documented_example():
    # scipy.stats.kendalltau's docstring: x1 = [12, 2, 1, 12, 2], x2 = [1, 4, 7, 1, 0] -> -0.47140452079103173
    assert sv.kendall_tau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]) == pytest.approx(-0.47140452079103173, abs=1e-12)


def test_kendall_tau_by_hand_with_ties():
    # calls 0, 0, 1, 1, 2 at positions 0..4: 10 pairs, 2 tied in calls (no position ties), the other 8 concordant:
    # τ-b = 8 / sqrt((10 - 2) * 10)
    assert sv.kendall_tau([0, 0, 1, 1, 2], range(5)) == pytest.approx(8 / math.sqrt(80), abs=1e-12)
    # one inversion among 4 distinct values: 5 concordant, 1 discordant of 6 pairs
    assert sv.kendall_tau([0, 2, 1, 3], range(4)) == pytest.approx(4 / 6, abs=1e-12)
    assert sv.kendall_tau(range(6), range(6)) == 1.0
    assert sv.kendall_tau(range(6), range(5, -1, -1)) == -1.0


def test_kendall_tau_equals_scipys():
    import random

    from scipy import stats  # requirements-dev.txt: the reference users of τ reach for

    rng = random.Random(0)
    for n in (2, 5, 40):
        x, y = [rng.randrange(4) for _ in range(n)], [rng.randrange(9) for _ in range(n)]
        want = stats.kendalltau(x, y).statistic
        got = sv.kendall_tau(x, y)
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12)


def test_kendall_tau_is_nan_where_undefined_and_names_bad_input():
    assert math.isnan(sv.kendall_tau([3], [0]))
    assert math.isnan(sv.kendall_tau([1, 1, 1], [0, 1, 2]))  # one call committed everything
    with pytest.raises(ValueError, match="x, y"):
        sv.kendall_tau([1, 2], [1, 2, 3])


# -- the measures on hand-made traces ---------------------------------------------------------------------------
def test_hand_trace_order_counted_independently():
    """HAND (conftest): block 0 commits slot 5 (call 0), slots 0 and 3 (call 1), slots 1, 2, 4 (call 2); block 1
    slot by slot (calls 3, 4, 5: slots 0 | 1 | 2, 3); block 2 slots 1, 3 (call 6), 0 (call 7), 2 (call 8)."""
    trace = hand_trace()
    calls = [1, 2, 2, 1, 2, 0, 3, 4, 5, 5, 7, 6, 8, 6]
    assert [k.step.call for k in kept_commits(trace)] == calls == trace.token_calls()
    order = sv.decode_order(trace)
    assert order.kendall_tau == pytest.approx(sv.kendall_tau(calls, range(14)))
    # gap fills: slot 5 (gap 5), slot 3 (gap 2), block 2's slot 1 (gap 1) and slot 3 (gap 2)
    assert (order.n_commits, order.n_out_of_order) == (14, 4)
    assert order.out_of_order_rate == pytest.approx(4 / 14)
    # block steps per slot: block 0 (1, 2, 2, 1, 2, 0), block 1 (0, 1, 2, 2), block 2 (1, 0, 2, 0)
    assert order.commit_lag == pytest.approx(((1 + 0 + 1) / 3, (2 + 1 + 0) / 3, (2 + 2 + 2) / 3, (1 + 2 + 0) / 3,
                                              2.0, 0.0))


def test_a_stop_keeps_only_the_output_s_commits():
    trace = hand_trace(stop_at=13)  # block 2's slot 3 (a gap fill) is cut by the stop
    order = sv.decode_order(trace)
    assert (order.n_commits, order.n_out_of_order) == (13, 3) == (trace.n_tokens, len(trace.kept_gap_fills()))


def test_left_to_right_one_per_call_is_tau_one_no_gaps_lag_by_slot():
    blocks = [("abcd", [{0}, {1}, {2}, {3}])]
    order = sv.decode_order(hand_trace(blocks))
    assert order.kendall_tau == 1.0 and order.out_of_order_rate == 0.0
    assert order.commit_lag == (0.0, 1.0, 2.0, 3.0)
    whole = sv.decode_order(hand_trace([("abcd", [{0, 1, 2, 3}])]))  # one call fills the block
    assert math.isnan(whole.kendall_tau) and whole.commit_lag == (0.0,) * 4


def test_order_rows_and_bad_input():
    rows = sv.order_rows([hand_trace(), hand_trace(stop_at=13)], labels=["a", "b"])
    assert [r["label"] for r in rows] == ["a", "b"] and rows[0]["commits"] == 14
    with pytest.raises(ValueError, match="labels"):
        sv.order_rows([hand_trace()], labels=["a", "b"])
    with pytest.raises(TypeError, match="trace"):
        sv.decode_order("not a trace")


# -- the picture ----------------------------------------------------------------------------------------------------
def test_commit_order_draws_each_token_at_its_call_on_one_axis():
    a, b = hand_trace(), hand_trace([("abcdefghijklmn", [{i} for i in range(14)])])
    fig = sv.commit_order({"hand": a, "one per call": b})
    assert [tuple(fig.data[i].y) for i in (0, 1)] == [tuple(a.token_calls()), tuple(range(14))]
    assert list(fig.data[0].x) == list(range(14))
    # gap fills are open markers, every other commit filled
    symbols = list(fig.data[0].marker.symbol)
    assert [i for i, s in enumerate(symbols) if s == "circle-open"] == [3, 5, 11, 13]
    assert list(fig.data[0].customdata) == [k.commit.gap for k in kept_commits(a)]
    assert fig.data[0].name == f"hand: τ = {sv.decode_order(a).kendall_tau:.2f}, 29% out of order"
    assert fig.data[1].name.startswith("one per call: τ = 1.00, 0% out of order")
    assert fig.layout.meta["order"] == sv.order_rows([a, b], ["hand", "one per call"])
    assert fig.data[-1].name == "left to right, one token per call"
    with pytest.raises(ValueError, match="traces"):
        sv.commit_order([])


# -- tokens per call by convention ---------------------------------------------------------------------------------
def _with_end(trace: Trace, reason: str = "eos") -> Trace:
    """``trace`` with its stop reason set (the last output token then reads as the end token for "eos")."""
    return dataclasses.replace(trace, stop_reason=reason)


def test_a_verified_decodes_drafts_count_at_the_call_that_checked_them(shipped):
    """Call 0 of a verified decode drafts a block but commits only NTP's token: its drafts are tokens once call 1
    checks them. The block fill's running count (``plots.blocks.committed_counts``, its own reading of the checks)
    agrees call by call."""
    from collections import Counter
    from itertools import accumulate

    from sbd_viz.trace.commits import output_calls
    from sbd_viz.plots.blocks import committed_counts

    trace = sv.decode(shipped, "assert sorted([31, 7, 19, 2]) == ", verify=True, gamma=2.0, block_size=8,
                      max_new_tokens=24)
    assert trace.verified and any(c.accepted for c in trace.checks())  # drafts were checked and kept
    assert prefill_tokens(trace) == 1 < sum(1 for call in trace.token_calls() if call == 0)
    per_call = Counter(output_calls(trace))
    assert list(accumulate(per_call.get(c, 0) for c in range(trace.nfe))) == committed_counts(trace)
    assert sv.tokens_per_call(trace, prefill=False) == (trace.n_tokens - 1) / (trace.nfe - 1)


def test_counts_without_end_token_and_prefill_by_hand():
    trace = hand_trace()  # 14 tokens, 9 calls; call 0 commits one token (block 0's slot 5)
    assert prefill_tokens(trace) == 1 and not has_end_token(trace)
    assert sv.tokens_per_call(trace) == trace.tokens_per_call == 14 / 9
    assert sv.tokens_per_call(trace, end_token=False) == 14 / 9  # no end token to leave out
    assert sv.tokens_per_call(trace, prefill=False) == 13 / 8
    ended = _with_end(trace)
    assert has_end_token(ended)
    counts = sv.call_counts(ended)
    assert (counts["tokens"], counts["end_tokens"], counts["calls"], counts["prefill_calls"],
            counts["prefill_tokens"]) == (14, 1, 9, 1, 1)
    assert counts[COUNT_LABELS[(True, True)]] == 14 / 9
    assert counts[COUNT_LABELS[(False, True)]] == 13 / 9
    assert counts[COUNT_LABELS[(True, False)]] == 13 / 8
    assert counts[COUNT_LABELS[(False, False)]] == 12 / 8
    assert len(set(COUNT_LABELS.values())) == 4


def test_an_end_token_from_the_prefill_is_taken_off_once():
    trace = _with_end(hand_trace([("ab", [{0, 1}]), ("cd", [{0}, {1}])]))  # call 0 commits a, b
    trace = dataclasses.replace(trace, output_ids=trace.output_ids[:2], output_texts=("a", "b"), text="ab")
    assert prefill_tokens(trace) == 2
    assert sv.tokens_per_call(trace, end_token=False, prefill=False) == 0.0  # 2 - 2 tokens over 3 - 1 calls
    assert sv.tokens_per_call(trace, end_token=False) == 1 / 3


def test_a_special_stop_token_is_an_end_token_and_a_text_stop_is_not():
    trace = hand_trace(stop_at=13)  # ends at its newline: a text stop
    assert not has_end_token(trace)
    special = dataclasses.replace(trace, meta={"special_tokens": ["\n"]})
    assert has_end_token(special) and sv.tokens_per_call(special, end_token=False) == 12 / 9
    with pytest.raises(ValueError, match="end_token"):
        sv.tokens_per_call(trace, end_token="no")


def test_one_call_after_the_prefill_leaves_nothing_to_divide():
    trace = hand_trace([("ab", [{0, 1}])])
    assert math.isnan(sv.tokens_per_call(trace, prefill=False))
