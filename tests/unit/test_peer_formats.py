"""Exports peers read and we import back: lmdeploy's step_map and d3LLM's per-step trajectories (JSON lines).

Export then import gives the same commits: on hand traces (an SBD trace with gaps, one cut by a stop), and on the
shipped character model's decodes by several decoders. An imported trace passes the trace checks (it is built by
``sv.trace_from_dict``) and every view draws it."""

import dataclasses
import json

import pytest

import sbd_viz as sv
from sbd_viz import plots
from sbd_viz.trace.peer_formats import same_commits
from sbd_viz.trace.data import Trace

from conftest import hand_trace

MASK = 99  # the mask id written into the hand traces' trajectories (the tests check no token of theirs has it)


def _json(record: dict) -> dict:
    return json.loads(json.dumps(record))  # what a file gives back


def _drawn(trace: Trace) -> None:
    """Every view a trace goes through draws the imported one."""
    assert len(plots.block_fill(trace).frames) == trace.nfe
    plots.calls_timeline(trace)
    plots.entropy_heatmap(trace, 0)
    assert sv.trace_summary(trace)
    sv.trace_from_json(trace.to_json())  # and it saves as a trace file that loads


# -- hand traces ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stop_at", [None, 13])
def test_step_map_round_trip_on_an_sbd_trace_with_gaps(stop_at):
    trace = hand_trace(stop_at=stop_at)
    record = _json(sv.to_step_map(trace))
    # lmdeploy's fields: a step number from 1 per generated token; the token that stopped the output left out
    shown = trace.n_tokens - bool(stop_at)
    numbers = [c + 1 for c in trace.token_calls()]  # every call of HAND commits a token: lmdeploy numbers them all
    assert record["token_ids"] == list(trace.output_ids[:shown]) and record["step_map"] == numbers[:shown]
    assert (record["input_token_len"], record["generate_token_len"]) == (len(trace.prompt_ids), shown)
    assert record["finish_reason"] == ("stop" if stop_at else "length")
    if stop_at:
        assert record["text"] == trace.text[:-1] and record["end_token"] == {
            "token_id": trace.output_ids[-1], "step": numbers[-1], "text": "\n", "prob": 0.8, "entropy": 0.5}
    else:
        assert record["text"] == trace.text and record["end_token"] is None
    back = sv.from_step_map(record)
    assert same_commits(trace, back, kept_only=True)
    assert [c for s in back.steps for c in s.commits] == [
        c for s in trace.steps for c in s.commits if trace.kept(s, c.slot)]  # token, text, prob, entropy, gap
    assert (back.text, back.output_ids, back.stop_reason, back.nfe) == (trace.text, trace.output_ids,
                                                                         trace.stop_reason, trace.nfe)
    assert len(back.kept_gap_fills()) == len(trace.kept_gap_fills()) == (3 if stop_at else 4)
    _drawn(back)


@pytest.mark.parametrize("stop_at", [None, 13])
def test_trajectory_round_trip_keeps_every_commit_even_past_the_stop(stop_at):
    trace = hand_trace(stop_at=stop_at)
    assert MASK not in trace.prompt_ids + trace.output_ids
    record = _json(sv.to_trajectory(trace, MASK))
    n0 = len(trace.prompt_ids)
    # d3LLM's fields: after each call the whole sequence, masks where not yet written (blocks not opened included)
    assert len(record["trajectory"]) == record["nfe"] == trace.nfe
    first, last = record["trajectory"][0], record["trajectory"][-1]
    assert first[:n0] == list(trace.prompt_ids) and len(first) == n0 + 14
    assert first[n0:] == [MASK] * 5 + [trace.steps[0].commits[0].token_id] + [MASK] * 8  # call 0: block 0's slot 5
    assert MASK not in last and record["final_output"] == list(trace.prompt_ids) + list(trace.output_ids)
    back = sv.from_trajectory(record)
    assert same_commits(trace, back)  # all commits, the one past the stop too
    assert back.steps == tuple(dataclasses.replace(s, slots=(), wall_time=0.0) for s in trace.steps)
    assert len(back.gap_fills()) == len(trace.gap_fills()) == 4
    _drawn(back)


