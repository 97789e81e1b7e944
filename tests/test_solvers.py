"""Commit rules on hand-made distributions."""

import math

import pytest
import torch

from sbd_viz.solvers import RULES, Solver

ENTROPY = torch.tensor([0.9, 0.05, 0.3, 0.01, 1.5, 0.2])  # six masked slots, left to right
CONFIDENCE = torch.tensor([0.55, 0.98, 0.85, 0.995, 0.3, 0.9])
TUNABLE = {"entropy_bounded": (0.0, 1e9), "entropy_threshold": (0.0, 1e9),
           "confidence_threshold": (1.0, 0.0), "factor": (1e-9, 1e9), "top_k": (1, 6)}


def test_entropy_bounded_follows_eq8():
    # sorted entropies 0.01, 0.05, 0.2, 0.3, 0.9, 1.5 -> prefix sums before each: 0, .01, .06, .26, .56, 1.46
    assert Solver("entropy_bounded", 0.0).select(ENTROPY, CONFIDENCE) == [3]
    assert Solver("entropy_bounded", 0.05).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert Solver("entropy_bounded", 0.07).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert Solver("entropy_bounded", 0.27).select(ENTROPY, CONFIDENCE) == [1, 2, 3, 5]
    assert Solver("entropy_bounded", 0.6).select(ENTROPY, CONFIDENCE) == [0, 1, 2, 3, 5]


def test_entropy_threshold_and_confidence_threshold():
    assert Solver("entropy_threshold", 0.25).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert Solver("entropy_threshold", 0.001).select(ENTROPY, CONFIDENCE) == [3]  # none below: the lowest
    assert Solver("confidence_threshold", 0.95).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert Solver("confidence_threshold", 0.999).select(ENTROPY, CONFIDENCE) == [3]


def test_factor_rule():
    # confidences sorted: .995 .98 .9 .85 .55 .3 -> (n+1)(1-c_n): .01 .06 .4 .75 2.7 4.9
    assert Solver("factor", 0.5).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert Solver("factor", 0.001).select(ENTROPY, CONFIDENCE) == [3]


def test_top_k_and_left_to_right():
    assert Solver("top_k", 2).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert Solver("left_to_right", 0).select(ENTROPY, CONFIDENCE) == [0]


@pytest.mark.parametrize("rule", sorted(TUNABLE))
def test_extremes_and_monotone(rule):
    low, high = TUNABLE[rule]
    assert len(Solver(rule, low).select(ENTROPY, CONFIDENCE)) == 1
    assert Solver(rule, high).select(ENTROPY, CONFIDENCE) == list(range(6))
    if rule in ("entropy_bounded", "entropy_threshold"):
        assert Solver(rule, 0.0).select(ENTROPY, CONFIDENCE) == [3]  # the lowest-entropy slot
    knobs = [low + (high - low) * t for t in torch.linspace(0, 1, 40).tolist()]
    if rule == "top_k":
        knobs = list(range(1, 7))
    if rule in ("entropy_bounded", "entropy_threshold", "factor"):
        knobs = [0.0 if rule != "factor" else 1e-9] + [10 ** e for e in torch.linspace(-3, 1, 40).tolist()]
    counts = [len(Solver(rule, g).select(ENTROPY, CONFIDENCE)) for g in knobs]
    assert counts == sorted(counts)  # knobs run from fewest to most commits (confidence: 1 -> 0)


@pytest.mark.parametrize("rule", RULES)
def test_gap_free_commits_a_run_from_the_left(rule):
    gamma = {"confidence_threshold": 0.5, "factor": 3.0, "top_k": 3, "left_to_right": 0}.get(rule, 0.6)
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        ent, conf = torch.rand(7, generator=g) * 2, torch.rand(7, generator=g)
        chosen = Solver(rule, gamma, gap_free=True).select(ent, conf)
        assert chosen == list(range(len(chosen))) and chosen, (rule, chosen)
        free = Solver(rule, gamma).select(ent, conf)
        assert len(chosen) <= max(1, len(free))


@pytest.mark.parametrize("rule", RULES)
def test_always_commits_at_least_one(rule):
    for m in (1, 2, 9):
        ent, conf = torch.full((m,), 3.0), torch.full((m,), 0.01)
        assert len(Solver(rule, 1 if rule == "top_k" else 0.0 if rule != "factor" else 0.1).select(ent, conf)) >= 1


@pytest.mark.parametrize("name, gamma", [("nope", 0.1), ("entropy_bounded", -0.1), ("entropy_bounded", math.nan),
                                         ("confidence_threshold", 1.5), ("factor", 0.0), ("top_k", 0),
                                         ("top_k", 2.5), ("entropy_bounded", "0.1")])
def test_bad_settings_are_rejected(name, gamma):
    with pytest.raises(ValueError, match="solver|gamma"):
        Solver(name, gamma)
