"""bench/SBD_FINETUNE.md: what a short CPU SBD fine-tune of SmolLM2 reaches. Its exact claims hold in its JSON (the
page is that JSON rendered: tests/unit/test_bench_pages.py), and its held-out text is not in the fine-tune's training
text."""

import json
import os
from pathlib import Path

import pytest

from conftest import bench_script

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "results" / "sbd_finetune.json"


def test_verified_sbd_wrote_ntps_ids_on_every_item_before_and_after():
    results = json.loads(DATA.read_text())["results"]
    n = len(results["after"]["ntp_ids"])
    assert n >= 16
    for side in ("before", "after"):
        rows = results[side]["decoders"]
        for name, row in rows.items():
            if name.startswith(("verified", "prompt lookup", "NTP")):  # the exact decoders
                assert row["equal"] == n, (side, name)
            assert row["tokens_per_call"] == pytest.approx(row["tokens"] / row["calls"])
        assert rows["NTP"]["tokens_per_call"] <= 1.0  # one token a call at most, the prefill counted


def test_the_held_out_text_is_not_the_training_text():
    """The fine-tune trains on the interpreter's standard library (code_documents' default folder); the held-out
    files are an installed package's, outside it."""
    bench = bench_script("bench_sbd_finetune")
    stdlib = Path(os.__file__).parent.resolve()
    held_out = bench.held_out_folder().resolve()
    assert held_out.is_dir() and any(held_out.glob("*.py"))
    assert "site-packages" in held_out.parts  # code_documents skips site-packages under the stdlib
    assert stdlib not in held_out.parents or "site-packages" in held_out.relative_to(stdlib).parts
