"""Where an SBD decode first leaves NTP's text, and whether the rule's budget covered that commit.

The entropy-bounded rule (the paper's eq. 8) commits a call's lowest-entropy slots while the entropies of all but
the last of them sum to at most gamma. So every call commits one slot whose own entropy is outside the budget: the
*uncounted* slot, the call's highest-entropy commit. When SBD gets an item wrong that NTP gets right, the question
this module answers is which commit went wrong first, and whether it was one the budget allowed (the model was
sure, and wrong) or the uncounted one (the rule committed it however unsure the model was):

- ``uncounted_slot``: a call's uncounted slot, for a trace decoded by the entropy-bounded rule;
- ``first_divergence``: the first commit, in call order, that put a token other than NTP's into the output;
- ``divergence_report``: one row per suite item whose SBD text differs from NTP's, scored, with its first
  divergence (``bench/scripts/bench_divergence.py`` runs it on the card's suite, in documents).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..decoders.door import decode
from ..decoders.ntp import decode_ntp
from ..decoders.sbd import SBD
from ..models.base import CausalModel
from ..models.checks import check_model
from ..tasks.asserts import SuiteItem, score
from ..trace.checks import check_trace
from ..trace.data import Step, Trace
from ..trace.labels import render_state

DIVERGENCE_FIELDS = (
    "call",
    "block",
    "step",
    "slot",
    "gap",
    "position",
    "token_id",
    "text",
    "ntp_text",
    "entropy",
    "prob",
    "n_commits",
    "budget_spent",
    "uncounted",
    "outside_budget",
    "state",
)
# The first divergence as the columns of a ladder's row or a map's piece: column -> ``first_divergence``'s field
DIVERGENCE_COLUMNS = {
    "divergence_call": "call",
    "divergence_block": "block",
    "divergence_slot": "slot",
    "divergence_token": "text",
    "divergence_ntp_token": "ntp_text",
}
REPORT_COLUMNS = (
    "family",
    "prompt",
    "answer",
    "ntp_output",
    "sbd_output",
    "ntp_correct",
    "sbd_correct",
    "tokens_per_call",
) + DIVERGENCE_FIELDS


def _budgeted(trace: Trace) -> bool:
    """Whether eq. 8 chose the trace's commits as they stand: the entropy-bounded rule, neither gap-free (which
    drops chosen slots right of a mask) nor verified (whose NTP corrections are not the rule's choices)."""
    c = trace.config
    return (
        c.get("decoder") == SBD.name
        and c.get("rule") == "entropy_bounded"
        and not c.get("gap_free")
        and not c.get("verify")
    )


def uncounted_slot(trace: Trace, step: Step) -> int | None:
    """The slot of ``step``'s commit whose entropy eq. 8 leaves out of the budget: the last in the rule's order
    (ascending entropy, ties by slot), so the call's highest-entropy commit. ``None`` where the rule is not the
    entropy-bounded one as the paper states it (another rule, gap-free, verified), or the call committed nothing."""
    trace = check_trace(trace)
    if not isinstance(step, Step):
        raise TypeError(f"step: expected an sbd_viz.Step, got {type(step).__name__}")
    if not _budgeted(trace) or not step.commits:
        return None
    return max(step.commits, key=lambda c: (c.entropy, c.slot)).slot


def first_divergence(trace: Trace, ntp_trace: Trace) -> dict | None:
    """The first commit of ``trace``, in call order, that put into the output a token other than ``ntp_trace``'s
    at its position (``ntp_trace``: usually ``decode_ntp`` on the same prompt). ``None`` if the outputs are equal.

    A dict: the commit (``call``, ``block``, ``step``, ``slot``, ``gap``, ``position`` in the output, ``token_id``,
    ``text``, ``entropy``, ``prob``), ``ntp_text`` (NTP's token there, ``None`` past NTP's end), the call's
    ``n_commits``, and for the entropy-bounded rule ``budget_spent`` (the entropies the call counted against
    gamma), ``uncounted`` (this commit was the call's uncounted slot) and ``outside_budget`` (uncounted, and its
    entropy alone exceeds gamma: a commit the budget would not have allowed); those three are ``None`` for other
    rules. ``state`` is the block after the call (``'== [1, <m><m>9'``). When several of one call's commits
    depart, the leftmost is reported. If ``trace`` stops early with every kept commit equal to NTP's (a shorter
    output), the commit fields are ``None`` and ``position`` is where the outputs part.
    """
    trace, ntp_trace = check_trace(trace), check_trace(ntp_trace, "ntp_trace")
    if ntp_trace.prompt != trace.prompt:
        raise ValueError("ntp_trace: must decode the same prompt as trace")
    out, ref = list(trace.output_ids), list(ntp_trace.output_ids)
    if out == ref:
        return None
    n_prompt = len(trace.prompt_ids)
    for step in trace.steps:
        # a commit counts only if the output holds it: a stop may cut it, a verified rollback replace it
        departing = [
            c
            for c in step.commits
            if trace.kept(step, c.slot)
            and (
                step.block_start + c.slot - n_prompt >= len(ref)
                or ref[step.block_start + c.slot - n_prompt] != c.token_id
            )
        ]
        if departing:
            return _describe(trace, step, min(departing, key=lambda c: c.slot), ntp_trace)
    return {
        **dict.fromkeys(DIVERGENCE_FIELDS),
        "position": len(out),
        "ntp_text": ntp_trace.output_texts[len(out)] if len(out) < len(ref) else None,
    }


def divergence_columns(trace: Trace, ntp_trace: Trace) -> dict:
    """``first_divergence(trace, ntp_trace)`` as ``DIVERGENCE_COLUMNS``: each None where the text is NTP's."""
    where = first_divergence(trace, ntp_trace) or {}
    return {column: where.get(field) for column, field in DIVERGENCE_COLUMNS.items()}


def _describe(trace: Trace, step: Step, commit, ntp_trace: Trace) -> dict:
    position = step.block_start + commit.slot - len(trace.prompt_ids)
    free = uncounted_slot(trace, step)
    gamma = trace.config.get("gamma")
    spent = uncounted = outside = None
    if free is not None:
        spent = sum(c.entropy for c in step.commits if c.slot != free)
        uncounted = commit.slot == free
        outside = uncounted and commit.entropy > gamma
    return {
        "call": step.call,
        "block": step.block,
        "step": step.step,
        "slot": commit.slot,
        "gap": commit.gap,
        "position": position,
        "token_id": commit.token_id,
        "text": commit.text,
        "ntp_text": ntp_trace.output_texts[position] if position < ntp_trace.n_tokens else None,
        "entropy": commit.entropy,
        "prob": commit.prob,
        "n_commits": len(step.commits),
        "budget_spent": spent,
        "uncounted": uncounted,
        "outside_budget": outside,
        "state": render_state(trace.block_state(step)[: commit.slot + 1], trace.text_before(step)),
    }


def divergence_report(
    model: CausalModel,
    suite: Iterable[SuiteItem],
    max_new_tokens: int = 64,
    stop: str | Iterable[str] | None = ("\n",),
    **decode_kwargs,
):
    """A ``pandas.DataFrame``, one row per item whose SBD output differs from NTP's (same weights, same prompt):
    the item's ``family``, ``prompt`` and ``answer``, both outputs, whether each is right, SBD's tokens per call,
    and ``first_divergence``'s fields. ``decode_kwargs`` go to ``sv.decode`` (``rule``, ``gamma``,
    ``block_size``, ...). Rows with ``ntp_correct & ~sbd_correct`` are the items SBD loses against NTP.
    """
    import pandas as pd

    model = check_model(model)
    rows = []
    for i, item in enumerate(suite):
        if not isinstance(item, SuiteItem):
            raise TypeError(f"suite: item {i} is a {type(item).__name__}, not a tasks.SuiteItem")
        ntp = decode_ntp(model, item.prompt, max_new_tokens=max_new_tokens, stop=stop)
        sbd = decode(model, item.prompt, SBD.name, max_new_tokens=max_new_tokens, stop=stop, **decode_kwargs)
        where = first_divergence(sbd, ntp)
        if where is None:
            continue
        rows.append(
            {
                "family": item.family,
                "prompt": item.prompt,
                "answer": item.answer,
                "ntp_output": ntp.text,
                "sbd_output": sbd.text,
                "ntp_correct": score(item, ntp.text),
                "sbd_correct": score(item, sbd.text),
                "tokens_per_call": sbd.tokens_per_call,
                **where,
            }
        )
    # kept bool even when empty, so ``~report.sbd_correct`` negates (an object column of bools would not)
    return pd.DataFrame(rows, columns=list(REPORT_COLUMNS)).astype({"ntp_correct": bool, "sbd_correct": bool})
