"""How a model call's logits become a ``Step``: the pieces every decode loop (plain SBD, verified SBD, greedy
NTP) builds its steps from, so each idea is written once.

- ``draft``: the commit rule's choice among a call's ``Proposal`` (``sbd_viz.decoders.base.propose``), as commits;
- ``commit``: every ``Commit`` of every decode is built here; ``exact_commit`` for a token read off a causal row;
- ``slot_views``: what a step records of each masked slot (its entropy and top candidates);
- ``ntp_step``: one greedy NTP call as a step (``decode_ntp`` and ``NTPDecoding`` both record it);
- ``checked_step``: one call of a draft-and-check decoder (Jacobi, prompt lookup) as a step.

Where an output ends, and the named types a step is built from, are ``sbd_viz.decoders.base``'s.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from ..models.call import Model
from ..trace.data import Candidate, Check, Commit, Rollback, SlotView, Step
from .base import Proposal, greedy, row_entropy
from .rules import CommitRule


def commit(model: Model, slot: int, token: int, prob: float, entropy: float, gap: int = 0, ntp: bool = False) -> Commit:
    """``token`` written into ``slot``, with its text as the model's tokenizer spells it."""
    return Commit(slot, token, model.token_text(token), prob, entropy, gap=gap, ntp=ntp)


def exact_commit(model: Model, slot: int, token: int, probs: torch.Tensor, logp: torch.Tensor, ntp: bool) -> Commit:
    """``token`` read off one causal row (``probs``, ``logp``: (V,)), so its prob and entropy are that row's.
    ``ntp`` marks NTP's exact token inside an SBD block (verified decoding); a ``decode_ntp`` trace's are False."""
    h = float(row_entropy(probs[None], logp[None])[0])
    return commit(model, slot, token, float(probs[token]), h, ntp=ntp)


def draft(
    model: Model, rule: CommitRule, slots: list[int], proposal: Proposal, intervals: list | None = None
) -> tuple[list[Commit], list[int]]:
    """The rule's commits among ``slots`` (ascending masked slots, one ``proposal`` row each), in slot order, and
    the slots it leaves masked. A commit's gap counts the slots left of it that stay masked: the gap it leaves
    behind. ``intervals``: if given, the rule's knob interval for this choice is appended to it, from the same
    unrounded scores (a greedy decode's γ range is the intersection of its calls')."""
    chosen = rule.select(proposal.entropy, proposal.confidence)
    if intervals is not None:
        intervals.append(rule.knob_interval(proposal.entropy, proposal.confidence))
    chosen_slots = {slots[i] for i in chosen}
    still = [s for s in slots if s not in chosen_slots]
    commits = [
        commit(
            model,
            slots[i],
            int(proposal.tokens[i]),
            float(proposal.confidence[i]),
            float(proposal.entropy[i]),
            gap=sum(1 for s in still if s < slots[i]),
        )
        for i in chosen
    ]
    return commits, still


class SlotRows(Protocol):
    """What ``slot_views`` reads of a call's proposal: the slots' distributions, (m, V), and their entropies, (m,)."""

    @property
    def probs(self) -> torch.Tensor: ...

    @property
    def entropy(self) -> torch.Tensor: ...


class _Rows(NamedTuple):
    """Causal rows' distributions and entropies, for ``slot_views`` where no proposal was drawn from them."""

    probs: torch.Tensor
    entropy: torch.Tensor


def slot_views(model: Model, masked, proposal: SlotRows, top_n: int) -> tuple[SlotView, ...]:
    """Each masked slot's entropy and its ``top_n`` candidates (one ``proposal`` row per slot of ``masked``)."""
    probs, entropy = proposal.probs, proposal.entropy
    top_p, top_i = torch.topk(probs, min(top_n, probs.shape[-1]), dim=-1)  # (m, n)
    return tuple(
        SlotView(slot, float(h), tuple(Candidate(int(i), model.token_text(int(i)), float(p)) for p, i in zip(ps, ids)))
        for slot, h, ps, ids in zip(masked, entropy.tolist(), top_p.tolist(), top_i.tolist())
    )


def ntp_step(
    model: Model,
    index: int,
    logits: torch.Tensor,
    n_prompt: int,
    n_input: int,
    wall_time: float,
    top_n: int,
    token: int | None = None,
) -> Step:
    """Greedy NTP's ``index``-th output token as a step: call ``index``, a one-slot block, one commit.

    ``logits``: (1, V) float32, the causal row that predicts the token; ``token``: the token the decode
    kept (HF ``generate``'s), or None for the row's argmax (never the mask id: ``base.greedy``)."""
    logp = torch.log_softmax(logits, -1)  # (1, V)
    probs = logp.exp()
    token = int(greedy(model, probs)[0]) if token is None else token
    h = row_entropy(probs, logp)  # (1,)
    return Step(
        call=index,
        block=index,
        block_start=n_prompt + index,
        block_size=1,
        step=0,
        masked=(0,),
        slots=slot_views(model, (0,), _Rows(probs, h.cpu()), top_n),
        commits=(exact_commit(model, 0, token, probs[0], logp[0], ntp=False),),
        wall_time=wall_time,
        n_input=n_input,
    )


def checked_step(
    model: Model,
    call: int,
    block_start: int,
    drafts: list[int],
    logits: torch.Tensor,
    kept: list[int],
    n_input: int,
    wall_time: float,
    top_n: int,
) -> Step:
    """One call that fed ``drafts`` causally after the accepted text, as a step of its own block (``block = call``).

    ``logits``: (len(drafts) + 1, V) float32 causal rows; row i is NTP's prediction at ``block_start + i``.
    ``kept``: the tokens the decoder appended (the accepted drafts, then NTP's token; fewer if it stopped).
    Each fed draft up to the first rejection is a ``Check``; a rejection is a ``Rollback`` there. A kept draft
    is a drafted commit; the token after the accepted drafts is NTP's (``ntp=True``)."""
    n = len(drafts)
    logp = torch.log_softmax(logits, -1)  # (n + 1, V)
    probs = logp.exp()
    ntp = greedy(model, probs).tolist()
    checks = tuple(
        Check(
            call,
            i,
            block_start + i,
            drafts[i],
            model.token_text(drafts[i]),
            ntp[i],
            model.token_text(ntp[i]),
            float(probs[i, ntp[i]]),
            float(probs[i, drafts[i]]),
            drafts[i] == ntp[i],
        )
        for i in range(min(len(kept), n))
    )
    rejected = next((c.slot for c in checks if not c.accepted), None)
    rollback = None if rejected is None else Rollback(rejected, block_start + rejected, (), n - rejected)
    entropy = row_entropy(probs, logp).cpu()
    commits = tuple(
        exact_commit(model, i, tok, probs[i], logp[i], ntp=i >= n or drafts[i] != tok) for i, tok in enumerate(kept)
    )
    return Step(
        call=call,
        block=call,
        block_start=block_start,
        block_size=n + 1,
        step=0,
        masked=tuple(range(n + 1)),
        slots=slot_views(model, range(n + 1), _Rows(probs, entropy), top_n),
        commits=commits,
        wall_time=wall_time,
        n_input=n_input,
        checks=checks,
        rollback=rollback,
    )
