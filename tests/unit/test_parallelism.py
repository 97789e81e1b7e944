"""The accuracy-parallelism curve from γ pieces, PBx and AUP (``sbd_viz.analysis.parallelism``): hand-built pieces
whose numbers are worked out by hand, a reference written the way d3LLM's ``get_aup`` and ParallelBench's
leaderboard compute them (a plain loop over sampled points), ParallelBench's published leaderboard numbers, and a
real γ map read the same as decoding at each γ."""

import math
import random

import pytest

import sbd_viz as sv
from sbd_viz.analysis.gamma_map import gamma_map
from sbd_viz.analysis.parallelism import (Outcome, aup, compare_grid, curve, grid_points, outcomes, pbx, summary, weight)


def two_items():
    """Item A is right below γ 0.5 (10 tokens in 10 calls), wrong above (10 in 2); item B right everywhere, 10
    tokens in 10 calls below 1.2, in 5 above. So: [0, 0.5) 100% at 20/20 = 1 token a call; [0.5, 1.2) 50% at
    20/12; [1.2, 2] 50% at 20/7."""
    a = [Outcome(0.0, 0.5, True, 10, 10), Outcome(0.5, 2.0, False, 10, 2, hi_closed=True)]
    b = [Outcome(0.0, 1.2, True, 10, 10), Outcome(1.2, 2.0, True, 10, 5, hi_closed=True)]
    return [a, b]


def test_the_curve_cuts_at_every_items_piece_ends():
    segs = curve(two_items())
    assert [(s.lo, s.hi, s.lo_closed, s.hi_closed) for s in segs] == [(0.0, 0.5, True, False), (0.5, 1.2, True, False),
                                                                     (1.2, 2.0, True, True)]
    assert [s.accuracy for s in segs] == [100.0, 50.0, 50.0]
    assert [s.parallelism for s in segs] == [1.0, 20 / 12, 20 / 7]
    assert [str(s) for s in segs] == ["[0, 0.5)", "[0.5, 1.2)", "[1.2, 2]"]


def test_pbx_by_hand():
    segs = curve(two_items())
    assert pbx(segs, 90) == 1.0 and pbx(segs, 60) == 1.0  # only the first segment is at or above 60%
    assert pbx(segs, 50) == 20 / 7  # every segment is
    assert pbx([(1.0, 40.0)], 60) == 0.0  # never reached: 0, as the leaderboard's Random at 80%
    assert pbx(segs, 90, relative_to=55.0) == 20 / 7  # 90% of 55 is 49.5
    # interpolation: the crossing of the line from (1, 100) to (20/12, 50) at 60%: 1 + 40/50 * (2/3)
    assert pbx(segs, 60, interpolate=True) == pytest.approx(1 + 0.8 * (20 / 12 - 1))


def test_aup_by_hand():
    # y_max 80; y_1 = 80 so y_min = 75 and the 70% point is left out; W(78) = e^-0.075 = 0.92774,
    # W(76) = e^-0.15 = 0.86071: 1*80 + 1/2*1*(78*0.92774 + 80) + 1/2*2*(76*0.86071 + 78*0.92774) = 293.96
    points = [(1, 80), (2, 78), (4, 76), (8, 70)]
    assert weight(78, 80) == pytest.approx(0.92774, abs=1e-5) and weight(90, 80) == 1.0
    assert aup(points) == pytest.approx(293.96, abs=0.005)
    assert aup(points, y_max=100) < aup(points)  # a higher task maximum weighs every point down
    assert aup(curve(two_items())) == 100.0  # y_min is 95: only the first point, 1 * 100


def d3llm_get_aup(rho, y, y_max, alpha=3.0, y_min_offset=5.0):
    """The reference: d3LLM's ``get_aup`` as written there (sorted by rho, filter at y_1 - 5, first term plus a
    trapezoid loop), without its assertions."""
    pairs = sorted(zip(rho, y), key=lambda p: p[0])
    y_min = pairs[0][1] - y_min_offset
    kept = [(r, a) for r, a in pairs if a >= y_min]
    out = kept[0][0] * kept[0][1]
    for i in range(1, len(kept)):
        w_i = min(math.exp(-alpha * (1 - kept[i][1] / y_max)), 1.0)
        w_p = min(math.exp(-alpha * (1 - kept[i - 1][1] / y_max)), 1.0)
        out += 0.5 * (kept[i][0] - kept[i - 1][0]) * (kept[i][1] * w_i + kept[i - 1][1] * w_p)
    return out


def leaderboard_max_tps(tps, acc, x):
    """The reference for PBx: the largest tokens per step of a setting whose accuracy is at least x, else 0."""
    best = 0.0
    for t, a in zip(tps, acc):
        if a >= x and t > best:
            best = t
    return best


