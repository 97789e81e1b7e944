"""A trace file is checked as strictly as an argument: mutated copies of saved traces either load as a trace
whose every value a decode could write, or raise TraceFormatError; never another exception."""

import copy
import json
import math
import random
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz.trace.data import Trace, TraceFormatError
from test_diffusion_trace import canvas_trace

pytestmark = pytest.mark.heavy  # 300 mutants of each kind of saved trace: seconds per test
DATA = Path(__file__).parents[1] / "data"
NASTY = [None, {}, [], -1, 0, 1, 3, 2**63, -(2**63), 10**19, 1e19, -1.0, -1e-9, 0.5, 1.5, 1 + 1e-9, math.nan,
         math.inf, -math.inf, "x", "", "-1", True, False, [1], {"a": 1}]
MUTATIONS = 300  # per source trace


def _canvas_trace() -> Trace:
    """Two canvas blocks of 3 slots, one slot renoised, encoder passes: the recorder's own test trace."""
    return canvas_trace(top_n=3)


@pytest.fixture(scope="module")
def saved(tiny):
    """Saved traces of each kind: plain SBD with gap fills, verified SBD with rollbacks, the saved plain SBD of
    tests/data, a canvas, NTP and Jacobi."""
    sbd = sv.decode(tiny, "assert 1 + 1 == ", rule="top_k", gamma=3, block_size=6, max_new_tokens=14)
    return {"sbd": json.loads(sbd.to_json()),
            "verified": json.loads((DATA / "trace_verified.json").read_text()),
            "saved": json.loads((DATA / "trace_sbd.json").read_text()),
            "canvas": json.loads(_canvas_trace().to_json()),
            "ntp": json.loads(sv.decode_ntp(tiny, "ab", max_new_tokens=6).to_json()),
            "jacobi": json.loads(sv.decode(tiny, "ab", decoder="jacobi", max_new_tokens=8).to_json())}


def test_saved_traces_of_every_kind_load(saved):
    for name, d in saved.items():
        trace = sv.trace_from_dict(d)
        _assert_legal(trace)
        assert sv.trace_from_json(trace.to_json()) == trace, name


# -- what a decode can write: the oracle, stated independently of the loader ------------------------------
def _prob(p):
    assert isinstance(p, float) and 0.0 <= p <= 1.0, p


def _id(t):
    assert isinstance(t, int) and not isinstance(t, bool) and t >= 0, t


def _nonneg(x):
    assert isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0, x


def _candidates(top, top_n):
    assert top_n is None or len(top) <= top_n
    for c in top:
        _id(c.token_id), _prob(c.prob)


def _assert_legal(trace: Trace) -> None:
    config = trace.config
    decoder = config.get("decoder", "sbd")
    assert isinstance(decoder, str) and decoder[:1].isalpha(), decoder
    if decoder in ("sbd", "remask"):
        sv.DecodeConfig(**{k: config[k] for k in ("rule", "gamma", "gap_free", "block_size", "max_new_tokens",
                                                  "temperature", "seed", "stop", "top_n", "verify") if k in config})
    for key in ("gamma", "temperature"):
        if key in config:
            _nonneg(config[key])
    top_n = config.get("top_n")
    if getattr(trace, "gamma_range", None) is not None:  # a greedy decode's γ range holds its own γ
        assert config.get("temperature", 0) == 0 and config["gamma"] in trace.gamma_range
    assert trace.stop_reason in ("stop", "eos", "length")
    for t in trace.prompt_ids + trace.output_ids:
        _id(t)
    assert trace.n_tokens <= config.get("max_new_tokens", math.inf)
    assert [s.call for s in trace.steps] == list(range(trace.nfe))
    for s in trace.steps:
        k = s.block_size
        assert 1 <= k <= config.get("block_size", 4096) and s.block_start >= len(trace.prompt_ids)
        _nonneg(s.wall_time), _nonneg(s.n_input)
        assert all(0 <= slot < k for slot in s.masked + s.renoised)
        for v in s.slots:
            assert v.slot in s.masked
            _nonneg(v.entropy), _candidates(v.top, top_n)
        for c in s.commits:
            assert 0 <= c.slot < k and 0 <= c.gap <= c.slot
            _id(c.token_id), _prob(c.prob), _nonneg(c.entropy)
        for c in s.checks:
            _id(c.token_id), _id(c.ntp_token_id), _prob(c.ntp_prob), _prob(c.draft_prob), _id(c.position)
        if s.rollback is not None:
            assert 0 <= s.rollback.slot < k and all(s.rollback.slot < x < k for x in s.rollback.dropped)
        for d in s.canvas:
            _id(d.token_id), _prob(d.prob), _nonneg(d.entropy), _candidates(d.top, top_n)
            assert d.accepted == (d.held_id is not None)
        for p in s.passes:
            _nonneg(p.wall_time), _nonneg(p.n_input)


