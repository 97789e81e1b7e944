"""Figures drawn from hand-made traces: no model, no browser."""

import html
import json
from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

import sbd_viz as sv
from sbd_viz.plots import (STATE_COLORS, STATES, VERIFIED_STATES, block_fill, block_fill_spec, calls_timeline, compare, entropy_heatmap, first_difference, save_html, sweep_frame, trace_html, tradeoff)
from sbd_viz.trace.data import Candidate, Commit, SlotView, Step, Trace

TOKENS = [" the", "\n", "x", "<b>", "=", " 4", "  ", "ok"]


def token(pos: int) -> str:
    return TOKENS[pos % len(TOKENS)]


def entropy(call: int, slot: int) -> float:
    return round(0.1 * (slot + 1) + 0.05 * call, 4)


def make_trace(schedule, k=4, decoder="sbd", prompt="Q: 2 + 2?\nA:") -> Trace:
    """``schedule[block][step]`` lists the slots committed at that step; every slot gets committed."""
    prompt_ids = tuple(range(100, 100 + len(prompt)))
    steps, call = [], 0
    for block, block_schedule in enumerate(schedule):
        start = len(prompt_ids) + block * k
        masked = list(range(k))
        for j, slots in enumerate(block_schedule):
            views = tuple(SlotView(s, entropy(call, s), (Candidate(start + s, token(start + s), 0.6),
                                                         Candidate(7, f"alt{start + s}", 0.25)))
                          for s in masked)
            after = [s for s in masked if s not in slots]
            commits = tuple(Commit(slot=s, token_id=start + s, text=token(start + s), prob=0.6,
                                   entropy=entropy(call, s), gap=sum(1 for m in after if m < s))
                            for s in sorted(slots))
            steps.append(Step(call=call, block=block, block_start=start, block_size=k, step=j,
                              masked=tuple(masked), slots=views, commits=commits, wall_time=0.01))
            masked, call = after, call + 1
        assert not masked, "schedule must commit every slot"
    n = len(schedule) * k
    positions = range(len(prompt_ids), len(prompt_ids) + n)
    texts = tuple(token(p) for p in positions)
    config = dict(decoder=decoder, rule=None if decoder == "ntp" else "eb",
                  gamma=None if decoder == "ntp" else 0.5, block_size=k)
    return Trace(prompt=prompt, prompt_ids=prompt_ids, config=config, model_id="toy", steps=tuple(steps),
                 output_ids=tuple(positions), output_texts=texts, text="".join(texts), stop_reason="length")


@pytest.fixture
def gap_trace():
    # block 0: slots 0,1 then 3 (gap: slot 2 still masked) then 2; block 1: in order.
    return make_trace([[[0, 1], [3], [2]], [[0, 1, 2, 3]]])


@pytest.fixture
def multi_trace():
    return make_trace([[[0], [1, 2], [3]], [[0, 2], [1], [3]], [[0, 1, 2, 3]], [[0], [1], [2], [3]]])


@pytest.fixture
def gapless_trace():
    return make_trace([[[0, 1], [2, 3]], [[0], [1, 2, 3]]])


@pytest.fixture
def ntp_trace():
    return make_trace([[[0]] for _ in range(20)], k=1, decoder="ntp")


def expected_state(trace, block, slot, call):
    steps = trace.block_steps(block)
    if steps[0].call > call:
        return "future"
    for s in steps:
        if slot in s.committed_slots:
            return "done" if s.call < call else "now" if s.call == call else "masked"
    return "masked"


def resolve(fig, i):
    """The full state of frame ``i`` as {trace index: trace}, resolving baseframes as plotly.js does."""
    by_name = {f.name: f for f in fig.frames}
    chain, frame = [], fig.frames[i]
    while frame is not None:
        chain.append(frame)
        frame = by_name[frame.baseframe] if frame.baseframe is not None else None
    state = {}
    for frame in reversed(chain):
        state.update(zip(frame.traces, frame.data))
    return state


def frame_cells(fig, i=None):
    """{(block, slot): (state, row, col)} of frame ``i`` (the figure's initial view if None)."""
    rows = fig.layout.meta["rows"]
    traces = dict(enumerate(fig.data)) if i is None else resolve(fig, i)
    cells = {}
    for r in range(rows):
        heat = traces[r]
        assert list(heat.y) == [r]
        for c, cell in enumerate(heat.customdata[0]):
            if cell is not None:
                state, block, slot = cell
                cells[(block, slot)] = (state, r, c)
    return cells


def outlined(fig, i=None):
    """{(block, slot, call)} of the gap-fill outlines drawn in frame ``i`` (the initial view if None)."""
    rows = fig.layout.meta["rows"]
    traces = dict(enumerate(fig.data)) if i is None else resolve(fig, i)
    return {tuple(t) for r in range(rows) for t in traces[rows + r].customdata if t is not None}


def cell_attr(fig, i, block, slot, attr):
    _, r, c = frame_cells(fig, i)[(block, slot)]
    return getattr(resolve(fig, i)[r], attr)[0][c]


