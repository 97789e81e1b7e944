"""The shipped model's card: a short Hugging Face model card whose commands run and whose numbers are the measured ones."""

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from sbd_viz.training import data, train
from sbd_viz.decoders.rules import DEFAULT_GAMMA, DEFAULT_RULE

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "sbd_viz" / "weights" / "sbd-char-5m"
CARD = FOLDER / "README.md"
HISTORY = ROOT / "docs" / "model_history.md"
LINEAGE = "the-commands-that-made-the-shipped-weights"  # the history page's section the card links for its commands
SECTIONS = ("What it is for", "Out-of-scope uses", "Limitations", "How to use", "Evaluation", "Training data",
            "Training procedure", "Citation")


def _card() -> tuple[dict, str]:
    """(the YAML front matter, parsed; the markdown after it)."""
    text = CARD.read_text(encoding="utf-8")
    assert text.startswith("---\n"), "the card starts with YAML front matter"
    head, sep, body = text[4:].partition("\n---\n")
    assert sep, "the front matter ends with a line of ---"
    return yaml.safe_load(head), body


def _lineage() -> str:
    """The section of docs/model_history.md that the card links for the exact commands of the shipped weights."""
    _, body = _card()
    assert f"`docs/model_history.md#{LINEAGE}`" in body, "the card names the commands that made its weights"
    sections = re.split(r"^## ", HISTORY.read_text(encoding="utf-8"), flags=re.M)
    found = [s for s in sections if re.sub(r"[^\w\- ]", "", s.splitlines()[0].lower()).replace(" ", "-") == LINEAGE]
    assert len(found) == 1, f"docs/model_history.md has no section #{LINEAGE}"
    return found[0]


def _train_commands(body: str) -> list[list[str]]:
    """Every ``sbd-viz train`` command in ``body``'s bash blocks, continuation lines joined, as argv after 'train'."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", body, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("sbd-viz train"):
                commands.append(shlex.split(line)[2:])
    return commands


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sbd-viz train", exit_on_error=False)
    train.add_arguments(p)
    return p


def test_the_card_is_at_most_250_lines():
    assert len(CARD.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_card_leads_with_its_numbers():
    """Accuracy, tokens per call and wall-clock are under "What it is for", as card_results.json measured them;
    the run log is not in the card."""
    _, body = _card()
    lead = body.split("## What it is for", 1)[1].split("\n## ", 1)[0]
    results = json.loads((FOLDER / "card_results.json").read_text())
    ntp = next(r for r in results["rows"] if r["rule"] == "ntp")
    sbd = next(r for r in results["rows"]
               if r["rule"] == DEFAULT_RULE and r["gamma"] == DEFAULT_GAMMA and not r["gap_free"])
    for number in (f"{ntp['accuracy']:.3f}", f"{sbd['accuracy']:.3f}", f"{sbd['tokens_per_call']:.2f}",
                   f"{1 / sbd['long_calls_per_token']:.2f}", f"{sbd['speedup_wall']:.2f}x",
                   f"{sbd['long_speedup_wall']:.2f}x"):
        assert number in lead, number
    assert "long answers" in lead and not _train_commands(body)


def test_the_front_matter_has_the_hub_fields():
    meta, _ = _card()
    assert {"license", "library_name", "pipeline_tag", "tags", "model-index"} <= set(meta)
    result = meta["model-index"][0]["results"][0]
    assert {"task", "dataset", "metrics"} <= set(result) and result["dataset"]["split"] == "test"


def test_the_card_has_its_sections_in_order():
    _, body = _card()
    headings = re.findall(r"^## (.+?)\s*$", body, re.M)
    assert [h for h in headings if h in SECTIONS] == list(SECTIONS), headings


def test_every_train_command_parses_and_the_runs_chain():
    """Each command the card links parses with the trainer's own flags and names a known preset or mix; each
    ``--base`` is an earlier command's output (its ``final`` or ``final_ema``), so the sequence is one lineage from
    scratch."""
    commands = _train_commands(_lineage())
    assert len(commands) >= 2
    outs = []
    for argv in commands:
        try:
            args = _parser().parse_args(argv)
        except (argparse.ArgumentError, SystemExit) as exc:
            pytest.fail(f"sbd-viz train {' '.join(argv)}: {exc}")
        assert args.mix in data.MIXES, args.mix
        if args.base is None:  # from scratch first, then resumes of that run
            assert args.preset in train.PRESETS and (not outs or outs[-1] == args.out), argv
        else:
            assert args.base in {f"{out}/{end}" for out in outs for end in ("final", "final_ema")}, args.base
        outs.append(args.out)
    assert _parser().parse_args(commands[0]).base is None  # the first run is from scratch
    _, card = _card()
    assert f"{len(commands)} `sbd-viz train` commands" in card, "the card counts the commands it links"


def test_the_mixes_are_the_recipes_the_card_ran_and_the_default():
    """``data.MIXES`` keeps the recipes that made the shipped model, and the trainer's default; no others."""
    used = {_parser().parse_args(argv).mix for argv in _train_commands(_lineage())}
    assert set(data.MIXES) == used | {train.TrainConfig.mix}


