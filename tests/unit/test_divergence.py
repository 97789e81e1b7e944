"""Where an SBD decode first leaves NTP's text (``sbd_viz.analysis.divergence``) and the bench script that lists it."""

import dataclasses
import json
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.analysis.divergence import divergence_report, first_divergence, uncounted_slot

from conftest import HAND, bench_script, hand_trace, sharp_model

ROOT = Path(__file__).resolve().parents[2]
EB = {"decoder": "sbd", "rule": "entropy_bounded", "gamma": 0.1}


def _text(blocks) -> str:
    return "".join(text for text, _ in blocks)


def _reference(text: str, stop_at=None):
    """A trace whose output is ``text`` (one block, left to right): the NTP output to compare with."""
    return hand_trace([(text, [{i} for i in range(len(text))])], stop_at=stop_at)


def _with_entropies(trace, config, entropies):
    """``trace`` decoded under ``config``, its commits' entropies set by ``{(call, slot): nats}``."""
    steps = tuple(dataclasses.replace(s, commits=tuple(
        dataclasses.replace(c, entropy=entropies.get((s.call, c.slot), c.entropy)) for c in s.commits))
        for s in trace.steps)
    return dataclasses.replace(trace, steps=steps, config=config)


@pytest.mark.heavy
def test_equal_outputs_have_no_divergence():
    assert first_divergence(hand_trace(), _reference(_text(HAND))) is None


def test_the_first_divergence_is_in_call_order_not_in_position_order():
    # "abcdef": call 0 commits slot 5 (f), call 1 slots 0 and 3, call 2 slots 1, 2, 4. NTP differs at b and f:
    # the b is further left, but the f was committed first
    text = _text(HAND)
    ntp = _reference("aXcdeY" + text[6:])
    where = first_divergence(hand_trace(), ntp)
    assert (where["call"], where["block"], where["step"], where["slot"], where["position"]) == (0, 0, 0, 5, 5)
    assert (where["text"], where["ntp_text"], where["gap"], where["n_commits"]) == ("f", "Y", 5, 1)
    assert where["state"] == "go: <m><m><m><m><m>f"
    # NTP differs only at b: call 2's commit of slot 1
    where = first_divergence(hand_trace(), _reference("aXcdef" + text[6:]))
    assert (where["call"], where["slot"], where["ntp_text"]) == (2, 1, "X")


def test_the_leftmost_of_a_calls_departing_commits_is_reported():
    text = _text(HAND)
    where = first_divergence(hand_trace(), _reference("abXdXf" + text[6:]))  # call 2 commits slots 1, 2, 4
    assert (where["call"], where["slot"], where["text"], where["ntp_text"]) == (2, 2, "c", "X")  # c and e differ


def test_the_uncounted_slot_is_the_calls_highest_entropy_commit_under_the_entropy_bounded_rule():
    trace = _with_entropies(hand_trace(), EB, {(1, 0): 0.05, (1, 3): 0.7, (2, 1): 0.02, (2, 2): 0.3, (2, 4): 0.03})
    assert [uncounted_slot(trace, s) for s in trace.steps[:3]] == [5, 3, 2]
    text = _text(HAND)
    where = first_divergence(trace, _reference("abcXef" + text[6:]))  # d: call 1's uncounted slot, 0.7 nats
    assert (where["call"], where["slot"], where["uncounted"], where["outside_budget"]) == (1, 3, True, True)
    assert where["budget_spent"] == pytest.approx(0.05) and where["entropy"] == pytest.approx(0.7)
    where = first_divergence(trace, _reference("Xbcdef" + text[6:]))  # a: counted against gamma
    assert (where["slot"], where["uncounted"], where["outside_budget"]) == (0, False, False)
    # an uncounted commit within gamma on its own is not outside the budget
    calm = _with_entropies(trace, EB, {(1, 3): 0.08})
    where = first_divergence(calm, _reference("abcXef" + text[6:]))
    assert (where["uncounted"], where["outside_budget"]) == (True, False)


@pytest.mark.parametrize("config", [{"decoder": "sbd", "rule": "confidence_threshold", "gamma": 0.9},
                                    {**EB, "gap_free": True}, {**EB, "verify": True}, {"decoder": "ntp"}])
def test_the_budget_fields_are_none_where_eq_8_did_not_choose_the_commits(config):
    trace = _with_entropies(hand_trace(), config, {})
    assert all(uncounted_slot(trace, s) is None for s in trace.steps)
    where = first_divergence(trace, _reference("Xbcdef" + _text(HAND)[6:]))
    assert where["slot"] == 0 and where["uncounted"] is where["outside_budget"] is where["budget_spent"] is None


def test_commits_a_stop_discarded_do_not_count():
    # stop_at=13 ends the output at block 2's newline: its slot 3 ("m") is committed but cut
    # and NTP writes a Z there: the outputs part where SBD stopped, with no kept commit of SBD's to blame
    where = first_divergence(hand_trace(stop_at=13), _reference(_text(HAND)[:13] + "Z"))
    assert (where["position"], where["ntp_text"]) == (13, "Z")
    assert where["call"] is None and where["slot"] is None and where["uncounted"] is None
    # the same cut output against an NTP output it equals: no divergence
    assert first_divergence(hand_trace(stop_at=13), _reference(_text(HAND)[:13])) is None


