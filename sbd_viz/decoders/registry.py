"""The decoder registry: every decoder described once, by a ``DecoderSpec``; the door builds decoders from it.

``decoders()``, ``get_decoder`` and ``register_decoder`` (or the entry-point group ``sbd_viz.decoders``);
``DecodeConfig``'s fields are ``COMMON`` and ``SHARED``; ``split_settings`` refuses a setting a decoder neither takes
nor owns. How the surfaces use the registry, and how settings are split: docs/decoders.md.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..models import kinds as model_kinds
from ..plugins.registry import Registry
from .rules import COMMIT_RULES, DEFAULT_GAMMA, DEFAULT_RULE
from .run import Decoder

ENTRY_POINT_GROUP = "sbd_viz.decoders"
# the built-in decoders' modules, in the order ``decoders()`` lists their specs
BUILTIN_MODULES = ("sbd", "remask", "jacobi", "lookup", "ntp", "diffusion")
# the settings every decoder reads (``sv.decode``'s arguments besides ``takes``)
COMMON: dict[str, Any] = {"max_new_tokens": 64, "stop": None, "top_n": 5}
# the settings a decoder may take, with the value that means "not set": DecodeConfig's fields besides COMMON. A
# setting at this value is not refused for a decoder that does not take it, so a caller can pass one set of settings
# to any decoder.
SHARED: dict[str, Any] = {
    "rule": DEFAULT_RULE,
    "gamma": DEFAULT_GAMMA,
    "block_size": None,
    "temperature": 0.0,
    "seed": 0,
    "gap_free": False,
    "verify": False,
}


@dataclass(frozen=True)
class Knob:
    """The setting a slider moves, and its range ``(lo, hi, step)``. ``gamma`` with no range moves along the
    chosen commit rule's own slider (``COMMIT_RULES[rule].slider``)."""

    name: str
    lo: float | None = None
    hi: float | None = None
    step: float | None = None

    def slider(self, rule: str = DEFAULT_RULE) -> tuple[float, float, float]:
        if self.lo is None:
            return COMMIT_RULES[rule].slider
        assert self.hi is not None and self.step is not None, "a range is lo, hi and step together"
        return self.lo, self.hi, self.step

    def values(self, rule: str = DEFAULT_RULE, points: int = 9) -> list:
        """``points`` values spread over the range, ends included, snapped to the step (whole numbers stay whole)."""
        lo, hi, step = self.slider(rule)
        out = {min(hi, lo + round((hi - lo) * i / (points - 1) / step) * step) for i in range(points)}
        whole = all(float(v).is_integer() for v in (lo, hi, step))
        return sorted(int(v) if whole else float(f"{v:.10g}") for v in out)


