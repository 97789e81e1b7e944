"""Commit rules on hand-made and random distributions, and the rule registry."""

import math

import pytest
import torch

from sbd_viz.rules import COMMIT_RULES, RULES, CommitRule, Range

ENTROPY = torch.tensor([0.9, 0.05, 0.3, 0.01, 1.5, 0.2])  # six masked slots, left to right
CONFIDENCE = torch.tensor([0.55, 0.98, 0.85, 0.995, 0.3, 0.9])
TUNABLE = {"entropy_bounded": (0.0, 1e9), "entropy_threshold": (0.0, 1e9),
           "confidence_threshold": (1.0, 0.0), "factor": (1e-9, 1e9), "top_k": (1, 6)}


def test_entropy_bounded_follows_eq8():
    # sorted entropies 0.01, 0.05, 0.2, 0.3, 0.9, 1.5 -> prefix sums before each: 0, .01, .06, .26, .56, 1.46
    assert CommitRule("entropy_bounded", 0.0).select(ENTROPY, CONFIDENCE) == [3]
    assert CommitRule("entropy_bounded", 0.05).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert CommitRule("entropy_bounded", 0.07).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert CommitRule("entropy_bounded", 0.27).select(ENTROPY, CONFIDENCE) == [1, 2, 3, 5]
    assert CommitRule("entropy_bounded", 0.6).select(ENTROPY, CONFIDENCE) == [0, 1, 2, 3, 5]


def test_entropy_threshold_and_confidence_threshold():
    assert CommitRule("entropy_threshold", 0.25).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert CommitRule("entropy_threshold", 0.001).select(ENTROPY, CONFIDENCE) == [3]  # none below: the lowest
    assert CommitRule("confidence_threshold", 0.95).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert CommitRule("confidence_threshold", 0.999).select(ENTROPY, CONFIDENCE) == [3]


def test_factor_rule():
    # confidences sorted: .995 .98 .9 .85 .55 .3 -> (n+1)(1-c_n): .01 .06 .4 .75 2.7 4.9
    assert CommitRule("factor", 0.5).select(ENTROPY, CONFIDENCE) == [1, 3, 5]
    assert CommitRule("factor", 0.001).select(ENTROPY, CONFIDENCE) == [3]


def test_top_k_and_left_to_right():
    assert CommitRule("top_k", 2).select(ENTROPY, CONFIDENCE) == [1, 3]
    assert CommitRule("left_to_right", 0).select(ENTROPY, CONFIDENCE) == [0]


@pytest.mark.parametrize("rule", sorted(TUNABLE))
def test_extremes_and_monotone(rule):
    low, high = TUNABLE[rule]
    assert len(CommitRule(rule, low).select(ENTROPY, CONFIDENCE)) == 1
    assert CommitRule(rule, high).select(ENTROPY, CONFIDENCE) == list(range(6))
    if rule in ("entropy_bounded", "entropy_threshold"):
        assert CommitRule(rule, 0.0).select(ENTROPY, CONFIDENCE) == [3]  # the lowest-entropy slot
    knobs = [low + (high - low) * t for t in torch.linspace(0, 1, 40).tolist()]
    if rule == "top_k":
        knobs = list(range(1, 7))
    if rule in ("entropy_bounded", "entropy_threshold", "factor"):
        knobs = [0.0 if rule != "factor" else 1e-9] + [10 ** e for e in torch.linspace(-3, 1, 40).tolist()]
    counts = [len(CommitRule(rule, g).select(ENTROPY, CONFIDENCE)) for g in knobs]
    assert counts == sorted(counts)  # knobs run from fewest to most commits (confidence: 1 -> 0)


@pytest.mark.parametrize("rule", RULES)
def test_gap_free_commits_a_run_from_the_left(rule):
    gamma = {"confidence_threshold": 0.5, "factor": 3.0, "top_k": 3, "left_to_right": 0}.get(rule, 0.6)
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        ent, conf = torch.rand(7, generator=g) * 2, torch.rand(7, generator=g)
        chosen = CommitRule(rule, gamma, gap_free=True).select(ent, conf)
        assert chosen == list(range(len(chosen))) and chosen, (rule, chosen)
        free = CommitRule(rule, gamma).select(ent, conf)
        assert len(chosen) <= max(1, len(free))


