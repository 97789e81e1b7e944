"""A training run's settings as a dataclass whose fields carry their help: one place states each option's name,
default and meaning, and ``sbd-viz train`` builds its flags from it."""

from __future__ import annotations

import argparse
import os
from dataclasses import field, fields


def option(default, help: str, least=None, choices=None):
    """A config field with its ``--help`` text and, if given, the ``least`` value it takes or the ``choices`` it
    takes one of (``check_options``; the flag refuses other choices too)."""
    return field(default=default, metadata={"help": help, "least": least, "choices": choices})


def check_options(config) -> None:
    """A ``ValueError`` naming the first field of ``config`` below the ``least`` or outside the ``choices`` its
    ``option`` declares."""
    for f in fields(config):
        least, choices, value = f.metadata.get("least"), f.metadata.get("choices"), getattr(config, f.name)
        if least is not None and value < least:
            raise ValueError(f"{f.name}: must be >= {least}, got {value}")
        if choices is not None and value not in choices:
            raise ValueError(f"{f.name}: must be one of {', '.join(map(str, choices))}, got {value!r}")


def torch_threads(asked: int, processes: int = 1) -> int:
    """The torch threads a run uses: ``asked``, or for 0 the count torch took from ``OMP_NUM_THREADS`` when that is
    set (a test worker, a shared machine: more threads than free cores spin against the other processes, many times
    slower), else the cores divided among the run's ``processes``."""
    import torch

    if asked:
        return asked
    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    return max(1, (os.cpu_count() or 1) // processes)


def add_config_arguments(p: argparse.ArgumentParser, config_class, help_of=None) -> None:
    """One flag per field of ``config_class`` (``--batch-size`` for ``batch_size``), its default the field's;
    the help from the field's ``option`` metadata, else from ``help_of[name]``. A bool field takes ``--x``/``--no-x``
    (a field whose default is None keeps None when neither is given)."""
    for f in fields(config_class):
        flag = "--" + f.name.replace("_", "-")
        text = f.metadata.get("help") or (help_of or {})[f.name]
        if "bool" in str(f.type):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=text)
        else:
            kind = type(f.default) if f.default is not None else str
            p.add_argument(
                flag,
                type=kind,
                default=f.default,
                choices=f.metadata.get("choices"),
                help=f"{text} (default: %(default)s)",
            )