# -- block fill ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gap_trace", "multi_trace", "gapless_trace", "ntp_trace"])
@pytest.mark.heavy
def test_block_fill_frames_match_trace(name, request):
    trace = request.getfixturevalue(name)
    fig = block_fill(trace)
    assert len(fig.frames) == trace.nfe
    assert [f.name for f in fig.frames] == [str(s.call) for s in trace.steps]
    k = trace.steps[0].block_size
    for i, step in enumerate(trace.steps):
        cells = frame_cells(fig, i)
        assert set(cells) == {(b, s) for b in range(trace.n_blocks) for s in range(k)}
        for (block, slot), (state, _, _) in cells.items():
            assert state in STATES
            assert state == expected_state(trace, block, slot, step.call), (step.call, block, slot)
    # The colour is the state: z sits in the state's band of the shared colour scale.
    bands = {"future": (0, 1), "done": (1, 2), "now": (2, 3), "masked": (3, 4)}
    last = trace.nfe - 1
    for (block, slot), (state, r, c) in frame_cells(fig, last).items():
        low, high = bands[state]
        assert low < resolve(fig, last)[r].z[0][c] < high
    # The slider and play buttons drive the frames.
    assert [s.label for s in fig.layout.sliders[0].steps] == [f"call {s.call}" for s in trace.steps]
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert any("play" in label for label in labels) and any("pause" in label for label in labels)


def test_block_fill_one_row_per_block(multi_trace):
    fig = block_fill(multi_trace)
    assert frame_cells(fig) == frame_cells(fig, multi_trace.nfe - 1)  # first view = finished decode
    cells = frame_cells(fig, multi_trace.nfe - 1)
    assert {(b, s): (r, c) for (b, s), (_, r, c) in cells.items()} == \
        {(b, s): (b, s) for b in range(4) for s in range(4)}
    assert fig.layout.height > block_fill(make_trace([[[0, 1, 2, 3]]])).layout.height