def _use(trace: Trace) -> None:
    """What the views ask of a trace: none of it may raise on a trace the loader accepted."""
    sv.trace_summary(trace), trace.gap_fills(), trace.kept_gap_fills(), trace.token_calls(), trace.verdicts()
    trace.calls_per_block(), trace.tokens_per_call, trace.accepted_fraction
    for s in trace.steps:
        trace.block_state(s), trace.block_state(s, after=False), trace.text_before(s)
    assert sv.trace_from_json(trace.to_json()) == trace


# -- the mutations --------------------------------------------------------------------------------------
def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, path + (i,))


def _mutate(d: dict, rng: random.Random) -> dict:
    d = copy.deepcopy(d)
    path = rng.choice([p for p in _paths(d) if p])
    parent = d
    for key in path[:-1]:
        parent = parent[key]
    key, value = path[-1], parent[path[-1]]
    how = rng.random()
    if how < 0.1:
        del parent[key]
    elif how < 0.2 and isinstance(value, list) and value:
        parent[key] = value + [value[rng.randrange(len(value))]] if rng.random() < 0.5 else value[::-1]
    elif how < 0.45 and isinstance(value, (int, float)) and not isinstance(value, bool):
        parent[key] = rng.choice([value + 1, value - 1, -value, value * 1e6, value + 0.5, 2**63])
    else:
        parent[key] = copy.deepcopy(rng.choice(NASTY))
    return d


@pytest.mark.parametrize("source", ["sbd", "verified", "saved", "canvas", "ntp", "jacobi"])
def test_mutated_traces_load_legal_or_are_refused(saved, source):
    rng = random.Random(f"trace-fuzz-{source}")
    refused = loaded = 0
    for _ in range(MUTATIONS):
        text = json.dumps(_mutate(saved[source], rng))  # NaN and Infinity written as JSON's extensions
        try:
            trace = sv.trace_from_json(text)
        except TraceFormatError:
            refused += 1
            continue
        loaded += 1
        _assert_legal(trace)
        _use(trace)
    assert refused > MUTATIONS / 3 and loaded > 10, (refused, loaded)  # the mutations reach both outcomes


def test_loaded_mutants_still_draw(saved):
    """A sample of accepted mutants through the block-fill view."""
    from sbd_viz import plots

    rng, drawn = random.Random("trace-fuzz-draw"), 0
    for _ in range(MUTATIONS):  # bounded: a loader that refused every mutant would fail here, not hang
        try:
            trace = sv.trace_from_json(json.dumps(_mutate(saved["sbd"], rng)))
        except TraceFormatError:
            continue
        plots.block_fill(trace)
        drawn += 1
        if drawn == 15:
            break
    assert drawn == 15, f"only {drawn} of {MUTATIONS} mutants loaded"