@pytest.mark.heavy
def test_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="ntp_trace"):
        first_divergence(hand_trace(), "abc")
    with pytest.raises(TypeError, match="trace"):
        first_divergence(None, hand_trace())
    other = dataclasses.replace(_reference(_text(HAND)), prompt="other: ")
    with pytest.raises(ValueError, match="ntp_trace: must decode the same prompt"):
        first_divergence(hand_trace(), other)
    with pytest.raises(TypeError, match="step"):
        uncounted_slot(hand_trace(), 0)
    with pytest.raises(TypeError, match="model"):
        divergence_report("model", [])
    with pytest.raises(TypeError, match="suite: item 0"):
        divergence_report(sharp_model(), ["assert 1 + 1 == "])


@pytest.fixture(scope="module")
def items():
    return tasks.load_suite(per_family=2, families=("add", "sorted", "range", "ctx_upper"))


@pytest.mark.heavy
def test_the_report_lists_exactly_the_items_whose_outputs_differ_and_where_they_part(sharp, items):
    report = divergence_report(sharp, items, max_new_tokens=12, gamma=0.6)
    differ = 0
    for item in items:
        ntp = sv.decode_ntp(sharp, item.prompt, max_new_tokens=12, stop="\n")
        sbd = sv.decode(sharp, item.prompt, max_new_tokens=12, stop="\n", gamma=0.6)
        if ntp.output_ids == sbd.output_ids:
            assert item.prompt not in set(report.prompt)
            continue
        differ += 1
        row = report[report.prompt == item.prompt].iloc[0]
        # SBD's token at the position is the reported commit's, and not NTP's
        p, call, n_prompt = int(row.position), int(row.call), len(sbd.prompt_ids)
        assert sbd.output_ids[p] == row.token_id and ntp.output_ids[p:p + 1] != (row.token_id,)
        step = sbd.steps[call]
        assert step.block_start + int(row.slot) - n_prompt == p
        # every kept commit before it, in call order (and left of it in its call), is NTP's token
        for s in sbd.steps[:call + 1]:
            for c in s.commits:
                q = s.block_start + c.slot - n_prompt
                if sbd.kept(s, c.slot) and (s.call < call or c.slot < row.slot):
                    assert q < len(ntp.output_ids) and ntp.output_ids[q] == c.token_id
        # the uncounted flag is the call's highest-entropy commit, and the counted entropy the rest
        top = max(step.commits, key=lambda c: (c.entropy, c.slot))
        assert bool(row.uncounted) == (top.slot == row.slot)
        assert row.budget_spent == pytest.approx(sum(c.entropy for c in step.commits) - top.entropy)
        assert row.budget_spent <= 0.6 + 1e-5  # what eq. 8 allows a call
        assert (row.ntp_correct, row.sbd_correct) == (tasks.score(item, ntp.text), tasks.score(item, sbd.text))
    assert differ == len(report) > 0  # a near-random model at gamma 0.6 parts from its own NTP somewhere


@pytest.mark.heavy
def test_verified_sbd_never_leaves_ntps_text(sharp, items):
    assert divergence_report(sharp, items, max_new_tokens=12, gamma=0.6, verify=True).empty


@pytest.mark.heavy
def test_the_bench_script_reports_counts_and_the_lost_items(tmp_path, monkeypatch):
    bench = bench_script("bench_divergence")
    model = sharp_model()
    monkeypatch.setattr(bench.sv, "load_model", lambda path=None: model)
    out, js = tmp_path / "div.md", tmp_path / "div.json"
    args = ["--per-family", "1", "--families", "add", "range", "--gamma", "0.6", "--threads", "1"]
    bench.main(args + ["--out", str(out), "--json", str(js)])
    text = out.read_text()
    assert "| place | items |" in text and "| standalone | 2 |" in text and "| 0-128 | 2 |" in text
    assert "python bench/scripts/bench_divergence.py --per-family 1 --families add range --gamma 0.6" in text
    data = json.loads(js.read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert set(data["counts"]) == {"standalone", "0-128", "128-256", "256-447"}
    for name, counts in data["counts"].items():
        rows = data["items"][name]
        assert counts["differ"] == len(rows) and counts["items"] == 2
        lost = [r for r in rows if r["ntp_correct"] and not r["sbd_correct"]]
        assert counts["sbd_loses"] == len(lost) and counts["lost_at_uncounted"] <= len(lost)
    assert sum(c["differ"] for c in data["counts"].values()) > 0
    # rendered again from the JSON, decoding nothing: the same page
    again = tmp_path / "again.md"
    monkeypatch.setattr(bench.sv, "load_model", None)
    bench.main(["--from-json", str(js), "--out", str(again)])
    assert again.read_text() == text


def test_the_committed_report_agrees_with_the_model_card():
    """bench/results/divergence.json (which bench/DIVERGENCE.md renders): its counts are the card's bucket accuracies
    (two scripts, one decoder each way): NTP right minus SBD right is what SBD loses minus what it wins."""
    data = json.loads((ROOT / "bench" / "results" / "divergence.json").read_text())
    card = json.loads((ROOT / "sbd_viz" / "weights" / "sbd-char-5m" / "card_results.json").read_text())
    assert data["header"]["model"] == "sbd_viz/weights/sbd-char-5m", "the committed report is not of the shipped model"
    assert data["header"]["gamma"] == card["buckets"][0]["gamma"], "the committed report is not at the card's gamma"
    assert data["header"]["block_size"] == card["header"].get("block_size", 16), "not at the card's block size"
    for bucket in card["buckets"]:
        counts = data["counts"]["{}-{}".format(*bucket["bucket"])]
        n = bucket["n_items"]
        assert counts["items"] == n
        ntp_minus_sbd = round(bucket["ntp_accuracy"] * n) - round(bucket["sbd_accuracy"] * n)
        assert ntp_minus_sbd == counts["sbd_loses"] - counts["sbd_wins"]
