"""Trace version 3 (canvases: drafts, acceptance, renoising, uncounted passes) and the CanvasRecorder that
writes it: round trips, older files still load, SBD traces still save as version 2."""

import json
from pathlib import Path

import pytest
import torch

import sbd_viz as sv
from sbd_viz.decoders.recorder import CanvasRecorder
from sbd_viz.trace.data import SCHEMA_VERSION, Trace, TraceFormatError

DATA = Path(__file__).parents[1] / "data"


def logits_for(drafts: list[int], vocab: int = 6, sharp: float = 4.0) -> torch.Tensor:
    """(K, V) logits whose argmax at slot s is drafts[s]."""
    scores = torch.zeros(len(drafts), vocab)
    scores[torch.arange(len(drafts)), torch.tensor(drafts)] = sharp
    return scores


def canvas_trace(top_n: int = 5) -> Trace:
    """Two blocks of 3 slots: block 0 accepts slot 2, then slots 0 and 1 while slot 2 is renoised, then all;
    block 1 accepts everything at once. Token 1 is the end of text."""
    rec = CanvasRecorder([5, 5], 3, token_text=lambda t: "abcdef"[t], eos_ids=[1], config={"gamma": 0.5},
                         top_n=top_n)
    rec.encoder(2, wall_time=0.5)
    rec.step(logits_for([3, 4, 2]), [False, False, True], held=[0, 0, 2], wall_time=0.1)
    rec.step(logits_for([3, 4, 2]), [True, True, False], held=[3, 5, 0], wall_time=0.1)
    rec.step(logits_for([3, 4, 2]), [True, True, True], held=[3, 4, 2], wall_time=0.1)
    rec.end_block([3, 4, 2])
    rec.encoder(3, wall_time=0.2)
    rec.step(logits_for([0, 1, 5]), [True, True, True], wall_time=0.1)
    rec.end_block([0, 1, 5])
    return rec.trace()


def test_recorder_derives_commits_renoising_and_gaps():
    trace = canvas_trace()
    s0, s1, s2, s3 = trace.steps
    assert (s0.masked, s0.committed_slots, s0.renoised, [c.gap for c in s0.commits]) == ((0, 1, 2), (2,), (), [2])
    assert (s1.masked, s1.committed_slots, s1.renoised) == ((0, 1), (0, 1), (2,))
    assert [c.text for c in s1.commits] == ["d", "f"]  # the accepted (held) tokens, not the drafts
    assert (s2.masked, s2.committed_slots, s2.renoised) == ((2,), (2,), ())
    assert [d.text for d in s1.canvas] == ["d", "e", "c"] and [d.held_text for d in s1.canvas] == ["d", "f", None]
    assert [p.kind for p in s0.passes] == ["encoder"] and s1.passes == () and s3.passes[0].n_input == 3
    assert trace.block_state(s1) == ["d", "f", None] and trace.block_state(s1, after=False) == [None, None, "c"]
    # four counted calls; the encoder passes are not counted
    assert (trace.nfe, trace.output_ids, trace.stop_reason, trace.text) == (4, (3, 4, 2, 0, 1), "eos", "decab")
    assert trace.token_calls() == [1, 1, 2, 3, 3]  # the call since which each slot held a token
    assert trace.has_canvas and trace.calls_per_block() == [3, 1]


CANVAS_FIELDS = ("canvas", "renoised", "passes")  # a step's fields for decoders whose slots change after a commit


def test_canvas_trace_round_trips(tmp_path):
    trace = canvas_trace()
    d = trace.to_dict()
    assert d["version"] == SCHEMA_VERSION and all(key in d["steps"][0] for key in CANVAS_FIELDS)
    assert d["steps"][0]["canvas"] and d["steps"][0]["passes"]
    assert sv.trace_from_json(trace.to_json()) == trace
    assert sv.load_trace(trace.save(tmp_path / "c.json")) == trace


@pytest.mark.heavy
def test_sbd_traces_save_in_the_same_version_with_empty_canvas_fields(tiny):
    trace = sv.decode(tiny, "ab", gamma=0.5, block_size=4, max_new_tokens=6)
    d = json.loads(trace.to_json())
    assert d["version"] == SCHEMA_VERSION and all(step[key] == [] for step in d["steps"] for key in CANVAS_FIELDS)
    assert sv.trace_from_json(trace.to_json()) == trace and not trace.has_canvas


@pytest.mark.parametrize("name", ["trace_sbd.json", "trace_verified.json"])
def test_saved_files_load_and_save_again_alike(name):
    raw = json.loads((DATA / name).read_text())
    assert raw["version"] == SCHEMA_VERSION
    trace = sv.load_trace(DATA / name)
    assert all(s.canvas == () and s.renoised == () and s.passes == () for s in trace.steps)
    assert json.loads(trace.to_json()) == raw


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["steps"][0]["canvas"].pop(), "one draft per slot"),
    (lambda d: d["steps"][0].update(renoised=[7]), "outside the block"),
    (lambda d: d["steps"][0]["canvas"][0].update(accepted="yes"), "true or false"),
    (lambda d: d["steps"][0]["passes"][0].pop("kind"), "missing"),
])
def test_bad_canvas_fields_are_rejected(mutate, message):
    d = json.loads(canvas_trace().to_json())
    mutate(d)
    with pytest.raises(TraceFormatError, match=message):
        sv.trace_from_dict(d)


def test_recorder_checks_its_inputs():
    rec = CanvasRecorder([1], 3)
    with pytest.raises(ValueError, match="logits"):
        rec.step(torch.zeros(2, 5), [True, True])
    with pytest.raises(ValueError, match="accepted"):
        rec.step(torch.zeros(3, 5), [True])
    with pytest.raises(ValueError, match="end_block"):
        rec.end_block([1, 2, 3])
    with pytest.raises(ValueError, match="canvas_length"):
        CanvasRecorder([1], 0)


@pytest.mark.heavy
def test_the_recorder_page_example_runs_and_prints_what_the_page_says(capsys):
    """docs/diffusion_recorder.md: its one code block records a toy loop; the page quotes what it prints."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "diffusion_recorder.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 1 and len(blocks[0].splitlines()) <= 40
    scope: dict = {}
    exec(compile(blocks[0], "diffusion_recorder.md", "exec"), scope)
    printed = capsys.readouterr().out.strip()
    assert f"It prints `{printed}`" in page
    trace = scope["trace"]
    assert trace.has_canvas and trace.text == "hello world." and any(s.renoised for s in trace.steps)
    assert sv.trace_from_json(trace.to_json()) == trace and len(scope["fig"].frames) == trace.nfe


def test_step_text_names_the_renoised_slots():
    from sbd_viz.trace.words import step_text

    trace = canvas_trace()
    text = step_text(trace, trace.steps[1])
    assert "renoised (accepted before, taken back): slot 2" in text
    assert "before: " in text and "renoised" not in step_text(trace, trace.steps[0])
    assert "slots renoised" in sv.trace_summary(trace).splitlines()[0]
