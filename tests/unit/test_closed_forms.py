"""ParallelBench's closed forms (``sbd_viz.analysis.closed_forms``) against brute force: an ideal model whose slot
distributions are the task's own (uniform over the right answers that agree with what is committed), decoded step by
step with several slots per step sampled independently, every outcome enumerated with its probability."""

import itertools
import math
from fractions import Fraction

import pytest

from sbd_viz.analysis.closed_forms import (copy_accuracy, replace_random_accuracy, replace_random_threshold_accuracy, shuffle_accuracy, shuffle_threshold_accuracy)


def right_answers(task, n):
    """Item ids: the list is 0..n-1; replace's new item is n."""
    if task == "copy":
        return {tuple(range(n))}
    if task == "replace":
        return {tuple(n if j == i else j for j in range(n)) for i in range(n)}
    return set(itertools.permutations(range(n)))


def slot_distribution(answers, committed, j):
    agree = [a for a in answers if all(a[p] == v for p, v in committed.items())]
    if not agree:
        return None
    counts = {}
    for a in agree:
        counts[a[j]] = counts.get(a[j], 0) + 1
    return {v: Fraction(c, len(agree)) for v, c in counts.items()}


def success(task, n, pick, greedy):
    """The exact probability that the ideal model decodes a right answer; ``pick(dists)`` chooses the masked slots
    a step commits from {slot: distribution}."""
    answers = right_answers(task, n)

    def go(committed):
        if len(committed) == n:
            return Fraction(int(tuple(committed[j] for j in range(n)) in answers))
        dists = {j: slot_distribution(answers, committed, j) for j in range(n) if j not in committed}
        if any(d is None for d in dists.values()):
            return Fraction(0)  # no right answer agrees with what is committed
        chosen = pick(dists)
        per_slot = []
        for j in chosen:
            d = dists[j]
            if greedy:  # argmax, ties broken uniformly at random
                top = max(d.values())
                best = [v for v, p in d.items() if p == top]
                d = {v: Fraction(1, len(best)) for v in best}
            per_slot.append(list(d.items()))
        total = Fraction(0)
        for combo in itertools.product(*per_slot):
            p = math.prod((q for _, q in combo), start=Fraction(1))
            total += p * go({**committed, **{j: v for j, (v, _) in zip(chosen, combo)}})
        return total

    return go({})


def top_k(k):
    return lambda dists: sorted(dists)[:k]


def threshold(gamma):
    def pick(dists):
        conf = {j: max(d.values()) for j, d in dists.items()}
        over = [j for j in sorted(conf) if conf[j] > gamma]
        return over or [max(sorted(conf), key=lambda j: conf[j])]
    return pick


@pytest.mark.parametrize("n, k", [(n, k) for n in range(1, 6) for k in range(1, n + 1)])
def test_shuffle_and_copy_under_top_k(n, k):
    for greedy in (True, False):
        assert shuffle_accuracy(n, k) == pytest.approx(float(success("shuffle", n, top_k(k), greedy)))
        assert copy_accuracy(n, k) == float(success("copy", n, top_k(k), greedy)) == 1.0


def test_shuffle_by_hand():
    assert shuffle_accuracy(4, 4) == pytest.approx(24 / 256)  # n!/n^n
    assert shuffle_accuracy(4, 2) == pytest.approx((12 / 16) * (2 / 4))  # (n-1)!!/n!! = 3/8
    assert shuffle_accuracy(6, 1) == 1.0


@pytest.mark.parametrize("n, k", [(n, k) for n in range(2, 7) for k in range(1, n + 1)])
def test_replace_random_greedy_under_top_k(n, k):
    assert replace_random_accuracy(n, k) == float(success("replace", n, top_k(k), greedy=True))


@pytest.mark.parametrize("n", range(2, 7))
def test_replace_random_sampled_in_one_step(n):
    assert replace_random_accuracy(n, n, temperature=1) == pytest.approx(float(success("replace", n, top_k(n), False)))
    assert replace_random_accuracy(n, 1, temperature=1) == float(success("replace", n, top_k(1), False)) == 1.0


def test_replace_random_one_step_tends_to_one_over_e():
    assert replace_random_accuracy(2000, 2000, temperature=1) == pytest.approx(1 / math.e, abs=1e-3)


@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("gamma", [0.2, 0.55, 0.7, 0.75, 0.8, 0.95])
def test_thresholds(n, gamma):
    assert replace_random_threshold_accuracy(n, gamma) == float(success("replace", n, threshold(gamma), True))
    if gamma > 0.5:
        assert shuffle_threshold_accuracy(n, gamma) == float(success("shuffle", n, threshold(gamma), True)) == 1.0


def test_outside_what_the_paper_covers_is_refused():
    with pytest.raises(ValueError, match="k"):
        replace_random_accuracy(5, 2, temperature=1)
    with pytest.raises(ValueError, match="gamma"):
        shuffle_threshold_accuracy(4, 0.4)
    with pytest.raises(ValueError, match="k"):
        shuffle_accuracy(3, 4)
    with pytest.raises(ValueError, match="n"):
        replace_random_threshold_accuracy(2, 0.9)


def test_closed_form_curve_in_tokens_per_call():
    from sbd_viz.analysis.closed_forms import closed_form_curve

    # 5 items of 3 tokens: k = 1..5 take 5, 3, 2, 2, 1 calls; k = 3 and 4 share 2 calls and the point is k = 3's
    points = closed_form_curve("shuffle", 5, 3.0)
    assert [x for x, _ in points] == [3.0, 5.0, 7.5, 15.0]
    assert [y for _, y in points] == pytest.approx([100.0, 100 * shuffle_accuracy(5, 2), 100 * shuffle_accuracy(5, 3),
                                                    100 * shuffle_accuracy(5, 5)])
    assert shuffle_accuracy(5, 3) > shuffle_accuracy(5, 4)  # the smallest k of a call count is the most accurate
    assert closed_form_curve("copy", 3) == [(1.0, 100.0), (1.5, 100.0), (3.0, 100.0)]
    assert closed_form_curve("replace", 4, 2.0) == closed_form_curve("copy", 4, 2.0)  # at a given position: copy
    with pytest.raises(ValueError, match="task"):
        closed_form_curve("sort", 3)
    with pytest.raises(ValueError, match="tokens_per_item"):
        closed_form_curve("copy", 3, 0)
