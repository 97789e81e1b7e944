"""Decoders as a choice: ``decode(model, prompt, decoder=NAME, ...)`` runs one of the block decoders this toolkit
records into the same ``Trace``, on an ``SBDModel``.

- ``"sbd"``: Set Block Decoding (``sbd_viz.decoders.sbd``; ``verify=True`` is verified SBD, ``sbd_viz.decoders.verified``);
- ``"remask"``: SBD with low-confidence remasking of gap fills (``sbd_viz.decoders.remask``; knob ``remask_threshold``);
- ``"jacobi"``: Jacobi fixed-point decoding on the causal LM (``sbd_viz.decoders.jacobi``): greedy's exact text;
- ``"prompt_lookup"``: HF prompt lookup decoding, recorded (``sbd_viz.decoders.lookup``; knob
  ``prompt_lookup_num_tokens``): greedy's exact text;
- ``"ntp"``: greedy NTP with HF ``generate`` (``decode_ntp``), the reference the others are measured against.

Each takes the arguments that mean something for it; any other argument given a value other than its default
is refused by name.
"""

from __future__ import annotations

from ..checks import check_model
from .sbd import DecodeConfig, decode as decode_sbd, decode_ntp
from .jacobi import JacobiDecoding
from .lookup import DEFAULT_LOOKUP_TOKENS, decode_prompt_lookup
from .remask import DEFAULT_REMASK_THRESHOLD, RemaskDecoding
from ..rules import DEFAULT_GAMMA, DEFAULT_RULE
from ..trace import DRAFT_AND_CHECK, Trace

DECODERS = ("sbd", "remask", "jacobi", "prompt_lookup", "ntp")
EXACT = DRAFT_AND_CHECK + ("ntp",)  # write greedy NTP's text by construction (and SBD with verify=True)
# each decoder's arguments besides model, prompt, max_new_tokens, stop and top_n
OWN_ARGUMENTS = {
    "sbd": ("rule", "gamma", "block_size", "temperature", "seed", "gap_free", "verify"),
    "remask": ("rule", "gamma", "block_size", "remask_threshold"),
    "jacobi": ("block_size",),
    "prompt_lookup": ("prompt_lookup_num_tokens", "max_matching_ngram_size"),
    "ntp": (),
}
DEFAULTS = {"rule": DEFAULT_RULE, "gamma": DEFAULT_GAMMA, "block_size": None, "temperature": 0.0, "seed": 0,
            "gap_free": False, "verify": False, "remask_threshold": DEFAULT_REMASK_THRESHOLD,
            "prompt_lookup_num_tokens": DEFAULT_LOOKUP_TOKENS, "max_matching_ngram_size": None}


def _run(decoding) -> Trace:
    for _ in decoding.steps():
        pass
    return decoding.trace()


def decode(model, prompt: str, decoder: str = "sbd", max_new_tokens: int = 64, stop=None, top_n: int = 5,
           **kwargs) -> Trace:
    """Decode ``prompt`` with ``decoder`` (one of ``DECODERS``) and return its ``Trace``; ``trace.nfe`` counts
    every model call. The keyword arguments are ``sv.decode``'s (``rule``, ``gamma``, ``block_size``, ...) plus
    ``remask_threshold`` (remask), ``prompt_lookup_num_tokens`` and ``max_matching_ngram_size`` (prompt_lookup)."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder: unknown decoder {decoder!r}; choose from {', '.join(DECODERS)}")
    unknown = sorted(set(kwargs) - set(DEFAULTS))
    if unknown:
        raise TypeError(f"{unknown[0]}: not an argument of decode (decoders: {', '.join(DECODERS)})")
    for name, value in kwargs.items():
        if name not in OWN_ARGUMENTS[decoder] and value != DEFAULTS[name]:
            raise ValueError(f"{name}: means nothing for decoder {decoder!r} (its own arguments: "
                             f"{', '.join(OWN_ARGUMENTS[decoder]) or 'none'}), got {value!r}")
    args = {**{n: DEFAULTS[n] for n in OWN_ARGUMENTS[decoder]}, **{n: v for n, v in kwargs.items()
                                                                    if n in OWN_ARGUMENTS[decoder]}}
    common = {"max_new_tokens": max_new_tokens, "stop": stop, "top_n": top_n}
    if decoder == "sbd":
        return decode_sbd(model, prompt, **args, **common)
    if decoder == "ntp":
        return decode_ntp(model, prompt, **common)
    if decoder == "prompt_lookup":
        return decode_prompt_lookup(model, prompt, **args, **common)
    block_size = check_model(model).block_size if args.pop("block_size") is None else kwargs["block_size"]
    threshold = args.pop("remask_threshold", None)
    config = DecodeConfig(block_size=block_size, max_new_tokens=max_new_tokens, stop=stop or (), top_n=top_n, **args)
    if decoder == "jacobi":
        return _run(JacobiDecoding(model, prompt, config))
    return _run(RemaskDecoding(model, prompt, config, threshold))
