"""Prompt lookup decoding through HF ``generate(prompt_lookup_num_tokens=N)``, recorded call by call.

The loop is transformers' own assisted generation with its ``PromptLookupCandidateGenerator``: each call drafts
up to N tokens by finding the last n-gram of the text earlier in it and copying what followed, feeds them to the
model, and keeps the drafts greedy NTP agrees with plus NTP's next token: greedy's exact text. The recording wraps
the candidate generator ``generate`` builds: ``get_candidates`` (the drafts of a call) and
``update_candidate_strategy`` (that call's logits and the text after it). Each call is a step of its own block,
the drafts checked by NTP as in ``sbd_viz.decoders.steps.checked_step``.
"""

from __future__ import annotations

import threading
import time
from typing import Generator, Iterable

import torch

from .ntp import _ntp_config
from .door import decode
from .registry import DecoderSpec, Knob
from .sbd import DecodeConfig, _Run, _trace
from ..checks import check_whole
from ..model import SBDModel
from .base import Stop, StopCriterion, find_stop, generate_stops
from .steps import checked_step
from ..trace import DRAFTS_CHECKED, Step, Trace

DEFAULT_LOOKUP_TOKENS = 10  # drafts per call, the value HF's documentation uses
# the recording wraps a method of the model itself, so two recorded decodes (the app runs two at a time) take turns
_RECORDING = threading.Lock()


class _Recorder:
    """Wraps the candidate generator of one ``generate``: notes each call's drafts, logits and kept tokens."""

    def __init__(self, model: SBDModel, n_prompt: int, top_n: int):
        self.model, self.n_prompt, self.top_n = model, n_prompt, top_n
        self.steps: list[Step] = []
        self.drafts: list[int] = []
        self.clock = time.perf_counter()

    def wrap(self, generator):
        get, update = generator.get_candidates, generator.update_candidate_strategy

        def get_candidates(input_ids, *args, **kwargs):
            candidates, logits = get(input_ids, *args, **kwargs)
            self.drafts = candidates[0, input_ids.shape[1]:].tolist()
            return candidates, logits

        def update_candidate_strategy(input_ids, scores, num_matches):
            self.record(input_ids[0].tolist(), scores[0].float().cpu(), int(num_matches))
            return update(input_ids, scores, num_matches)

        generator.get_candidates, generator.update_candidate_strategy = get_candidates, update_candidate_strategy
        return generator

    def record(self, ids: list[int], logits: torch.Tensor, num_matches: int) -> None:
        """One call: ``ids`` the text after it, ``logits`` (drafts + 1, V) the rows it scored the drafts with."""
        kept = ids[len(ids) - num_matches - 1:]
        start = len(ids) - len(kept)
        call = len(self.steps)
        n_input = start + len(self.drafts) if call == 0 else 1 + len(self.drafts)
        now = time.perf_counter()
        step = checked_step(self.model, call, start, self.drafts, logits, kept, n_input, now - self.clock, self.top_n)
        self.steps.append(step)
        self.clock = now


class LookupDecoding(_Run):
    """One prompt-lookup decode of ``prompt``: HF ``generate(prompt_lookup_num_tokens=N)`` on the same weights,
    greedy; ``config`` gives ``max_new_tokens``, ``stop`` and ``top_n``. ``steps()`` runs ``generate`` and then
    yields one step per call (the loop is transformers'; the recording listens to it); ``trace()`` after.
    ``max_matching_ngram_size``: the longest n-gram looked up (None: HF's default). Not batchable: ``generate``
    serves its own calls."""

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None,
                 prompt_lookup_num_tokens: int = DEFAULT_LOOKUP_TOKENS, max_matching_ngram_size: int | None = None):
        super().__init__(model, prompt, config)
        for name, value in (("prompt_lookup_num_tokens", prompt_lookup_num_tokens),
                            ("max_matching_ngram_size", 1 if max_matching_ngram_size is None
                             else max_matching_ngram_size)):
            check_whole(value, name, 1, 64)
        self.lookup_tokens, self.ngram = prompt_lookup_num_tokens, max_matching_ngram_size

    @torch.inference_mode()
    def steps(self) -> Generator[Step, None, None]:
        from transformers import StoppingCriteriaList

        self._start()
        model, config, prompt_ids = self.model, self.config, self.prompt_ids
        hf = model.model
        recorder = _Recorder(model, len(prompt_ids), config.top_n)
        build = hf._get_candidate_generator

        def get_candidate_generator(*args, **kwargs):
            return recorder.wrap(build(*args, **kwargs))

        ids = torch.tensor([prompt_ids], device=model.device)
        extra = {} if self.ngram is None else {"max_matching_ngram_size": self.ngram}
        with _RECORDING:
            hf._get_candidate_generator = get_candidate_generator
            try:
                out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=config.max_new_tokens,
                                  do_sample=False, temperature=None, top_p=None, top_k=None,
                                  prompt_lookup_num_tokens=self.lookup_tokens,
                                  stopping_criteria=StoppingCriteriaList([StopCriterion(model, len(prompt_ids),
                                                                                        config.stop)]),
                                  eos_token_id=model.eos_token_id, pad_token_id=model.eos_token_id,
                                  **generate_stops(model), **extra)
            finally:
                del hf._get_candidate_generator
        new = out[0, len(prompt_ids):].tolist()
        stop = find_stop(model, new, 1, config.stop) or Stop(len(new), "length")
        self._steps.extend(recorder.steps)
        self.output_ids, self.stop_reason = new[: stop.index], stop.reason
        yield from self._steps

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
    """Greedy decoding with HF prompt lookup; the text is greedy NTP's, ``trace.nfe`` counts ``generate``'s calls,
    the prompt's prefill included. A shortcut to ``sv.decode(..., decoder="prompt_lookup")``."""
    return decode(model, prompt, PROMPT_LOOKUP.name, max_new_tokens, stop, top_n,
                  prompt_lookup_num_tokens=prompt_lookup_num_tokens, max_matching_ngram_size=max_matching_ngram_size)
