"""Decode each γ piece once: what the sweeps share with the γ map.

``decode_at_gammas`` (one prompt at several γ), ``prompts_at_gammas`` (several prompts) and ``PieceStore`` (decodes
kept with their γ ranges, found again by γ). Why one decode per piece gives every γ's trace: docs/gamma_map.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..decoders.door import decode
from ..decoders.registry import default_decoder, get_decoder
from ..decoders.rules import DEFAULT_RULE
from ..trace.data import Trace
from .gamma_map import GammaMapWalk, walks_gamma


def at_gamma(trace: Trace, gamma: float) -> Trace:
    """``trace`` as ``sv.decode`` gives it at ``gamma``, a γ its range holds (a ``ValueError`` otherwise): the same
    steps and output, its ``config["gamma"]`` set to ``gamma``."""
    if trace.gamma_range is None or gamma not in trace.gamma_range:
        raise ValueError(f"gamma: {gamma!r} is not in the trace's γ range {trace.gamma_range}")
    if trace.config.get("gamma") == gamma:
        return trace
    return dataclasses.replace(trace, config={**trace.config, "gamma": gamma})


def line_of(setting: dict) -> tuple:
    """The key of ``setting``'s line: every setting but γ, so the settings of one line differ in γ alone and may
    share their pieces."""
    return tuple(sorted((k, v) for k, v in setting.items() if k != "gamma"))


def shares_pieces(spec, settings: dict) -> bool:
    """Whether decodes of ``spec`` with ``settings`` have γ pieces to share: a greedy decode whose knob is the
    commit rule's γ (SBD, verified SBD, remasking)."""
    temperature = settings.get("temperature", 0.0)
    return walks_gamma(spec) and not (isinstance(temperature, (int, float)) and temperature > 0)


class PieceStore:
    """Values kept with the γ range of the decode they came from; ``find(γ)`` gives the one whose range holds γ."""

    def __init__(self):
        self._kept: list[tuple[Any, Any]] = []  # (γ range, value)

    def add(self, trace: Trace, value: Any) -> None:
        """Keep ``value`` (what was measured of ``trace``) under ``trace``'s γ range; a trace without one is not
        kept (nothing can share it)."""
        if trace.gamma_range is not None:
            self._kept.append((trace.gamma_range, value))

    def find(self, gamma: float) -> Any:
        """The value kept for the piece holding ``gamma``, or None."""
        return next((value for interval, value in self._kept if gamma in interval), None)

    def __len__(self) -> int:
        return len(self._kept)


@dataclasses.dataclass
class GammaDecodes:
    """``decode_at_gammas``'s answer: ``traces`` (γ -> its ``Trace``, as ``sv.decode`` at that γ gives it),
    ``calls`` (model forwards run), ``decodes`` (decodes run) and ``direct_calls`` (the calls of decoding every γ
    on its own: the traces' calls summed)."""

    traces: dict[float, Trace]
    calls: int
    decodes: int

    @property
    def direct_calls(self) -> int:
        return sum(t.nfe for t in self.traces.values())


def decode_at_gammas(
    model,
    prompt: str,
    gammas: Iterable[float],
    decoder=None,
    rule: str = DEFAULT_RULE,
    reuse_prefix: bool = True,
    **settings,
) -> GammaDecodes:
    """``prompt`` decoded at every γ of ``gammas`` with ``decoder`` (None: the model's first) and the other
    ``settings`` of ``sv.decode``: each trace is what ``sv.decode(model, prompt, decoder, rule=rule, gamma=γ,
    **settings)`` gives. A decoder with γ pieces (``shares_pieces``) decodes one γ per piece and reads the others
    off it (``GammaMapWalk`` with ``points``; ``reuse_prefix`` as ``sv.gamma_map``'s); any other decodes every
    γ."""
    values = list(gammas)
    if not values:
        raise ValueError("gammas: need one or more γ values")
    spec = default_decoder(model) if decoder is None else get_decoder(decoder)
    if not shares_pieces(spec, settings):
        traces = {g: decode(model, prompt, spec.name, rule=rule, gamma=g, **settings) for g in values}
        return GammaDecodes(traces, sum(t.nfe for t in traces.values()), len(traces))
    walk = GammaMapWalk(
        model, prompt, rule, min(values), max(values), None, spec.name, reuse_prefix, points=values, **settings
    )
    for _ in walk.pieces():
        pass
    traces = {}
    for g in values:
        trace = walk.map.trace_at(g)
        assert trace is not None  # the walk decoded every point
        traces[g] = at_gamma(trace, g)
    return GammaDecodes(traces, walk.map.calls, walk.map.decodes)


def prompts_at_gammas(model, prompts: Iterable[str], gammas: Iterable[float], **settings) -> dict[float, list[Trace]]:
    """Each of ``prompts`` decoded at every γ of ``gammas`` (``decode_at_gammas``, one decode per piece; ``settings``
    as its): γ -> the prompts' traces, in the prompts' order."""
    values = list(gammas)
    by_prompt = [decode_at_gammas(model, prompt, values, **settings).traces for prompt in prompts]
    return {g: [traces[g] for traces in by_prompt] for g in values}
