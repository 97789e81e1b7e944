"""The one door: ``decode(model, prompt, decoder=NAME, **settings)`` and the pieces it is made of, which the other
entry points (``decode_batch``, ``evaluate``, the ladder, the explorer, the app) share so they check alike.

``prepare`` picks the spec (``sbd_viz.decoders.registry``), refuses by name a setting the decoder does not take,
and builds the ``DecodeConfig`` of the ones it does; ``start`` builds the decoding, checked but not run (a UI streams
its ``steps()``); ``decode`` runs it and returns the trace, its config naming the decoder. The registry imports no
decoder; the decoders' modules import the registry and the door (their ``decode_*`` shortcuts).
"""

from __future__ import annotations

from ..models.checks import check_block_size
from ..trace.file import install_settings_check
from .config import DecodeConfig
from .registry import (
    COMMON,
    SHARED,
    DecoderSpec,
    check_serves,
    decoders,
    default_decoder,
    get_decoder,
    is_unset,
    model_kind,
    split_settings,
)


def config_for(spec: DecoderSpec, model, max_new_tokens=64, stop=None, top_n=5, **shared):
    """The ``DecodeConfig`` a decode of ``spec`` is built with: the shared settings it takes, the rest at their
    defaults; ``block_size`` None is the model's."""
    shared["block_size"] = check_block_size(shared.get("block_size"), model)
    return DecodeConfig(max_new_tokens=max_new_tokens, stop=stop or (), top_n=top_n, **shared)


def prepare(model, decoder=None, max_new_tokens: int = 64, stop=None, top_n: int = 5, **settings):
    """``(spec, config, own)`` for a decode of ``decoder`` on ``model``: the spec (None: the model's first), the
    ``DecodeConfig`` of the settings it takes, and its own settings. Refuses what it does not take, by name."""
    if (
        decoder is None
        and model_kind(model) == "causal"
        and any(n in SHARED and n != "block_size" and not is_unset(n, v) for n, v in settings.items())
    ):
        # SBD's settings on a model without SBD training: refused by name, with the training command
        decoder = next(s for s in decoders() if s.model == "sbd")
    spec = default_decoder(model) if decoder is None else get_decoder(decoder)
    check_serves(spec, model)
    shared, own = split_settings(spec, settings)
    return spec, config_for(spec, model, max_new_tokens, stop, top_n, **shared), own


def start(model, prompt: str, decoder=None, max_new_tokens: int = 64, stop=None, top_n: int = 5, **settings):
    """``(spec, decoding)``: the decoding ``decode`` would run, built and checked but not started, for a caller
    that streams its ``steps()`` (finish with ``spec.trace(decoding)``)."""
    spec, config, own = prepare(model, decoder, max_new_tokens, stop, top_n, **settings)
    return spec, spec.decoding(model, prompt, config, **own)


def decode(model, prompt: str, decoder=None, max_new_tokens: int = 64, stop=None, top_n: int = 5, **settings):
    """Decode ``prompt`` with ``decoder`` (a registered name; None: the model's first, SBD for an SBD model) and
    return its ``Trace``. ``settings``: the shared ones the decoder takes and its own; any other is refused by name."""
    spec, decoding = start(model, prompt, decoder, max_new_tokens, stop, top_n, **settings)
    for _ in decoding.steps():
        pass
    return spec.trace(decoding)


def trace_settings_check(config: dict, canvas: bool) -> dict:
    """A trace's settings checked as ``sv.decode`` checks its arguments (``DecodeConfig``: commit rule and γ, ranges,
    verify at temperature 0), and its decoder's own settings as {name: (default, lowest value or None)} for the trace
    file to check by kind (``sbd_viz.trace.file.install_settings_check``). A decoder not installed here: none."""
    spec = next((s for s in decoders() if s.name == config["decoder"]), None)
    own = {}
    if spec is not None:
        for key, default in spec.own.items():
            own[key] = (default, spec.knob.lo if spec.knob is not None and spec.knob.name == key else None)
    if not canvas:  # a canvas decoder's block is its model's canvas, past sv.decode's block sizes
        # a decoder that writes a γ decodes with a commit rule: its name, γ and gap-free are checked with it; one
        # that writes none names itself as the rule, so only the other settings are the door's
        fields = tuple(COMMON) + tuple(SHARED)
        names = fields if "gamma" in config else tuple(f for f in fields if f not in ("rule", "gamma", "gap_free"))
        DecodeConfig(**{key: config[key] for key in names if key in config})
    return own


install_settings_check(trace_settings_check)