@dataclass(frozen=True)
class DecoderSpec:
    """One decoder, described once; the surfaces read what it takes and how to build it from this.

    - ``name``: what ``sv.decode(..., decoder=NAME)`` and ``--decoder`` take, and what its traces' config says (the
      figures name a trace by it);
    - ``label``: what the app's choices call it (and the CLI's ``--decoder`` help, beside the name);
    - ``decoding``: the class, built as ``decoding(model, prompt, config, **own)`` with ``config`` an
      ``sv.DecodeConfig``; it has ``steps()`` (one ``Step`` per model call) and ``trace()``, and ``requests()``
      (the cache-request coroutine ``decode_batch`` serves) if it can be batched;
    - ``takes``: the ``SHARED`` settings it reads from ``config`` (besides ``max_new_tokens``, ``stop``, ``top_n``);
    - ``own``: its own settings and their defaults, passed to ``decoding`` as keyword arguments;
    - ``exact``: it writes greedy NTP's text by construction;
    - ``knob``: the setting a slider moves (a ``Knob``), or None;
    - ``model``: the kind of model it serves (a ``sbd_viz.models.kinds`` name: ``sbd``, ``causal``, ...);
    - ``variants``: labelled settings shown as decoders of their own (SBD's ``"verified SBD": {"verify": True}``);
    - ``color``: the colour its line is drawn in (``"#RRGGBB"``; None: one of ``PALETTE``, ``color_of``);
    - ``sweep``: the values ``sv.sweep_decoders`` runs its own settings along unless the caller gives others (a
      setting left out runs at its default).
    """

    name: str
    label: str
    decoding: type
    takes: tuple[str, ...] = ()
    own: Mapping[str, Any] = field(default_factory=dict)
    exact: bool = False
    knob: Knob | None = None
    model: str = "sbd"
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    color: str | None = None
    sweep: Mapping[str, tuple] = field(default_factory=dict)

    def __post_init__(self):
        where = f"DecoderSpec {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(
                f"name: must be an identifier (it is an argument value and a CLI choice), got {self.name!r}"
            )
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"label: {where} needs a non-empty label, got {self.label!r}")
        if not isinstance(self.decoding, type) or not issubclass(self.decoding, Decoder):
            raise TypeError(
                f"decoding: {where} needs a class with steps() and trace() (sv.Decoder), got {self.decoding!r}"
            )
        object.__setattr__(self, "takes", tuple(self.takes))
        unknown = [t for t in self.takes if t not in SHARED]
        if unknown:
            raise ValueError(
                f"takes: {where} names {unknown[0]!r}, not a shared setting ({', '.join(SHARED)}); "
                "a setting of its own goes in own"
            )
        clash = [o for o in self.own if o in SHARED or o in COMMON or not str(o).isidentifier()]
        if clash:
            raise ValueError(f"own: {where} names {clash[0]!r}, which is a shared setting or not an identifier")
        object.__setattr__(self, "own", MappingProxyType(dict(self.own)))
        if self.knob is not None and (not isinstance(self.knob, Knob) or self.knob.name not in self.settings):
            raise ValueError(f"knob: {where}'s knob must be a Knob over a setting it takes, got {self.knob!r}")
        if self.model not in model_kinds.names():
            raise ValueError(f"model: {where} serves one of {', '.join(model_kinds.names())}, got {self.model!r}")
        variants = {str(k): MappingProxyType(dict(v)) for k, v in dict(self.variants).items()}
        for label, settings in variants.items():
            bad = [s for s in settings if s not in self.settings]
            if bad:
                raise ValueError(f"variants: {where}'s variant {label!r} sets {bad[0]!r}, which it does not take")
        object.__setattr__(self, "variants", MappingProxyType(variants))
        if self.color is not None and not (
            isinstance(self.color, str) and re.fullmatch(r"#[0-9A-Fa-f]{6}", self.color)
        ):
            raise ValueError(f"color: {where}'s colour must be '#RRGGBB' or None, got {self.color!r}")
        sweep = {}
        for name, values in dict(self.sweep).items():
            values = (values,) if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") else tuple(values)
            if name not in self.own or not values:
                raise ValueError(
                    f"sweep: {where} sweeps its own settings along one or more values each; got {name!r}: {values!r}"
                )
            sweep[name] = values
        object.__setattr__(self, "sweep", MappingProxyType(sweep))

    @property
    def settings(self) -> tuple[str, ...]:
        """Every setting it reads: the common ones, the shared ones it takes, and its own."""
        return tuple(COMMON) + self.takes + tuple(self.own)

    @property
    def batchable(self) -> bool:
        return callable(getattr(self.decoding, "requests", None))

    def label_of(self, settings: Mapping[str, Any]) -> str:
        """What a decode of it with ``settings`` is called: the label of the variant those settings choose (SBD's
        "verified SBD" with ``verify=True``), else its own label."""
        return next(
            (
                label
                for label, chosen in self.variants.items()
                if all(settings.get(k, SHARED.get(k, self.own.get(k))) == v for k, v in chosen.items())
            ),
            self.label,
        )

    def serves(self, model) -> bool:
        """Whether it can decode with ``model``: its kind is this decoder's, or is one too (``ModelKind.also``: a
        causal decoder takes an ``SBDModel``)."""
        return model_kinds.get(model_kind(model)).is_a(self.model)

    def trace(self, decoding):
        """The finished ``decoding``'s trace, its config naming this decoder (a decoder built on another's class,
        e.g. on ``Decoding``, would otherwise carry that one's name)."""
        trace = decoding.trace()
        if trace.config.get("decoder") == self.name:
            return trace
        return replace(trace, config={**trace.config, "decoder": self.name})


# the colours of the decoders that name none, in turn; the built-ins' own are Okabe-Ito's others and black
PALETTE = ("#56B4E9", "#882255", "#44AA99", "#999933", "#AA4499", "#F0E442")


def color_of(spec) -> str:
    """The colour ``spec`` (a ``DecoderSpec`` or a registered name) is drawn in: its own, else the next of
    ``PALETTE`` in registry order among the decoders that name none."""
    spec = get_decoder(spec)
    if spec.color is not None:
        return spec.color
    colourless = [s for s in decoders() if s.color is None]
    index = colourless.index(spec) if spec in colourless else len(colourless)
    return PALETTE[index % len(PALETTE)]


def model_kind(model) -> str:
    """A model's kind's name (``sbd_viz.models.kinds``): its class says it (``kind``; an SBDModel is "sbd", a
    CausalLM "causal": pretrained, not SBD-trained; a DiffusionModel "diffusion")."""
    return getattr(model, "kind", model_kinds.DEFAULT)


