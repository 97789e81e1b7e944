"""Jacobi decoding: greedy NTP's exact text, several tokens per call when a guess holds.

``JacobiDecoding`` is the decoder, ``JACOBI`` its spec. Which guesses a call keeps, and how it is recorded:
docs/decoders.md.
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
        self._guess = verdicts[accepted + 1 :]  # the rows past the first wrong guess: the fixed-point iteration

    def trace_settings(self) -> dict:
        return {**super().trace_settings(), "decoder": "jacobi", "rule": "jacobi", "block_size": self.config.block_size}


JACOBI = DecoderSpec(
    name="jacobi",
    label="Jacobi",
    decoding=JacobiDecoding,
    takes=("block_size",),
    exact=True,
    knob=Knob("block_size", 1, 32, 1),
    model="causal",
    color="#009E73",
)
SPECS = (JACOBI,)
