"""The shipped SBD adapter's card is what tools/adapter_card.py writes from the adapter's settings and the measured
pages' JSON (so every number in it is a measured one), and it says what the model is for and its limits first."""

import importlib.util
import json

from sbd_viz.models import adapted_lm

FOLDER = adapted_lm.shipped_folder("smollm2-135m-sbd")


def card_tool():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "adapter_card.py"
    spec = importlib.util.spec_from_file_location("adapter_card", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_card_is_its_sources_rendered():
    tool = card_tool()
    assert (FOLDER / "README.md").read_text() == tool.render(*tool.sources())


def test_the_cards_parameter_count_is_the_loaded_adapters():
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(FOLDER / "adapter.safetensors"))
    assert card_tool().parameter_count(FOLDER / "adapter.safetensors") == sum(t.numel() for t in tensors.values())
    assert all(t.dtype == torch.bfloat16 for t in tensors.values())


def test_the_card_leads_with_what_it_is_for_and_its_limits():
    card = (FOLDER / "README.md").read_text()
    assert card.index("**What it is for.**") < card.index("**Limits.**") < card.index("## Training")


def test_the_bench_measured_the_shipped_adapter_not_a_checkpoint():
    bench = json.loads(card_tool().BENCH.read_text())
    settings = json.loads((FOLDER / "adapter.json").read_text())
    assert bench["header"]["adapter"]["steps"] == settings["extra"]["steps"]
