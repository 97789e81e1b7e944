"""Sweeps that decode each γ piece once (``sbd_viz.analysis.pieces``, ``sv.sweep``, ``sv.sweep_decoders``): every
number equals the reference built by calling ``sv.decode`` at each γ, and the model runs fewer forwards (counted by a
hook on the network, not by the code under test)."""

import contextlib

import pandas as pd
import pytest

import sbd_viz as sv
from sbd_viz.analysis.pieces import PieceStore, at_gamma, decode_at_gammas
from sbd_viz.tasks.asserts import SuiteItem, score

from conftest import bench_script

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = ["assert 12 + 7 == ", "assert 3 + 4 == ", "assert sorted([3, 1]) == "]
# several γ share a piece (0 and 0.001; 0.3 and 0.31), others do not
GAMMAS = [0.0, 0.001, 0.05, 0.3, 0.31, 1.0, 2.0]
N = 10
TIMED = ("wall_time", "ntp_wall_time", "speedup_wall", "measured_at")


def same_decode(a, b) -> bool:
    """The same decode: output, calls, every call's commits and verified records, and the settings."""
    def key(t):
        return (t.output_ids, t.text, t.nfe, t.config, t.gamma_range,
                [(s.block, s.masked, s.commits, s.checks, s.rollback) for s in t.steps])
    return key(a) == key(b)


@contextlib.contextmanager
def counted_forwards(model):
    """Every forward of the network, whoever runs it (SBD's calls, HF ``generate``'s steps, teacher forcing)."""
    count = [0]
    handle = model.model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    try:
        yield count
    finally:
        handle.remove()


def items(model):
    """Suite items whose answer is the model's own γ-0 text for half of them, so accuracy varies with γ."""
    out = []
    for i, p in enumerate(PROMPTS):
        text = sv.decode(model, p, gamma=0.0, max_new_tokens=N, stop="\n").text
        out.append(SuiteItem(prompt=p, answer=text.strip() if i % 2 == 0 else "no", family="add"))
    return out


@pytest.mark.heavy
def test_decode_at_gammas_equals_sv_decode_at_each_gamma(sharp):
    for settings in (dict(), dict(verify=True), dict(decoder="remask")):
        got = decode_at_gammas(sharp, PROMPTS[0], GAMMAS, max_new_tokens=N, **settings)
        for g in GAMMAS:
            ref = sv.decode(sharp, PROMPTS[0], gamma=g, max_new_tokens=N, **settings)
            assert same_decode(got.traces[g], ref), (settings, g)
        assert got.decodes < len(GAMMAS) and got.calls < got.direct_calls
        assert got.direct_calls == sum(sv.decode(sharp, PROMPTS[0], gamma=g, max_new_tokens=N, **settings).nfe
                                       for g in GAMMAS)


@pytest.mark.heavy
def test_at_gamma_and_the_store(sharp):
    trace = sv.decode(sharp, PROMPTS[0], gamma=0.0, max_new_tokens=N)
    r = trace.gamma_range
    inside = r.hi / 2 if r.hi > 0 else 0.0
    assert at_gamma(trace, inside).config["gamma"] == inside and at_gamma(trace, inside).steps == trace.steps
    with pytest.raises(ValueError, match="gamma"):
        at_gamma(trace, 2.0)
    store = PieceStore()
    store.add(trace, "kept")
    assert store.find(inside) == "kept" and store.find(2.0) is None and len(store) == 1
    store.add(sv.decode(sharp, PROMPTS[0], gamma=0.5, temperature=1.0, max_new_tokens=N), "sampled")
    assert len(store) == 1  # a sampled decode has no γ range: nothing shares it


