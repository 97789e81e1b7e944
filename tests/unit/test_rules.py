"""Commit rules on hand-made and random distributions, and the rule registry."""

import math

import pytest
import torch

from sbd_viz.decoders.rules import COMMIT_RULES, RULES, CommitRule, Interval, Range

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
@pytest.mark.heavy
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


# -- knob intervals ------------------------------------------------------------------------------------
def _inside(iv, valid, g):
    """Knob values in ``iv`` to try: its closed finite ends, the floats just inside its open ones, its midpoint,
    random interior points (far ones too where it is unbounded); whole members for a whole-number knob."""
    if iv.whole:
        top = iv.hi if math.isfinite(iv.hi) else iv.lo + 12
        return [iv.lo, top, *(int(v) for v in torch.randint(int(iv.lo), int(top) + 1, (4,), generator=g))]
    lo = iv.lo if math.isfinite(iv.lo) else min(iv.hi, 0.0) - 10.0
    hi = iv.hi if math.isfinite(iv.hi) else max(iv.lo, 0.0) + 10.0
    points = [lo + (hi - lo) * t for t in [0.5, *torch.rand(4, generator=g).tolist()]]
    points += [iv.lo if iv.lo_closed else math.nextafter(iv.lo, math.inf),
               iv.hi if iv.hi_closed else math.nextafter(iv.hi, -math.inf)]
    if not math.isfinite(iv.hi):
        points += [hi * 1e6]
    return [v for v in points if v in iv and v in valid]


def _just_outside(iv, valid):
    """The knob values right past each end of ``iv`` that the rule accepts: the end itself where it is open,
    else the next float (the next whole number for a whole-number knob)."""
    if iv.whole:
        points = [iv.lo - 1, iv.hi + 1]
    else:
        points = [math.nextafter(iv.lo, -math.inf) if iv.lo_closed else iv.lo,
                  math.nextafter(iv.hi, math.inf) if iv.hi_closed else iv.hi]
    return [v for v in points if math.isfinite(v) and v in valid and v not in iv]


def _interval_problems(rule, gap_free, ent, conf, gamma, iv, g):
    """What is wrong with ``iv`` as the knob interval of ``CommitRule(rule, gamma, gap_free)`` on this block."""
    valid = COMMIT_RULES[rule].valid
    choice = CommitRule(rule, gamma, gap_free).select(ent, conf)
    problems = [] if gamma in iv else [("gamma outside", gamma)]
    problems += [("inside, other choice", v) for v in _inside(iv, valid, g)
                 if CommitRule(rule, v, gap_free).select(ent, conf) != choice]
    problems += [("just outside, same choice", v) for v in _just_outside(iv, valid)
                 if CommitRule(rule, v, gap_free).select(ent, conf) == choice]
    return problems


def _block(g, trial):
    """Random masked slots: spread out, coarse (many ties), near-certain, or tiny entropies; float32 like a model's."""
    m = 1 + trial % 12
    ent, conf = torch.rand(m, generator=g) * 3, torch.rand(m, generator=g)
    kind = trial // 12 % 4
    if kind == 1:
        ent, conf = (ent * 2).round() / 2, (conf * 4).round() / 4
    elif kind == 2:
        ent, conf = ent * (torch.rand(m, generator=g) < 0.5), 1 - 0.1 * conf
    elif kind == 3:
        ent = ent * 0.01
    return ent, conf


def _gammas(rule, g):
    r = COMMIT_RULES[rule]
    lo, hi, _ = r.slider
    values = [r.default, lo, hi, *(lo + (hi - lo) * torch.rand(2, generator=g)).tolist()]
    values = [round(v) for v in values] if r.valid.whole else values
    return [v for v in values if v in r.valid]


@pytest.mark.parametrize("gap_free", [False, True])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.heavy
def test_knob_interval_is_where_the_choice_holds(rule, gap_free):
    """Every knob value in the interval (closed ends, just inside open ones, midpoints, random points) commits
    the same slots; the values right past each end that the rule accepts commit others. Also at the interval's
    own ends taken as the knob, so every boundary is exercised."""
    valid = COMMIT_RULES[rule].valid
    g = torch.Generator().manual_seed(7)
    checked = bounded = 0
    for trial in range(48):
        ent, conf = _block(g, trial)
        for gamma in _gammas(rule, g):
            iv = CommitRule(rule, gamma, gap_free).knob_interval(ent, conf)
            ends = [e for e in (iv.lo, iv.hi) if math.isfinite(e) and e in valid]
            for knob in [gamma, *ends]:
                knob_iv = CommitRule(rule, knob, gap_free).knob_interval(ent, conf)
                assert _interval_problems(rule, gap_free, ent, conf, knob, knob_iv, g) == [], (ent, conf, knob, knob_iv)
                checked += 1
                bounded += bool(_just_outside(knob_iv, valid))
    assert checked >= 48 * 5 and (bounded > 150 or rule == "left_to_right"), (checked, bounded)


