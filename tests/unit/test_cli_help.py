"""Every option of every ``sbd-viz`` subcommand says what it does in ``--help``: the subcommands parsed here, and
the ones that forward their words to a module of their own (train, train --adapter, bench)."""
import argparse
import importlib.util

import pytest

from conftest import ROOT
from sbd_viz import cli
from sbd_viz.training import adapter_train, head_train, train


class Captured(Exception):
    pass


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    return [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if a.dest != "help" and not (a.help and a.help.strip())]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in cli.build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("sbd-viz has no subcommands")


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_of_a_subcommand_has_help(name):
    parser = subcommands()[name]
    assert not undocumented(parser), f"sbd-viz {name}: options without help: {undocumented(parser)}"


def _parser_of(main, monkeypatch) -> argparse.ArgumentParser:
    """The parser a module's ``main`` builds, caught as it parses."""
    def catch(self, *args, **kwargs):
        raise Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    with pytest.raises(Captured) as caught:
        main([])
    return caught.value.args[0]


@pytest.mark.parametrize("module", ["train", "adapter_train", "head_train", "bench_speed"])
def test_every_option_of_a_forwarded_subcommand_has_help(module, monkeypatch):
    if module == "bench_speed":
        spec = importlib.util.spec_from_file_location("bench_speed_help", ROOT / "bench" / "scripts" / "bench_speed.py")
        monkeypatch.syspath_prepend(str(ROOT / "bench" / "scripts"))
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        main = loaded.main
    else:
        main = {"train": train.main, "adapter_train": adapter_train.main, "head_train": head_train.main}[module]
    parser = _parser_of(main, monkeypatch)
    assert not undocumented(parser), f"{module}: options without help: {undocumented(parser)}"
