"""Incoherent commits within a call (repeats, doubled delimiters, n-grams NTP would not write) and the joint
failure report with gap fills."""

import json

import pandas as pd
import pytest

import sbd_viz as sv
from sbd_viz.analysis import gap_fill_report, teacher_forced_ntp
from sbd_viz.analysis.incoherence import FAILURE_COLUMNS, INCOHERENCE_REPORT_COLUMNS, incoherence_events, \
    incoherence_report, failure_report

from conftest import HAND_PROMPT, bench_script, hand_trace

# block 0: call 1 commits "tt" side by side (a repeat), call 2 "]]" (a doubled delimiter, not also a repeat);
# block 1: call 3 commits ", ," (a doubled delimiter across a space); block 2: "aa" over two calls (no event: the
# second call saw the first one's token); block 3: "qq" right to left over two calls (a gap fill, no event).
BLOCKS = [("att]]", [{0}, {1, 2}, {3, 4}]),
          (", ,x", [{0, 1, 2}, {3}]),
          ("aab", [{0}, {1, 2}]),
          ("qq", [{1}, {0}])]


@pytest.mark.heavy
def test_repeats_and_doubled_delimiters_are_found_within_one_call():
    events = incoherence_events(None, hand_trace(BLOCKS))
    found = [(e["kind"], e["call"], e["block"], e["slot"], e["text"], e["left_text"], e["run_text"]) for e in events]
    assert found == [
        ("repeat", 1, 0, 2, "t", "t", "tt"),
        ("doubled_delimiter", 2, 0, 4, "]", "]", "]]"),
        ("doubled_delimiter", 3, 1, 2, ",", " ", ", ,")]
    assert [e["position"] for e in events] == [2, 4, 7]
    assert [e["state"] for e in events] == ["go: att", "go: att]]", "go: att]], ,"]
    # without a model nothing is judged, and no n-gram can be found
    assert all(e["ntp_agrees"] is None and e["ntp_text"] is None and e["correct"] is None for e in events)
    assert all(e["suspicion"] > 0 and e["kept"] for e in events)


def test_commits_after_the_stop_are_listed_but_not_suspected():
    events = incoherence_events(None, hand_trace(BLOCKS, stop_at=6))  # the output ends inside block 1
    assert [e["kept"] for e in events] == [True, True, False]
    assert events[-1]["suspicion"] == 0 and events[-1]["correct"] is None


@pytest.mark.heavy
def test_events_rank_like_gap_fills(sharp):
    """The suspicion of an event is analysis.suspicion of its commit, with NTP's verdict, as for a gap fill."""
    trace = hand_trace(BLOCKS)
    for e in incoherence_events(sharp, trace):
        step = trace.steps[e["call"]]
        assert e["suspicion"] == pytest.approx(sv.analysis.suspicion(
            e["gap"], step.block_size, e["entropy"], e["ntp_agrees"], e["ntp_logprob"], e["correct"], e["kept"]))


def test_ntp_verdicts_are_teacher_forced_and_ngrams_are_every_other_disagreement(sharp):
    """Every commit whose left neighbour came in the same call is an event exactly when it is a repeat, a doubled
    delimiter, or NTP (teacher forced, given the final text before it) would write something else there."""
    blocks = [("abcd", [{0, 1, 2, 3}]), ("e]]f", [{0, 1, 2}, {3}]), ("ggh", [{0, 1}, {2}])]
    trace = hand_trace(blocks)
    tf = teacher_forced_ntp(sharp, trace)
    events = {(e["call"], e["slot"]): e for e in incoherence_events(sharp, trace)}
    n_prompt = len(trace.prompt_ids)
    expected = {}
    for step in trace.steps:
        slots = {c.slot: c for c in step.commits}
        for c in step.commits:
            if c.slot - 1 not in slots:
                continue
            position = step.block_start + c.slot - n_prompt
            left = slots[c.slot - 1]
            if c.text == "]" and left.text == "]":
                expected[(step.call, c.slot)] = "doubled_delimiter"
            elif c.token_id == left.token_id:
                expected[(step.call, c.slot)] = "repeat"
            elif not tf["agrees"][position]:
                expected[(step.call, c.slot)] = "ngram"
    assert {k: e["kind"] for k, e in events.items()} == expected
    assert "ngram" in expected.values()  # a random model disagrees with "abcd"
    for (call, slot), e in events.items():
        position = trace.steps[call].block_start + slot - n_prompt
        assert e["ntp_agrees"] == tf["agrees"][position] and e["ntp_text"] == tf["ntp_texts"][position]
        assert e["ntp_logprob"] == pytest.approx(tf["logprobs"][position])
        if e["kind"] == "ngram":
            assert e["ntp_agrees"] is False and e["suspicion"] >= 2  # NTP disagreeing weighs 2


