"""How a model call's logits become a ``Step``: the pieces every decode loop (plain SBD, verified SBD, greedy
NTP) builds its steps from, so each idea is written once.

- ``propose``: a call's slot logits -> each slot's distribution, entropy, proposed token and its probability;
- ``draft``: the commit rule's choice among the proposals, as commits;
- ``commit``: every ``Commit`` of every decode is built here; ``exact_commit`` for a token read off a causal row;
- ``slot_views``: what a step records of each masked slot (its entropy and top candidates);
- ``ntp_step``: one greedy NTP call as a step (``decode_ntp`` and ``NTPDecoding`` both record it);
- ``checked_step``: one call of a draft-and-check decoder (Jacobi, prompt lookup) as a step;
- ``stop_index`` / ``ends_output``: where the output ends.
"""

from __future__ import annotations

import torch

from ..model import SBDModel
from ..rules import CommitRule
from ..trace import Candidate, Check, Commit, Rollback, SlotView, Step


def row_entropy(probs: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """(m, V) -> (m,) nats. A token the model rules out (logit -inf) adds 0, not 0 * -inf = NaN."""
    return -torch.where(probs > 0, probs * logp, 0.0).sum(-1)


def propose(logits: torch.Tensor, temperature: float, gen: torch.Generator | None):
    """(m, V) slot logits -> probs (m, V), entropy (m,) nats of the untempered distribution, proposal (m,),
    confidence (m,) = probability of the proposal. The (m,) vectors are on the CPU, where the rules run:
    they are a few numbers, wherever the model is."""
    logp = torch.log_softmax(logits, -1)
    probs = logp.exp()
    if temperature == 0:
        proposal = probs.argmax(-1)
    else:
        proposal = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen).squeeze(-1)
    confidence = probs.gather(-1, proposal[:, None]).squeeze(-1)
    return probs, row_entropy(probs, logp).cpu(), proposal.cpu(), confidence.cpu()


def commit(model: SBDModel, slot: int, token: int, prob: float, entropy: float, gap: int = 0,
           ntp: bool = False) -> Commit:
    """``token`` written into ``slot``, with its text as the model's tokenizer spells it."""
    return Commit(slot, token, model.token_text(token), prob, entropy, gap=gap, ntp=ntp)


def exact_commit(model: SBDModel, slot: int, token: int, probs: torch.Tensor, logp: torch.Tensor,
                 ntp: bool) -> Commit:
    """``token`` read off one causal row (``probs``, ``logp``: (V,)), so its prob and entropy are that row's.
    ``ntp`` marks NTP's exact token inside an SBD block (verified decoding); a ``decode_ntp`` trace's are False."""
    h = float(row_entropy(probs[None], logp[None])[0])
    return commit(model, slot, token, float(probs[token]), h, ntp=ntp)


def draft(model: SBDModel, rule: CommitRule, slots: list[int], proposal: torch.Tensor, confidence: torch.Tensor,
          entropy: torch.Tensor) -> tuple[list[Commit], list[int]]:
    """The rule's commits among ``slots`` (ascending masked slots, each with its proposal, confidence and entropy,
    (m,)), in slot order, and the slots it leaves masked. A commit's gap counts the slots left of it that stay
    masked: the gap it leaves behind."""
    chosen = rule.select(entropy, confidence)
    chosen_slots = {slots[i] for i in chosen}
    still = [s for s in slots if s not in chosen_slots]
    commits = [commit(model, slots[i], int(proposal[i]), float(confidence[i]), float(entropy[i]),
                      gap=sum(1 for s in still if s < slots[i])) for i in chosen]
    return commits, still


def slot_views(model: SBDModel, masked, probs, entropy, top_n) -> tuple[SlotView, ...]:
    """Each masked slot's entropy and its ``top_n`` candidates (probs: (m, V), entropy: (m,))."""
    top_p, top_i = torch.topk(probs, min(top_n, probs.shape[-1]), dim=-1)  # (m, n)
    return tuple(
        SlotView(slot, float(h), tuple(Candidate(int(i), model.token_text(int(i)), float(p))
                                       for p, i in zip(ps, ids)))
        for slot, h, ps, ids in zip(masked, entropy.tolist(), top_p.tolist(), top_i.tolist()))