# -- the registry -------------------------------------------------------------------------------
def _builtins() -> list[DecoderSpec]:
    """The built-in decoders' specs, from their modules (imported at the first look-up)."""
    return [spec for module in BUILTIN_MODULES for spec in importlib.import_module(f"{__package__}.{module}").SPECS]


REGISTRY = Registry(ENTRY_POINT_GROUP, DecoderSpec, "decoder", "spec", _builtins)


def register_decoder(spec: DecoderSpec, replace_existing: bool = False) -> DecoderSpec:
    """Add ``spec`` for this process (a notebook's decoder; a package uses the ``sbd_viz.decoders`` entry point).
    A name already registered is refused unless ``replace_existing``."""
    return REGISTRY.register(spec, replace_existing)


def decoders(model=None) -> tuple[DecoderSpec, ...]:
    """Every registered decoder, in a stable order: the built-ins, then the entry points' (by name), then the ones
    registered in this process. With ``model``: only those that serve it."""
    specs = REGISTRY.items()
    return specs if model is None else tuple(s for s in specs if s.serves(model))


def get_decoder(name) -> DecoderSpec:
    """The spec named ``name`` (a spec is returned as it is); an unknown name is a ``ValueError`` naming
    ``decoder`` and the choices."""
    if isinstance(name, DecoderSpec):
        return name
    specs = {s.name: s for s in decoders()}
    if name not in specs:
        raise ValueError(f"decoder: unknown decoder {name!r}; choose from {', '.join(specs)}")
    return specs[name]


def by_label(label) -> DecoderSpec:
    """The spec whose ``label`` is ``label`` (the app's choices), else a ``ValueError`` naming ``decoder``."""
    specs = {s.label: s for s in decoders()}
    if label not in specs:
        raise ValueError(f"decoder: unknown decoder {label!r}; choose from {', '.join(specs)}")
    return specs[label]


def default_decoder(model) -> DecoderSpec:
    """The first decoder that serves ``model`` (SBD for an ``SBDModel``, the sampler for a DiffusionGemma)."""
    specs = decoders(model)
    if not specs:
        raise ValueError(f"model: no registered decoder serves a {model_kind(model)} model")
    return specs[0]


# -- the door -----------------------------------------------------------------------------------
def split_settings(spec: DecoderSpec, settings: Mapping[str, Any]) -> tuple[dict, dict]:
    """``settings`` as (the shared ones ``spec`` takes, its own ones with defaults filled in). A setting it neither
    takes nor owns is a ``ValueError`` naming the setting, unless it is a shared one left at its "not set" value."""
    shared, own = {}, dict(spec.own)
    for name, value in settings.items():
        if name in spec.own:
            own[name] = value
        elif name in spec.takes:
            shared[name] = value
        elif name in SHARED and is_unset(name, value):
            continue
        else:
            takes = ", ".join(spec.takes + tuple(spec.own)) or "none besides max_new_tokens, stop and top_n"
            what = (
                "not a setting of any decoder"
                if name not in SHARED and not _owned(name)
                else f"{spec.label} (decoder {spec.name!r}) does not take it"
            )
            raise ValueError(f"{name}: {what} (decoder {spec.name!r} takes: {takes}), got {value!r}")
    return shared, own


def is_unset(name: str, value) -> bool:
    default = SHARED[name]
    if default is None or isinstance(value, bool) != isinstance(default, bool):
        return value is default
    try:
        return value == default or (isinstance(value, float) and math.isnan(value) and math.isnan(default))
    except Exception:  # an odd value (an array) is not the default
        return False


def _owned(name: str) -> bool:
    return any(name in s.own for s in decoders())


def check_serves(spec: DecoderSpec, model) -> None:
    model_kinds.kind_of(model)  # a model of its kind's class, else a TypeError naming model
    if not spec.serves(model) and model_kind(model) == "causal" and spec.model == "sbd":
        from ..models.causal_lm import KIND, train_hint

        raise ValueError(
            f"decoder: {spec.name!r} needs an SBD-trained model: it reads the predictions of masked "
            f"slots, which a model trained on next-token prediction alone has never learned, so its "
            f"drafts would be noise. {model.name!r} is a {KIND}; fine-tune it for SBD first "
            f"({train_hint(model.name)}), or use one of its decoders: "
            f"{', '.join(s.name for s in decoders(model))}"
        )
    if not spec.serves(model):
        raise ValueError(
            f"decoder: {spec.name!r} decodes with {model_kinds.get(spec.model).description}; this model "
            f"is {model_kinds.kind_of(model).description.split(':')[0]} (its decoders: "
            f"{', '.join(s.name for s in decoders(model))})"
        )
