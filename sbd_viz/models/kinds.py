"""Model kinds: what a decoder serves (``DecoderSpec.model``) and how ``sv.load_model`` opens a model of each.

``ModelKind`` describes one kind; ``register_model_kind`` adds one in a notebook, the entry-point group
``sbd_viz.model_kinds`` for every process. The built-in kinds and what a kind holds: docs/models.md.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..plugins.registry import Registry

ENTRY_POINT_GROUP = "sbd_viz.model_kinds"
# the built-in kinds and the modules that name them (``MODEL_KIND``), in the order ``sv.load_model`` asks them
# (after the plugins'): SBD's last, as it opens any folder the others do not
BUILTIN = {"diffusion": "diffusion", "adapted": "adapted_lm", "causal": "causal_lm", "sbd": "sbd_model"}
DEFAULT = "sbd"  # the kind of a model whose class names none


@dataclass(frozen=True)
class ModelKind:
    """One kind of model, described once.

    - ``name``: the kind's name: its models' ``kind`` attribute, and what a ``DecoderSpec``'s ``model`` names;
    - ``description``: how a message names it, e.g. ``"an SBD-trained model (SBDModel): it reads the mask slots'
      predictions"`` (the part before a colon names the model; the rest says what its decoders read);
    - ``model_class``: the class its models are instances of;
    - ``opens``: ``opens(source) -> bool``: whether ``sv.load_model(source)`` is a model of this kind (``source`` a
      path or a name, as the caller gave it); must return False, not raise, for a source that is not its own;
    - ``load``: ``load(source, dtype=..., device=...)``, returning a ``model_class`` instance (``dtype`` a torch
      dtype, ``device`` a ``torch.device`` or None); ``opens`` and ``load`` are both given or both None (a kind
      whose models are built in code);
    - ``also``: the other kinds whose decoders serve it too (an SBD model is a causal LM: ``("causal",)``).
    """

    name: str
    description: str
    model_class: type
    opens: Callable[[Any], bool] | None = None
    load: Callable[..., Any] | None = None
    also: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name: a model kind's name must be an identifier, got {self.name!r}")
        where = f"ModelKind {self.name!r}"
        if not isinstance(self.description, str) or not self.description:
            raise ValueError(f"description: {where} needs a non-empty description, got {self.description!r}")
        if not isinstance(self.model_class, type):
            raise TypeError(f"model_class: {where} needs a class, got {self.model_class!r}")
        if (self.opens is None) != (self.load is None) or not all(
            f is None or callable(f) for f in (self.opens, self.load)
        ):
            raise TypeError(
                f"opens: {where} needs opens and load both callable, or both None; got "
                f"opens={self.opens!r}, load={self.load!r}"
            )
        object.__setattr__(self, "also", tuple(self.also))
        bad = [k for k in self.also if not isinstance(k, str) or not k.isidentifier() or k == self.name]
        if bad:
            raise ValueError(f"also: {where} names {bad[0]!r}, not another kind's name")

    def is_a(self, kind: str) -> bool:
        """Whether a decoder that serves ``kind`` serves models of this kind."""
        return kind == self.name or kind in self.also


# -- the registry -------------------------------------------------------------------------------
def _builtins() -> list[ModelKind]:
    """The built-in kinds, from the modules that name them (imported here, at the first look-up, so each can build
    its kind from this module)."""
    return [importlib.import_module(f"{__package__}.{module}").MODEL_KIND for module in BUILTIN.values()]


REGISTRY = Registry(ENTRY_POINT_GROUP, ModelKind, "model kind", "kind", _builtins, same_name=True)


def register_model_kind(kind: ModelKind, replace_existing: bool = False) -> ModelKind:
    """Add ``kind`` for this process (a notebook's; a package uses the ``sbd_viz.model_kinds`` entry point). A name
    already registered is refused unless ``replace_existing``."""
    return REGISTRY.register(kind, replace_existing)


def kinds() -> tuple[ModelKind, ...]:
    """Every registered kind, in the order ``sv.load_model`` asks them: the entry points' (by name), the ones
    registered in this process, then the built-ins (``BUILTIN``)."""
    found = REGISTRY.items()
    return tuple(k for k in found if k.name not in BUILTIN) + tuple(k for k in found if k.name in BUILTIN)


def names() -> tuple[str, ...]:
    """The kinds' names, without importing any (the entry points' names are read from the installed metadata):
    what ``DecoderSpec`` checks its ``model`` against, so a plugin can build its spec while its kind loads."""
    return tuple(dict.fromkeys(tuple(BUILTIN) + REGISTRY.entry_point_names() + REGISTRY.names_so_far()))


def get(name: str) -> ModelKind:
    """The kind named ``name``, else a ``ValueError`` naming ``model`` and the kinds."""
    found = {k.name: k for k in kinds()}
    if name not in found:
        raise ValueError(f"model: {name!r} is not a registered model kind; the kinds: {', '.join(found)}")
    return found[name]


def kind_of(model) -> ModelKind:
    """``model``'s kind: its class's ``kind`` (``DEFAULT`` if it has none), checked: ``model`` is an instance of
    that kind's class, else a ``TypeError`` naming ``model``."""
    kind = get(getattr(model, "kind", DEFAULT))
    if not isinstance(model, kind.model_class):
        raise TypeError(
            f"model: expected a model of kind {kind.name!r} (class {kind.model_class.__name__}; see "
            f"sv.load_model), got {type(model).__name__}"
        )
    return kind


def opening(source) -> ModelKind:
    """The kind that opens ``source`` (``sv.load_model``'s path or name): the first in ``kinds()``'s order whose
    ``opens`` says so. A plugin's ``opens`` that raises is named in a warning and passed over."""
    for kind in kinds():
        if kind.opens is not None and _opens(kind, source):
            return kind
    raise ValueError(f"path: no model kind opens {source!r}")  # the SBD kind opens anything: only if it is replaced


def _opens(kind: ModelKind, source) -> bool:
    assert kind.opens is not None, "opening asks only the kinds that open something"
    if kind.name in BUILTIN:
        return bool(kind.opens(source))
    try:
        return bool(kind.opens(source))
    except Exception as exc:  # a third party's bug: say which kind, keep the built-ins working
        warnings.warn(
            f"sbd_viz.model_kinds: the plugin kind {kind.name!r} failed to check {source!r}: "
            f"{type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=4,
        )
        return False
