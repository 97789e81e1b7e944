"""Greedy next-token prediction (NTP): the reference every other decoder is measured against.

``NTPDecoding`` has both paths: ``steps()`` runs HF ``generate`` (greedy, the same weights), recorded one step per
call, the baseline the speedups are measured against; ``requests()`` is the same greedy loop as cache requests
(the argmax of the causal logits at the last token, what ``generate`` computes), so ``decode_batch`` serves NTP
rows beside any other decoder's. The two agree up to float rounding.

(SBD with one-slot blocks is *not* this: its token comes from a mask slot's prediction, a different output of the
same weights, which disagrees with NTP wherever the model is unsure.)
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from dataclasses import replace

import torch

from ..models.call import CacheCut, Model, ModelCall
from ..trace.data import Step, Trace
from .base import Reply, Stop, StopCriterion, find_stop, generate_stops
from .door import decode
from .registry import DecoderSpec
from .run import DecodeRun, greedy_settings
from .steps import ntp_step


class _Clock:
    """A logits processor that only notes when each generation step's forward has finished."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


class NTPDecoding(DecodeRun):
    """One greedy NTP decode of ``prompt``; only ``max_new_tokens``, ``stop`` and ``top_n`` of ``config`` apply.

    ``steps()``: HF ``generate``, recorded (its steps come once ``generate`` returns). ``requests()``: the same
    loop as cache requests, one token per call, for engines that serve calls themselves (``decode_batch``)."""

    # the smallest prefill piece decode_batch feeds an NTP row's prompt in. Measured on the suite at batch 32
    # (2 threads): 1.7x the items/s of whole prompts (a 1-token row no longer pads to a prompt)
    prefill_chunk = 16

    @torch.inference_mode()
    def steps(self) -> Generator[Step, None, None]:
        from transformers import LogitsProcessorList, StoppingCriteriaList

        self.begin()
        model, config, prompt_ids = self.model, self.config, self.prompt_ids
        ids = torch.tensor([prompt_ids], device=model.device)
        clock = _Clock()
        t0 = time.perf_counter()
        out = model.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=config.max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            logits_processor=LogitsProcessorList([clock]),
            output_logits=True,
            return_dict_in_generate=True,
            stopping_criteria=StoppingCriteriaList([StopCriterion(model, len(prompt_ids), config.stop)]),
            eos_token_id=model.eos_token_id,
            pad_token_id=model.eos_token_id,
            **generate_stops(model),
        )
        new = out.sequences[0, len(prompt_ids) :].tolist()
        stop = find_stop(model, new, 1, config.stop) or Stop(len(new), "length")
        new = new[: stop.index]
        times = [t0] + clock.times
        for i, tok in enumerate(new):  # out.logits[i]: (1, V)
            self.record(
                ntp_step(
                    model,
                    i,
                    out.logits[i].float(),
                    len(prompt_ids),
                    len(prompt_ids) if i == 0 else 1,
                    times[i + 1] - times[i],
                    config.top_n,
                    token=tok,
                )
            )
        self.output_ids, self.stop_reason = new, stop.reason
        yield from self.recorded_steps

    def loop(self) -> Generator[ModelCall | CacheCut, object, tuple[list[int], Stop]]:
        """The same greedy loop as cache requests, one token per call (``decode_batch`` serves NTP rows so)."""
        model, config, n_prompt = self.model, self.config, len(self.prompt_ids)
        generated: list[int] = []
        while len(generated) < config.max_new_tokens:
            fed = list(self.prompt_ids) if not generated else generated[-1:]
            reply = yield ModelCall.fused(fed, [], 1)  # reply.causal: (1, V)
            assert isinstance(reply, Reply)  # a model call's answer
            t0 = time.perf_counter()
            step = ntp_step(model, len(generated), reply.causal, n_prompt, len(fed), reply.seconds, config.top_n)
            # the step's wall time: the forward plus this decode's own work, building the step included
            self.record(replace(step, wall_time=reply.seconds + time.perf_counter() - t0))
            generated.append(step.commits[0].token_id)
            stop = find_stop(model, generated, len(generated), config.stop)
            if stop:
                return generated[: stop.index], stop
        return generated, Stop(len(generated), "length")

    def trace_settings(self) -> dict:
        return {"decoder": "ntp", "rule": "ntp", **greedy_settings(self.config)}


NTP = DecoderSpec(name="ntp", label="NTP", decoding=NTPDecoding, exact=True, model="causal", color="#000000")
SPECS = (NTP,)


def decode_ntp(
    model: Model, prompt: str, max_new_tokens: int = 64, stop: str | Iterable[str] | None = None, top_n: int = 5
) -> Trace:
    """The same weights decoded causally and greedily with HF ``generate``: one token per call."""
    return decode(model, prompt, NTP.name, max_new_tokens, stop, top_n)
