"""Measure SBD's gap fills: the events and their outcomes, and agreement with NTP.

``teacher_forced_ntp``, ``gap_fill_events`` / ``gap_fill_report`` and ``agreement_counts``; what a gap fill is and
what each of them answers: docs/measures.md.

pandas is imported inside the functions that return frames, so ``import sbd_viz`` stays light.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..models.base import CausalModel
from ..models.checks import check_model
from ..tasks.asserts import SuiteItem, score
from ..trace.checks import check_trace, check_traces
from ..trace.data import Trace
from ..trace.labels import first_difference

EVENT_COLUMNS = (
    "block",
    "step",
    "call",
    "slot",
    "gap",
    "position",
    "token_id",
    "text",
    "entropy",
    "prob",
    "state",
    "kept",
    "ntp_text",
    "ntp_agrees",
    "ntp_logprob",
    "correct",
    "suspicion",
)
REPORT_COLUMNS = ("trace", "prompt", "output") + EVENT_COLUMNS


# -- teacher-forced NTP ----------------------------------------------------------------
@torch.inference_mode()
def teacher_forced_ntp(model: CausalModel, trace: Trace, ntp_trace: Trace | None = None) -> dict:
    """What NTP greedy decoding would choose at each output position of ``trace``, given its final prefix.

    One plain causal forward over ``prompt + output``: the logits at position ``i - 1`` are
    the model's next-token distribution for output token ``i`` given everything the trace
    finally holds before it (teacher forcing). Returns a dict:

    - ``ntp_ids`` / ``ntp_texts``: the NTP greedy (argmax) token at each output position;
    - ``agrees``: whether the trace's token equals it; ``agreement``: their fraction (NaN
      for an empty output);
    - ``logprobs``: NTP log-probability of the trace's own token at each position;
    - ``first_divergence``: index of the first output token where the trace departs from
      NTP greedy decoding of the same prompt, ``None`` if it never does;
      ``divergence_source`` says how it was found. With ``ntp_trace`` (a ``decode_ntp`` run
      on the same prompt) it is the first index where the two outputs differ, or the
      shorter length when one output is a prefix of the other (``'ntp_trace'``). Without it,
      it is the first teacher-forced disagreement (``'teacher_forced'``): up to that index
      the prefixes are identical, so greedy decoding would have produced the same tokens
      there; it can only differ from a real run by ties/rounding, or where NTP would have
      stopped earlier (EOS, stop string) than the trace.
    """
    model, trace = check_model(model), check_trace(trace)
    prompt_ids, out_ids = list(trace.prompt_ids), list(trace.output_ids)
    if model.encode(trace.prompt) != prompt_ids:
        raise ValueError(
            "trace: its prompt_ids differ from model.encode(trace.prompt); it was decoded with "
            "another tokenizer, so this model cannot score it"
        )
    vocab = model.model.get_input_embeddings().weight.shape[0]
    if any(not 0 <= t < vocab for t in out_ids):
        raise ValueError(f"trace: output token ids outside this model's vocabulary (size {vocab})")
    result: dict[str, Any] = {"ntp_ids": [], "ntp_texts": [], "agrees": [], "logprobs": [], "agreement": float("nan")}
    if out_ids:
        ids = torch.tensor([prompt_ids + out_ids[:-1]], device=model.device)  # (1, n_prompt + n_out - 1)
        logits = model.model(input_ids=ids).logits[0, len(prompt_ids) - 1 :].float()  # (n_out, V)
        logp = torch.log_softmax(logits, -1)
        greedy = logp.argmax(-1).tolist()
        own = logp.gather(-1, torch.tensor(out_ids, device=logp.device)[:, None]).squeeze(-1).tolist()
        agrees = [g == t for g, t in zip(greedy, out_ids)]
        result.update(
            ntp_ids=greedy,
            ntp_texts=[model.token_text(g) for g in greedy],
            agrees=agrees,
            logprobs=own,
            agreement=sum(agrees) / len(agrees),
        )
    if ntp_trace is not None:
        ntp_trace = check_trace(ntp_trace, "ntp_trace")
        if ntp_trace.prompt != trace.prompt:
            raise ValueError("ntp_trace: must decode the same prompt as trace")
        result["first_divergence"] = first_difference(out_ids, list(ntp_trace.output_ids))
        result["divergence_source"] = "ntp_trace"
    else:
        result["first_divergence"] = next((i for i, a in enumerate(result["agrees"]) if not a), None)
        result["divergence_source"] = "teacher_forced"
    return result


@torch.inference_mode()
def agreement_counts(model: CausalModel, traces: list[Trace], batch_size: int = 1) -> list[tuple[int, int]]:
    """Per trace: (output tokens equal to NTP greedy given the final prefix, output tokens), as
    ``teacher_forced_ntp`` counts them; ``batch_size`` traces per forward, right-padded (a causal
    token never sees the padding after it)."""
    counts = [(0, 0)] * len(traces)
    todo = [i for i, t in enumerate(traces) if t.output_ids]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        seqs = [list(traces[i].prompt_ids) + list(traces[i].output_ids[:-1]) for i in chunk]
        width = max(map(len, seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        attention = torch.zeros(len(seqs), width, dtype=torch.long)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = torch.tensor(seq)
            attention[row, : len(seq)] = 1
        greedy = (
            model.model(input_ids=ids.to(model.device), attention_mask=attention.to(model.device))
            .logits.argmax(-1)
            .cpu()
        )  # (rows, width)
        for row, i in enumerate(chunk):
            out, n_prompt = traces[i].output_ids, len(traces[i].prompt_ids)
            predicted = greedy[row, n_prompt - 1 : n_prompt - 1 + len(out)].tolist()
            counts[i] = (sum(p == t for p, t in zip(predicted, out)), len(out))
    return counts


# -- gap-fill events ---------------------------------------------------------------------
def suspicion(
    gap: int,
    block_size: int,
    entropy: float,
    ntp_agrees: bool | None = None,
    ntp_logprob: float | None = None,
    correct: bool | None = None,
    kept: bool = True,
) -> float:
    """How likely a gap fill is a failure; higher = look here first. Range 0..6.

    ``gap / block_size`` (guessing further ahead of the known text)
    ``+ (1 - exp(-entropy))`` (the model was unsure when it committed)
    ``+ 2 * [NTP greedy disagrees]`` (the strongest single sign: causal decoding of the same
    weights, given the same final prefix, would have written something else)
    ``+ (1 - p_NTP(token))`` (how surprising the token is to causal decoding)
    ``+ [the item's answer is wrong]``.
    Unknown terms (no model, no item) count 0. A gap fill that the stop discarded (after the
    end of the output) cannot have hurt the answer: its suspicion is 0.
    """
    if not kept:
        return 0.0
    s = gap / max(1, block_size) + (1.0 - math.exp(-max(0.0, entropy)))
    if ntp_agrees is False:
        s += 2.0
    if ntp_logprob is not None and math.isfinite(ntp_logprob):
        s += 1.0 - math.exp(ntp_logprob)
    if correct is False:
        s += 1.0
    return s


def gap_fill_outcomes(trace: Trace, tf: dict | None, correct: bool | None) -> list[dict]:
    """The gap-fill events of ``trace``, with NTP outcomes from a ``teacher_forced_ntp`` result, or, for a verified
    trace, from its own checks (``tf`` is then unused)."""
    events = []
    n_prompt = len(trace.prompt_ids)
    verdicts = trace.verdicts() if trace.verified else None
    for g in trace.gap_fills():
        step = trace.steps[g.call]
        position = step.block_start + g.slot - n_prompt  # index into the output tokens
        agrees = logprob = ntp_text = None
        checked = False
        if verdicts is not None:
            # The verifier's verdict is teacher-forced NTP given the final prefix: the text before a checked draft
            # is accepted text, which is the output's. A rejected draft is not in the output, yet it is exactly
            # the gap fill that cost a rollback, so it keeps its verdict and its suspicion.
            hit = verdicts.get((g.call, step.block_start + g.slot))
            if hit is not None:
                check, checked = hit[1], True
                agrees, ntp_text = check.accepted, check.ntp_text
                logprob = math.log(check.draft_prob) if check.draft_prob > 0 else -math.inf
        elif tf is not None and g.kept:
            agrees, logprob, ntp_text = tf["agrees"][position], tf["logprobs"][position], tf["ntp_texts"][position]
        events.append(
            {
                "block": g.block,
                "step": g.step,
                "call": g.call,
                "slot": g.slot,
                "gap": g.gap,
                "position": position,
                "token_id": g.token_id,
                "text": g.text,
                "entropy": g.entropy,
                "prob": g.prob,
                "state": g.state,
                "kept": g.kept,
                "ntp_text": ntp_text,
                "ntp_agrees": agrees,
                "ntp_logprob": logprob,
                "correct": correct if g.kept else None,
                "suspicion": suspicion(
                    g.gap, step.block_size, g.entropy, agrees, logprob, correct if g.kept else None, g.kept or checked
                ),
            }
        )
    return events


def item_correct(trace: Trace, item) -> bool | None:
    if item is None:
        return None
    if not isinstance(item, SuiteItem):
        raise TypeError(f"item: expected a tasks.SuiteItem or None, got {type(item).__name__}")
    # the item may end a document, after earlier lines (as tasks.item_in_prompt finds it): its answer is the same
    if item.prompt != trace.prompt and not trace.prompt.endswith("\n" + item.prompt):
        raise ValueError(f"item: its prompt {item.prompt!r} neither is nor ends the trace's prompt {trace.prompt!r}")
    return score(item, trace.text)


def gap_fill_events(model: CausalModel | None, trace: Trace, item: SuiteItem | None = None) -> list[dict]:
    """Every gap-fill commit of ``trace`` (``trace.gap_fills()``, in call order), with its outcome.

    Each event is a dict: ``block``, ``step``, ``call``, ``slot``, ``gap``, ``position`` (index
    into the output tokens), ``token_id``, ``text``, ``entropy`` and ``prob`` at commit, the
    block ``state`` after the step (``'... == 8<m>'``), ``kept`` (``GapFill.kept``: False if a stop
    later cut the output before this slot, so the commit was discarded), and once the block is final:
    ``ntp_text`` / ``ntp_agrees`` / ``ntp_logprob`` (NTP greedy at that position given the
    final prefix, teacher forced; ``None`` without a model), ``correct`` (whether the item's
    answer was right; ``None`` without an item) and ``suspicion`` (see ``suspicion``).

    A verified trace (``trace.verified``) needs no model: the NTP outcomes are its own checks (``Check``:
    NTP's token, and the draft's probability under NTP as ``ntp_logprob``), the same teacher-forced
    verdicts the decode computed for free; ``model`` is then not used. Every checked draft gets its verdict,
    a rejected one too (``kept`` False: NTP's token replaced it), and is scored as if kept, so the
    drafts that cost a rollback rank first; a draft a rollback dropped before it was checked has none.
    """
    trace = check_trace(trace)
    correct = item_correct(trace, item)
    has_gaps = any(c.gap for s in trace.steps for c in s.commits)
    # a verified trace carries NTP's verdicts already (free from its fused calls): no second forward
    tf = teacher_forced_ntp(model, trace) if model is not None and has_gaps and not trace.verified else None
    return gap_fill_outcomes(trace, tf, correct)


def gap_fill_report(
    traces: Trace | Iterable[Trace], model: CausalModel | None = None, items: Sequence[SuiteItem | None] | None = None
):
    """A tidy ``pandas.DataFrame``: one row per gap-fill event of ``traces``, most suspicious first.

    Columns: ``trace`` (index into ``traces``), ``prompt``, ``output`` and the event fields of
    ``gap_fill_events``. ``items`` (suite items, same order and length as ``traces``; ``None``
    entries allowed) adds whether each answer was right.
    """
    return events_report(gap_fill_events, traces, model, items, REPORT_COLUMNS)


def events_report(events, traces, model, items, columns):
    """The reports' one table: ``events(model, trace, item)``'s events of every trace, with the trace's index,
    prompt and output, in ``columns``, most suspicious first (a stable sort: ties keep trace and call order)."""
    import pandas as pd

    traces, items = check_traces(traces, items)
    rows = []
    for i, trace in enumerate(traces):
        for event in events(model, trace, items[i] if items is not None else None):
            rows.append({"trace": i, "prompt": trace.prompt, "output": trace.text, **event})
    df = pd.DataFrame(rows, columns=list(columns))
    return df.sort_values("suspicion", ascending=False, kind="stable").reset_index(drop=True)