def random_items(rng, n_items=6, cuts=5):
    """Items whose pieces end at random hundredths of γ in [0, 2], accuracy mostly falling and parallelism rising
    with γ."""
    items = []
    for _ in range(n_items):
        ends = sorted({round(rng.uniform(0.05, 1.95), 2) for _ in range(cuts)})
        bounds = [0.0, *ends, 2.0]
        item = []
        for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            item.append(Outcome(lo, hi, rng.random() > 0.15 * i, 16, max(1, 16 - 3 * i), hi_closed=hi == 2.0))
        items.append(item)
    return items


@pytest.mark.parametrize("seed", range(5))
def test_exact_numbers_equal_a_dense_grid_computed_the_way_the_field_does(seed):
    items = random_items(random.Random(seed))
    segs = curve(items)
    assert min(s.width for s in segs) > 0.009
    gammas = [i / 200 for i in range(401)]  # every segment holds a grid point
    grid = grid_points(items, gammas)
    y_max = max(s.accuracy for s in segs)
    assert aup(segs, y_max=y_max) == pytest.approx(d3llm_get_aup(*zip(*grid), y_max=y_max), rel=1e-12)
    for x in (90, 80, 70, 60, 50):
        assert pbx(segs, x) == leaderboard_max_tps(*zip(*grid), x)
    assert not any(r["differs"] for r in compare_grid(items, gammas))


def test_a_coarse_grid_misses_a_segment_and_says_which():
    # item B is right only on the sliver [0.71, 0.73), where it also makes the most tokens per call
    a = [Outcome(0.0, 2.0, True, 10, 5, hi_closed=True)]
    b = [Outcome(0.0, 0.71, False, 10, 10), Outcome(0.71, 0.73, True, 10, 2), Outcome(0.73, 2.0, False, 10, 4,
                                                                                       hi_closed=True)]
    grid = [0.0, 0.5, 1.0, 1.5, 2.0]
    rows = {r["metric"]: r for r in compare_grid([a, b], grid)}
    assert rows["PB90"]["exact"] == 20 / 7 and rows["PB90"]["grid"] == 0.0  # 100% only on the sliver
    assert rows["PB90"]["differs"] and rows["PB90"]["missed"] == ["[0.71, 0.73)"]
    assert rows["AUP"]["differs"] and rows["AUP"]["missed"] == ["[0.71, 0.73)"]
    finer = [i / 100 for i in range(201)]
    assert not any(r["differs"] for r in compare_grid([a, b], finer))


def test_the_leaderboards_published_numbers():
    """ParallelBench's dream.json: confidence factor PB80 5.17058 and PB75 6.48454 are crossings between its
    measured averages; PB70 7.3758 its last point; Random top-k 0, 2, 4 are measured points, not crossings."""
    factor = [(4.784975, 82.647059), (5.290547, 79.176471), (5.996088, 76.705882), (6.652965, 74.411765),
              (7.375800, 70.352941)]
    assert pbx(factor, 80, interpolate=True) == pytest.approx(5.17058035, abs=1e-5)
    assert pbx(factor, 75, interpolate=True) == pytest.approx(6.48453537, abs=1e-5)
    assert pbx(factor, 70, interpolate=True) == pytest.approx(7.3758, abs=1e-6)
    top_k = [(1, 79.235294), (2, 77.058824), (4, 70.823529), (8, 59.176471), (16, 42.882353), (32, 28.941176)]
    assert [pbx(top_k, x) for x in (80, 75, 70)] == [0.0, 2.0, 4.0]


def test_points_of_equal_parallelism_are_crossed_in_parallelbenchs_order():
    """ParallelBench orders a method's points by tokens per step, and points of equal tokens per step by accuracy,
    highest first (its site, parallelbench/parallelbench.github.io at 7b930091, sorts each curve so in js/chart.js:
    ``a.tps - b.tps || b.accuracy - a.accuracy``), and interpolates along that line. Its LLaDA 1.5 + DUS averages
    (data/figures/llada15/dus.csv) hold two points at 2 tokens per step, listed worse first; the published PB75 and
    PB70 (data/leaderboard/llada15.json) are the crossings from (1, 76.59) to the better one, (2, 57.35)."""
    dus = [(1.0, 76.58823529411765), (2.0, 54.529411764705884), (2.0, 57.35294117647059),
           (2.6666666666666674, 46.76470588235294), (4.0, 37.470588235294116), (6.399999999999999, 41.35294117647059)]
    published = {80: 0.0, 75: 1.0825688073394497, 70: 1.342507645259939}
    for order in (dus, dus[::-1], sorted(dus, key=lambda p: p[1])):
        assert {x: pbx(order, x, interpolate=True) for x in published} == pytest.approx(published, abs=1e-12)
    assert pbx(dus, 75) == 1.0  # without interpolation the order of a tie cannot matter


