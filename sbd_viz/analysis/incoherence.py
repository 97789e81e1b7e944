"""Incoherent commits within a call: tokens one call committed side by side that repeat or contradict each other.

``incoherence_events`` / ``incoherence_report`` find them (kinds ``repeat``, ``doubled_delimiter``, ``ngram``);
``failure_report`` lists them with the gap fills, on one ``suspicion`` scale. The kinds and NTP's verdict on them:
docs/measures.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..models.base import CausalModel
from ..tasks.asserts import SuiteItem
from ..trace.checks import check_trace, check_traces
from ..trace.data import Step, Trace
from ..trace.labels import render_state
from .gaps import (
    EVENT_COLUMNS,
    REPORT_COLUMNS,
    events_report,
    gap_fill_outcomes,
    item_correct,
    suspicion,
    teacher_forced_ntp,
)

KINDS = ("repeat", "doubled_delimiter", "ngram")
DELIMITERS = ",;)]}\"'"  # separators, closing brackets and quotes: doubled, they break the answer's syntax
EXTRA_COLUMNS = ("left_text", "run_text")  # the same-call neighbour's token; the call's run of slots up to this one
INCOHERENCE_COLUMNS = ("kind",) + EVENT_COLUMNS + EXTRA_COLUMNS
INCOHERENCE_REPORT_COLUMNS = ("kind",) + REPORT_COLUMNS + EXTRA_COLUMNS
FAILURE_COLUMNS = INCOHERENCE_REPORT_COLUMNS  # gap fills leave the two extra columns empty


def _pairs(step: Step):
    """Each commit of ``step`` whose left neighbour slot was committed in the same call: ``(commit, the run of
    commits of this call that ends with it, at least two)``."""
    at = {c.slot: c for c in step.commits}
    for c in step.commits:
        if c.slot - 1 not in at:
            continue
        start = c.slot - 1
        while start - 1 in at:
            start -= 1
        yield c, [at[s] for s in range(start, c.slot + 1)]


def _structural_kind(run) -> str | None:
    """``doubled_delimiter`` or ``repeat`` for the last commit of ``run``, from the tokens alone; else None."""
    *before, commit = run
    left, right = "".join(c.text for c in before).rstrip(), commit.text.lstrip()
    if left and right and right[0] in DELIMITERS and left[-1] == right[0]:
        return "doubled_delimiter"
    if commit.token_id == before[-1].token_id:
        return "repeat"
    return None


def _events(trace: Trace, tf: dict | None, correct: bool | None) -> list[dict]:
    """The incoherent commits of ``trace`` with NTP's verdicts from a ``teacher_forced_ntp`` result ``tf``, or,
    for a verified trace, from its own checks (as ``analysis.gap_fill_events`` judges gap fills)."""
    events = []
    n_prompt = len(trace.prompt_ids)
    verdicts = trace.verdicts() if trace.verified else None
    for step in trace.steps:
        for commit, run in _pairs(step):
            position = step.block_start + commit.slot - n_prompt
            kept = trace.kept(step, commit.slot)
            agrees = logprob = ntp_text = None
            checked = False
            if verdicts is not None:
                hit = verdicts.get((step.call, step.block_start + commit.slot))
                if commit.ntp:  # written from NTP's own causal prediction: NTP agrees by construction
                    agrees, ntp_text, logprob = True, commit.text, math.log(commit.prob) if commit.prob > 0 else None
                elif hit is not None:
                    check, checked = hit[1], True
                    agrees, ntp_text = check.accepted, check.ntp_text
                    logprob = math.log(check.draft_prob) if check.draft_prob > 0 else -math.inf
            elif tf is not None and kept:
                agrees, logprob, ntp_text = tf["agrees"][position], tf["logprobs"][position], tf["ntp_texts"][position]
            kind = _structural_kind(run) or ("ngram" if agrees is False else None)
            if kind is None:
                continue
            item_correct = correct if kept else None
            events.append(
                {
                    "kind": kind,
                    "block": step.block,
                    "step": step.step,
                    "call": step.call,
                    "slot": commit.slot,
                    "gap": commit.gap,
                    "position": position,
                    "token_id": commit.token_id,
                    "text": commit.text,
                    "entropy": commit.entropy,
                    "prob": commit.prob,
                    "state": render_state(trace.block_state(step)[: commit.slot + 1], trace.text_before(step)),
                    "kept": kept,
                    "ntp_text": ntp_text,
                    "ntp_agrees": agrees,
                    "ntp_logprob": logprob,
                    "correct": item_correct,
                    "suspicion": suspicion(
                        commit.gap, step.block_size, commit.entropy, agrees, logprob, item_correct, kept or checked
                    ),
                    "left_text": run[-2].text,
                    "run_text": "".join(c.text for c in run),
                }
            )
    return events


def incoherence_events(model: CausalModel | None, trace: Trace, item: SuiteItem | None = None) -> list[dict]:
    """Every incoherent commit of ``trace`` (see the module's kinds), in call order, with its outcome.

    Each event is a dict of ``INCOHERENCE_COLUMNS``: ``kind``, then the fields a gap-fill event has (``block``,
    ``step``, ``call``, ``slot``, ``gap``, ``position``, ``token_id``, ``text``, ``entropy``, ``prob``, ``state``,
    ``kept``, ``ntp_text``, ``ntp_agrees``, ``ntp_logprob``, ``correct``, ``suspicion``; see
    ``analysis.gap_fill_events``), and ``left_text`` (the neighbour committed in the same call) and ``run_text``
    (the call's adjacent commits up to this one). Without a model (and for an unverified trace) the NTP fields are
    None and no ``ngram`` event can be found; a verified trace judges with its own checks and needs no model.
    """
    trace = check_trace(trace)
    correct = item_correct(trace, item)
    has_pairs = any(True for step in trace.steps for _ in _pairs(step))
    tf = teacher_forced_ntp(model, trace) if model is not None and has_pairs and not trace.verified else None
    return _events(trace, tf, correct)


def incoherence_report(
    traces: Trace | Iterable[Trace], model: CausalModel | None = None, items: Sequence[SuiteItem | None] | None = None
):
    """A tidy ``pandas.DataFrame``: one row per incoherent commit of ``traces``, most suspicious first.

    Columns (``INCOHERENCE_REPORT_COLUMNS``): ``kind``, ``trace`` (index into ``traces``), ``prompt``, ``output``,
    then ``incoherence_events``' fields. ``items`` (suite items, one per trace, ``None`` allowed) adds whether each
    answer was right, as in ``analysis.gap_fill_report``.
    """
    return events_report(incoherence_events, traces, model, items, INCOHERENCE_REPORT_COLUMNS)


def failure_report(
    traces: Trace | Iterable[Trace], model: CausalModel | None = None, items: Sequence[SuiteItem | None] | None = None
):
    """Gap fills and incoherent commits of ``traces`` in one ``pandas.DataFrame``, most suspicious first.

    ``analysis.gap_fill_report``'s rows with ``kind`` ``"gap_fill"`` and ``incoherence_report``'s rows (``kind``
    ``"repeat"``, ``"doubled_delimiter"`` or ``"ngram"``), ranked together by the one ``suspicion`` score (ties keep
    gap fills first, then trace and call order). Columns: ``FAILURE_COLUMNS`` (``left_text`` and ``run_text`` are
    empty for gap fills).
    """
    import pandas as pd

    traces, items = check_traces(traces, items)
    gaps: list[dict] = []
    incoherent: list[dict] = []
    for i, trace in enumerate(traces):
        for event in failure_events(model, trace, items[i] if items is not None else None):
            row = {"trace": i, "prompt": trace.prompt, "output": trace.text, **event}
            (gaps if event["kind"] == "gap_fill" else incoherent).append(row)
    df = pd.DataFrame(gaps + incoherent, columns=list(FAILURE_COLUMNS))
    return df.sort_values("suspicion", ascending=False, kind="stable").reset_index(drop=True)


def failure_events(model: CausalModel | None, trace: Trace, item: SuiteItem | None = None) -> list[dict]:
    """The gap fills (``kind`` ``"gap_fill"``, the events of ``analysis.gap_fill_events``) and the incoherent
    commits of one trace, judged with one teacher-forced NTP forward between them, in call and slot order (a gap
    fill before an incoherent commit of the same slot)."""
    trace = check_trace(trace)
    correct = item_correct(trace, item)
    judged = any(c.gap for s in trace.steps for c in s.commits) or any(True for s in trace.steps for _ in _pairs(s))
    tf = teacher_forced_ntp(model, trace) if model is not None and judged and not trace.verified else None
    events = [{**e, "kind": "gap_fill"} for e in gap_fill_outcomes(trace, tf, correct)] + _events(trace, tf, correct)
    return sorted(events, key=lambda e: (e["call"], e["slot"], e["kind"] != "gap_fill"))