def reference_row(model, suite, gamma, verify):
    """A sweep row's numbers from ``sv.decode`` at ``gamma`` on every item, and NTP's."""
    traces = [sv.decode(model, i.prompt, gamma=gamma, verify=verify, max_new_tokens=N, stop="\n") for i in suite]
    ntp = [sv.decode_ntp(model, i.prompt, max_new_tokens=N, stop="\n") for i in suite]
    return dict(calls=sum(t.nfe for t in traces), tokens=sum(t.n_tokens for t in traces),
                accuracy=sum(score(i, t.text) for i, t in zip(suite, traces)) / len(suite),
                same_as_ntp=sum(t.text == n.text for t, n in zip(traces, ntp)) / len(suite),
                speedup_calls=sum(n.nfe for n in ntp) / sum(t.nfe for t in traces))


@pytest.mark.heavy
@pytest.mark.parametrize("batch_size", [1, 2])
def test_sweep_decodes_each_piece_once_with_the_rows_of_decoding_each_gamma(sharp, batch_size):
    suite = items(sharp)
    kw = dict(gammas=GAMMAS, verify=(False, True), cache_dir=None, progress=False, max_new_tokens=N,
              batch_size=batch_size, speed_batch_size=1 if batch_size == 1 else None)
    with counted_forwards(sharp) as shared:
        df = sv.sweep(sharp, suite, **kw)
    with counted_forwards(sharp) as every:
        each = sv.sweep(sharp, suite, reuse_pieces=False, **kw)
    cols = [c for c in df.columns if c not in TIMED]
    pd.testing.assert_frame_equal(df[cols], each[cols])
    for _, row in df[df["rule"] != "ntp"].iterrows():
        ref = reference_row(sharp, suite, row["gamma"], bool(row["verify"]))
        for key, value in ref.items():
            assert row[key] == pytest.approx(value), (row["gamma"], row["verify"], key)
    assert df.attrs["calls_reused"] > 0 and each.attrs["calls_reused"] == 0
    assert df.attrs["calls_run"] + df.attrs["calls_reused"] == each.attrs["calls_run"]
    assert shared[0] < every[0]  # the network itself ran fewer forwards
    if batch_size == 1:  # a reused row keeps the seconds measured with its decode
        assert df["wall_time"].notna().all()


@pytest.mark.heavy
def test_sweep_decoders_decodes_each_piece_once_with_the_same_frame(sharp):
    kw = dict(gammas=GAMMAS, decoders=("sbd", "remask", "jacobi"), verify=(False, True), max_new_tokens=N)
    with counted_forwards(sharp) as shared:
        df = sv.sweep_decoders(sharp, PROMPTS, **kw)
    with counted_forwards(sharp) as every:
        each = sv.sweep_decoders(sharp, PROMPTS, reuse_pieces=False, **kw)
    pd.testing.assert_frame_equal(df, each)
    for _, row in df[df["decoder"].isin(["sbd", "remask"])].iterrows():
        settings = dict(verify=True) if row["label"] == "verified SBD" else {}
        traces = [sv.decode(sharp, p, decoder=row["decoder"], gamma=row["gamma"], max_new_tokens=N, stop="\n",
                            **settings) for p in PROMPTS]
        assert (row["calls"], row["tokens"]) == (sum(t.nfe for t in traces), sum(t.n_tokens for t in traces))
    assert df.attrs["calls_run"] < df.attrs["calls_direct"] == each.attrs["calls_run"] == each.attrs["calls_direct"]
    assert shared[0] < every[0]
    with pytest.raises(ValueError, match="reuse_pieces"):
        sv.sweep_decoders(sharp, PROMPTS, reuse_pieces="yes")
    with pytest.raises(ValueError, match="reuse_pieces"):
        sv.sweep(sharp, PROMPTS, reuse_pieces=1, cache_dir=None)


def second_gamma(traces, gamma):
    """A γ other than ``gamma`` that the γ range of every trace (each decoded at ``gamma``) holds."""
    common = traces[0].gamma_range
    for t in traces[1:]:
        common = common & t.gamma_range
    for other in ((gamma + common.hi) / 2, gamma + 1.0, (gamma + common.lo) / 2):
        if other != gamma and other in common:
            return other
    raise AssertionError(f"no second γ in {common}")


