"""The decode skeleton: what every decoder of this package shares, written once.

- the named types a decode keeps (the request and reply are ``sbd_viz.models.call``'s): ``Stop`` (where and why an
  output ends) and ``Proposal`` (a call's token choice per slot);
- the stop rule: ``find_stop`` is the one place an output's end is looked for (EOS, or a stop string in the text
  *with special tokens kept*, so a stop string that is a special token, as chat models' are, is found);
  ``ends_output`` and ``live_slots`` ("generate until": slots right of a final stop token are not decoded) and
  ``StopCriterion`` (the same rule for HF ``generate``) are built on it;
- ``greedy`` and ``propose``: a token choice never holds the mask id;
- ``Block`` and ``BlockLoop``: the block loop (a block of mask slots filled over calls, the stop rule after each
  call, the next block fed causally with the first call of the block after it) that plain SBD
  (``sbd_viz.decoders.sbd``) and remasking (``sbd_viz.decoders.remask``) run; verified SBD
  (``sbd_viz.decoders.verified.single``) drives the same ``Block`` and stop rule through its draft-and-check loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..models.call import CacheCut, Model, ModelCall, Reply
from ..trace.data import Step

if TYPE_CHECKING:  # the config module reads the rules, which read this module's Proposal
    from .config import DecodeConfig

REASONS = ("stop", "eos", "length")


@dataclass(frozen=True)
class Stop:
    """Where an output ends: its length ``index`` (up to and including the stop) and why ('stop', 'eos', 'length')."""

    index: int
    reason: str

    def __post_init__(self):
        if self.reason not in REASONS:
            raise ValueError(f"reason: must be one of {REASONS}, got {self.reason!r}")


@dataclass(frozen=True)
class Proposal:
    """A call's choice for each of m slots: ``probs`` (m, V) the model's distribution as it gave it (the mask id's
    share included), ``entropy`` (m,) nats of it, ``tokens`` (m,) the proposed tokens (never the mask id) and
    ``confidence`` (m,) their probabilities under ``probs``. The (m,) vectors are on the CPU, where the rules run."""

    probs: torch.Tensor
    entropy: torch.Tensor
    tokens: torch.Tensor
    confidence: torch.Tensor

    def rows(self, index) -> Proposal:
        """The proposal of some of the slots (``index``: positions into the m slots)."""
        index = torch.as_tensor(index, dtype=torch.long)
        return Proposal(
            self.probs[index.to(self.probs.device)], self.entropy[index], self.tokens[index], self.confidence[index]
        )


def row_entropy(probs: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """(m, V) -> (m,) nats. A token the model rules out (logit -inf) adds 0, not 0 * -inf = NaN."""
    return -torch.where(probs > 0, probs * logp, 0.0).sum(-1)


def greedy(model, scores: torch.Tensor) -> torch.Tensor:
    """(m, V) logits or probabilities -> (m,) argmax, never the mask id: a decode never writes the mask token,
    even where the model ranks it first (it is a slot's placeholder, not text). Rows whose argmax is another
    token, as it is everywhere on a trained model, are the plain argmax's."""
    best = scores.argmax(-1)
    mask_id = model.mask_id
    if mask_id is not None and bool((best == mask_id).any()):
        rows = (best == mask_id).nonzero().squeeze(-1)
        others = scores[rows].clone()
        others[:, mask_id] = -torch.inf
        best[rows] = others.argmax(-1)
    return best


def propose(model, logits: torch.Tensor, temperature: float, gen: torch.Generator | None) -> Proposal:
    """(m, V) slot logits -> the slots' ``Proposal``: the argmax at temperature 0, else a sample of
    softmax(logits / temperature) drawn with ``gen``.

    The mask id is never proposed. A slot whose draw is the mask id draws again with the mask's logit at -inf:
    exactly the sampling distribution conditioned on not the mask, and the generator's stream is untouched for
    every slot that did not draw it. What the step records stays the model's own: ``probs`` and ``entropy`` are
    of the untempered distribution with the mask's share left in, and ``confidence`` is the proposed token's
    probability there (not renormalised), so a slot whose model wanted the mask reads as unsure of its token."""
    logp = torch.log_softmax(logits, -1)  # (m, V)
    probs = logp.exp()
    mask_id = model.mask_id
    if temperature == 0:
        tokens = greedy(model, probs)
    else:
        tokens = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen).squeeze(-1)
        if mask_id is not None and bool((tokens == mask_id).any()):
            rows = (tokens == mask_id).nonzero().squeeze(-1)
            others = logits[rows] / temperature
            others[:, mask_id] = -torch.inf
            tokens[rows] = torch.multinomial(torch.softmax(others, -1), 1, generator=gen).squeeze(-1)
    confidence = probs.gather(-1, tokens[:, None]).squeeze(-1)
    return Proposal(probs, row_entropy(probs, logp).cpu(), tokens.cpu(), confidence.cpu())


