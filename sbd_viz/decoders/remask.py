"""SBD with low-confidence remasking (LLaDA-style): a gap fill is held provisionally and can go back to masked.

SBD's block loop, with one change. A commit made while a slot to its left is still open (a gap fill) is
*pending*: later calls of the block feed its slot as a mask again and re-read the model's probability of the
held token there. If that confidence falls below ``remask_threshold`` the slot is *remasked* (open again; the
commit rule may fill it anew from the next call on); once a call re-reads it with no open slot to its left and
keeps it, it is *confirmed* and fed as its token from then on. A commit with nothing open to its left is
confirmed at once. A slot is remasked at most once, so every block ends.

Why the slot is fed masked to be re-read: the SBD objective trains the block head on masked slots only, so its
logits at a slot fed as a token are untrained. On the shipped model (blocks of NTP's text, two held-out items a
family, three slots kept) a right token fed as itself read a median probability of 0.004; fed masked, 0.995, and a
random wrong token at most 0.0004. The price: a pending gap fill does not inform the other slots until confirmed.

Each step records the block as a canvas (``Step.canvas``: every slot's draft, and whether it holds a token after
the step); a remask is ``Step.renoised``. Confirmed slots show the draft they were committed with.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Generator

import torch

from .sbd import DecodeConfig, Decoding, _trace
from ..model import CacheCut, ModelCall, SBDModel
from .steps import draft, ends_output, propose, slot_views, stop_index
from ..trace import Candidate, Draft, Step, Trace

DEFAULT_REMASK_THRESHOLD = 0.5  # re-read probability of the held token below which a pending gap fill is remasked
OPEN, PENDING, DONE, DROPPED = "open", "pending", "done", "dropped"  # a slot's state; dropped: past a stop


def check_threshold(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1:
        raise ValueError(f"remask_threshold: must be a probability in [0, 1], got {value!r}")
    return float(value)


class RemaskDecoding(Decoding):
    """One remasking decode of ``prompt``: ``config`` (a ``DecodeConfig``, temperature 0, not verified) gives the
    rule, γ, block size, length, stop and ``top_n``; ``remask_threshold`` the knob. ``steps()`` then ``trace()``."""

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None,
                 remask_threshold: float = DEFAULT_REMASK_THRESHOLD):
        super().__init__(model, prompt, config)
        self.threshold = check_threshold(remask_threshold)
        if self.config.temperature != 0:
            raise ValueError(f"temperature: remasking re-reads the argmax's confidence; needs 0, got "
                             f"{self.config.temperature!r}")
        if self.config.verify or self.config.gap_free:
            name = "verify" if self.config.verify else "gap_free"
            raise ValueError(f"{name}: remasking takes back gap fills; it runs without {name}")

    def requests(self) -> Generator[ModelCall | CacheCut, object, None]:
        self._start()
        return self._keep_output(self._requests())

    def _requests(self):
        model, config = self.model, self.config
        mask_id, k_max = model.mask_token_id, config.block_size
        pending = list(self.prompt_ids)  # final tokens not yet in the cache: fed causally with the next block
        generated: list[int] = []
        call, block, reason = 0, 0, "length"
        while len(generated) < config.max_new_tokens and reason == "length":
            k = min(k_max, config.max_new_tokens - len(generated))
            start = len(self.prompt_ids) + len(generated)
            tokens, state = [mask_id] * k, [OPEN] * k
            stood: dict[int, Draft] = {}  # a confirmed slot's draft as it was committed
            remasked: set[int] = set()
            step = 0
            while any(s in (OPEN, PENDING) for s in state):
                fed = [tokens[s] if state[s] == DONE else mask_id for s in range(k)]
                _, logits, seconds = yield ModelCall(pending, fed)
                t0 = time.perf_counter()
                n_input, pending = len(pending) + k, []
                probs, entropy, proposal, confidence = propose(logits, 0.0, None)  # (k, V), (k,) x3
                top_p, top_i = torch.topk(probs, min(config.top_n, probs.shape[-1]), -1)
                read = {s: self._draft(s, probs, entropy, top_p, top_i) for s in range(k) if state[s] != DONE}
                open_before = [s for s in range(k) if state[s] == OPEN]
                renoised = []
                for s in [s for s in range(k) if state[s] == PENDING]:
                    if float(probs[s, tokens[s]]) < self.threshold and s not in remasked:
                        tokens[s], state[s] = mask_id, OPEN
                        remasked.add(s)
                        renoised.append(s)
                    elif not any(o < s for o in open_before):
                        state[s] = DONE
                commits = []
                if open_before:
                    idx = torch.tensor(open_before)
                    commits, _ = draft(model, config._rule, open_before, proposal[idx], confidence[idx],
                                       entropy[idx])
                    chosen = {c.slot for c in commits}
                    open_after = [s for s in range(k) if (state[s] == OPEN and s not in chosen)]
                    commits = [replace(c, gap=sum(1 for s in open_after if s < c.slot)) for c in commits]
                    for c in commits:
                        tokens[c.slot], state[c.slot] = c.token_id, PENDING if c.gap else DONE
                for s in range(k):
                    if state[s] == DONE and s not in stood:
                        stood[s] = replace(read[s], accepted=True, held_id=tokens[s],
                                           held_text=model.token_text(tokens[s]))
                canvas = tuple(stood[s] if s in stood else replace(
                    read[s], accepted=state[s] == PENDING, held_id=tokens[s] if state[s] == PENDING else None,
                    held_text=model.token_text(tokens[s]) if state[s] == PENDING else None) for s in range(k))
                self._steps.append(Step(
                    call=call, block=block, block_start=start, block_size=k, step=step, masked=tuple(open_before),
                    slots=slot_views(model, open_before, probs[open_before], entropy[open_before], config.top_n),
                    commits=tuple(commits), wall_time=seconds + time.perf_counter() - t0, n_input=n_input,
                    canvas=canvas, renoised=tuple(renoised)))
                call, step = call + 1, step + 1
                # "generate until": slots right of a confirmed stop token never reach the output
                ends = [s for s in range(k) if state[s] == DONE and ends_output(model, tokens[s], config.stop)]
                for s in range(ends[0] + 1 if ends else k, k):
                    state[s] = DROPPED
                prefix = next((s for s in range(k) if state[s] != DONE), k)
                hit = stop_index(model, generated + tokens[:prefix], len(generated) + 1, config.stop)
                if hit:
                    generated, reason = (generated + tokens[:prefix])[: hit[0]], hit[1]
                    break
            if reason == "length":
                generated += tokens
                pending = list(tokens)
            block += 1
        return generated, reason

    def _draft(self, slot: int, probs, entropy, top_p, top_i) -> Draft:
        """Slot ``slot``'s draft in this call (its argmax, confidence, entropy and top candidates)."""
        top = tuple(Candidate(int(i), self.model.token_text(int(i)), float(p))
                    for p, i in zip(top_p[slot].tolist(), top_i[slot].tolist()))
        return Draft(slot, top[0].token_id, top[0].text, top[0].prob, float(entropy[slot]), top, False)

    def trace(self) -> Trace:
        self._finished()
        config = {**self.config.as_dict(), "decoder": "remask", "remask_threshold": self.threshold}
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      config)