@pytest.mark.parametrize("rule", ["entropy_bounded", "entropy_threshold", "confidence_threshold", "factor"])
@pytest.mark.heavy
def test_the_interval_check_catches_an_end_one_float_off(rule):
    """The check above can fail: an interval with one end moved by one float, or one end's closedness flipped,
    is caught (on random blocks, wherever that end is not the valid range's)."""
    valid = COMMIT_RULES[rule].valid
    g = torch.Generator().manual_seed(3)
    caught = tried = 0
    for trial in range(24):
        ent, conf = _block(g, trial + 1)
        for gamma in _gammas(rule, g):
            iv = CommitRule(rule, gamma).knob_interval(ent, conf)
            wrong = []
            if _just_outside(Interval(iv.lo, math.inf, iv.lo_closed), valid):
                wrong += [Interval(math.nextafter(iv.lo, -math.inf), iv.hi, iv.lo_closed, iv.hi_closed),
                          Interval(math.nextafter(iv.lo, math.inf), iv.hi, iv.lo_closed, iv.hi_closed),
                          Interval(iv.lo, iv.hi, not iv.lo_closed, iv.hi_closed)]
            if _just_outside(Interval(-math.inf, iv.hi, True, iv.hi_closed), valid):
                wrong += [Interval(iv.lo, math.nextafter(iv.hi, math.inf), iv.lo_closed, iv.hi_closed),
                          Interval(iv.lo, math.nextafter(iv.hi, -math.inf), iv.lo_closed, iv.hi_closed),
                          Interval(iv.lo, iv.hi, iv.lo_closed, not iv.hi_closed)]
            for bad in wrong:
                tried += 1
                caught += bool(_interval_problems(rule, False, ent, conf, gamma, bad, g))
    assert tried > 50 and caught == tried, (caught, tried)


def test_knob_intervals_by_hand():
    # float32 inputs, so the ends are those float32 values in float64
    e = ENTROPY.double().tolist()

    def iv(rule, gamma, gap_free=False):
        return CommitRule(rule, gamma, gap_free).knob_interval(ENTROPY, CONFIDENCE)

    # sorted entropies .01 .05 .2 .3 .9 1.5: spent 0 .01 .06 .26 .56 1.46; gamma .05 commits 2 for spent in [.01, .06)
    assert iv("entropy_bounded", 0.05) == Interval(e[3] - 1e-12, e[3] + e[1] - 1e-12, True, False)
    assert iv("entropy_bounded", 0.0) == Interval(0.0, e[3] - 1e-12, True, False)
    assert iv("entropy_bounded", 5.0).hi == math.inf and iv("entropy_bounded", 5.0).hi_closed
    # {e < .25} = {.01, .05, .2} from .2 (open) to .3 (closed)
    assert iv("entropy_threshold", 0.25) == Interval(e[5], e[2], False, True)
    # none below .001: the lowest slot (3); {e < gamma} = {slot 3} for gamma in (.01, .05]: the same choice
    assert iv("entropy_threshold", 0.001) == Interval(0.0, e[1], True, True)
    assert iv("entropy_threshold", 9.0) == Interval(e[4], math.inf, False, True)
    c = CONFIDENCE.double().tolist()
    assert iv("confidence_threshold", 0.95) == Interval(c[5], c[1], True, False)  # {.995, .98}: [.9, .98)
    assert iv("confidence_threshold", 0.999) == Interval(c[1], 1.0, True, True)  # top slot alone from .98 up
    # ranks' (n + 1)(1 - c_n): - .06 .3 .6 2.7 4.9 (float64 of the float32 confidences); f .5 passes 3 ranks
    assert iv("factor", 0.5) == Interval(4 * (1 - c[5]), 5 * (1 - c[2]), True, False)
    assert iv("factor", 0.001) == Interval(0.0, 3 * (1 - c[1]), False, False)  # valid range is f > 0
    assert iv("factor", 3.0) == Interval(6 * (1 - c[0]), math.inf)  # rank 6 fails: the last, so all six
    assert iv("top_k", 2) == Interval(2, 2, whole=True) and 2 in iv("top_k", 2) and 2.5 not in iv("top_k", 2)
    assert iv("top_k", 9) == Interval(6, math.inf, whole=True) and 100 in iv("top_k", 9)
    assert iv("left_to_right", 0) == Interval(-math.inf, math.inf)
    # gap_free: top_k 1, 2 and 3 commit slot 0 alone ({3}, {1, 3}, {1, 3, 5}); 4 adds slot 2, 5 slot 0 -> [0, 1, 2, 3]
    assert iv("top_k", 2, gap_free=True) == Interval(1, 4, whole=True)
    assert str(iv("top_k", 2, gap_free=True)) == "whole numbers in [1, 4]"
    assert str(iv("entropy_threshold", 0.25)) == f"({e[5]:g}, {e[2]:g}]"


