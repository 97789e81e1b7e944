"""Traces in words (sbd_viz.trace.words): the measures, one call's text and the CLI's summary, from hand-made and
saved traces; no model."""

import dataclasses
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz.trace.words import Measure, fed_text, measures, measures_text, step_text, trace_summary
from sbd_viz.trace.data import Trace

from conftest import hand_trace

VERIFIED = Path(__file__).parents[1] / "data" / "trace_verified.json"
TEXT = "abcdefghijkl\nm"


def ntp_of(text: str = TEXT) -> Trace:
    """The same text one token per call (9 calls for the hand trace's 14 tokens, 14 here)."""
    return hand_trace([(text, [{i} for i in range(len(text))])])


@pytest.mark.heavy
def test_measures_beside_ntp_compare_per_generated_token():
    sbd, ntp = hand_trace(), ntp_of()
    got = {m.label: m for m in measures(sbd, ntp)}
    assert list(got) == ["model calls", "tokens per call", "speedup · calls", "wall clock", "gap fills"]
    assert got["model calls"] == Measure("model calls", "9", "NTP: 14 for 14 tokens")
    assert got["tokens per call"] == Measure("tokens per call", f"{14 / 9:.2f}",
                                             "14 tokens, end token and prefill counted · ended at max new "
                                             "tokens")
    assert got["speedup · calls"].value == f"{14 / 9:.2f}×"
    # two decodes timed apart: their seconds, no ratio (a speedup in seconds needs side-by-side runs)
    assert got["wall clock"].value == "9 ms" and "NTP 14 ms, timed apart" in got["wall clock"].note
    assert got["gap fills"].value == str(len(sbd.kept_gap_fills())) == "4"
    # measured seconds (the app times the whole decode) replace the traces' own
    timed = {m.label: m for m in measures(sbd, ntp, seconds=0.1, ntp_seconds=0.4)}
    assert timed["wall clock"].value == "100 ms" and "NTP 400 ms" in timed["wall clock"].note


def test_measures_while_ntp_runs_and_without_ntp():
    sbd = hand_trace()
    pending = {m.label: m for m in measures(sbd, pending=True)}
    assert pending["model calls"].note == "NTP: running…"
    assert pending["speedup · calls"].value == "…" and "NTP: running" in pending["wall clock"].note
    alone = measures(sbd)
    assert [m.label for m in alone] == ["model calls", "tokens per call", "wall clock", "gap fills"]
    assert alone[0].note == "over 3 blocks" and alone[2].value == "9 ms"


def test_the_verified_measure_says_what_checking_cost_and_whether_the_text_is_ntps():
    trace = sv.load_trace(VERIFIED)
    checks = trace.checks()
    alone = {m.label: m for m in measures(trace)}["verified"]
    assert alone.value == "NTP's text" and alone.verdict == ""
    assert alone.note == (f"{len(trace.rollbacks())} rollbacks · {sum(c.accepted for c in checks)}/{len(checks)} "
                          f"drafts accepted by NTP ({trace.accepted_fraction:.0%}) · 1 checking-only call")
    same = {m.label: m for m in measures(trace, trace)}["verified"]
    assert (same.value, same.verdict) == ("= NTP ✓", "good")
    other = dataclasses.replace(trace, output_ids=trace.output_ids[:-1] + (trace.output_ids[-1] + 1,))
    differs = {m.label: m for m in measures(trace, other)}["verified"]
    assert (differs.value, differs.verdict) == ("≠ NTP ✗", "bad")
    assert "verified" not in {m.label for m in measures(hand_trace())}


def test_step_text_says_what_a_call_fed_and_committed_and_shows_its_block():
    trace = hand_trace()
    assert step_text(trace, trace.steps[1]).split("\n") == [
        "call 1 · block 0, step 1 · fed 0 tokens: 6 block slots (the prefix is in the KV cache)",
        "5 slots masked before the call; committed slot 0 ← 'a' (p 0.80, H 0.50), slot 3 ← 'd' (p 0.80, H 0.50, "
        "gap 2)",
        "before: go: <m><m><m><m><m>f",
        "after:  go: a<m><m>d<m>f"]
    newline = next(s for s in trace.steps if any(c.text == "\n" for c in s.commits))
    assert "'⏎'" in step_text(trace, newline)  # whitespace visible, as labels.visible shows it
    verified = sv.load_trace(VERIFIED)
    lines = step_text(verified, verified.steps[7]).split("\n")
    check = verified.steps[7].rejected[0]
    assert lines[2] == (f"rollback: the draft '{check.text}' in slot 3 was rejected, NTP wanted '{check.ntp_text}' "
                        f"(p {check.ntp_prob:.2f}); 2 drafts after it dropped")


def test_fed_text_of_verified_steps_counts_drafts_and_block():
    """A verified call feeds the last accepted token and the drafts causally, then the block from its first open
    slot (not ``n_input - k`` tokens causally): counted on the saved verified trace, without a model."""
    trace = sv.load_trace(VERIFIED)
    texts = {s.call: fed_text(trace, s) for s in trace.steps}
    assert texts[0] == f"the prompt's {trace.steps[0].n_input - 6} tokens causally + 6 masked slots " \
                       "(prefill fused with block 0)"
    for s in trace.steps[1:]:
        if s.check_only:
            assert f"{s.n_input - 1} draft(s) causally" in texts[s.call] and "no block" in texts[s.call]
        elif s.rollback is None:  # every draft fed was checked and accepted
            assert f"and {len(s.checks)} draft(s) causally" in texts[s.call]
            assert f"{len(s.checks)}/{len(s.checks)} accepted" in texts[s.call]
    # calls 4 and 7: the next block's first call found a rejected draft in this block's tail (1 and 3 drafts fed
    # after the last accepted token), beside that block's 6 and 3 masked slots
    assert "and 1 draft(s) causally, checked against NTP (0/1 accepted), + 6 masked slot(s)" in texts[4]
    assert "and 3 draft(s) causally, checked against NTP (0/1 accepted), + 3 masked slot(s)" in texts[7]


def test_the_cli_summary_uses_the_same_measures_and_rollback_words():
    trace = sv.load_trace(VERIFIED)
    text = trace_summary(trace)
    assert measures_text(measures(trace)) in text
    for s in trace.rollbacks():
        assert f"rollback: call {s.call}, block {s.block}: the draft '{s.rejected[0].text}' in slot" in text
    assert measures_text([Measure("a", "1", "x"), Measure("long label", "22")]) == "a           1   x\nlong label  22"
    assert "⏎" in trace_summary(hand_trace())  # the newline token, visible in the token row


def test_a_gap_fill_left_out_of_the_output_says_why():
    """A stop discards a gap fill; in verified decoding a check rejects it, or a rollback drops it with a rejected
    draft to its left: the summary says which, never "after the stop" for a draft NTP's check threw out."""
    lines = [ln for ln in trace_summary(sv.load_trace(VERIFIED)).splitlines() if "gap fill:" in ln]
    assert "rejected by NTP's check in call 4" in lines[1] and "dropped in call 1" in lines[0]
    assert not any("after the stop" in ln for ln in lines)
    cut = hand_trace(stop_at=13)  # block 2's gap fill at slot 3 lies past the stop
    assert [ln for ln in trace_summary(cut).splitlines() if "gap fill:" in ln][-1].endswith("(after the stop: discarded)")