def test_the_model_index_is_the_measured_card():
    meta, _ = _card()
    results = json.loads((FOLDER / "card_results.json").read_text())
    block_size = json.loads((FOLDER / "config.json").read_text())["sbd_block_size"]
    assert results["header"]["block_size"] == block_size  # the card was measured at the shipped default
    ntp = next(r for r in results["rows"] if r["rule"] == "ntp")
    sbd = next(r for r in results["rows"]
               if r["rule"] == DEFAULT_RULE and r["gamma"] == DEFAULT_GAMMA and not r["gap_free"])
    metrics = {m["name"]: m for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert metrics["NTP exact match"]["value"] == round(ntp["accuracy"], 3)
    assert metrics["SBD exact match"]["value"] == round(sbd["accuracy"], 3)
    assert metrics["SBD tokens per call"]["value"] == round(sbd["tokens_per_call"], 2)
    assert metrics["SBD tokens per call, long answers"]["value"] == round(1 / sbd["long_calls_per_token"], 2)
    for name in ("SBD exact match", "SBD tokens per call", "SBD tokens per call, long answers"):
        assert metrics[name]["args"] == {"rule": DEFAULT_RULE, "gamma": DEFAULT_GAMMA, "block_size": block_size}


def test_the_files_the_card_names_are_in_the_tree_and_no_stale_results_remain():
    _, body = _card()
    named = set(re.findall(r"`((?:bench|tools|docs)/[\w./-]+\.\w+)(?:#[\w-]+)?`", body))
    named |= {str((CARD.parent / link).resolve().relative_to(ROOT))
              for link in re.findall(r"\]\((\.\.[^)#]+)[^)]*\)", body)}
    assert named and all((ROOT / path).is_file() for path in named), sorted(p for p in named if not (ROOT / p).is_file())
    stale = sorted(p.name for p in FOLDER.iterdir() if re.fullmatch(r"card_results_.+\.json|train_log.*\.jsonl", p.name))
    assert not stale, stale


def test_the_card_is_about_the_model_not_its_lineage():
    """The title is the model's name alone, and no version of the runs that led to it appears."""
    _, body = _card()
    assert re.search(r"^# sbd-char-5m\s*$", body, re.M)
    assert not re.search(r"\bv\d+\.\d+\b", body), re.findall(r"\bv\d+\.\d+\b", body)


def test_every_link_works_inside_the_installed_package():
    """A link is a web address, a heading of the card, or a file inside the package (the wheel carries only
    ``sbd_viz/``): the card is read from the installed folder too."""
    _, body = _card()
    headings = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+?)\s*$", body, re.M)}
    package = ROOT / "sbd_viz"
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            assert anchor in headings, f"#{anchor}: no such heading in the card"
            continue
        resolved = (FOLDER / path).resolve()
        assert resolved.is_relative_to(package) and resolved.exists(), f"{target}: not a file inside the package"


def test_every_measured_number_in_the_prose_is_in_a_table_of_the_card():
    """A number with a decimal point (an accuracy, a rate, a speedup) that the prose states is one a table in the
    card shows, so a reader can check it there."""
    _, body = _card()
    body = re.sub(r"```.*?```", "", body, flags=re.S)
    tables = "\n".join(line for line in body.splitlines() if line.startswith("|"))
    prose = "\n".join(line for line in body.splitlines() if not line.startswith("|"))
    prose = re.sub(r"arXiv \d+\.\d+|`[^`]*`|\(\d+\.\d+\)", " ", prose)  # paper ids and code are not measurements
    missing = sorted({n for n in re.findall(r"(?<![\w.])\d+\.\d+x?(?![\w.])", prose) if n not in tables})
    assert not missing, f"numbers stated outside the card's tables: {missing}"
