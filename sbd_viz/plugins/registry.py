"""A registry of named things that plugins extend: the decoders (``sbd_viz.decoders``) and the model kinds
(``sbd_viz.models.kinds``) are two.

A registry holds the built-ins, then what installed packages declare under its entry-point group (by entry-point
name), then what a process registers itself. It loads once per process, at the first look-up (the built-ins'
modules may look things up while they load: they see what is loaded so far). A plugin that fails to load, or whose
object is not of the registry's class, is named in a warning and left out: it never silently vanishes, and the
built-ins keep working.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    """What a registry holds: a thing with a name."""

    @property
    def name(self) -> str: ...


Item = TypeVar("Item", bound=Named)


class Registry(Generic[Item]):
    """Items of class ``cls`` by name (``item.name``). ``group``: the entry-point group; ``noun``: what a message
    calls one item ("decoder"); ``arg``: the argument a refusal names ("spec"); ``builtins()``: the built-in items,
    imported at the first look-up; ``same_name``: an entry point must be named as its item (else it is left out)."""

    def __init__(
        self,
        group: str,
        cls: type[Item],
        noun: str,
        arg: str,
        builtins: Callable[[], Iterable[Item]],
        same_name: bool = False,
    ):
        self.group, self.cls, self.noun, self.arg, self._builtins = group, cls, noun, arg, builtins
        self.same_name = same_name
        self._items: dict[str, Item] = {}
        self._loaded = self._loading = False
        self._lock = threading.RLock()  # a second caller waits for the first load
        self._entry_names: tuple[str, ...] | None = None

    def register(self, item: Item, replace_existing: bool = False) -> Item:
        """Add ``item`` for this process. A name already registered is refused unless ``replace_existing``."""
        if not isinstance(item, self.cls):
            raise TypeError(f"{self.arg}: expected an sbd_viz.{self.cls.__name__}, got {type(item).__name__}")
        with self._lock:
            self._load()
            known = self._items.get(item.name)
            if known is not None and known is not item and not replace_existing:
                raise ValueError(
                    f"{self.arg}: a {self.noun} named {item.name!r} is already registered "
                    "(pass replace_existing=True to replace it)"
                )
            self._items[item.name] = item
        return item

    def unregister(self, name: str) -> None:
        """Forget ``name`` in this process (a test's or a notebook's own item)."""
        with self._lock:
            self._items.pop(name, None)

    def items(self) -> tuple[Item, ...]:
        """Every item: the built-ins, the entry points' (by name), then the ones registered in this process."""
        with self._lock:
            self._load()
            return tuple(self._items.values())

    def names_so_far(self) -> tuple[str, ...]:
        """The names registered so far, without loading (what a built-in's module may ask while it loads)."""
        return tuple(self._items)

    def entry_point_names(self) -> tuple[str, ...]:
        """The entry points' names, read from the installed metadata without importing them."""
        if self._entry_names is None:
            from importlib.metadata import entry_points

            self._entry_names = tuple(sorted({p.name for p in entry_points(group=self.group)}))
        return self._entry_names

    def _load(self) -> None:
        if self._loaded or self._loading:
            return
        self._loading = True
        try:
            loaded = {item.name: item for item in self._builtins()}  # filled aside: a failed import tries again
            for item in self._entry_point_items():
                if item.name in loaded:
                    self._warn(
                        f"the plugin {self.noun} {item.name!r} has the name of one already registered; the "
                        "plugin's is ignored"
                    )
                    continue
                loaded[item.name] = item
            registered = dict(self._items)  # by a plugin's module while it loaded: after the loaded ones, and wins
            self._items.clear()
            self._items.update({**loaded, **registered})
            self._loaded = True
        finally:
            self._loading = False

    def _entry_point_items(self) -> list[Item]:
        from importlib.metadata import entry_points

        found: list[Item] = []
        for point in sorted(entry_points(group=self.group), key=lambda p: p.name):
            named = f"the plugin {self.noun} {point.name!r} ({point.value})"
            try:
                item = point.load()
            except Exception as exc:  # any error of a third-party import: say which plugin
                self._warn(f"{named} failed to load: {type(exc).__name__}: {exc}")
                continue
            if not isinstance(item, self.cls):
                self._warn(f"{named} is a {type(item).__name__}, not an sbd_viz.{self.cls.__name__}; left out")
                continue
            if self.same_name and item.name != point.name:
                self._warn(
                    f"{named} is the {self.noun} {item.name!r}, not an sbd_viz.{self.cls.__name__} named "
                    f"{point.name!r}; left out"
                )
                continue
            found.append(item)
        return found

    def _warn(self, message: str) -> None:
        warnings.warn(f"{self.group}: {message}", RuntimeWarning, stacklevel=5)
