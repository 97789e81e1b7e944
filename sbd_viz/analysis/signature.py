"""One parameter list for two entry points: ``same_signature(source)`` gives a function ``source``'s parameters.

For a function that takes exactly another's arguments and passes them on (``gamma_map`` builds a ``GammaMapWalk`` of
its arguments and walks it to the end; ``roofline.forward_time`` and ``roofline.compute_and_memory`` read one forward
alike), so that the parameters, their defaults and their types are written once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def same_signature(source: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """A decorator: the function it decorates is called with ``source``'s arguments (it takes them as ``*args,
    **kwargs`` and hands them to ``source``), and says so: ``help``, ``inspect.signature`` and type checkers give
    ``source``'s parameters (a class's: its constructor's), with the function's own return annotation."""

    def adopt(function: Callable[..., R]) -> Callable[P, R]:
        returns = inspect.signature(function).return_annotation
        function.__signature__ = inspect.signature(source).replace(return_annotation=returns)  # type: ignore[attr-defined]
        return function

    return adopt
