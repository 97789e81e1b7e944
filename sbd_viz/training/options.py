"""A training run's settings as a dataclass whose fields carry their help: one place states each option's name,
default and meaning, and ``sbd-viz train`` builds its flags from it."""

from __future__ import annotations

import argparse
from dataclasses import field, fields


def option(default, help: str):
    """A config field with its ``--help`` text."""
    return field(default=default, metadata={"help": help})


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
            p.add_argument(flag, type=kind, default=f.default, help=f"{text} (default: %(default)s)")