# -- out-of-range values and broken cross-field facts a file can hold: refused on load, naming the field ----
def _set(*path_and_value):
    *path, value = path_and_value

    def mutate(d):
        node = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (_set("steps", 0, "commits", 0, "prob", 1e19), r"commits\[0\].prob must be in \[0, 1\]"),
    (_set("steps", 0, "commits", 0, "prob", -1.0), r"prob must be in \[0, 1\]"),
    (_set("steps", 0, "slots", 0, "top", 0, "prob", 1.5), r"top\[0\].prob must be in \[0, 1\]"),
    (_set("steps", 0, "commits", 0, "entropy", -0.5), r"entropy must be in \[0, inf\]"),
    (_set("steps", 0, "slots", 0, "entropy", -1e-9), r"slots\[0\].entropy"),
    (_set("steps", 0, "commits", 0, "token_id", -1), r"token_id must be >= 0"),
    (_set("output_ids", 0, -3), r"output_ids must be >= 0"),
    (_set("prompt_ids", 0, -3), r"prompt_ids must be >= 0"),
    (_set("steps", 0, "commits", 0, "gap", -1), r"gap must be >= 0"),
    (_set("steps", 0, "wall_time", -0.01), r"wall_time must be in \[0, inf\]"),
    (_set("steps", 0, "commits", -1, "slot", 2**63), r"not masked"),  # a slot of 2^63 in a block of 6
    (_set("steps", 0, "masked", 0, 2**63), r"outside the block"),
    (_set("steps", 0, "block_size", 2**63), r"more than any decoder writes"),
    (_set("config", "gamma", None), r"config.gamma must be a finite number"),
    (_set("config", "temperature", {}), r"config.temperature must be a finite number"),
    (_set("config", "decoder", -1), r"config.decoder must be a decoder's name"),
    (_set("config", "decoder", "-1"), r"config.decoder must be a decoder's name"),
    (_set("config", "gamma", 1.5), r"sv.decode refuses: gamma: for top_k"),  # top_k's k must be whole
    (_set("config", "rule", "fastest"), r"sv.decode refuses: rule: unknown rule"),
    (_set("config", "block_size", 65), r"sv.decode refuses: block_size"),
    (_set("config", "stop", {}), r"config.stop must be a list"),
    (_set("config", "verify", "false"), r"config.verify must be true or false"),
    (_set("config", "max_new_tokens", 3), r"more than max_new_tokens=3"),
    (_set("config", "block_size", 2), r"larger than block_size=2"),
    (_set("stop_reason", "tired"), r"stop_reason must be one of"),
    (_set("steps", 1, "block", 5), r"block must be"),
    (_set("steps", 0, "block_start", 0), r"past the prompt"),
])
def test_values_no_decode_writes_are_refused_by_name(saved, mutate, message):
    d = copy.deepcopy(saved["sbd"])
    mutate(d)
    with pytest.raises(TraceFormatError, match=message):
        sv.trace_from_dict(d)


def test_a_gap_must_count_the_masked_slots_to_its_left(saved):
    d = copy.deepcopy(saved["sbd"])
    step, i = next((s, i) for s in d["steps"] for i, c in enumerate(s["commits"]) if c["gap"] > 0)
    step["commits"][i]["gap"] -= 1
    with pytest.raises(TraceFormatError, match="must count the slots left of"):
        sv.trace_from_dict(d)
    step["commits"][i]["gap"] = step["commits"][i]["slot"] + 1
    with pytest.raises(TraceFormatError, match="at most its slot"):
        sv.trace_from_dict(d)


def test_verified_and_canvas_facts(saved):
    d = copy.deepcopy(saved["verified"])
    rb = next(s for s in d["steps"] if s.get("rollback"))
    rb["rollback"]["position"] += 1
    with pytest.raises(TraceFormatError, match="block's start plus its slot"):
        sv.trace_from_dict(d)
    d = copy.deepcopy(saved["verified"])
    next(s for s in d["steps"] if s.get("checks"))["checks"][0]["draft_prob"] = 2.0
    with pytest.raises(TraceFormatError, match=r"draft_prob must be in \[0, 1\]"):
        sv.trace_from_dict(d)
    d = copy.deepcopy(saved["canvas"])
    d["steps"][0]["canvas"][0]["held_id"] = 3  # slot 0 is open after step 0, so it holds nothing
    with pytest.raises(TraceFormatError, match="exactly when accepted"):
        sv.trace_from_dict(d)
    d = copy.deepcopy(saved["canvas"])
    d["steps"][0]["passes"][0]["wall_time"] = -1
    with pytest.raises(TraceFormatError, match=r"passes\[0\].wall_time"):
        sv.trace_from_dict(d)


def test_deep_nesting_is_refused_not_a_crash(saved):
    with pytest.raises(TraceFormatError, match="nested too deeply"):
        sv.trace_from_json("[" * 100_000 + "]" * 100_000)
    d, deep = copy.deepcopy(saved["sbd"]), []
    for _ in range(100_000):
        deep = [deep]
    d["meta"]["x"] = deep  # a dict built in Python, never through JSON
    with pytest.raises(TraceFormatError, match="nested too deeply"):
        sv.trace_from_dict(d)