def test_summary_and_errors():
    s = summary(curve(two_items()))
    assert list(s) == ["PB90", "PB80", "PB70", "PB60", "AUP"] and s["AUP"] == 100.0
    with pytest.raises(ValueError, match="x"):
        pbx([(1, 50)], 120)
    with pytest.raises(ValueError, match="points"):
        aup([(1, 0.5e3)])
    with pytest.raises(ValueError, match="not contiguous"):
        curve([[Outcome(0, 1, True, 1, 1), Outcome(1.5, 2, True, 1, 1)]])
    with pytest.raises(ValueError, match="another γ range"):
        curve([[Outcome(0, 1, True, 1, 1)], [Outcome(0, 2, True, 1, 1)]])
    with pytest.raises(ValueError, match="outside"):
        grid_points(two_items(), [3.0])


@pytest.mark.heavy
@pytest.mark.usefixtures("one_thread")
def test_a_real_map_reads_as_decoding_at_each_gamma(sharp):
    prompts = ["assert 12 + 7 == ", "assert 3 + 4 == "]
    kw = dict(max_new_tokens=6)
    right = {p: sv.decode(sharp, p, gamma=0.0, **kw).text for p in prompts}  # "right" means NTP-like text here
    items = [outcomes(gamma_map(sharp, p, **kw), lambda text, p=p: text == right[p]) for p in prompts]
    gammas = [0.0, 0.3, 1.0, 2.0]
    for g, (rho, acc) in zip(gammas, grid_points(items, gammas)):
        traces = [sv.decode(sharp, p, gamma=g, **kw) for p in prompts]
        assert rho == sum(t.n_tokens for t in traces) / sum(t.nfe for t in traces)
        assert acc == 100.0 * sum(t.text == right[p] for t, p in zip(traces, prompts)) / len(prompts)
    with pytest.raises(ValueError, match="step map"):
        outcomes(gamma_map(sharp, prompts[0], step=0.5, **kw), bool)


@pytest.mark.heavy
@pytest.mark.usefixtures("one_thread")
def test_real_maps_pbx_and_aup_equal_a_dense_grid_of_decodes_and_add_what_it_misses(sharp):
    """PBx and AUP from real exact maps against the field's computation over ``sv.decode`` at every hundredth of γ:
    equal where the grid sees every segment; where it misses some, ``compare_grid`` names them, and the grid with one
    γ inside each missed segment added (read off the map's breakpoints) gives the exact numbers."""
    prompts = ["assert 12 + 7 == ", "assert sorted([3, 1]) == "]
    kw = dict(max_new_tokens=8)
    right = {p: sv.decode(sharp, p, gamma=0.0, **kw).text for p in prompts}
    items = [outcomes(gamma_map(sharp, p, **kw), lambda text, p=p: text == right[p]) for p in prompts]
    segments = curve(items)
    assert len(segments) > 3

    def decoded_point(g):  # independent of the map: decode every item at g
        traces = [sv.decode(sharp, p, gamma=g, **kw) for p in prompts]
        return (sum(t.n_tokens for t in traces) / sum(t.nfe for t in traces),
                100.0 * sum(t.text == right[p] for t, p in zip(traces, prompts)) / len(prompts))

    grid = [i / 50 for i in range(101)]
    points = [decoded_point(g) for g in grid]
    missed = [s for s in segments if not any(g in s for g in grid)]
    assert missed and len(missed) < len(segments)  # both cases: segments the grid sees, and slivers it misses
    y_max = max(s.accuracy for s in segments)
    rows = {r["metric"]: r for r in compare_grid(items, grid, y_max=y_max)}
    for x in (90, 80, 70, 60):
        assert rows[f"PB{x}"]["grid"] == leaderboard_max_tps(*zip(*points), x)
    assert rows["AUP"]["grid"] == pytest.approx(d3llm_get_aup(*zip(*points), y_max=y_max), rel=1e-12)
    assert rows["AUP"]["missed"] == [str(s) for s in missed if s.point not in set(points)]
    # one γ inside each missed segment: its closed bottom, else the middle
    added = sorted(grid + [s.lo if s.lo_closed else (s.lo + s.hi) / 2 for s in missed])
    full = [decoded_point(g) for g in added]
    assert aup(segments, y_max=y_max) == pytest.approx(d3llm_get_aup(*zip(*full), y_max=y_max), rel=1e-12)
    for x in (90, 80, 70, 60, 50):
        assert pbx(segments, x) == leaderboard_max_tps(*zip(*full), x)
    for x in (90, 80, 70, 60):  # where the grid saw the deciding segment, its number is the exact one
        row = rows[f"PB{x}"]
        assert row["exact"] == pbx(segments, x) and (row["grid"] == row["exact"]) != bool(row["missed"])