@pytest.mark.parametrize("k", [4, 16, 32, 64])
def test_block_fill_fits_a_notebook_and_wraps_a_wide_block(k):
    """JupyterLab's output area is about 900 px wide: a block fill is never wider than FIT_WIDTH (k = 16 was 1230
    px), its cells never narrower than MIN_CELL; a block too wide for that wraps over rows, each labelled with its
    slots, and every cell is still drawn once, where its row and column say."""
    from sbd_viz.plots.style import FIT_WIDTH, MIN_CELL

    trace = make_trace([[list(range(k))], [list(range(k // 2)), list(range(k // 2, k))]], k=k)
    fig = block_fill(trace)
    layout = fig.layout
    assert layout.width <= FIT_WIDTH
    plot_w = layout.width - layout.margin.l - layout.margin.r
    cols = len(layout.xaxis.tickvals)
    assert plot_w / cols >= MIN_CELL and layout.margin.r >= 100  # room for the entropy scale
    rows = layout.meta["rows"]
    lines = rows // 2
    assert (lines > 1) == (k * MIN_CELL > FIT_WIDTH - 260) and cols * lines >= k
    for i in range(trace.nfe):
        cells = frame_cells(fig, i)
        assert set(cells) == {(b, s) for b in range(2) for s in range(k)}
        assert {(b, s): (r, c) for (b, s), (_, r, c) in cells.items()} == \
            {(b, s): (b * lines + s // cols, s % cols) for b in range(2) for s in range(k)}
    labels = list(layout.yaxis.ticktext)
    if lines > 1:
        assert labels[:lines] == [f"block 0 · slots {j * cols}–{min(k, (j + 1) * cols) - 1}" for j in range(lines)]
        assert layout.xaxis.title.text == "slot in the row"
    else:
        n0 = len(trace.prompt_ids)
        assert labels == [f"block 0 · pos {n0}", f"block 1 · pos {n0 + k}"]


def test_block_fill_frames_are_incremental(multi_trace, ntp_trace):
    for trace in (multi_trace, ntp_trace):
        fig = block_fill(trace)
        rows = fig.layout.meta["rows"]
        assert sorted(fig.frames[0].traces) == list(range(2 * rows))
        for i, frame in enumerate(fig.frames[1:], start=1):
            assert frame.baseframe == str(i - 1)
            assert len(frame.traces) <= 4  # this call's row and the previous call's row, with their outlines


def test_block_fill_gap_outlines(gap_trace, gapless_trace):
    fig = block_fill(gap_trace)
    fills = {(g.block, g.slot, g.call) for g in gap_trace.gap_fills()}
    assert fills == {(0, 3, 1)}
    for i, step in enumerate(gap_trace.steps):
        assert outlined(fig, i) == {f for f in fills if f[2] <= step.call}
    assert outlined(fig) == fills  # the initial view is the finished decode
    gapless = block_fill(gapless_trace)
    assert all(outlined(gapless, i) == set() for i in range(gapless_trace.nfe))


def test_block_fill_text_hover_and_counters(gap_trace):
    fig = block_fill(gap_trace)
    # After call 0 slot 2 of block 0 is still masked: its hover lists the candidates with probabilities.
    hover = cell_attr(fig, 0, 0, 2, "hovertext")
    pos = gap_trace.steps[0].block_start + 2
    assert "still masked" in hover and f"{entropy(0, 2):.3f}" in hover
    assert "alt" + str(pos) in hover and "0.600" in hover and "0.250" in hover
    # Committed cells show their token with whitespace made visible and HTML escaped.
    last = gap_trace.nfe - 1
    texts = [cell_attr(fig, last, b, s, "text") for b, s in frame_cells(fig, last)]
    assert "␣the" in texts and "⏎" in texts and "&lt;b&gt;" in texts and "▒" not in texts
    assert cell_attr(fig, 0, 0, 2, "text") == "▒"
    hovers = "".join(cell_attr(fig, last, b, s, "hovertext") for b, s in frame_cells(fig, last))
    assert "<b>&lt;b&gt;</b>" in hovers and "<b><b>" not in hovers
    last_title = fig.frames[-1].layout.title.text
    assert f"{gap_trace.nfe}/{gap_trace.nfe} calls · {gap_trace.n_tokens} tokens" in last_title
    assert f"{gap_trace.tokens_per_call:.2f} {sv.COUNT_LABELS[(True, True)]}" in last_title  # named as everywhere


def test_block_fill_legend_and_max_blocks(multi_trace):
    fig = block_fill(multi_trace)
    legend = " ".join(a.text for a in fig.layout.annotations)
    for label in ("committed before", "committed in this call", "still masked", "not started", "gap fill"):
        assert label in legend
    assert STATE_COLORS["done"] in legend and STATE_COLORS["now"] in legend
    first_two = block_fill(multi_trace, max_blocks=2)
    assert len(first_two.frames) == multi_trace.nfe
    assert {b for b, _ in frame_cells(first_two, multi_trace.nfe - 1)} == {0, 1}
    last_one = block_fill(multi_trace, max_blocks=1, last=True)
    assert {b for b, _ in frame_cells(last_one, multi_trace.nfe - 1)} == {3}
    with pytest.raises(ValueError, match="max_blocks"):
        block_fill(multi_trace, max_blocks=0)


# -- other figures --------------------------------------------------------------------
def test_entropy_heatmap_values(gap_trace):
    fig = entropy_heatmap(gap_trace, block=0)
    entropies = fig.data[0].customdata
    for r, step in enumerate(gap_trace.block_steps(0)):
        for slot in range(4):
            view = step.slot_view(slot)
            assert entropies[r][slot] == (view.entropy if view else None)
    gap_tags = {tuple(t) for t in fig.data[1].customdata if t is not None}
    assert gap_tags == {(0, 3, 1)}
    for bad in (5, -1, True, "0"):
        with pytest.raises(ValueError, match="block"):
            entropy_heatmap(gap_trace, block=bad)


def test_calls_timeline(multi_trace, ntp_trace):
    for fig in (calls_timeline(multi_trace), calls_timeline(multi_trace, ntp_trace=ntp_trace)):
        line = next(t for t in fig.data if t.name == "tokens so far")
        assert line.y[-1] == multi_trace.n_tokens and len(line.x) == multi_trace.nfe + 1
        bars = [t for t in fig.data if isinstance(t, go.Bar)]
        assert sum(v or 0 for b in bars for v in b.y) == multi_trace.n_tokens
    ntp_line = next(t for t in calls_timeline(multi_trace, ntp_trace).data if t.name == "NTP run")
    assert ntp_line.y[-1] == ntp_trace.n_tokens


RESULTS = [
    dict(rule="eb", gamma=0.1, accuracy=0.80, calls_per_token=0.8),
    dict(rule="eb", gamma=0.5, accuracy=0.74, calls_per_token=0.5),
    dict(rule="eb", gamma=1.0, accuracy=0.60, calls_per_token=0.3),
    dict(rule="eb", gamma=0.5, accuracy=0.78, calls_per_token=0.6, gap_free=True),
    dict(rule="topk", gamma=2, accuracy=0.70, calls_per_token=0.5),
    dict(rule="ntp", gamma=None, accuracy=0.82, calls_per_token=1.0),
]


@pytest.mark.heavy
def test_tradeoff_rules_and_current():
    fig = tradeoff(RESULTS, current=dict(rule="eb", gamma=0.5))
    rules = [t for t in fig.data if t.meta and t.meta["role"] == "rule"]
    assert sorted(t.name for t in rules) == ["eb", "eb · gap-free", "topk"]
    eb = next(t for t in rules if t.name == "eb")
    assert list(eb.x) == sorted(eb.x) and len(eb.x) == 3
    current = next(t for t in fig.data if t.name == "current setting")
    assert sorted(zip(current.x, current.y)) == sorted([(2.0, 0.74), (1 / 0.6, 0.78)])
    assert any(t.name == "NTP" for t in fig.data)
    only_plain = tradeoff(RESULTS, current=dict(rule="eb", gamma=0.5, gap_free=False))
    assert list(next(t for t in only_plain.data if t.name == "current setting").y) == [0.74]
    with pytest.raises(ValueError, match="current"):
        tradeoff(RESULTS, current=dict(rule="eb", gamma=9))
    with pytest.raises(ValueError, match="x"):
        tradeoff(RESULTS, x="speedup_wall")
    with pytest.raises(ValueError, match="results"):
        tradeoff([dict(rule="eb", gamma=1)])


def test_sweep_frame_reads_rows_and_frames_alike():
    """One loader for sweep rows: rows without "verify" load as unverified rows with their rule; a frame loads as its
    rows do; a row without a rule is refused (no other column stands for it)."""
    import pandas as pd

    df = sweep_frame(RESULTS)
    assert list(df["rule"]) == [r["rule"] for r in RESULTS]
    with pytest.raises(ValueError, match=r"missing columns \['rule'\]"):
        sweep_frame([{("solver" if k == "rule" else k): v for k, v in row.items()} for row in RESULTS])
    assert not df["verify"].any() and list(df["gap_free"]) == [bool(r.get("gap_free")) for r in RESULTS]
    assert df["tokens_per_call"].tolist() == pytest.approx([1 / r["calls_per_token"] for r in RESULTS])
    given = pd.DataFrame(RESULTS)
    assert sweep_frame(given).equals(sweep_frame(RESULTS)) and "verify" not in given.columns  # a copy
    with pytest.raises(ValueError, match="results"):
        sweep_frame("sweep.json")
    with pytest.raises(ValueError, match="results: missing columns"):
        sweep_frame([dict(rule="eb", gamma=1)])


def test_tradeoff_draws_one_line_per_block_size():
    rows = [dict(rule="eb", gamma=g, block_size=k, accuracy=0.5, tokens_per_call=g * k)
            for g in (0.1, 1.0) for k in (4, 16)] + [dict(rule="ntp", gamma=None, block_size=1, accuracy=0.6,
                                                          tokens_per_call=1.0)]
    fig = tradeoff(rows, current=dict(rule="eb", gamma=1.0, block_size=4))
    rules = sorted(t.name for t in fig.data if t.meta and t.meta["role"] == "rule")
    assert rules == ["eb · k=16", "eb · k=4"]
    assert list(next(t for t in fig.data if t.name == "current setting").x) == [4.0]
    single = tradeoff([r for r in rows if r["block_size"] != 4])  # one block size: names stay plain
    assert [t.name for t in single.data if t.meta and t.meta["role"] == "rule"] == ["eb"]


def test_tradeoff_leaves_bunched_labels_blank():
    """Settings that land on about the same point (bold gammas, a block capping a call's commits) keep their
    points and hovers, but only the first of a bunch is labelled; points apart keep their labels."""
    rows = [dict(rule="eb", gamma=g, accuracy=a, tokens_per_call=t) for g, a, t in
            ((0.1, 0.99, 4.5), (0.35, 0.95, 5.25), (0.6, 0.95, 5.42), (1.0, 0.95, 5.52), (2.0, 0.90, 5.6))]
    rows.append(dict(rule="ntp", gamma=None, accuracy=0.99, tokens_per_call=1.0))
    (line,) = [t for t in tradeoff(rows).data if t.meta and t.meta["role"] == "rule"]
    assert list(line.x) == [4.5, 5.25, 5.42, 5.52, 5.6] and len(line.hovertext) == 5
    # 0.6 and 1 sit within 0.3 tokens per call and at the same accuracy as 0.35; 2 is 0.05 lower: apart
    assert list(line.text) == ["γ=0.1", "γ=0.35", "", "", "γ=2"]
    # the same points spread out keep every label
    spread = [dict(r, tokens_per_call=1 + 2 * i) for i, r in enumerate(rows[:-1])] + rows[-1:]
    (line,) = [t for t in tradeoff(spread).data if t.meta and t.meta["role"] == "rule"]
    assert "" not in list(line.text)
    # every point at one accuracy: the bunch is still found on the speed axis alone
    flat = [dict(r, accuracy=0.95) for r in rows]
    (line,) = [t for t in tradeoff(flat).data if t.meta and t.meta["role"] == "rule"]
    assert list(line.text) == ["γ=0.1", "γ=0.35", "", "", ""]


def test_tradeoff_colours_each_rule_from_the_house_palette_and_names_ntp_by_its_spec():
    """A rule's line takes its own colour of RULE_COLORS whatever else is drawn (it took the i-th colour of the
    lines present, so a rule changed colour between figures), every line its own; NTP is named by its spec, and
    its accuracy line in the legend, not by a note printed over the points."""
    from sbd_viz.decoders.ntp import NTP
    from sbd_viz.plots.style import RULE_COLORS
    from sbd_viz.decoders.rules import RULES

    def colors(rows):
        return {t.name: t.line.color for t in tradeoff(rows).data if t.meta and t.meta["role"] == "rule"}

    row = dict(gamma=0.5, accuracy=0.8, tokens_per_call=2.0)
    alone = colors([dict(row, rule="entropy_threshold")])
    both = colors([dict(row, rule="entropy_threshold"), dict(row, rule="confidence_threshold", gamma=0.9)])
    assert alone["entropy_threshold"] == both["entropy_threshold"] == RULE_COLORS[RULES.index("entropy_threshold")]
    mixed = colors([dict(row, rule="entropy_bounded"), dict(row, rule="entropy_bounded", gap_free=True),
                    dict(row, rule="plugin_rule"), dict(row, rule="top_k", gamma=2)])
    assert mixed["entropy_bounded"] == RULE_COLORS[0] and mixed["top_k"] == RULE_COLORS[RULES.index("top_k")]
    assert len(set(mixed.values())) == 4 and set(mixed.values()) <= set(RULE_COLORS)
    fig = tradeoff(RESULTS)
    assert NTP.label in [t.name for t in fig.data] and f"{NTP.label} accuracy" in [t.name for t in fig.data]
    assert not [a for a in fig.layout.annotations if "accuracy" in (a.text or "")]


def test_decoder_tradeoff_gives_an_unregistered_decoder_a_house_colour():
    import pandas as pd

    from sbd_viz.plots import decoder_tradeoff
    from sbd_viz.plots.style import RULE_COLORS

    frame = pd.DataFrame([dict(decoder=f"not_registered_{i}", label=f"mine {i}", speedup_calls=1.5, accuracy=1.0,
                               knob_value=float("nan"), knob="") for i in range(3)])
    assert {t.marker.color for t in decoder_tradeoff(frame).data} <= set(RULE_COLORS)


VERIFIED_RESULTS = RESULTS + [
    dict(rule="eb", gamma=0.1, accuracy=0.82, calls_per_token=0.9, verify=True, same_as_ntp=1.0),
    dict(rule="eb", gamma=0.5, accuracy=0.82, calls_per_token=0.7, verify=True, same_as_ntp=1.0),
    dict(rule="eb", gamma=1.0, accuracy=0.82, calls_per_token=0.55, verify=True, same_as_ntp=1.0),
]


def test_tradeoff_draws_the_verified_line_beside_the_lossy_rules():
    fig = tradeoff(VERIFIED_RESULTS)
    rules = [t for t in fig.data if t.meta and t.meta["role"] == "rule"]
    assert sorted(t.name for t in rules) == ["eb", "eb · gap-free", "topk"]  # the lossy lines as before
    (verified,) = [t for t in fig.data if t.meta and t.meta["role"] == "verified"]
    assert verified.name == "verified (lossless)"
    assert list(verified.x) == sorted(1 / c for c in (0.9, 0.7, 0.55)) and set(verified.y) == {0.82}
    assert list(verified.text) == ["γ=0.1", "γ=0.5", "γ=1"]  # sorted by tokens per call
    # a style of its own: dashed, diamonds, a colour no lossy line has
    assert verified.line.dash == "dash" and verified.marker.symbol == "diamond"
    assert verified.line.color not in {t.line.color for t in rules}
    assert all(t.line.dash is None for t in rules)
    assert "same_as_ntp: 1" in verified.hovertext[0]
    # the lossy colours do not move when a verified line is added
    assert [t.line.color for t in rules] == [t.line.color for t in tradeoff(RESULTS).data
                                             if t.meta and t.meta["role"] == "rule"]


def test_tradeoff_rings_the_verified_point_when_verified():
    ring = lambda fig: next(t for t in fig.data if t.name == "current setting")  # noqa: E731
    on = ring(tradeoff(VERIFIED_RESULTS, current=dict(rule="eb", gamma=0.5, gap_free=False, verify=True)))
    assert list(zip(on.x, on.y)) == [(pytest.approx(1 / 0.7), 0.82)]
    off = ring(tradeoff(VERIFIED_RESULTS, current=dict(rule="eb", gamma=0.5, gap_free=False, verify=False)))
    assert list(zip(off.x, off.y)) == [(2.0, 0.74)]
    with pytest.raises(ValueError, match="current"):  # no verified topk row
        tradeoff(VERIFIED_RESULTS, current=dict(rule="topk", gamma=2, verify=True))


def test_tradeoff_names_and_dashes_each_verified_line_when_there_are_several():
    rows = VERIFIED_RESULTS + [dict(rule="topk", gamma=2, accuracy=0.82, calls_per_token=0.6, verify=True)]
    lines = [t for t in tradeoff(rows).data if t.meta and t.meta["role"] == "verified"]
    assert sorted(t.name for t in lines) == ["verified (lossless) · eb", "verified (lossless) · topk"]
    assert len({t.line.dash for t in lines}) == 2  # told apart by their dashes


# -- comparing two runs ---------------------------------------------------------------
@pytest.mark.parametrize("a, b, expected", [
    ("abc", "abc", None), ("abc", "abd", 2), ("abc", "abcd", 3), ("", "x", 0), ("x", "", 0), ("", "", None),
    ([5, 6, 7], [5, 6, 8], 2), ([5, 6], (5, 6), None), ([5], [5, 6], 1),  # token ids, as analysis compares them
])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


def test_first_difference_names_a_bad_argument():
    with pytest.raises(ValueError, match="b: must be a string or a list of token ids"):
        first_difference("abc", 3)


def test_compare_marks_first_difference(multi_trace, ntp_trace):
    fig = compare(multi_trace, ntp_trace, labels=("SBD", "NTP"))
    joined = ["".join(t.output_texts) for t in (multi_trace, ntp_trace)]
    diff = first_difference(*joined)
    assert fig.layout.meta["first_difference"] == diff
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heat) == 2
    # each token's colour = how many tokens its call committed
    calls = multi_trace.token_calls()
    values = [v for row in heat[0].z for v in row if v is not None]
    assert values == [calls.count(c) for c in calls]
    same = compare(multi_trace, multi_trace)
    assert same.layout.meta["first_difference"] is None


# -- HTML ---------------------------------------------------------------------------------
def test_html_is_offline(gap_trace, tmp_path):
    path = tmp_path / "trace.html"
    page = save_html(gap_trace, path)
    assert path.read_text(encoding="utf-8") == page
    library = get_plotlyjs()[:300]
    assert '<script src="http' not in page and "<script src='http" not in page
    assert page.count(library) == 1
    assert "gap fills" in page and "Q: 2 + 2?" in page
    fragment = trace_html(gap_trace)
    assert fragment.count(library) == 1 and '<script src="http' not in fragment
    assert save_html(entropy_heatmap(gap_trace)).count(library) == 1
    with pytest.raises(ValueError, match="trace_or_fig"):
        save_html("not a trace")
    empty = Trace(prompt="p", prompt_ids=(1,), config={}, model_id="toy", steps=(), output_ids=(),
                  output_texts=(), text="", stop_reason="length")
    assert "prompt" in trace_html(empty)  # a notebook repr must not raise
    with pytest.raises(ValueError, match="trace"):
        block_fill(empty)


def test_roofline_draws_a_line_and_knee_per_hardware_and_batch():
    from sbd_viz import plots
    from sbd_viz.analysis import roofline as rf

    fig = plots.roofline(("h100-fp8", "a100-bf16"), batches=(1, 16), measured=[(1, 0.01), (16, 0.013)])
    lines = [t for t in fig.data if t.meta["role"] == "line"]
    assert {(t.meta["hardware"], t.meta["batch"]) for t in lines} == {
        (h, b) for h in ("h100-fp8", "a100-bf16") for b in (1, 16)}
    for t in lines:  # a call never gets cheaper with more tokens in it
        assert list(t.y) == sorted(t.y)
    for knee in (t for t in fig.data if t.meta["role"] == "knee"):
        assert knee.meta["tokens"] == rf.knee_tokens(knee.meta["batch"], knee.meta["hardware"], "paper-8b", 16,
                                                     "corrected", 1024)
    measured = [t for t in fig.data if t.meta["role"] == "measured"]
    assert len(measured) == 1 and list(measured[0].x) == [1, 16]
    with pytest.raises(ValueError, match="hardware"):
        plots.roofline("tpu-v9")
    with pytest.raises(ValueError, match="measured"):
        plots.roofline(measured=[(1, -2.0)])
    with pytest.raises(ValueError, match="max_tokens"):
        plots.roofline(max_tokens=1)


@pytest.mark.parametrize("schedule, k", [([[[3], [0, 1], [2]], [[0, 1, 2, 3]]], 4), ([[[0]], [[0]], [[0]]], 1),
                                         ([[[1], [0]], [[0, 1]]], 2)])
def test_block_fill_spec_is_valid_plotly_data_that_validation_leaves_unchanged(schedule, k):
    """The app sends block_fill_spec as JSON without building graph objects: it must be exactly the figure."""
    import json

    from sbd_viz.plots import block_fill_spec

    trace = make_trace(schedule, k=k)
    spec = block_fill_spec(trace)
    fig = go.Figure(spec)  # raises on any property Plotly does not know
    assert json.loads(json.dumps(spec)) == json.loads(fig.to_json())
    assert len(spec["frames"]) == trace.nfe and fig.layout.template.layout.colorway  # the default look, too


# -- verified traces ----------------------------------------------------------------------
DATA = Path(__file__).parents[1] / "data"
# tests/data/trace_verified.json: sharp("llama") of test_verify with oracle_drafter(..., {g % 7 in (2, 5)}, soft=True),
# "x = [3, 1", confidence_threshold 0.5, k = 6, 15 tokens, stop "q", verify=True. Its 11 calls reject drafts in a block
# (call 1), in a block's tail found by the next block's first call (calls 4 and 7), drop drafts after them, hold gap
# fills, and end with a checking-only call.
VERIFIED = DATA / "trace_verified.json"


@pytest.fixture
def verified():
    return sv.load_trace(VERIFIED)


def unverified_snapshot() -> dict:
    """The unverified pictures as plain JSON (plotly's template left out: it is not ours)."""
    traces = {"gap": make_trace([[[0, 1], [3], [2]], [[0, 1, 2, 3]]]), "sbd": sv.load_trace(DATA / "trace_sbd.json")}
    out = {}
    for name, t in traces.items():
        spec = block_fill_spec(t)
        spec = {**spec, "layout": {k: v for k, v in spec["layout"].items() if k != "template"}}
        timeline = calls_timeline(t).to_plotly_json()
        timeline["layout"].pop("template", None)
        out[name] = json.loads(json.dumps({"block_fill": spec, "timeline": timeline}, default=list))
    return out


def test_unverified_pictures_are_unchanged_by_verification():
    """tests/data/plots_unverified.json holds the pictures of two unverified traces (a hand-made one and
    tests/data/trace_sbd.json) as ``unverified_snapshot`` draws them: the verified pictures' marks must not reach an
    unverified trace. Save it again (``unverified_snapshot()``) only for a change meant for every trace."""
    assert unverified_snapshot() == json.loads((DATA / "plots_unverified.json").read_text())


def verified_expected(trace, block, slot, call):
    """A cell's state after ``call`` from the trace's own block_state: what the picture must say."""
    steps = [s for s in trace.block_steps(block) if s.call <= call]
    if not steps:
        return "future"
    state = trace.block_state(steps[-1])[slot] if slot < steps[-1].block_size else None
    events = [(s, c) for s in steps for c in s.commits if c.slot == slot]
    if state is None:
        dropped = [s for s in steps if s.rollback is not None and slot in s.rollback.dropped]
        return "dropped" if dropped and (not events or events[-1][0].call < dropped[-1].call) else "masked"
    s, c = events[-1]
    if c.ntp and s.rollback is not None and s.rollback.slot == slot:
        return "corrected"
    return "now" if s.call == call else "done"


def test_verified_block_fill_shows_corrections_and_dropped_drafts(verified):
    fig = block_fill(verified)
    assert fig.layout.meta["states"] == list(VERIFIED_STATES)
    seen = set()
    for i, step in enumerate(verified.steps):
        for (block, slot), (state, _, _) in frame_cells(fig, i).items():
            assert state == verified_expected(verified, block, slot, step.call), (step.call, block, slot)
            seen.add(state)
    assert {"corrected", "dropped", "now", "done", "masked"} <= seen
    # The colour is the state: z in the state's band of the verified scale (0..6).
    bands = {"future": (0, 1), "done": (1, 2), "now": (2, 3), "masked": (3, 4), "corrected": (4, 5),
             "dropped": (5, 6)}
    last = verified.nfe - 1
    for (block, slot), (state, r, c) in frame_cells(fig, last).items():
        low, high = bands[state]
        assert low < resolve(fig, last)[r].z[0][c] < high and resolve(fig, last)[r].zmax == 6
    legend = " ".join(a.text for a in fig.layout.annotations)
    assert "rejected draft" in legend and "dropped by a rollback" in legend


def shown(text: str) -> str:
    """A token as hovers show it: whitespace visible, HTML escaped."""
    return html.escape(text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅", quote=False)


def test_verified_hover_says_what_ntp_wanted(verified):
    fig = block_fill(verified)
    for step in verified.rollbacks():
        check = step.rejected[0]
        fix = cell_attr(fig, step.call, step.block, step.rollback.slot, "hovertext")
        assert "NTP's correction" in fix and f"<b>{shown(check.ntp_text)}</b> (p = {check.ntp_prob:.3f})" in fix
        # before the rollback the cell held the draft, and its hover gives the verdict to come
        draft = cell_attr(fig, step.call - 1, step.block, step.rollback.slot, "hovertext")
        assert f"<b>{shown(check.text)}</b>" in draft and "rejected" in draft and f"{check.draft_prob:.3f}" in draft
    accepted = [c for c in verified.checks() if c.accepted]
    hovers = "".join(cell_attr(fig, verified.nfe - 1, b, s, "hovertext")
                     for b, s in frame_cells(fig, verified.nfe - 1))
    assert "draft accepted by NTP" in hovers and accepted
    assert "NTP's exact token" in hovers  # each block's first open slot is written from NTP, not drafted


def test_verified_counters_mark_rollbacks_and_checking_only_calls(verified):
    fig = block_fill(verified)
    labels = [s.label for s in fig.layout.sliders[0].steps]
    for step in verified.steps:
        title = fig.frames[step.call].layout.title.text
        assert ("checking only" in title) == step.check_only
        assert ("<b>rollback</b>" in title) == (step.rollback is not None)
        assert f"{len(step.checks)} draft(s) checked in this call" in title
        assert labels[step.call] == f"call {step.call}" + (" ↺" if step.rollback else "") + \
            (" ✓" if step.check_only else "")
    assert verified.n_check_only and verified.rollbacks()
    n = len(verified.checks())
    assert f"{sum(c.accepted for c in verified.checks())}/{n} accepted so far" in fig.frames[-1].layout.title.text


def test_verified_counters_count_a_draft_only_once_its_check_accepts_it(verified):
    """A verified call drafts tokens that a later call checks: the title counts a drafted token from the call whose
    check accepted it, NTP's own token from the call that wrote it, and never a draft a rollback replaced."""
    from sbd_viz.plots.blocks import committed_counts

    verdicts, at = verified.verdicts(), [0] * verified.nfe
    for s in verified.steps:
        for c in s.commits:
            if verified.kept(s, c.slot):
                at[s.call if c.ntp else verdicts[(s.call, s.block_start + c.slot)][0]] += 1
    expected = [sum(at[:i + 1]) for i in range(verified.nfe)]
    assert committed_counts(verified) == expected and expected[-1] == verified.n_tokens
    assert expected[0] == 1  # call 0 wrote NTP's token and drafted more: only NTP's token is committed
    fig = block_fill(verified)
    for step, n in zip(verified.steps, expected):
        title = fig.frames[step.call].layout.title.text
        assert f"{n} token{'' if n == 1 else 's'} committed" in title
        assert f"{n / (step.call + 1):.2f} {sv.COUNT_LABELS[(True, True)]}" in title
    assert f"{verified.tokens_per_call:.2f} tokens per call" in fig.frames[-1].layout.title.text


def test_the_call_marks_are_explained_in_the_legend(verified, gap_trace):
    legend = " ".join(a.text for a in block_fill(verified).layout.annotations)
    assert "↺</b> a call that rejected a draft" in legend and "✓</b> a call that only checked drafts" in legend
    plain = " ".join(a.text for a in block_fill(gap_trace).layout.annotations)
    assert "↺" not in plain and "✓" not in plain  # no mark drawn, none explained
    titles = [f.layout.title.text for f in block_fill(verified).frames]
    assert all(("↺" in t) == (s.rollback is not None) and ("✓" in t) == s.check_only
               for t, s in zip(titles, verified.steps))


def test_verified_spec_is_what_validation_gives(verified):
    spec = block_fill_spec(verified)
    assert json.loads(json.dumps(spec)) == json.loads(go.Figure(spec).to_json())


def test_calls_timeline_marks_rollbacks_and_checking_only_calls(verified, multi_trace):
    fig = calls_timeline(verified)
    marks = {t.meta["role"]: list(t.x) for t in fig.data if t.meta}
    assert marks == {"rollback": [s.call for s in verified.rollbacks()],
                     "check_only": [s.call for s in verified.steps if s.check_only]}
    hover = next(t for t in fig.data if t.meta and t.meta["role"] == "rollback").hovertext[0]
    assert "NTP wanted" in hover
    assert not [t for t in calls_timeline(multi_trace).data if t.meta]  # unverified: no marks


def test_verified_page_header_counts_the_verdicts(verified, gap_trace):
    checks = verified.checks()
    page = trace_html(verified)
    assert f"{sum(c.accepted for c in checks)}/{len(checks)} drafts accepted by NTP" in page
    assert f"{len(verified.rollbacks())} rollbacks" in page and "drafts accepted" not in trace_html(gap_trace)


def test_a_decoder_without_masks_shows_its_open_slots_as_not_written_yet(gap_trace):
    """Jacobi and prompt lookup feed drafts causally (the config says ``drafts: checked``): their open slots hold no
    mask token, so the block fill and the heatmap say "not written yet" where SBD's say "still masked"."""
    from dataclasses import replace

    drafts = replace(gap_trace, config={**gap_trace.config, "drafts": "checked"})
    for trace, word, other in ((gap_trace, "still masked", "not written yet"),
                               (drafts, "not written yet", "still masked")):
        fig = block_fill(trace)
        hover = cell_attr(fig, 0, 0, 2, "hovertext")
        legend = " ".join(a.text for a in fig.layout.annotations)
        assert word in hover and other not in hover
        assert word in legend and other not in legend
        heat = " ".join(a.text for a in entropy_heatmap(trace, block=0).layout.annotations)
        assert word in heat and other not in heat


# -- one name per count ---------------------------------------------------------------------
def _unnamed_counts(text: str) -> list[str]:
    """The places in a figure's text that show tokens per call without the name every view gives that count."""
    import re

    for label in sv.COUNT_LABELS.values():
        text = text.replace(label, "")
    return re.findall(r".{0,30}(?:tokens per call|tokens/call|tok/call|/call)", text)


def test_every_figure_names_tokens_per_call_as_count_labels_does(gap_trace, verified):
    """Peers count tokens per call with or without the end token and the prefill call: every figure that shows the
    ratio names it with ``sv.COUNT_LABELS`` (it was "tokens/call", "tok/call", "/call" and "tokens per call" in
    turn), so one count reads alike everywhere."""
    from test_gamma_strip import PIECES, _map
    from test_ladder import _frame

    from sbd_viz.plots import compare, compare_decoders, gamma_ladder, gamma_strip, tradeoff

    label = sv.COUNT_LABELS[(True, True)]
    figures = {"block_fill": block_fill(verified), "calls_timeline": calls_timeline(gap_trace),
               "compare": compare(gap_trace, gap_trace), "compare_decoders": compare_decoders([gap_trace]),
               "tradeoff": tradeoff(RESULTS), "gamma_ladder": gamma_ladder(_frame([True, True, False, True]))}
    for name, fig in figures.items():
        text = json.dumps(json.loads(fig.to_json()), ensure_ascii=False)  # plotly's JSON writes / as \u002f
        assert label in text and not _unnamed_counts(text), (name, _unnamed_counts(text))
    strip = gamma_strip(_map(PIECES))
    assert label in strip and not _unnamed_counts(strip)


@pytest.mark.parametrize("k", [4, 16, 32])
def test_no_figure_of_a_trace_is_wider_than_a_notebook(k):
    """JupyterLab's output area is about 900 px wide: compare (1048 px at 16 tokens a line) and the entropy heatmap
    (1092 px at k = 16) were cut; every figure of a trace is at most FIT_WIDTH wide."""
    from sbd_viz.plots import attention_mask
    from sbd_viz.plots.style import FIT_WIDTH

    trace = make_trace([[list(range(k))], [list(range(k // 2)), list(range(k // 2, k))]], k=k)
    figures = {"block_fill": block_fill(trace), "entropy_heatmap": entropy_heatmap(trace, block=1),
               "calls_timeline": calls_timeline(trace), "compare": compare(trace, trace),
               "compare 32 a line": compare(trace, trace, width=32),
               "compare_decoders": sv.plots.compare_decoders([trace]),
               "attention_mask": attention_mask("inference", past=min(64, 3 * k), n_causal=k, block_size=k)}
    for name, fig in figures.items():
        assert fig.layout.width <= FIT_WIDTH, (name, fig.layout.width)
    with pytest.raises(ValueError, match="width"):
        compare(trace, trace, width=0)