# -- the stop rule ---------------------------------------------------------------------------------------------
def find_stop(model, ids: list[int], first: int, stop: tuple[str, ...]) -> Stop | None:
    """Where ``ids`` end: the first length n >= ``first`` whose last token is EOS, or whose text holds a stop
    string; None if none does. The text keeps special tokens (``model.raw_text``), so a stop string that is a
    special token is found like any other."""
    eos = model.eos_token_id
    for n in range(max(first, 1), len(ids) + 1):
        if eos is not None and ids[n - 1] == eos:
            return Stop(n, "eos")
        if stop and any(s in model.raw_text(ids[:n]) for s in stop):
            return Stop(n, "stop")
    return None


def ends_output(model, token_id: int, stop: tuple[str, ...]) -> bool:
    """Whether this one token ends an output by itself (``find_stop`` on it alone)."""
    return find_stop(model, [token_id], 1, stop) is not None


def live_slots(model, tokens: list[int], final: list[bool], stop: tuple[str, ...]) -> list[int]:
    """The slots of a block still to decode ("generate until"): the open (not final) slots left of the first
    final slot whose token ends the output, which slots right of it can never reach. If that leaves none while
    slots are open, that token did not end the output after all (its text in context holds no stop), and every
    open slot is decoded: a block always ends with every slot final, so no mask id reaches an output."""
    open_slots = [s for s in range(len(tokens)) if not final[s]]
    cut = next((s for s in range(len(tokens)) if final[s] and ends_output(model, tokens[s], stop)), len(tokens))
    return [s for s in open_slots if s < cut] or open_slots


class StopCriterion:
    """``find_stop`` as an HF ``generate`` stopping criterion: the new text holds a stop string anywhere (HF's own
    ``stop_strings`` look at the end of the text only, and a call that keeps several tokens can carry the stop
    inside them; they also need a tokenizer that can spell ``"abcdef"``, which a word-level one may not)."""

    def __init__(self, model, n_prompt: int, stop: tuple[str, ...]):
        self.model, self.n_prompt, self.stop = model, n_prompt, tuple(stop)

    def __call__(self, input_ids, scores, **kwargs) -> torch.Tensor:
        new = input_ids[0, self.n_prompt :].tolist()
        hit = bool(self.stop) and any(s in self.model.raw_text(new) for s in self.stop)
        return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)


def generate_stops(model) -> dict:
    """What HF ``generate`` needs so it never writes the mask id (``suppress_tokens``), as every decode here."""
    return {} if model.mask_id is None else {"suppress_tokens": [model.mask_id]}


