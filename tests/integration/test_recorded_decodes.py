"""Every decode setting writes the ids, in the calls, with the per-call commits recorded from the code before the
engine was restructured (``tests/data/make_decodes.py`` wrote ``tests/data/decodes.json``): verified SBD with single
drafting, the chain, token trees and fewer blocks a call, plain SBD under several rules, and the exact decoders, on
both shipped models and the tiny architectures."""

import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import pytest

import sbd_viz as sv

DATA = Path(__file__).resolve().parents[1] / "data"
spec = importlib.util.spec_from_file_location("make_decodes", DATA / "make_decodes.py")
make_decodes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_decodes)

RECORDS = defaultdict(list)
for record in json.loads((DATA / "decodes.json").read_text()):
    RECORDS[record["model"]].append(record)
MAKERS = {name: make for name, make, _, _ in make_decodes.plans(tiny_only=False)}


def test_the_recording_covers_every_drafting_on_every_model():
    drafted = {(r["model"], json.dumps({k: r["settings"].get(k) for k in ("drafting", "tree_widths", "tree_blocks")}))
               for rs in RECORDS.values() for r in rs if r["settings"].get("verify")}
    for name in MAKERS:
        assert len({d for m, d in drafted if m == name}) == len(make_decodes.DRAFTINGS), name


@pytest.mark.parametrize("name", list(MAKERS))
def test_every_recorded_decode_is_unchanged(name, one_thread):
    model = MAKERS[name]()
    changed = []
    for record in RECORDS[name]:
        trace = sv.decode(model, record["prompt"], **record["settings"])
        if make_decodes.record(trace) != {k: record[k] for k in ("ids", "calls", "commits")}:
            changed.append((record["prompt"], record["settings"], record["calls"], trace.nfe))
    assert not changed, f"{len(changed)} of {len(RECORDS[name])} decodes changed, e.g. {changed[:3]}"