@pytest.mark.heavy
def test_a_verified_trace_is_judged_by_its_own_checks(sharp):
    trace = sv.decode(sharp, "assert 12 + 7 == ", gamma=3.0, max_new_tokens=16, verify=True)
    events = incoherence_events(None, trace)  # no model needed
    verdicts = trace.verdicts()
    judged = [e for e in events if e["ntp_agrees"] is not None]
    assert judged and any(e["kind"] == "ngram" for e in events)
    for e in events:
        step = trace.steps[e["call"]]
        commit = next(c for c in step.commits if c.slot == e["slot"])
        hit = verdicts.get((e["call"], step.block_start + e["slot"]))
        if commit.ntp:
            assert e["ntp_agrees"] is True
        elif hit is not None:
            assert e["ntp_agrees"] == hit[1].accepted
        else:
            assert e["ntp_agrees"] is None and e["kind"] != "ngram"
        if e["kind"] == "ngram":
            assert e["ntp_agrees"] is False


def test_report_sorts_by_suspicion_and_names_every_trace(sharp):
    traces = [hand_trace(BLOCKS), hand_trace([("abcd", [{0, 1, 2, 3}])])]
    df = incoherence_report(traces, model=sharp)
    assert list(df.columns) == list(INCOHERENCE_REPORT_COLUMNS)
    assert list(df["suspicion"]) == sorted(df["suspicion"], reverse=True)
    assert set(df["trace"]) == {0, 1} and set(df["kind"]) <= {"repeat", "doubled_delimiter", "ngram"}
    assert (df["prompt"] == HAND_PROMPT).all()
    assert incoherence_report(hand_trace([("ab", [{0}, {1}])])).empty  # one commit a call: nothing to contradict


def test_items_add_whether_the_answer_was_right():
    trace = hand_trace(BLOCKS)
    right = sv.tasks.SuiteItem(prompt=HAND_PROMPT, answer=trace.text, family="add")
    wrong = sv.tasks.SuiteItem(prompt=HAND_PROMPT, answer="nope", family="add")
    assert incoherence_report([trace], items=[right])["correct"].tolist() == [True] * 3
    scored = incoherence_report([trace], items=[wrong])
    assert scored["correct"].tolist() == [False] * 3
    plain = incoherence_report([trace])
    assert (scored["suspicion"].to_numpy() == pytest.approx(plain["suspicion"].to_numpy() + 1))


def test_failure_report_joins_gap_fills_and_incoherent_commits(sharp):
    traces = [hand_trace(BLOCKS), hand_trace(stop_at=13)]
    df = failure_report(traces, model=sharp)
    assert list(df.columns) == list(FAILURE_COLUMNS)
    gaps, incoherent = gap_fill_report(traces, model=sharp), incoherence_report(traces, model=sharp)
    assert (df["kind"] == "gap_fill").sum() == len(gaps) > 0
    assert (df["kind"] != "gap_fill").sum() == len(incoherent) > 0
    assert list(df["suspicion"]) == sorted(df["suspicion"], reverse=True)
    # the gap-fill rows are gap_fill_report's own rows, labelled
    cols = ["trace", "call", "slot", "suspicion", "ntp_agrees"]
    mine = df[df["kind"] == "gap_fill"][cols].sort_values(["trace", "call", "slot"]).reset_index(drop=True)
    theirs = gaps[cols].sort_values(["trace", "call", "slot"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
    assert df[df["kind"] == "gap_fill"]["left_text"].isna().all()
    # block 3's "qq" is a gap fill (slot 1 before slot 0) but not incoherent: over two calls
    qq = df[(df["trace"] == 0) & (df["block"] == 3)]
    assert list(qq["kind"]) == ["gap_fill"]


def test_failure_report_of_clean_traces_is_empty_with_its_columns():
    df = failure_report([hand_trace([("ab", [{0}, {1}])])])
    assert df.empty and list(df.columns) == list(FAILURE_COLUMNS)


@pytest.mark.parametrize("call, error, match", [
    (lambda: incoherence_report(["not a trace"]), TypeError, r"traces\[0\]:"),
    (lambda: failure_report([hand_trace()], items=[]), ValueError, "items: got 0 items for 1 traces"),
    (lambda: incoherence_events(None, "x"), TypeError, "trace:"),
    (lambda: incoherence_events("model", hand_trace(BLOCKS)), TypeError, "model:"),
])
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_exported_from_the_package():
    assert sv.incoherence_report is incoherence_report and sv.failure_report is failure_report


@pytest.mark.slow
def test_bench_page_states_its_command_and_renders_again_from_its_json(tmp_path):
    script = bench_script("bench_incoherent")
    out, data = tmp_path / "INCOHERENT.md", tmp_path / "incoherent.json"
    script.main(["--per-family", "1", "--gammas", "2", "--out", str(out), "--json", str(data)])
    page = out.read_text()
    assert "`python bench/scripts/bench_incoherent.py --per-family 1 --gammas 2" in page and "load average" in page
    saved = json.loads(data.read_text())
    (row,) = saved["results"]
    assert row["items"] == 14 and row["gamma"] == 2.0
    assert all(row[k]["events"] == row[k]["ntp_agrees"] + row[k]["ntp_disagrees"] for k in ("repeat", "ngram"))
    assert row["ngram"]["ntp_agrees"] == 0  # an n-gram event is an NTP disagreement by definition
    assert len(saved["examples"]) == sum(row[k]["ntp_disagrees"] for k in ("repeat", "doubled_delimiter", "ngram"))
    again = tmp_path / "again.md"
    script.main(["--from-json", str(data), "--out", str(again)])
    assert again.read_text() == page