# -- the block loop --------------------------------------------------------------------------------------------
@dataclass
class Block:
    """The block being decoded: ``tokens`` holds the mask id in each open slot; ``final`` marks the slots whose
    token is final (committed for good). A decoder may hold a token in a slot that is not final yet
    (remasking's pending gap fills)."""

    index: int
    start: int  # generated position of slot 0
    tokens: list[int]
    final: list[bool]
    mask_id: int
    steps: int = 0  # steps recorded in this block so far

    @classmethod
    def empty(cls, index: int, start: int, size: int, mask_id: int) -> Block:
        return cls(index, start, [mask_id] * size, [False] * size, mask_id)

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def prefix(self) -> int:
        """The final prefix is ``tokens[:prefix]``: up to the first slot that is not final."""
        return self.final.index(False) if False in self.final else self.size

    def open_slots(self) -> list[int]:
        return [s for s in range(self.size) if not self.final[s]]

    def write(self, slot: int, token: int) -> None:
        """Commit ``token`` to ``slot`` for good."""
        self.tokens[slot], self.final[slot] = token, True

    def reopen(self, slot: int) -> None:
        self.tokens[slot], self.final[slot] = self.mask_id, False

    def reopen_after(self, slot: int) -> tuple[int, ...]:
        """Open again the final slots right of ``slot`` (they were drafted given its token, which was just
        rejected). Returns them."""
        dropped = tuple(s for s in range(slot + 1, self.size) if self.final[s])
        for s in dropped:
            self.reopen(s)
        return dropped


class BlockLoop:
    """The block loop of the decoders that fill blocks of mask slots, mixed into a decode run
    (``sbd_viz.decoders.run.DecodeRun``: it reads ``model``, ``config`` and ``prompt_ids`` and ``record``s the
    steps). A decoder gives ``read_call`` (one call's reply -> the block's new state and the step it records) and
    may change ``fed`` (what a call feeds as the block), ``live`` (the slots a call decodes) and ``begin_block``;
    the loop owns the blocks, the calls' causal feed, the stop rule and the output."""

    # what the decode run it is mixed into holds (``DecodeRun``)
    model: Model
    config: DecodeConfig
    prompt_ids: list[int]
    record: Callable[[Step], None]

    def begin_block(self, block: Block) -> None:
        """A new block starts (a decoder that keeps state per block resets it here)."""

    def fed(self, block: Block) -> list[int]:
        """The block's ids as a call feeds them (mask ids in open slots)."""
        return list(block.tokens)

    def live(self, block: Block) -> list[int]:
        """The slots the next call decodes; none: the block is done."""
        return live_slots(self.model, block.tokens, block.final, self.config.stop)

    def read_call(self, block: Block, live: list[int], reply: Reply, call: int, n_input: int, started: float):
        """One call: read ``reply`` for the ``live`` slots, update ``block``, return the call's ``Step``
        (``started``: when its forward began, by ``time.perf_counter``)."""
        raise NotImplementedError(f"{type(self).__name__}.read_call: a block decoder says what a call commits")

    def block_loop(self) -> Generator[ModelCall | CacheCut, Reply, tuple[list[int], Stop]]:
        """Yield ``ModelCall``s (send back a ``Reply``); return the output ids and their ``Stop``."""
        model, config = self.model, self.config
        n_max = config.max_new_tokens
        pending = list(self.prompt_ids)  # final tokens not yet in the cache: fed causally with the next block
        generated: list[int] = []
        call = index = 0
        while len(generated) < n_max:
            size = min(config.block_size, n_max - len(generated))
            block = Block.empty(index, len(generated), size, model.mask_token_id)
            self.begin_block(block)
            checked = 0  # the block's final prefix already searched for a stop
            while live := self.live(block):
                reply = yield ModelCall.fused(pending, self.fed(block))
                started = time.perf_counter() - reply.seconds
                self.record(self.read_call(block, live, reply, call, len(pending) + size, started))
                pending, call = [], call + 1
                block.steps += 1
                if block.prefix > checked:  # a stop in the final prefix ends the output: later slots are dropped
                    found = find_stop(
                        model, generated + block.tokens[: block.prefix], len(generated) + checked + 1, config.stop
                    )
                    checked = block.prefix
                    if found:
                        return (generated + block.tokens)[: found.index], found
            if model.mask_token_id in block.tokens:  # live_slots decodes every slot before a block ends
                raise RuntimeError(f"block {block.index} ended with an open slot")
            generated += block.tokens
            pending, index = list(block.tokens), index + 1
        return generated, Stop(len(generated), "length")