LMDEPLOY = ("token_ids", "step_map", "text", "finish_reason", "input_token_len", "generate_token_len")


def test_our_step_map_without_our_fields_reads_as_lmdeploy_would():
    """Stripped to lmdeploy's fields, a record needs a tokenizer and a block size, and its blocks are lmdeploy's:
    aligned to the whole sequence. An SBD decode's blocks start at the first generated token, so after a prompt of 5
    they are not lmdeploy's blocks of 4 (refused, naming the step); after a prompt of 8 they are."""
    from sbd_viz.training.data import build_char_tokenizer

    trace = hand_trace([("abcd", [{3}, {0, 1}, {2}]), ("efgh", [{0, 2}, {1, 3}])])
    peer = {k: v for k, v in sv.to_step_map(trace).items() if k in LMDEPLOY}
    with pytest.raises(ValueError, match="tokenizer"):
        sv.from_step_map(peer)
    with pytest.raises(ValueError, match="block_size"):
        sv.from_step_map(peer, build_char_tokenizer())
    with pytest.raises(ValueError, match="step_map: step 5 commits tokens in more than one block of 4 after a prompt "
                                         "of 5 tokens"):  # blocks [0, 3), [3, 7), [7, 11): f and h are in two
        sv.from_step_map(peer, build_char_tokenizer(), block_size=4)
    whole = {**peer, "input_token_len": 8}
    back = sv.from_step_map(whole, build_char_tokenizer(), block_size=4)
    assert same_commits(trace, back, kept_only=True)
    assert back.meta["unmeasured"] == ["wall_time", "slot predictions", "prob", "entropy"]
    assert all(c.prob == 0.0 and c.entropy == 0.0 for s in back.steps for c in s.commits)
    _drawn(back)
    # a step whose tokens straddle two blocks of the given size is refused, naming the step (call 3: e and g)
    with pytest.raises(ValueError, match="step_map: step 4 commits tokens in more than one block of 2"):
        sv.from_step_map(whole, build_char_tokenizer(), block_size=2)


def test_a_peers_trajectory_with_d3llms_fields_only_imports_with_mask_id_tokenizer_and_block_size():
    from sbd_viz.training.data import build_char_tokenizer

    trace = hand_trace([("abcd", [{3}, {0, 1}, {2}]), ("efgh", [{0, 2}, {1, 3}])])
    d3llm = ("idx", "question", "prompt_ids", "trajectory", "final_output", "generated_text", "nfe")
    peer = {k: v for k, v in _json(sv.to_trajectory(trace, MASK)).items() if k in d3llm}
    tok = build_char_tokenizer()
    with pytest.raises(ValueError, match="mask_token_id"):
        sv.from_trajectory(peer, tok, block_size=4)
    with pytest.raises(ValueError, match="tokenizer"):
        sv.from_trajectory(peer, mask_token_id=MASK, block_size=4)
    with pytest.raises(ValueError, match="block_size"):
        sv.from_trajectory(peer, tok, mask_token_id=MASK)
    back = sv.from_trajectory(peer, tok, mask_token_id=MASK, block_size=4)
    assert same_commits(trace, back) and back.text == trace.text and back.prompt == trace.prompt
    # another mask id reads the masks as tokens: the first call then "commits" every position
    with pytest.raises(ValueError, match="changes after it was written"):
        sv.from_trajectory(peer, tok, mask_token_id=MASK + 1, block_size=4)