@pytest.mark.heavy
@pytest.mark.parametrize("script", ["bench_remask", "bench_incoherent", "bench_verified"])
def test_bench_scripts_decode_each_piece_once(sharp, script):
    """Each bench script that loops over γ decodes an item once for two γ of one piece: its model forwards are those
    of one decode per item and line (one per γ would double them), and its traces are ``sv.decode``'s at each γ."""
    bench = bench_script(script)
    suite = [SuiteItem(prompt=p, answer="x", family="add") for p in PROMPTS[:2]]
    kw = dict(max_new_tokens=64, stop="\n")
    lines = {"bench_remask": [{}, dict(decoder="remask", remask_threshold=0.5)],
             "bench_incoherent": [dict(rule="entropy_bounded")], "bench_verified": [dict(block_size=16, verify=True)]}
    g = 0.3
    with counted_forwards(sharp) as once:
        first = [sv.decode(sharp, i.prompt, gamma=g, **kw, **line) for line in lines[script] for i in suite]
    other = second_gamma(first, g)
    with counted_forwards(sharp) as count:
        if script == "bench_remask":
            sbd, remask = bench.decode_suite(sharp, suite, [g, other], [0.5])
            got = {gamma: sbd[gamma] + remask[gamma, 0.5] for gamma in (g, other)}
        elif script == "bench_incoherent":
            got = bench.decode_suite(sharp, suite, [g, other])
        else:
            got = {gamma: [] for gamma in (g, other)}
            for item in suite:
                pieces, seconds = {}, []
                for gamma in (g, other):
                    trace, s = bench.decode_timed(sharp, item.prompt, (gamma, 16, True), pieces, 64, "\n")
                    got[gamma].append(trace)
                    seconds.append(s)
                assert seconds[0] == seconds[1]  # read back with the decode it was timed with
    assert count[0] == once[0] > 0
    for gamma in (g, other):
        refs = [sv.decode(sharp, i.prompt, gamma=gamma, **kw, **line) for line in lines[script] for i in suite]
        assert all(same_decode(a, b) for a, b in zip(got[gamma], refs, strict=True)), gamma


@pytest.mark.heavy
def test_the_fine_tune_bench_decodes_each_verified_piece_once(sharp, monkeypatch):
    """bench_sbd_finetune's verified settings at two γ of one piece cost the forwards of one verified decode, and its
    rows are those of decoding each setting with ``sv.decode``."""
    bench = bench_script("bench_sbd_finetune")
    prompt, g = PROMPTS[0], 0.3
    first = sv.decode(sharp, prompt, decoder="sbd", verify=True, block_size=16, gamma=g, max_new_tokens=24)
    other = second_gamma([first], g)
    monkeypatch.setattr(bench, "VERIFIED", [(16, g), (16, other)])
    with counted_forwards(sharp) as count:
        rows = bench.measure(sharp, [prompt], 24)["decoders"]
    with counted_forwards(sharp) as once:
        ntp = sv.decode(sharp, prompt, decoder="ntp", max_new_tokens=24)
        sv.decode(sharp, prompt, decoder="prompt_lookup", max_new_tokens=24)
        sv.decode(sharp, prompt, decoder="sbd", verify=True, block_size=16, gamma=g, max_new_tokens=24)
        k, gamma = bench.PLAIN
        sv.decode(sharp, prompt, decoder="sbd", block_size=k, gamma=gamma, max_new_tokens=24)
    assert count[0] == once[0] > 0
    for gamma in (g, other):
        ref = sv.decode(sharp, prompt, decoder="sbd", verify=True, block_size=16, gamma=gamma, max_new_tokens=24)
        row = rows[f"verified SBD, block 16, γ {gamma:g}"]
        assert (row["tokens"], row["calls"], row["equal"]) == (ref.n_tokens, ref.nfe,
                                                               int(list(ref.output_ids) == list(ntp.output_ids)))
