"""Jacobi decoding: greedy NTP's exact text, several tokens per call when a guess holds.

Each call feeds a guess of the next ``block_size`` tokens causally after the accepted text. Row i of the causal
logits is NTP's greedy token at guess position i given the guesses before it, so the rows are exact as long as
the guesses before them were right: the decode keeps the guesses that equal their row's token, and then the first
row that disagrees (or, with every guess right, the row after the last): at least one exact token per call, so
never more calls than greedy NTP. The rows it did not keep are the next guess: the fixed-point iteration
``guess <- argmax f(guess)``, restarted after each accepted prefix. Works on any causal LM; the SBD model's
mask-slot head is not used.

Each call is a step of its own block: the fed guesses are drafts that NTP checks (``Step.checks``), the first
wrong guess a ``Rollback`` (``sbd_viz.decoders.steps.checked_step``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Generator

from .ntp import _ntp_config
from .registry import DecoderSpec, Knob
from .sbd import Decoding, _trace
from ..model import CacheCut, ModelCall
from .base import Stop, find_stop, greedy
from .steps import checked_step
from ..trace import DRAFTS_CHECKED, Trace


class JacobiDecoding(Decoding):
    """One Jacobi decode of ``prompt`` (a ``DecodeConfig``: ``block_size`` is the guess length plus one, the
    tokens one call can write; ``max_new_tokens``, ``stop`` and ``top_n`` apply). ``steps()`` then ``trace()``,
    as ``Decoding``."""

    def requests(self) -> Generator[ModelCall | CacheCut, object, None]:
        self._start()
        return self._keep_output(self._requests())

    def _requests(self):
        model, config = self.model, self.config
        n_prompt, k = len(self.prompt_ids), self.config.block_size
        pending = list(self.prompt_ids)  # the accepted text not yet in the cache: its last token, or the prompt
        generated: list[int] = []
        guess: list[int] = []
        call, found = 0, None
        while len(generated) < config.max_new_tokens:
            room = config.max_new_tokens - len(generated)
            # the guess: what the last call predicted past its accepted tokens, padded with the last token
            guess = (guess + [pending[-1]] * k)[: min(k, room) - 1]
            cached = n_prompt + len(generated) - len(pending)  # the cache's length before the call
            reply = yield ModelCall(pending + guess, [], len(guess) + 1)
            rows = reply.causal  # (len(guess) + 1, V)
            t0 = time.perf_counter()
            ntp = greedy(model, rows).tolist()
            agree = next((i for i, g in enumerate(guess) if g != ntp[i]), len(guess))
            kept = ntp[: agree + 1]
            found = find_stop(model, generated + kept, len(generated) + 1, config.stop)
            kept = kept[: found.index - len(generated)] if found else kept
            step = checked_step(model, call, n_prompt + len(generated), guess, rows, kept, len(pending) + len(guess),
                                0.0, config.top_n)
            # the cache keeps the fed tokens up to the last right guess; the last kept token is fed next call
            yield CacheCut(cached + len(pending) + len(kept) - 1)
            self._steps.append(replace(step, wall_time=reply.seconds + time.perf_counter() - t0))
            generated += kept
            pending, guess, call = kept[-1:], ntp[agree + 1:], call + 1
            if found:
                break
        return generated, found or Stop(len(generated), "length")

    def trace(self) -> Trace:
        self._finished()
        config = {**_ntp_config(self.config), "decoder": "jacobi", "rule": "jacobi",
                  "block_size": self.config.block_size, "exact": True, **DRAFTS_CHECKED}
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      config)


JACOBI = DecoderSpec(name="jacobi", label="Jacobi", decoding=JacobiDecoding, takes=("block_size",), exact=True,
                     knob=Knob("block_size", 1, 32, 1), model="causal")
SPECS = (JACOBI,)