def _valid_gammas(rule, g):
    """The knob's edges, its default and slider ends, and random values in its valid range."""
    r = COMMIT_RULES[rule]
    lo = r.valid.lo if math.isfinite(r.valid.lo) else -5.0
    hi = r.valid.hi if math.isfinite(r.valid.hi) else 50.0
    edges = [lo + 1e-9 if r.valid.lo_open else lo, hi, r.default, *r.slider[:2]]
    draws = (lo + (hi - lo) * torch.rand(20, generator=g)).tolist()
    values = [round(v) for v in edges + draws] if r.valid.whole else edges + draws
    return [v for v in values if v in r.valid]


@pytest.mark.parametrize("gap_free", [False, True])
@pytest.mark.parametrize("rule", RULES)
def test_every_rule_commits_at_least_one_slot_of_any_block(rule, gap_free):
    """The decoder relies on it (a step that commits nothing would repeat forever): random blocks of 1..16
    masked slots, with spread-out, tied, all-zero and all-high entropies, at valid knobs from edge to edge."""
    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        m = 1 + trial % 16
        ent = torch.rand(m, generator=g) * 5 * (trial % 4 != 0)  # every fourth block: all entropies 0
        if trial % 5 == 0:
            ent = torch.full((m,), 4.6)  # near-uniform over 100 tokens: every slot unsure
        conf = torch.rand(m, generator=g) * (0.01 if trial % 3 == 0 else 1.0)
        for gamma in _valid_gammas(rule, g):
            chosen = CommitRule(rule, gamma, gap_free=gap_free).select(ent, conf)
            assert chosen and chosen == sorted(set(chosen)) and 0 <= chosen[0] and chosen[-1] < m, (gamma, chosen)


def test_non_finite_scores_are_refused():
    with pytest.raises(ValueError, match="entropy/confidence"):
        CommitRule().select(torch.tensor([0.1, math.nan]), torch.tensor([0.5, 0.5]))


def test_the_registry_is_consistent():
    for name, rule in COMMIT_RULES.items():
        lo, hi, step = rule.slider
        assert lo in rule.valid and hi in rule.valid and rule.default in rule.valid, name
        assert lo <= rule.default <= hi and step > 0, name
        assert not rule.valid.whole or step == int(step) == 1, name
        assert CommitRule(name, rule.default).select(ENTROPY, CONFIDENCE)
    assert RULES == tuple(COMMIT_RULES)


def test_range():
    assert 0 in Range(lo=0.0) and -0.1 not in Range(lo=0.0) and math.inf in Range(lo=0.0)
    assert 0 not in Range(lo=0.0, lo_open=True) and 1e-9 in Range(lo=0.0, lo_open=True)
    assert 2 in Range(lo=1, whole=True) and 2.5 not in Range(lo=1, whole=True)
    assert [str(r) for r in (Range(lo=0.0), Range(0.0, 1.0), Range(lo=0.0, lo_open=True), Range(lo=1, whole=True),
                             Range())] == ["a number >= 0", "a number in [0, 1]", "a number > 0",
                                           "a whole number >= 1", "a number"]


@pytest.mark.parametrize("name, gamma", [("nope", 0.1), ("entropy_bounded", -0.1), ("entropy_bounded", math.nan),
                                         ("confidence_threshold", 1.5), ("factor", 0.0), ("top_k", 0),
                                         ("top_k", 2.5), ("entropy_bounded", "0.1")])
def test_bad_settings_are_rejected(name, gamma):
    with pytest.raises(ValueError, match="^rule|^gamma"):
        CommitRule(name, gamma)


def test_a_knob_out_of_range_error_says_what_the_knob_is():
    with pytest.raises(ValueError, match=r"gamma: for factor it is the Fast-dLLM factor f and must be a number > 0"):
        CommitRule("factor", 0.0)
