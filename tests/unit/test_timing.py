"""Speedups in seconds timed honestly (sbd_viz.analysis.timing): both sides in every round, in
alternating order, reported as the median of the rounds' ratios with their range; two decodes timed apart show
seconds and no ratio. No model: callables stand in for decodes."""

import pytest

from sbd_viz.analysis.timing import Timing, side_by_side
from sbd_viz.trace.words import measures

from conftest import hand_trace


def test_both_sides_run_in_every_round_in_alternating_order():
    order = []
    timing = side_by_side(lambda: order.append("sbd"), lambda: order.append("ntp"), rounds=4)
    assert order == ["sbd", "ntp", "ntp", "sbd", "sbd", "ntp", "ntp", "sbd"]
    assert timing.rounds == 4 and len(timing.ntp_seconds) == 4 and all(s >= 0 for s in timing.seconds)


@pytest.mark.parametrize("rounds", [0, -1, 2.5, True, None])
def test_rounds_must_be_a_whole_number_of_at_least_one(rounds):
    with pytest.raises(ValueError, match="rounds"):
        side_by_side(lambda: None, lambda: None, rounds=rounds)


def test_the_speedup_is_the_median_of_the_rounds_ratios_per_generated_token():
    timing = Timing(seconds=(1.0, 1.0, 2.0), ntp_seconds=(4.0, 2.0, 4.0))
    assert timing.speedup() == (2.0, 2.0, 4.0)
    # per generated token: NTP wrote twice as many tokens in the same seconds, so half the speedup
    assert timing.speedup(tokens=10, ntp_tokens=20) == (1.0, 1.0, 2.0)
    assert timing.median_seconds() == (1.0, 4.0)


def test_a_speedup_in_seconds_is_shown_only_from_side_by_side_rounds():
    sbd = hand_trace()
    ntp = hand_trace([("abcdefghijkl\nm", [{i} for i in range(14)])])
    apart = {m.label: m for m in measures(sbd, ntp, seconds=0.1, ntp_seconds=0.4)}
    assert "speedup · wall clock" not in apart and "timed apart" in apart["wall clock"].note
    rounds = Timing(seconds=(0.1, 0.2, 0.1), ntp_seconds=(0.3, 0.4, 0.5))
    paired = {m.label: m for m in measures(sbd, ntp, timing=rounds)}
    speed = paired["speedup · wall clock"]
    assert speed.value == "3.00×" and speed.note.startswith("median of 3 side-by-side runs, 2.00–5.00×")
    assert "SBD 100 ms · NTP 400 ms" in speed.note


def test_warm_up_runs_each_side_once_untimed_before_the_rounds():
    order = []
    timing = side_by_side(lambda: order.append("sbd"), lambda: order.append("ntp"), rounds=2, warm_up=True)
    assert order == ["sbd", "ntp", "sbd", "ntp", "ntp", "sbd"]  # the warm-up pair, then the alternating rounds
    assert timing.rounds == 2 and timing.warmed
    assert not side_by_side(lambda: None, lambda: None, rounds=1).warmed


def test_the_ratio_of_medians_is_not_the_median_of_ratios():
    """Medians 2.0 s and 2.4 s give 1.2x; the rounds' ratios 0.9, 1.2, 1.1 have median 1.1x: two statistics."""
    timing = Timing(seconds=(1.0, 2.0, 3.0), ntp_seconds=(0.9, 2.4, 3.3))
    assert timing.ratio_of_medians() == pytest.approx(1.2)
    assert timing.speedup()[0] == pytest.approx(1.1)
    assert timing.ratio_of_medians(tokens=10, ntp_tokens=20) == pytest.approx(0.6)  # per generated token
