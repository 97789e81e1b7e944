"""Trace: JSON round trip, rejection of bad files, derived measures."""

import json

import pytest

import sbd_viz as sv
from sbd_viz.trace import render_state


@pytest.fixture(scope="module")
def trace(tiny):
    return sv.decode(tiny, "assert 1 + 1 == ", solver="top_k", gamma=3, block_size=6, max_new_tokens=14)


def test_json_round_trip_is_lossless(trace, tmp_path):
    assert sv.Trace.from_json(trace.to_json()) == trace
    path = trace.save(tmp_path / "t.json")
    again = sv.Trace.load(path)
    assert again == trace
    assert again.to_json() == trace.to_json()
    assert again.nfe == trace.nfe and again.tokens_per_call == trace.tokens_per_call


def test_ntp_trace_round_trips(tiny):
    ntp = sv.decode_ntp(tiny, "hi", max_new_tokens=4)
    assert sv.Trace.from_json(ntp.to_json()) == ntp


def test_derived_measures(trace):
    assert trace.nfe == len(trace.steps)
    assert sum(trace.calls_per_block()) == trace.nfe
    assert trace.tokens_per_call == pytest.approx(trace.n_tokens / trace.nfe)
    assert len(trace.token_calls()) == trace.n_tokens
    assert trace.calls_per_block() == [2, 2, 1]  # 3 slots per call in blocks of 6, 6, 2


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="other.tool"), "schema"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.pop("steps"), "missing"),
    (lambda d: d["steps"][0].update(commits=[]), "commits nothing"),
    (lambda d: d["steps"][0]["commits"][0].update(slot="x"), "integer"),
    (lambda d: d["steps"][0].update(wall_time=None), "finite number"),
    (lambda d: d["steps"][1].update(call=7), "numbered"),
    (lambda d: d["steps"][0]["commits"][0].update(slot=99), "not masked"),
])
def test_malformed_traces_are_rejected(trace, mutate, message):
    d = json.loads(trace.to_json())
    mutate(d)
    with pytest.raises(sv.TraceFormatError, match=message):
        sv.Trace.from_json(json.dumps(d))


def test_foreign_and_broken_files(tmp_path):
    bad = {"list.json": "[1, 2]", "junk.json": "{not json", "empty.json": ""}
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(sv.TraceFormatError, match=name):
            sv.Trace.load(tmp_path / name)
    (tmp_path / "bin.json").write_bytes(b"\x80\x04\x95pickle")
    with pytest.raises(sv.TraceFormatError, match="not a text file"):
        sv.Trace.load(tmp_path / "bin.json")


def test_render_state():
    assert render_state(["a", None, None, "b"], prefix="x == ") == "x == a<m><m>b"
    assert render_state(["\n"], prefix="y") == "y⏎"
