"""Batched decoding: every batched forward gives each row the logits its own single-row forward would, and the
traces equal unbatched ones (output ids, commits per step) across architectures, prompt lengths, stops and rules."""

import pytest

import sbd_viz as sv
from sbd_viz.decoders.batch import BatchDecoding
from sbd_viz.decoders.sbd import serve

from conftest import sharp_model as sharp

ARCHS = ["llama", "qwen3", "gpt_neox", "mistral"]
# different lengths, so rows are padded and finish at different calls
PROMPTS = ["assert 1 + 2 == ", "x = [3, 1", "def f(a):", "hi", "assert sorted([5, 1, 3]) == ", "a",
           "for i in range(10):\n    print(i)\n", "y"]
SETTINGS = [
    dict(gamma=0.5, block_size=5, max_new_tokens=17),  # the length limit mid-block
    # stops at different blocks: characters these random models write at different places
    dict(rule="top_k", gamma=2, block_size=4, max_new_tokens=20, stop=("q", "t", "L", "2", "%", "H", "P")),
    dict(rule="left_to_right", gamma=0.3, block_size=4, max_new_tokens=9),
    dict(gamma=0.5, block_size=4, max_new_tokens=13, verify=True),  # rollbacks cut a row's cache
    dict(gamma=0.1, block_size=1, max_new_tokens=6),
]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here


@pytest.fixture(scope="module")
def models():
    return {arch: sharp(arch) for arch in ARCHS}


def _commits(trace):
    return [[(c.slot, c.token_id) for c in s.commits] for s in trace.steps]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.heavy
def test_each_row_gets_its_single_row_logits(arch, models, monkeypatch):
    """Every request a row makes is also served on a private single-row cache; the replies agree."""
    model = models[arch]
    real_requests = sv.Decoding.requests
    worst = {"diff": 0.0, "calls": 0, "cuts": 0}

    def shadowed(self):
        inner, shadow, reply = real_requests(self), self.model.new_cache(), None

        def run():
            nonlocal reply
            while True:
                try:
                    request = inner.send(reply)
                except StopIteration:
                    return
                reply = yield request
                expected = serve(self.model, shadow, request)
                if expected is None:
                    worst["cuts"] += 1
                    continue
                worst["calls"] += 1
                for got, want in ((reply.causal, expected.causal), (reply.blocks, expected.blocks)):
                    assert got.shape == want.shape
                    if got.numel():
                        worst["diff"] = max(worst["diff"], float((got - want).abs().max()))
        return run()

    monkeypatch.setattr(sv.Decoding, "requests", shadowed)
    for setting in (SETTINGS[0], SETTINGS[3]):
        batch = BatchDecoding(model, PROMPTS, sv.DecodeConfig(**setting), batch_size=3, prefill_chunk=4)
        traces = batch.run()
        assert batch.stats.row_calls == sum(t.nfe for t in traces)  # one row-call per recorded step
        assert batch.stats.compactions > 0  # the gather path was exercised
        assert batch.stats.prefill_pieces > 0  # and prompts went in pieces
    assert worst["calls"] > 50 and worst["cuts"] > 0, worst  # verified rows really rolled back
    assert worst["diff"] <= 1e-4, worst


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.heavy
def test_batched_traces_equal_unbatched(arch, models):
    model = models[arch]
    for setting in SETTINGS:
        singles = [sv.decode(model, p, **setting) for p in PROMPTS]
        for batch_size in (3, 8):
            batched = sv.decode_batch(model, PROMPTS, batch_size=batch_size, **setting)
            assert [t.prompt for t in batched] == PROMPTS
            for one, many in zip(singles, batched):
                assert many.output_ids == one.output_ids, (setting, one.prompt)
                assert _commits(many) == _commits(one), (setting, one.prompt)
                assert many.stop_reason == one.stop_reason
                assert many.meta["batch_size"] == batch_size
        if "stop" in setting:  # the rows really stopped, and at different blocks
            assert "stop" in {t.stop_reason for t in singles}
            assert len({t.n_blocks for t in singles}) > 1


def test_a_batch_of_one_is_the_plain_decode(models):
    model = models["qwen3"]
    one = sv.decode(model, PROMPTS[0], gamma=0.3, block_size=6, max_new_tokens=12)
    (same,) = sv.decode_batch(model, [PROMPTS[0]], gamma=0.3, block_size=6, max_new_tokens=12, batch_size=1)
    assert same.output_ids == one.output_ids and _commits(same) == _commits(one)


@pytest.mark.parametrize("prefill_chunk", [16, 4, None])
@pytest.mark.heavy
def test_shipped_model_batch_equals_unbatched(shipped, prefill_chunk):
    items = sv.tasks.load_suite()[:24]
    prompts = [item.prompt for item in items]
    singles = [sv.decode(shipped, p, gamma=0.1, stop="\n") for p in prompts]
    batch = BatchDecoding(shipped, prompts, sv.DecodeConfig(gamma=0.1, stop=("\n",)), batch_size=8,
                          prefill_chunk=prefill_chunk)
    batched = batch.run()
    assert [t.output_ids for t in batched] == [t.output_ids for t in singles]
    assert (batch.stats.prefill_pieces > 0) == (prefill_chunk is not None)
    assert batch.stats.row_calls == sum(t.nfe for t in singles)
    assert 0 < batch.stats.token_efficiency <= 1 and 0 < batch.stats.row_efficiency <= 1


def test_bad_input_names_the_argument(models):
    model = models["llama"]
    with pytest.raises(ValueError, match="prompts"):
        sv.decode_batch(model, "one string")
    with pytest.raises(ValueError, match="prompts"):
        sv.decode_batch(model, [])
    with pytest.raises(ValueError, match=r"prompts\[1\]"):
        sv.decode_batch(model, ["ok", ""])
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="batch_size"):
            sv.decode_batch(model, ["ok"], batch_size=bad)
    with pytest.raises(ValueError, match="gamma"):
        sv.decode_batch(model, ["ok"], gamma=-1)
    for bad in (0, True, 1.5, "16"):
        with pytest.raises(ValueError, match="prefill_chunk"):
            BatchDecoding(model, ["ok"], prefill_chunk=bad)
    with pytest.raises(TypeError, match="model"):
        sv.decode_batch("not a model", ["ok"])
    limit = model.context_length
    if limit:
        with pytest.raises(ValueError, match=r"max_new_tokens.*prompts\[0\]"):
            sv.decode_batch(model, ["ok"], max_new_tokens=limit)


def test_a_batch_runs_once(models):
    batch = BatchDecoding(models["llama"], ["a", "b"], sv.DecodeConfig(max_new_tokens=3))
    batch.run()
    with pytest.raises(RuntimeError, match="run"):
        batch.run()
