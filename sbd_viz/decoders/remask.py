"""SBD with remasking of gap fills (ReMDM-style, not LLaDA's low-confidence remasking): a gap fill is held
provisionally and can go back to masked.

``RemaskDecoding`` is the decoder, ``REMASK`` its spec (its own setting: ``remask_threshold``). How a pending gap fill
is re-read, remasked or confirmed, and why it is fed masked: docs/decoders.md.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from ..models.base import CausalModel
from ..trace.checks import check_probability
from ..trace.data import Candidate, Commit, Draft, Step
from .base import Block, Reply, ends_output, propose
from .config import DecodeConfig
from .registry import DecoderSpec, Knob
from .sbd import Decoding
from .steps import draft, slot_views

DEFAULT_REMASK_THRESHOLD = 0.5  # re-read probability of the held token below which a pending gap fill is remasked


def check_threshold(value) -> float:
    return check_probability(value, "remask_threshold")


class RemaskDecoding(Decoding):
    """One remasking decode of ``prompt``: ``config`` (a ``DecodeConfig``, temperature 0, not verified) gives the
    rule, γ, block size, length, stop and ``top_n``; ``remask_threshold`` the knob. ``steps()`` then ``trace()``."""

    def __init__(
        self,
        model: CausalModel,
        prompt: str,
        config: DecodeConfig | None = None,
        remask_threshold: float = DEFAULT_REMASK_THRESHOLD,
    ):
        super().__init__(model, prompt, config)
        self.threshold = check_threshold(remask_threshold)
        if self.config.temperature != 0:
            raise ValueError(
                f"temperature: remasking re-reads the argmax's confidence; needs 0, got {self.config.temperature!r}"
            )
        if self.config.verify or self.config.gap_free:
            name = "verify" if self.config.verify else "gap_free"
            raise ValueError(f"{name}: remasking takes back gap fills; it runs without {name}")

    def loop(self):
        """SBD's block loop (``BlockLoop``), never verified; returns the output ids and their ``Stop``."""
        return (yield from self.block_loop())

    # A slot of the block is open (the mask id), pending (a gap fill held, ``self._held``, not final), or done
    # (``Block.final``). ``BlockLoop`` decodes the live slots (``live_slots``: none right of a done stop token).
    def begin_block(self, block: Block) -> None:
        self._held: set[int] = set()  # pending slots: their token is held in ``block.tokens``, fed masked
        self._stood: dict[int, Draft] = {}  # a done slot's draft as it was committed
        self._remasked: set[int] = set()

    def fed(self, block: Block) -> list[int]:
        """Done slots as their tokens, the others masked; so are done slots right of a done stop token, which
        can never reach the output."""
        cut = next(
            (
                s
                for s in range(block.size)
                if block.final[s] and ends_output(self.model, block.tokens[s], self.config.stop)
            ),
            block.size,
        )
        return [t if block.final[s] and s <= cut else block.mask_id for s, t in enumerate(block.tokens)]

    def read_call(self, block: Block, live: list[int], reply: Reply, call: int, n_input: int, started: float) -> Step:
        model, config, k, tokens = self.model, self.config, block.size, block.tokens
        proposal = propose(model, reply.blocks[0], 0.0, None)  # (k, V): every slot of the block
        probs = proposal.probs
        top_p, top_i = torch.topk(probs, min(config.top_n, probs.shape[-1]), -1)
        read = {s: self._draft(s, proposal, top_p, top_i) for s in range(k) if not block.final[s]}
        open_before = [s for s in live if s not in self._held]
        renoised = []
        for s in [s for s in live if s in self._held]:
            if float(probs[s, tokens[s]]) < self.threshold and s not in self._remasked:
                block.reopen(s)
                self._held.discard(s)
                self._remasked.add(s)
                renoised.append(s)
            elif not any(o < s for o in open_before):
                block.write(s, tokens[s])
                self._held.discard(s)
        commits: list[Commit] = []
        if open_before:
            commits, _ = draft(model, config.commit_rule, open_before, proposal.rows(open_before), self.knob_intervals)
            chosen = {c.slot for c in commits}
            open_after = [s for s in range(k) if not block.final[s] and s not in self._held and s not in chosen]
            commits = [replace(c, gap=sum(1 for s in open_after if s < c.slot)) for c in commits]
            for c in commits:
                if c.gap:
                    tokens[c.slot] = c.token_id
                    self._held.add(c.slot)
                else:
                    block.write(c.slot, c.token_id)
        for s in range(k):
            if block.final[s] and s not in self._stood:
                self._stood[s] = replace(
                    read[s], accepted=True, held_id=tokens[s], held_text=model.token_text(tokens[s])
                )
        live_held = {s for s in self._held if s in live}  # a held slot right of a done stop token is dropped
        canvas = tuple(
            self._stood[s]
            if s in self._stood
            else replace(
                read[s],
                accepted=s in live_held,
                held_id=tokens[s] if s in live_held else None,
                held_text=model.token_text(tokens[s]) if s in live_held else None,
            )
            for s in range(k)
        )
        return Step(
            call=call,
            block=block.index,
            block_start=len(self.prompt_ids) + block.start,
            block_size=k,
            step=block.steps,
            masked=tuple(open_before),
            slots=slot_views(model, open_before, proposal.rows(open_before), config.top_n),
            commits=tuple(commits),
            wall_time=time.perf_counter() - started,
            n_input=n_input,
            canvas=canvas,
            renoised=tuple(renoised),
        )

    def _draft(self, slot: int, proposal, top_p, top_i) -> Draft:
        """Slot ``slot``'s draft in this call (its proposal, confidence, entropy and top candidates)."""
        top = tuple(
            Candidate(int(i), self.model.token_text(int(i)), float(p))
            for p, i in zip(top_p[slot].tolist(), top_i[slot].tolist())
        )
        token = int(proposal.tokens[slot])  # the argmax, unless that is the mask id
        return Draft(
            slot,
            token,
            self.model.token_text(token),
            float(proposal.confidence[slot]),
            float(proposal.entropy[slot]),
            top,
            False,
        )

    def trace_settings(self) -> dict:
        return {**self.config.as_dict(), "decoder": "remask", "remask_threshold": self.threshold}


REMASK = DecoderSpec(
    name="remask",
    label="SBD + remasking",
    decoding=RemaskDecoding,
    takes=("rule", "gamma", "block_size"),
    own={"remask_threshold": DEFAULT_REMASK_THRESHOLD},
    knob=Knob("gamma"),
    model="sbd",
    color="#D55E00",
)
SPECS = (REMASK,)