def test_jsonl_files_and_d3llms_json_list(tmp_path):
    traces = [hand_trace(), hand_trace(stop_at=13)]
    path = sv.save_trajectories(traces, tmp_path / "t.jsonl", MASK)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and [json.loads(line)["idx"] for line in lines] == [0, 1]
    assert all(same_commits(a, b) for a, b in zip(traces, sv.load_trajectories(path)))
    # d3LLM saves its records as one JSON list: that reads too
    listed = tmp_path / "d3llm.json"
    listed.write_text(json.dumps([json.loads(line) for line in lines]))
    assert all(same_commits(a, b) for a, b in zip(traces, sv.load_trajectories(listed)))
    maps = sv.save_step_maps(traces, tmp_path / "m.jsonl")
    assert all(same_commits(a, b, kept_only=True) for a, b in zip(traces, sv.load_step_maps(maps)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"token_ids": []}\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        sv.load_step_maps(bad)


def test_a_trajectory_that_rewrites_a_position_is_refused():
    record = _json(sv.to_trajectory(hand_trace(), MASK))
    n0 = len(record["prompt_ids"])
    record["trajectory"][1][n0 + 5] = 7  # call 0 wrote block 0's slot 5; call 1 now changes it
    with pytest.raises(ValueError, match=r"trajectory\[1\]: position 5 changes after it was written"):
        sv.from_trajectory(record)
    still = _json(sv.to_trajectory(hand_trace(), MASK))
    still["trajectory"][1] = still["trajectory"][0]
    with pytest.raises(ValueError, match=r"trajectory\[1\]: commits nothing"):
        sv.from_trajectory(still)


def test_an_import_that_breaks_a_trace_fact_fails_the_trace_checks():
    record = _json(sv.to_step_map(hand_trace()))
    record["config"] = {**record["config"], "max_new_tokens": 3}  # fewer than the 14 tokens it holds
    with pytest.raises(sv.TraceFormatError, match="max_new_tokens"):
        sv.from_step_map(record)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mask_token_id"):
        sv.to_trajectory(hand_trace(), "mask")
    with pytest.raises(ValueError, match="step_map"):
        sv.from_step_map({"token_ids": [1, 2], "step_map": [1]})
    with pytest.raises(ValueError, match="record"):
        sv.from_trajectory([])


# -- the shipped character model's decodes -------------------------------------------------------------------------
DECODES = [("sbd", {"gamma": 0.5}), ("sbd", {"gamma": 0.1, "gap_free": True}), ("ntp", {}), ("jacobi", {}),
           ("prompt_lookup", {})]


@pytest.fixture(scope="module")
def char_traces(shipped):
    prompt = "assert max([3, 9, 4]) == "
    return {f"{name} {kw}": sv.decode(shipped, prompt, decoder=name, max_new_tokens=24, **kw)
            for name, kw in DECODES}


@pytest.mark.heavy
def test_round_trips_on_the_character_models_decodes(char_traces, shipped):
    assert any(t.kept_gap_fills() for t in char_traces.values())  # SBD at γ 0.5 fills gaps on this prompt
    for label, trace in char_traces.items():
        back = sv.from_step_map(_json(sv.to_step_map(trace)))
        assert same_commits(trace, back, kept_only=True), label
        assert back.text == trace.text and back.output_texts == trace.output_texts, label
        assert repr(sv.decode_order(back)) == repr(sv.decode_order(trace)), label  # repr: NaN equals NaN
        _drawn(back)
        back = sv.from_trajectory(_json(sv.to_trajectory(trace, shipped.mask_id)))
        assert same_commits(trace, back), label
        assert repr(sv.decode_order(back)) == repr(sv.decode_order(trace)), label  # repr: NaN equals NaN


@pytest.mark.heavy
def test_a_verified_trace_exports_its_step_map_and_its_trajectory_is_refused_where_drafts_were_corrected(shipped):
    trace = sv.decode(shipped, "assert max([3, 9, 4]) == ", gamma=0.1, verify=True, max_new_tokens=24)
    assert trace.rollbacks()
    back = sv.from_step_map(_json(sv.to_step_map(trace)))
    assert same_commits(trace, back, kept_only=True) and back.text == trace.text
    with pytest.raises(ValueError, match="changes after it was written"):
        sv.from_trajectory(_json(sv.to_trajectory(trace, shipped.mask_id)))
