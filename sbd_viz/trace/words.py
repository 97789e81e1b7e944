"""Traces in words: pure functions returning plain text, shared by every view.

- ``measures``: a decode's headline numbers (calls, tokens per call, speedups beside NTP, what verifying
  cost, gap fills), each a ``Measure``; the app draws them as cards, the widgets and the HTML export as
  table rows, the CLI as aligned lines;
- ``step_text``: one call in words (what it fed, what it committed, its block before and after), shown by
  the app and the widgets for the call a user picks;
- ``trace_summary``: the one-screen summary ``sbd-viz trace`` prints (``Trace.summary``).

Whitespace shows as ``labels.visible`` shows it; a view adds only its markup (escaped HTML, code blocks).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .data import Commit, Step, Trace, drafts_checked
from .labels import COUNT_LABELS, mark_special, output_labels, render_state, visible

PENDING = "…"  # a number still being measured (the app decodes NTP after SBD)
# why a decode ended (``Trace.stop_reason``), in words
STOP_WORDS = {"stop": "ended at a stop string", "eos": "ended at end-of-text", "length": "ended at max new tokens"}


class Measure(NamedTuple):
    """One headline number: ``label`` says what it is, ``value`` is the number, ``note`` what it is out of
    or compared with; ``verdict`` is ``"good"``, ``"bad"`` or ``""`` (for a view that colours it)."""

    label: str
    value: str
    note: str = ""
    verdict: str = ""


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _quoted(text: str) -> str:
    return f"'{visible(text, spaces=True)}'"


def measures(
    trace: Trace,
    ntp: Trace | None = None,
    seconds: float | None = None,
    ntp_seconds: float | None = None,
    pending: bool = False,
    label: str = "SBD",
    timing=None,
) -> list[Measure]:
    """The headline numbers of ``trace``, beside ``ntp`` (NTP's decode of the same prompt) when given.

    ``pending``: NTP is still running, so its numbers show as "…". ``seconds`` / ``ntp_seconds``: measured
    wall times of the two decodes (default: the traces' own ``wall_time``); ``label``: what the decoder is called
    (its spec's label). Speedups are per generated token, so a run that stops earlier or later than NTP is compared
    fairly. A speedup in seconds is shown only from ``timing`` (``analysis.timing.side_by_side``: both timed in the
    same rounds, the median and range of the rounds' ratios); two decodes timed apart show their seconds, no ratio.
    """
    seconds = trace.wall_time if seconds is None else seconds
    if ntp is not None:
        ntp_seconds = ntp.wall_time if ntp_seconds is None else ntp_seconds
        calls_note = f"NTP: {ntp.nfe} for {ntp.n_tokens} tokens"
        in_calls = f"{trace.tokens_per_call / ntp.tokens_per_call:.2f}×" if ntp.n_tokens and trace.n_tokens else "—"
        speed = [
            Measure("speedup · calls", in_calls, "vs NTP, per generated token"),
            _wall_clock(trace, ntp, seconds, ntp_seconds, label, timing),
        ]
    elif pending:
        calls_note = "NTP: running…"
        speed = [
            Measure("speedup · calls", PENDING, "vs NTP, per generated token"),
            Measure("wall clock", f"{1000 * seconds:.0f} ms", f"{label} decode, one run · NTP: running…"),
        ]
    else:
        calls_note = f"over {_count(trace.n_blocks, 'block')}"
        speed = [Measure("wall clock", f"{1000 * seconds:.0f} ms", "the model calls, summed")]
    # the card's short title; its note names the count as every view names it (COUNT_LABELS)
    counted = COUNT_LABELS[(True, True)].removeprefix("tokens per call ").strip("()")
    out = [
        Measure("model calls", f"{trace.nfe}", calls_note),
        Measure(
            "tokens per call",
            f"{trace.tokens_per_call:.2f}",
            f"{trace.n_tokens} tokens, {counted} · {STOP_WORDS.get(trace.stop_reason, trace.stop_reason)}",
        ),
        *speed,
    ]
    if trace.verified:
        out.append(_verified(trace, ntp, pending))
    out.append(
        Measure(
            "gap fills", f"{len(trace.kept_gap_fills())}", "commits with masked slots to their left, kept in the output"
        )
    )
    return out


def _wall_clock(trace: Trace, ntp: Trace, seconds: float, ntp_seconds: float, label: str, timing) -> Measure:
    """The speedup in seconds from side-by-side rounds; without them, the two decodes' seconds and no ratio."""
    if timing is None:
        return Measure(
            "wall clock",
            f"{1000 * seconds:.0f} ms",
            f"{label} decode, one run · NTP {1000 * ntp_seconds:.0f} ms, timed apart: no speedup in seconds "
            "without side-by-side runs",
        )
    mid, lo, hi = timing.speedup(trace.n_tokens, ntp.n_tokens)
    ms, ntp_ms = (1000 * x for x in timing.median_seconds())
    return Measure(
        "speedup · wall clock",
        f"{mid:.2f}×",
        f"median of {timing.rounds} side-by-side runs, {lo:.2f}–{hi:.2f}× · {label} {ms:.0f} ms · NTP {ntp_ms:.0f} ms",
    )


def _verified(trace: Trace, ntp: Trace | None, pending: bool) -> Measure:
    """A verified decode: does its text equal NTP's, and what checking cost."""
    checks = trace.checks()
    accepted = trace.accepted_fraction
    note = " · ".join(
        [
            _count(len(trace.rollbacks()), "rollback"),
            "no drafts checked"
            if math.isnan(accepted)
            else f"{sum(c.accepted for c in checks)}/{len(checks)} drafts accepted by NTP ({accepted:.0%})",
            _count(trace.n_check_only, "checking-only call"),
        ]
    )
    if ntp is None:  # without NTP beside it, say what verification promises
        return Measure("verified", PENDING if pending else "NTP's text", note)
    same = trace.output_ids == ntp.output_ids
    return Measure("verified", "= NTP ✓" if same else "≠ NTP ✗", note, "good" if same else "bad")


# -- one call in words --------------------------------------------------------------------------
def commit_text(commit: Commit) -> str:
    """One commit: its slot, its token, how sure the call was, and its gap if it filled one."""
    return (
        f"slot {commit.slot} ← {_quoted(commit.text)} (p {commit.prob:.2f}, H {commit.entropy:.2f}"
        + (f", gap {commit.gap}" if commit.gap else "")
        + ")"
    )


def rollback_text(step: Step, tree: bool = False, capped: bool = False) -> str:
    """What a call's rollback threw away: the rejected draft, NTP's token, and the drafts built on it (a tree call
    records none dropped here: they lie in the previous call's block, and this call's block drafts anew; with
    ``capped``, fewer blocks than fed tokens, a call may have had no block where its path ended)."""
    rollback = step.rollback
    assert rollback is not None, "a call with a rollback"
    check = step.rejected[0] if step.rejected else None
    draft, wanted = (
        ("", "")
        if check is None
        else (f" {_quoted(check.text)}", f", NTP wanted {_quoted(check.ntp_text)} (p {check.ntp_prob:.2f})")
    )
    dropped = (
        "the drafts after it are replaced by this call's own (tree drafting)"
        if tree
        else f"{_count(len(rollback.dropped), 'draft')} after it dropped"
    )
    if capped and len(step.commits) == step.block_size and all(c.ntp for c in step.commits):
        dropped = "no block followed NTP's token in this call, so it drafted nothing after it (fewer blocks a call)"
    if tree and step.alternatives_taken:
        dropped = (
            f"NTP's token was the tree's alternative there, so the call went on along it: "
            f"{_count(step.alternatives_taken, 'alternative')} taken, then NTP's next token; {dropped}"
        )
    return f"the draft{draft} in slot {rollback.slot} was rejected{wanted}; {dropped}"


def fed_text(trace: Trace, step: Step) -> str:
    """What a call fed the model: the causal part (text before the block) and the block's slots."""
    k = step.block_size
    if trace.verified:
        return _fed_verified(trace, step)
    if drafts_checked(trace.config):  # the text so far's tail, then the drafts, all causal; no masked slot
        before = f"the prompt's {step.n_input - k + 1} tokens" if step.call == 0 else "the last accepted token"
        return (
            f"{before} and {k - 1} draft(s) causally, each checked against NTP "
            f"({len(step.accepted)}/{len(step.checks)} accepted)"
        )
    if step.step > 0:
        return f"{k} block slots (the prefix is in the KV cache)"
    if step.call == 0:
        return f"the prompt's {step.n_input - k} tokens causally + {k} masked slots (prefill fused with block 0)"
    return f"the previous block's {step.n_input - k} final tokens causally + {k} masked slots (the fused call)"


def _fed_verified(trace: Trace, step: Step) -> str:
    """What a verified call fed: the causal part (the last accepted token, then the drafts to check) and the
    block from its first open slot; a checking-only call feeds no block. A tree-drafting call
    (``sbd_viz.decoders.verified.single``) fed a block after every possible accepted length."""
    checked = f"{len(step.accepted)}/{len(step.checks)} accepted"
    previous = trace.steps[step.call - 1] if step.call > 0 else None  # its drafts are the ones this call checks
    if previous is not None and previous.alternatives and not step.check_only:  # a token tree's
        drafts = sum(not c.ntp for c in previous.commits)
        cap = trace.tree_block_cap
        blocks = (
            "a block of masked slots after each"
            if cap is None
            else f"at most {_count(cap, 'block')} of masked slots, where its path was likeliest to end"
        )
        return (
            f"the last accepted token and a token tree of {_count(drafts, 'draft')} and "
            f"{_count(len(previous.alternatives), 'alternative')}, each seeing its own path, checked against "
            f"NTP ({checked}), + {blocks}"
        )
    if trace.tree_drafted and previous is not None and not step.check_only:
        k = int(trace.config["block_size"])
        n_causal = 1 + sum(not c.ntp for c in previous.commits)
        n_blocks = -(-(step.n_input - n_causal) // k)  # the blocks near the length limit are cut short
        if n_causal == 1:
            return (
                f"the last accepted token and a block of {k} masked slots after it (no drafts to check: the call "
                "before drafted none)"
            )
        cap = trace.tree_block_cap
        where = (
            "one after each possible accepted length"
            if cap is None
            else f"after the accepted lengths the drafts made likeliest (at most {cap} a call)"
        )
        return (
            f"the last accepted token and {n_causal - 1} draft(s) causally, checked against NTP ({checked}), "
            f"+ {n_blocks} block(s) of {k} masked slots, {where} (tree drafting)"
        )
    if step.check_only:
        return (
            f"the last accepted token and {step.n_input - 1} draft(s) causally, each checked against NTP "
            f"({checked}), and no block (the final check)"
        )
    if step.masked:  # the block from its first open slot
        n_block = step.block_size - step.masked[0]
    else:  # the next block's first call, which found a rejected draft in this block's tail: that block was whole
        start = step.block_start - len(trace.prompt_ids) + step.block_size
        n_block = min(int(trace.config["block_size"]), int(trace.config["max_new_tokens"]) - start)
    n_causal = step.n_input - n_block
    if step.call == 0:
        return f"the prompt's {n_causal} tokens causally + {n_block} masked slots (prefill fused with block 0)"
    return (
        f"the last accepted token and {n_causal - 1} draft(s) causally, checked against NTP ({checked}), "
        f"+ {n_block} masked slot(s) (the fused call)"
    )


def step_text(trace: Trace, step: Step) -> str:
    """One call in words, as lines: a head line (the call, its block and step, what it fed), what it committed,
    its rollback if it made one, and its block before and after it (``render_state``)."""
    prefix = trace.text_before(step)
    head = (
        f"call {step.call} · block {step.block}, step {step.step} · fed {step.n_input} tokens: {fed_text(trace, step)}"
    )
    if drafts_checked(trace.config) and not trace.verified:
        return _drafts_step_text(trace, step, head, prefix)
    lines = [
        head,
        f"{_count(len(step.masked), 'slot')} masked before the call; committed "
        + (", ".join(commit_text(c) for c in step.commits) or "nothing"),
    ]
    if step.rollback is not None:
        lines.append(f"rollback: {_rollback_words(trace, step)}")
    if step.renoised:  # a canvas decoder took back slots it had accepted
        lines.append(
            f"renoised (accepted before, taken back): slot{'s' if len(step.renoised) > 1 else ''} "
            + ", ".join(map(str, step.renoised))
        )
    lines += [
        f"before: {render_state(trace.block_state(step, after=False), prefix)}",
        f"after:  {render_state(trace.block_state(step, after=True), prefix)}",
    ]
    return "\n".join(lines)


def _drafts_step_text(trace: Trace, step: Step, head: str, prefix: str) -> str:
    """A call of a decoder that checks drafts (Jacobi, prompt lookup): no slot is masked; the call checked its
    drafts against NTP and kept the accepted ones, then NTP's own token after them."""
    checks = step.checks
    drafts = " ".join(f"{_quoted(c.text)} {'✓' if c.accepted else '✗'}" for c in checks)
    kept = "".join(c.text for c in step.commits)
    lines = [
        head,
        (
            f"drafts against NTP's choice, left to right to the first it rejects: {drafts}"
            if checks
            else "no draft to check: the call wrote NTP's next token"
        ),
        f"kept {_count(len(step.commits), 'token')}: " + (", ".join(commit_text(c) for c in step.commits) or "nothing"),
    ]
    if step.rollback is not None:
        lines.append(f"rollback: {_rollback_words(trace, step)}")
    before = "".join(t for t in trace.block_state(step, after=False) if t is not None)
    lines += [f"text before: {visible(prefix[-24:] + before)}", f"text after:  {visible(prefix[-24:] + before + kept)}"]
    return "\n".join(lines)


# -- the CLI's one screen -------------------------------------------------------------------------
def measures_text(items: list[Measure]) -> str:
    """Measures as aligned lines: label, value, note."""
    wide_label, wide_value = (max(len(getattr(m, f)) for m in items) for f in ("label", "value"))
    return "\n".join(f"{m.label.ljust(wide_label)}  {m.value.ljust(wide_value)}  {m.note}".rstrip() for m in items)


def _rollback_words(trace: Trace, step: Step) -> str:
    """``rollback_text`` of a step of ``trace``, told how the trace's calls drafted."""
    return rollback_text(step, trace.tree_drafted, trace.tree_block_cap is not None)


def trace_summary(trace: Trace, width: int = 100) -> str:
    """The generated text with each token's call number under it, the headline measures, then each rollback
    and gap fill."""
    cfg = trace.config
    if trace.is_greedy:
        head = "NTP greedy (HF generate)"
    elif drafts_checked(cfg):
        head = f"{cfg.get('decoder')} (drafts checked by NTP: greedy's text) block_size={cfg.get('block_size')}"
    elif trace.has_canvas:  # a block decoder whose accepted slots can be renoised (e.g. DiffusionGemma)
        head = (
            f"{cfg.get('decoder')} {cfg.get('rule')} gamma={cfg.get('gamma')} canvas={cfg.get('block_size')}, "
            f"{sum(len(s.renoised) for s in trace.steps)} slots renoised"
        )
    else:
        head = (
            f"SBD {'verified ' if trace.verified else ''}{cfg.get('rule')}"
            f"{' gap_free' if cfg.get('gap_free') else ''} gamma={cfg.get('gamma')} "
            f"block_size={cfg.get('block_size')}"
        )
    kind = f" ({trace.model_kind})" if trace.model_kind else ""
    prompt = visible(mark_special(trace.prompt, trace.special_tokens))
    lines = [
        f"{head}  model={trace.model_id}{kind}",
        f"prompt: {prompt}",
        "",
        "output, with the call that committed each token (a space shows as ␣):",
    ]
    # each token as the pictures show it: its leading space visible, special tokens marked, a character split
    # across tokens whole where it completes
    texts, calls = [label for label, _ in output_labels(trace)], trace.token_calls()
    row_t, row_c = "", ""
    for text, call in zip(texts, calls):
        cell = max(len(text), len(str(call))) + 1
        if len(row_t) + cell > width:
            lines += [row_t, row_c, ""]
            row_t, row_c = "", ""
        row_t += text.ljust(cell)
        row_c += str(call).ljust(cell)
    lines += [row_t, row_c, "", measures_text(measures(trace))]
    for s in trace.rollbacks()[:10]:
        lines.append(f"  rollback: call {s.call}, block {s.block}: {_rollback_words(trace, s)}")
    gaps = trace.gap_fills()
    for g in gaps[:10]:
        lines.append(
            f"  gap fill: call {g.call} block {g.block} slot {g.slot} gap {g.gap}: {g.state}"
            + ("" if g.kept else f"  ({_not_kept(trace, g)})")
        )
    if len(gaps) > 10:
        lines.append(f"  ... and {len(gaps) - 10} more")
    return "\n".join(lines)


def _not_kept(trace: Trace, g) -> str:
    """Why a gap fill is not in the output: the stop cut the output before it, verified decoding rejected it or
    dropped it with a rejected draft to its left, or a later call wrote its position."""
    position = trace.steps[g.call].block_start + g.slot
    if position >= len(trace.prompt_ids) + trace.n_tokens:
        return "after the stop: discarded"
    verdict = trace.verdicts().get((g.call, position))
    if verdict is not None and not verdict[1].accepted:
        return f"rejected by NTP's check in call {verdict[0]}"
    dropped = next(
        (
            s.call
            for s in trace.steps[g.call + 1 :]
            if s.rollback is not None and s.block == g.block and g.slot in s.rollback.dropped
        ),
        None,
    )
    if dropped is not None:
        return f"dropped in call {dropped}, with a rejected draft to its left"
    return f"replaced by call {trace.last_commit_calls.get(position)}'s commit"
