"""Jacobi decoding: greedy NTP's exact text, several tokens per call when a guess holds.

Each call feeds a guess of the next ``block_size`` tokens causally after the accepted text. Row i of the causal
logits is NTP's greedy token at guess position i given the guesses before it, so the rows are exact as long as
the guesses before them were right: the decode keeps the guesses that equal their row's token, and then the first
row that disagrees (or, with every guess right, the row after the last): at least one exact token per call, so
never more calls than greedy NTP. The rows it did not keep are the next guess: the fixed-point iteration
``guess <- argmax f(guess)``, restarted after each accepted prefix. Works on any causal LM; the SBD model's
mask-slot head is not used.

Each call is a step of its own block: the fed guesses are drafts that NTP checks (``Step.checks``), the first
wrong guess a ``Rollback`` (``sbd_viz.decoders.steps.checked_step``); the loop is
``sbd_viz.decoders.run.DraftAndCheck``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import DecodeConfig
from .registry import DecoderSpec, Knob
from .run import DraftAndCheck


class JacobiDecoding(DraftAndCheck):
    """One Jacobi decode of ``prompt`` (a ``DecodeConfig``: ``block_size`` is the guess length plus one, the
    tokens one call can write; ``max_new_tokens``, ``stop`` and ``top_n`` apply). ``steps()`` then ``trace()``."""

    def __init__(self, model, prompt: str, config: DecodeConfig | None = None):
        super().__init__(model, prompt, config)
        self._guess: list[int] = []  # what the last call predicted past its accepted tokens

    def draft(self, ids: Sequence[int], limit: int) -> list[int]:
        """The guess: the last call's predictions past its accepted tokens, padded with the last token."""
        k = self.config.block_size
        return (self._guess + [ids[-1]] * k)[: min(k - 1, limit)]

    def checked(self, drafts: list[int], verdicts: list[int], accepted: int) -> None:
        self._guess = verdicts[accepted + 1:]  # the rows past the first wrong guess: the fixed-point iteration

    def trace_settings(self) -> dict:
        return {**super().trace_settings(), "decoder": "jacobi", "rule": "jacobi", "block_size": self.config.block_size}


JACOBI = DecoderSpec(name="jacobi", label="Jacobi", decoding=JacobiDecoding, takes=("block_size",), exact=True,
                     knob=Knob("block_size", 1, 32, 1), model="causal", color="#009E73")
SPECS = (JACOBI,)