def ntp_step(model: SBDModel, index: int, logits: torch.Tensor, n_prompt: int, n_input: int, wall_time: float,
             top_n: int, token: int | None = None) -> Step:
    """Greedy NTP's ``index``-th output token as a step: call ``index``, a one-slot block, one commit.

    ``logits``: (1, V) float32, the causal row that predicts the token; ``token``: the token the decode
    kept (HF ``generate``'s), or None for the row's argmax."""
    logp = torch.log_softmax(logits, -1)  # (1, V)
    probs = logp.exp()
    token = int(probs[0].argmax()) if token is None else token
    h = row_entropy(probs, logp)  # (1,)
    return Step(call=index, block=index, block_start=n_prompt + index, block_size=1, step=0, masked=(0,),
                slots=slot_views(model, (0,), probs, h.cpu(), top_n),
                commits=(exact_commit(model, 0, token, probs[0], logp[0], ntp=False),),
                wall_time=wall_time, n_input=n_input)


def checked_step(model: SBDModel, call: int, block_start: int, drafts: list[int], logits: torch.Tensor,
                 kept: list[int], n_input: int, wall_time: float, top_n: int) -> Step:
    """One call that fed ``drafts`` causally after the accepted text, as a step of its own block (``block = call``).

    ``logits``: (len(drafts) + 1, V) float32 causal rows; row i is NTP's prediction at ``block_start + i``.
    ``kept``: the tokens the decoder appended (the accepted drafts, then NTP's token; fewer if it stopped).
    Each fed draft up to the first rejection is a ``Check``; a rejection is a ``Rollback`` there. A kept draft
    is a drafted commit; the token after the accepted drafts is NTP's (``ntp=True``)."""
    n = len(drafts)
    logp = torch.log_softmax(logits, -1)  # (n + 1, V)
    probs = logp.exp()
    ntp = probs.argmax(-1).tolist()
    checks = tuple(Check(call, i, block_start + i, drafts[i], model.token_text(drafts[i]), ntp[i],
                         model.token_text(ntp[i]), float(probs[i, ntp[i]]), float(probs[i, drafts[i]]),
                         drafts[i] == ntp[i]) for i in range(min(len(kept), n)))
    rejected = next((c.slot for c in checks if not c.accepted), None)
    rollback = None if rejected is None else Rollback(rejected, block_start + rejected, (), n - rejected)
    entropy = row_entropy(probs, logp).cpu()
    commits = tuple(exact_commit(model, i, tok, probs[i], logp[i], ntp=i >= n or drafts[i] != tok)
                    for i, tok in enumerate(kept))
    return Step(call=call, block=call, block_start=block_start, block_size=n + 1, step=0, masked=tuple(range(n + 1)),
                slots=slot_views(model, range(n + 1), probs, entropy, top_n), commits=commits,
                wall_time=wall_time, n_input=n_input, checks=checks, rollback=rollback)


def stop_index(model: SBDModel, ids: list[int], first: int, stop: tuple[str, ...]) -> tuple[int, str] | None:
    """The length of ``ids`` up to and including the first stop, if one ends at or after ``first``."""
    eos = model.eos_token_id
    for n in range(max(first, 1), len(ids) + 1):
        if eos is not None and ids[n - 1] == eos:
            return n, "eos"
        if stop and any(s in model.text(ids[:n]) for s in stop):
            return n, "stop"
    return None


def ends_output(model: SBDModel, token_id: int, stop: tuple[str, ...]) -> bool:
    """Whether this one token ends the output by itself (EOS, or a token containing a stop string)."""
    if token_id == model.eos_token_id:
        return True
    text = model.token_text(token_id)
    return any(st in text for st in stop)
