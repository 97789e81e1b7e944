"""The settings of one decode, shared by every decoder built from ``sbd_viz.decoders.run``: ``DecodeConfig``.

A decoder reads the settings its spec ``takes`` from it (``sbd_viz.decoders.registry``) and its own settings as
keyword arguments; every field is checked on construction, and an error names the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models.sbd_model import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE
from ..trace.checks import check_number, check_whole
from .rules import DEFAULT_GAMMA, DEFAULT_RULE, CommitRule

MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class DecodeConfig:
    """Settings of one SBD decode; validated on construction (errors name the argument)."""

    rule: str = DEFAULT_RULE
    gamma: float = DEFAULT_GAMMA
    block_size: int = DEFAULT_BLOCK_SIZE  # decode() and the other entry points default to the model's
    max_new_tokens: int = 64
    temperature: float = 0.0  # 0 = argmax (the paper's setting); > 0 samples with ``seed``
    seed: int = 0
    stop: tuple[str, ...] = ()  # stop strings; decoding also stops at the tokenizer's EOS
    gap_free: bool = False
    top_n: int = 5  # candidates recorded per masked slot
    verify: bool = False  # check every draft against NTP greedy on the same weights: the output is NTP's
    _rule: CommitRule = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_whole(self.block_size, "block_size", 1, MAX_BLOCK_SIZE)
        check_whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        check_whole(self.top_n, "top_n", 1, 50)
        check_whole(self.seed, "seed", 0, 2**63 - 1)
        t = self.temperature
        check_number(t, "temperature", 0)
        if not isinstance(self.verify, bool):
            raise ValueError(f"verify: must be True or False, got {self.verify!r}")
        if self.verify and t > 0:
            # Speculative sampling (accept a draft with min(1, p/q), else resample from max(0, p - q)) is
            # exact only if each draft was sampled from q given its left context alone. SBD's drafts break
            # that: a gap fill was conditioned on tokens to its right, and confidence rules choose which
            # slots to commit by the sampled tokens themselves; both bias the accepted text.
            raise ValueError(
                f"verify: verified decoding checks drafts against NTP's greedy choice, so it needs "
                f"temperature 0, got temperature={t!r}. Sampled drafts cannot be verified exactly "
                "(gap fills are conditioned on tokens to their right and confidence rules pick "
                "slots by the sampled tokens, so the speculative-sampling rule would be biased)"
            )
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop: must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "_rule", CommitRule(self.rule, self.gamma, self.gap_free))

    @property
    def commit_rule(self) -> CommitRule:
        """The commit rule these settings choose (``rule`` at ``gamma``, gap-free or not), built once."""
        return self._rule

    def as_dict(self) -> dict:
        """Every setting, JSON-native, as an SBD trace's config stores it: ``"decoder"`` is ``"sbd"`` whichever
        decoder holds this config. ``Decoding.trace`` adds ``drafting`` when it is not ``"single"``; remasking's
        trace names its own decoder and adds ``remask_threshold``; NTP, Jacobi and prompt lookup do not use it (they
        store the settings greedy NTP reads, ``sbd_viz.decoders.run.greedy_settings``, and their own)."""
        return {
            "decoder": "sbd",
            "rule": self.rule,
            "gamma": self.gamma,
            "gap_free": self.gap_free,
            "block_size": self.block_size,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "stop": list(self.stop),
            "top_n": self.top_n,
            "verify": self.verify,
        }
