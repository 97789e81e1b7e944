"""The speed the lm-eval results carry: each task's counts summed over its generations, its ratios pooled (tokens
over calls, each convention of ``sv.COUNT_LABELS`` as ``sv.tokens_per_call`` counts it), tasks kept apart."""

import pytest
from conftest import HAND, hand_trace

import sbd_viz as sv

pytest.importorskip("lm_eval")

from sbd_viz.harness.speed import Tally, speed_lines  # noqa: E402


def test_a_tasks_speed_is_its_generations_pooled():
    a, b = hand_trace(), hand_trace(blocks=HAND[:1])
    tally = Tally()
    tally.add("t", a, 0.5)
    tally.add("t", b, 0.25)
    tally.add("u", b, 1.0)
    tally.scoring("u", 2.0)
    table = tally.table()
    t = table["t"]
    assert (t["generations"], t["calls"], t["tokens"]) == (2, a.nfe + b.nfe, a.n_tokens + b.n_tokens)
    assert t["tokens_per_call"] == pytest.approx((a.n_tokens + b.n_tokens) / (a.nfe + b.nfe))
    after = sv.COUNT_LABELS[(True, False)]
    want = (sv.tokens_per_call(a, prefill=False) * (a.nfe - 1) + sv.tokens_per_call(b, prefill=False) * (b.nfe - 1))
    assert t[after] == pytest.approx(want / (a.nfe + b.nfe - 2), abs=1e-6)
    assert t["generate_seconds"] == 0.75 and t["loglikelihood_seconds"] == 0
    assert table["u"]["calls"] == b.nfe and table["u"]["loglikelihood_seconds"] == 2.0
    assert [line.split(" | ")[0] for line in speed_lines(table)[2:]] == ["| t", "| u"]
