"""Prompt lookup decoding: drafts copied from earlier in the text, checked by greedy NTP; greedy's exact text.

Each call drafts up to ``prompt_lookup_num_tokens`` tokens with ``lookup_drafts`` (the prompt-lookup rule of
transformers' ``PromptLookupCandidateGenerator``, which ``generate(prompt_lookup_num_tokens=N)`` runs: find the
last n-gram of the prompt and the text so far earlier in it, the longest n first, and copy what followed it),
feeds them causally after the accepted text, and keeps the drafts greedy NTP agrees with plus NTP's next token,
as Jacobi does (``sbd_viz.decoders.jacobi``): the loop is ``sbd_viz.decoders.run.DraftAndCheck`` (``requests()``,
served by ``serve`` or ``decode_batch``), so a decode shares no state with another and patches nothing of
transformers; the drafter is tested against transformers' generator. Each call is a step of its own block, the
drafts checked by NTP as in ``sbd_viz.decoders.steps.checked_step``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..models.base import CausalModel
from ..trace.checks import check_whole
from ..trace.data import Trace
from .config import DecodeConfig
from .door import decode
from .registry import DecoderSpec, Knob
from .run import DraftAndCheck

DEFAULT_LOOKUP_TOKENS = 10  # drafts per call, the value HF's documentation uses
DEFAULT_NGRAM = 2  # the longest n-gram looked up when max_matching_ngram_size is None: transformers' default


def lookup_drafts(
    ids: Sequence[int],
    num_tokens: int,
    max_ngram: int = DEFAULT_NGRAM,
    stop_ids: Iterable[int] = (),
    forbidden: Iterable[int] = (),
) -> list[int]:
    """The prompt-lookup drafts after ``ids`` (the prompt and the text so far): for n from ``max_ngram`` down to 1
    (at most ``len(ids) - 1``), the *first* (leftmost) earlier occurrence of the last n tokens that has a token
    after it; the drafts are the tokens that follow it, up to ``num_tokens`` and up to the end of ``ids`` (an
    occurrence near the end gives fewer). A draft in ``forbidden`` (tokens the decode never writes: the mask id)
    ends the drafts before it; if that leaves none, the next occurrence is tried, then the next shorter n-gram.
    The drafts then end before the first of ``stop_ids`` (EOS). No occurrence: no drafts.

    This is ``transformers.generation.candidate_generator.PromptLookupCandidateGenerator.get_candidates``'s rule
    (with ``eos_token_id`` = ``stop_ids``, a ``SuppressTokensLogitsProcessor`` of ``forbidden`` and a
    ``max_length`` past the text), on a plain list."""
    ids = list(ids)
    stop_ids, forbidden = set(stop_ids), set(forbidden)
    length = len(ids)
    for n in range(min(max_ngram, length - 1), 0, -1):
        tail = ids[length - n :]
        for i in range(length - n):  # the occurrence at length - n is the tail itself: nothing follows it
            if ids[i] != tail[0] or ids[i : i + n] != tail:
                continue
            chosen = ids[i + n : i + n + num_tokens]
            cut = next((j for j, t in enumerate(chosen) if t in forbidden), len(chosen))
            if cut == 0:
                continue
            chosen = chosen[:cut]
            return chosen[: next((j for j, t in enumerate(chosen) if t in stop_ids), len(chosen))]
    return []


class LookupDecoding(DraftAndCheck):
    """One prompt-lookup decode of ``prompt``, greedy; ``config`` gives ``max_new_tokens``, ``stop`` and ``top_n``.
    ``prompt_lookup_num_tokens``: the most drafts a call feeds; ``max_matching_ngram_size``: the longest n-gram
    looked up (None: transformers' default, 2). ``steps()`` then ``trace()``; ``requests()`` is the same loop as
    cache requests (``decode_batch``)."""

    def __init__(
        self,
        model: CausalModel,
        prompt: str,
        config: DecodeConfig | None = None,
        prompt_lookup_num_tokens: int = DEFAULT_LOOKUP_TOKENS,
        max_matching_ngram_size: int | None = None,
    ):
        super().__init__(model, prompt, config)
        for name, value in (
            ("prompt_lookup_num_tokens", prompt_lookup_num_tokens),
            ("max_matching_ngram_size", 1 if max_matching_ngram_size is None else max_matching_ngram_size),
        ):
            check_whole(value, name, 1, 64)
        self.lookup_tokens, self.ngram = prompt_lookup_num_tokens, max_matching_ngram_size
        self._stop_ids = () if model.eos_token_id is None else (model.eos_token_id,)
        self._forbidden = () if model.mask_id is None else (model.mask_id,)  # no decode writes the mask id

    def draft(self, ids: Sequence[int], limit: int) -> list[int]:
        ngram = DEFAULT_NGRAM if self.ngram is None else self.ngram
        return lookup_drafts(ids, self.lookup_tokens, ngram, self._stop_ids, self._forbidden)[:limit]

    def trace_settings(self) -> dict:
        return {
            **super().trace_settings(),
            "decoder": "prompt_lookup",
            "rule": "prompt_lookup",
            "block_size": self.lookup_tokens + 1,
            "prompt_lookup_num_tokens": self.lookup_tokens,
            "max_matching_ngram_size": self.ngram,
        }


PROMPT_LOOKUP = DecoderSpec(
    name="prompt_lookup",
    label="prompt lookup",
    decoding=LookupDecoding,
    exact=True,
    model="causal",
    own={"prompt_lookup_num_tokens": DEFAULT_LOOKUP_TOKENS, "max_matching_ngram_size": None},
    knob=Knob("prompt_lookup_num_tokens", 1, 20, 1),
    color="#CC79A7",
)
SPECS = (PROMPT_LOOKUP,)


def decode_prompt_lookup(
    model: CausalModel,
    prompt: str,
    max_new_tokens: int = 64,
    stop: str | Iterable[str] | None = None,
    top_n: int = 5,
    prompt_lookup_num_tokens: int = DEFAULT_LOOKUP_TOKENS,
    max_matching_ngram_size: int | None = None,
) -> Trace:
    """Greedy decoding with prompt lookup; the text is greedy NTP's, ``trace.nfe`` counts the calls, the prompt's
    prefill included. A shortcut to ``sv.decode(..., decoder="prompt_lookup")``."""
    return decode(
        model,
        prompt,
        PROMPT_LOOKUP.name,
        max_new_tokens,
        stop,
        top_n,
        prompt_lookup_num_tokens=prompt_lookup_num_tokens,
        max_matching_ngram_size=max_matching_ngram_size,
    )