def test_interval_and_clip():
    assert 1.0 in Interval(0.0, 1.0) and 1.0 not in Interval(0.0, 1.0, hi_closed=False)
    assert 0.0 not in Interval(0.0, 1.0, lo_closed=False) and math.inf in Interval(0.0, math.inf)
    assert 3 in Interval(3, math.inf, whole=True) and math.inf not in Interval(3, math.inf, whole=True)
    assert Range(lo=0.0, lo_open=True).clip(Interval(-1.0, 2.0, False, False)) == Interval(0.0, 2.0, False, False)
    assert Range(0.0, 1.0).clip(Interval(-math.inf, 1.0, True, False)) == Interval(0.0, 1.0, True, False)
    assert Range(0.0, 1.0).clip(Interval(0.0, 3.0, False, False)) == Interval(0.0, 1.0, False, True)
    assert Range(lo=1, whole=True).clip(Interval(-math.inf, 4.0)) == Interval(1, 4.0, whole=True)
    assert math.inf not in Range(lo=1, whole=True)  # not a whole number (int(inf) used to raise OverflowError)


def test_knob_interval_refuses_what_select_refuses():
    with pytest.raises(ValueError, match="entropy/confidence"):
        CommitRule().knob_interval(torch.tensor([0.1, math.inf]), torch.tensor([0.5, 0.5]))


# -- factor: Fast-dLLM's published code ----------------------------------------------------------------
def fast_dllm_factor(confidences: list[float], f: float) -> list[int]:
    """The slots Fast-dLLM's ``get_transfer_index_dynamic`` (NVlabs/Fast-dLLM, llada/generate.py) transfers for
    one sequence, written out in plain Python as its loop reads: a threshold 1 - f / (n + 1) per rank n, the
    first one -1 (always at least one token), walk down the confidences sorted high to low until one falls below
    its threshold, and take the top ``top_i``, plus one when ``top_i`` ended at 0 or at the last rank."""
    threshs = [1 - f / (n + 1) for n in range(1, len(confidences) + 1)]
    threshs[0] = -1
    sorted_conf = sorted(confidences, reverse=True)
    for top_i in range(len(threshs)):
        if sorted_conf[top_i] < threshs[top_i]:
            break
    if top_i == 0 or top_i == len(threshs) - 1:
        top_i += 1
    by_confidence = sorted(range(len(confidences)), key=lambda i: -confidences[i])  # topk; no ties here
    return sorted(by_confidence[:top_i])


def test_factor_commits_all_when_the_first_to_fail_is_the_last_as_fast_dllm_does():
    # f = 1: thresholds -, 2/3, 3/4, 4/5. Sorted .95 .9 .8 .5: ranks 2, 3 pass, rank 4 (the last) fails -> all 4
    conf = torch.tensor([0.8, 0.95, 0.5, 0.9])
    assert fast_dllm_factor(conf.double().tolist(), 1.0) == [0, 1, 2, 3]
    assert CommitRule("factor", 1.0).select(ENTROPY[:4], conf) == [0, 1, 2, 3]
    # the same with rank 3 failing instead (.7 < 3/4): the two before it
    conf = torch.tensor([0.7, 0.95, 0.5, 0.9])
    assert fast_dllm_factor(conf.double().tolist(), 1.0) == [1, 3]
    assert CommitRule("factor", 1.0).select(ENTROPY[:4], conf) == [1, 3]
    # two slots: rank 2 is the last, so both always commit, however unsure
    assert CommitRule("factor", 0.01).select(ENTROPY[:2], torch.tensor([0.9, 0.01])) == [0, 1]


@pytest.mark.heavy
def test_factor_matches_fast_dllm_on_random_calls():
    g = torch.Generator().manual_seed(11)
    last = 0
    for trial in range(3000):
        m = 1 + trial % 16
        conf = 1 - torch.rand(m, generator=g, dtype=torch.float64) ** 2 * (0.6 if trial % 2 else 0.2)
        f = float(torch.rand(1, generator=g)) * 3 + 1e-6
        theirs = fast_dllm_factor(conf.tolist(), f)
        assert CommitRule("factor", f).select(torch.zeros(m), conf) == theirs, (conf, f)
        # the case where the two readings differ: the first rank to fail is the last one
        ranked = sorted(conf.tolist(), reverse=True)
        fails = [n for n in range(2, m + 1) if ranked[n - 1] < 1 - f / (n + 1)]
        last += bool(fails) and fails[0] == m and m > 2
    assert last > 100, last
