"""Prompt lookup decoding: drafts copied from earlier in the text, checked by greedy NTP; greedy's exact text.

Each call drafts up to ``prompt_lookup_num_tokens`` tokens with ``lookup_drafts`` (the prompt-lookup rule of
transformers' ``PromptLookupCandidateGenerator``, which ``generate(prompt_lookup_num_tokens=N)`` runs: find the
last n-gram of the prompt and the text so far earlier in it, the longest n first, and copy what followed it),
feeds them causally after the accepted text, and keeps the drafts greedy NTP agrees with plus NTP's next token,
as Jacobi does (``sbd_viz.decoders.jacobi``). The loop is this package's own (``requests()``, served by ``serve``
or ``decode_batch``), so a decode shares no state with another and patches nothing of transformers; the drafter is
tested against transformers' generator. Each call is a step of its own block, the drafts checked by NTP as in
``sbd_viz.decoders.steps.checked_step``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Generator, Iterable, Sequence

from ..checks import check_whole
from ..model import CacheCut, ModelCall, SBDModel
from .base import Stop, find_stop, greedy
from .door import decode
from .ntp import _ntp_config
from .registry import DecoderSpec, Knob
from .sbd import DecodeConfig, Decoding, _trace
from .steps import checked_step
from ..trace import DRAFTS_CHECKED, Trace

DEFAULT_LOOKUP_TOKENS = 10  # drafts per call, the value HF's documentation uses
DEFAULT_NGRAM = 2  # the longest n-gram looked up when max_matching_ngram_size is None: transformers' default


def lookup_drafts(ids: Sequence[int], num_tokens: int, max_ngram: int = DEFAULT_NGRAM,
                  stop_ids: Iterable[int] = (), forbidden: Iterable[int] = ()) -> list[int]:
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
        tail = ids[length - n:]
        for i in range(length - n):  # the occurrence at length - n is the tail itself: nothing follows it
            if ids[i] != tail[0] or ids[i:i + n] != tail:
                continue
            chosen = ids[i + n: i + n + num_tokens]
            cut = next((j for j, t in enumerate(chosen) if t in forbidden), len(chosen))
            if cut == 0:
                continue
            chosen = chosen[:cut]
            return chosen[: next((j for j, t in enumerate(chosen) if t in stop_ids), len(chosen))]
    return []


class LookupDecoding(Decoding):
    """One prompt-lookup decode of ``prompt``, greedy; ``config`` gives ``max_new_tokens``, ``stop`` and ``top_n``.
    ``prompt_lookup_num_tokens``: the most drafts a call feeds; ``max_matching_ngram_size``: the longest n-gram
    looked up (None: transformers' default, 2). ``steps()`` then ``trace()``, as ``Decoding``; ``requests()`` is
    the same loop as cache requests (``decode_batch``)."""

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None,
                 prompt_lookup_num_tokens: int = DEFAULT_LOOKUP_TOKENS, max_matching_ngram_size: int | None = None):
        super().__init__(model, prompt, config)
        for name, value in (("prompt_lookup_num_tokens", prompt_lookup_num_tokens),
                            ("max_matching_ngram_size", 1 if max_matching_ngram_size is None
                             else max_matching_ngram_size)):
            check_whole(value, name, 1, 64)
        self.lookup_tokens, self.ngram = prompt_lookup_num_tokens, max_matching_ngram_size

    def requests(self) -> Generator[ModelCall | CacheCut, object, None]:
        self._start()
        return self._keep_output(self._requests())

    def _requests(self):
        model, config = self.model, self.config
        n_prompt, ngram = len(self.prompt_ids), DEFAULT_NGRAM if self.ngram is None else self.ngram
        stop_ids = () if model.eos_token_id is None else (model.eos_token_id,)
        forbidden = () if model.mask_id is None else (model.mask_id,)  # no decode writes the mask id
        pending = list(self.prompt_ids)  # the accepted text not yet in the cache: its last token, or the prompt
        generated: list[int] = []
        call, found = 0, None
        while len(generated) < config.max_new_tokens:
            room = config.max_new_tokens - len(generated)  # a call keeps at most its drafts + 1 tokens
            drafts = lookup_drafts(self.prompt_ids + generated, self.lookup_tokens, ngram, stop_ids,
                                   forbidden)[: room - 1]
            cached = n_prompt + len(generated) - len(pending)  # the cache's length before the call
            reply = yield ModelCall(pending + drafts, [], len(drafts) + 1)
            rows = reply.causal  # (len(drafts) + 1, V)
            t0 = time.perf_counter()
            ntp = greedy(model, rows).tolist()
            agree = next((i for i, d in enumerate(drafts) if d != ntp[i]), len(drafts))
            kept = ntp[: agree + 1]
            found = find_stop(model, generated + kept, len(generated) + 1, config.stop)
            kept = kept[: found.index - len(generated)] if found else kept
            step = checked_step(model, call, n_prompt + len(generated), drafts, rows, kept,
                                len(pending) + len(drafts), 0.0, config.top_n)
            # the cache keeps the fed tokens up to the last right draft; the last kept token is fed next call
            yield CacheCut(cached + len(pending) + len(kept) - 1)
            self._steps.append(replace(step, wall_time=reply.seconds + time.perf_counter() - t0))
            generated += kept
            pending, call = kept[-1:], call + 1
            if found:
                break
        return generated, found or Stop(len(generated), "length")

    def trace(self) -> Trace:
        self._finished()
        config = {**_ntp_config(self.config), "decoder": "prompt_lookup", "rule": "prompt_lookup",
                  "block_size": self.lookup_tokens + 1, "prompt_lookup_num_tokens": self.lookup_tokens,
                  "max_matching_ngram_size": self.ngram, "exact": True, **DRAFTS_CHECKED}
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      config)


PROMPT_LOOKUP = DecoderSpec(
    name="prompt_lookup", label="prompt lookup", decoding=LookupDecoding, exact=True, model="causal",
    own={"prompt_lookup_num_tokens": DEFAULT_LOOKUP_TOKENS, "max_matching_ngram_size": None},
    knob=Knob("prompt_lookup_num_tokens", 1, 20, 1))
SPECS = (PROMPT_LOOKUP,)


def decode_prompt_lookup(model: SBDModel, prompt: str, max_new_tokens: int = 64,
                         stop: str | Iterable[str] | None = None, top_n: int = 5,
                         prompt_lookup_num_tokens: int = DEFAULT_LOOKUP_TOKENS,
                         max_matching_ngram_size: int | None = None) -> Trace:
    """Greedy decoding with prompt lookup; the text is greedy NTP's, ``trace.nfe`` counts the calls, the prompt's
    prefill included. A shortcut to ``sv.decode(..., decoder="prompt_lookup")``."""
    return decode(model, prompt, PROMPT_LOOKUP.name, max_new_tokens, stop, top_n,
                  prompt_lookup_num_tokens=prompt_lookup_num_tokens, max_matching_ngram_size=max_matching_ngram_size)
