"""The decoding engine: exact KV cache on several architectures, decode invariants, errors."""

import math

import pytest
import torch

import sbd_viz as sv
from sbd_viz.training.data import build_char_tokenizer

from conftest import block_call, call_from, fused_call, fused_from, reference_logits, tiny_model


def _prefill_keys(model, ids):
    cache = model.new_cache()
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return [layer.keys for layer in cache.layers]


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gpt_neox", "mistral"])
@pytest.mark.heavy
def test_cached_block_calls_equal_uncached_forward(arch, monkeypatch):
    model = tiny_model(arch, seed=1)
    final: list[int] = []  # tokens that entered the cache, in order
    worst = {"logits": 0.0, "cache": 0.0, "calls": 0}
    real_call = fused_from(model.call)

    def checked_call(cache, new_ids, block_ids, n_causal=0):
        expected = reference_logits(model, final + list(new_ids), list(block_ids))
        causal, got = real_call(cache, new_ids, block_ids, n_causal)
        final.extend(new_ids)
        worst["logits"] = max(worst["logits"], float((got - expected).abs().max()))
        assert cache.get_seq_length() == len(final)
        for cached, ref in zip((layer.keys for layer in cache.layers), _prefill_keys(model, final)):
            worst["cache"] = max(worst["cache"], float((cached - ref).abs().max()))
        worst["calls"] += 1
        return causal, got

    # on this model alone: a patch of the class would also see any other model's calls in this process
    monkeypatch.setattr(model, "call", call_from(checked_call))
    trace = sv.decode(model, "assert 1 + 2 == ", rule="top_k", gamma=2, block_size=5, max_new_tokens=17)
    assert worst["calls"] == trace.nfe >= 9  # blocks of 5, 5, 5, 2 at two slots per call
    assert trace.n_blocks == 4
    assert worst["logits"] <= 1e-4, worst
    assert worst["cache"] <= 1e-4, worst


def test_bidirectional_block_really_sees_itself(tiny):
    """Changing one committed slot changes the other slots' predictions (the mask is applied)."""
    ids = tiny.encode("assert 3 == ")
    m = tiny.mask_token_id
    a = block_call(tiny, tiny.new_cache(), ids, [m, m, m, m])
    b = block_call(tiny, tiny.new_cache(), ids, [m, m, m, 30])
    assert float((a[0] - b[0]).abs().max()) > 1e-4


def test_failed_call_leaves_cache_untouched(tiny, monkeypatch):
    cache = tiny.new_cache()
    m = tiny.mask_token_id
    block_call(tiny, cache, tiny.encode("assert 1 == "), [m, m, m])
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    attn = tiny.model.model.layers[1].self_attn

    def boom(*args, **kwargs):
        raise RuntimeError("boom in layer 1")

    monkeypatch.setattr(attn, "forward", boom)
    with pytest.raises(RuntimeError, match="boom"):
        block_call(tiny, cache, [40, 41], [m, m, m])  # layer 0 has already appended its K/V by then
    monkeypatch.undo()
    assert len(cache.layers) == len(before)
    for layer, (k, v) in zip(cache.layers, before):
        assert torch.equal(layer.keys, k) and torch.equal(layer.values, v)
    block_call(tiny, cache, [40, 41], [m, m, m])  # and the cache still works
    assert cache.get_seq_length() == len(tiny.encode("assert 1 == ")) + 2


class ScriptedModel(sv.SBDModel):
    """Predicts a fixed script; right-hand slots of a block are the most confident, which
    makes the entropy rules fill gaps. Lets decode logic be tested without a trained model."""

    def __init__(self, script: str):
        super().__init__(tiny_model("llama").model, build_char_tokenizer(), name="scripted")
        self.script = script
        self.calls = 0

    class _Cache:
        def __init__(self):
            self.n = 0

        def get_seq_length(self):
            return self.n

    def new_cache(self):
        return self._Cache()

    def call(self, cache, request):
        return call_from(self.fused)(cache, request)

    def fused(self, cache, new_ids, block_ids, n_causal=0):
        cache.n += len(new_ids)
        self.calls += 1
        vocab = self.tokenizer.get_vocab()
        logits = torch.zeros(len(block_ids), len(vocab))
        gen_start = cache.n - self.prompt_len
        for slot in range(len(block_ids)):
            pos = gen_start + slot
            char = self.script[pos] if pos < len(self.script) else " "
            logits[slot, vocab[char]] = 4.0 + slot  # sharper to the right: low entropy there
        return torch.zeros(n_causal, len(vocab)), logits


def _scripted(script, prompt="go: "):
    model = ScriptedModel(script)
    model.prompt_len = len(model.encode(prompt))
    return model, prompt


@pytest.mark.heavy
def test_decode_invariants_and_gap_fills():
    model, prompt = _scripted("abcdefghijklmnopqrstuvwxyz0123456789")
    trace = sv.decode(model, prompt, gamma=0.5, block_size=8, max_new_tokens=20)
    assert trace.text == "abcdefghijklmnopqrst"
    assert trace.nfe == len(trace.steps) == model.calls
    assert [s.call for s in trace.steps] == list(range(trace.nfe))
    # every block is complete before the next starts; each slot committed exactly once
    for b in range(trace.n_blocks):
        steps = trace.block_steps(b)
        slots = [c.slot for s in steps for c in s.commits]
        assert sorted(slots) == list(range(steps[0].block_size))
        assert all(s.commits for s in steps)
        later = [s.call for s in trace.steps if s.block > b]
        assert not later or min(later) > max(s.call for s in steps)
    # the trace reproduces the text from its commits
    rebuilt = {}
    for s in trace.steps:
        for c in s.commits:
            rebuilt[s.block_start + c.slot] = c.text
    assert "".join(rebuilt[p] for p in sorted(rebuilt)) == trace.text
    assert trace.gap_fills(), "right-confident script should cause gap fills"
    for g in trace.gap_fills():
        assert g.state.count("<m>") == g.gap


@pytest.mark.heavy
def test_gap_free_and_left_to_right_never_fill_gaps():
    model, prompt = _scripted("abcdefghijklmnopqrstuvwxyz")
    for kwargs in (dict(gamma=0.5, gap_free=True), dict(rule="left_to_right"), dict(gamma=100.0, gap_free=True)):
        trace = sv.decode(model, prompt, block_size=8, max_new_tokens=16, **kwargs)
        assert trace.text == "abcdefghijklmnop"
        assert trace.gap_fills() == []
    assert sv.decode(model, prompt, rule="left_to_right", block_size=8, max_new_tokens=16).nfe == 16


def test_stop_string_ends_early_and_truncates():
    model, prompt = _scripted("12\n456789abcdefgh")
    trace = sv.decode(model, prompt, rule="left_to_right", block_size=8, max_new_tokens=16, stop="\n")
    assert trace.text == "12\n" and trace.stop_reason == "stop"
    assert trace.nfe == 3  # slots after the newline are never decoded
    big = sv.decode(model, prompt, gamma=100.0, block_size=8, max_new_tokens=16, stop=["\n"])
    assert big.text == "12\n" and big.nfe == 1


def test_eos_stops():
    model, prompt = _scripted("ab_cd")
    vocab = model.tokenizer.get_vocab()
    original = model.fused

    def with_eos(cache, new_ids, block_ids, n_causal=0):
        causal, logits = original(cache, new_ids, block_ids, n_causal)
        gen_start = cache.n - model.prompt_len
        for slot in range(len(block_ids)):
            if gen_start + slot == 2:
                logits[slot] = 0
                logits[slot, vocab["<|endoftext|>"]] = 9.0
        return causal, logits

    model.fused = with_eos
    trace = sv.decode(model, prompt, rule="left_to_right", block_size=4, max_new_tokens=8)
    assert trace.stop_reason == "eos" and trace.text == "ab" and trace.n_tokens == 3


@pytest.mark.heavy
def test_temperature_sampling_is_seeded(tiny):
    a = sv.decode(tiny, "x = ", temperature=1.0, seed=3, max_new_tokens=12, block_size=4)
    b = sv.decode(tiny, "x = ", temperature=1.0, seed=3, max_new_tokens=12, block_size=4)
    c = sv.decode(tiny, "x = ", temperature=1.0, seed=4, max_new_tokens=12, block_size=4)
    assert a.output_ids == b.output_ids
    assert a.output_ids != c.output_ids


@pytest.mark.heavy
def test_ntp_baseline_is_greedy_one_token_per_call(tiny):
    trace = sv.decode_ntp(tiny, "assert 7 == ", max_new_tokens=10)
    assert trace.nfe == trace.n_tokens == 10
    ids = tiny.encode("assert 7 == ")
    for tok in trace.output_ids:  # uncached greedy, token by token
        with torch.no_grad():
            nxt = int(tiny.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        assert nxt == tok
        ids.append(nxt)
    assert all(s.slots[0].top[0].token_id == s.commits[0].token_id for s in trace.steps)


def test_missing_mask_token_names_the_fix():
    model = tiny_model("llama")
    model.model.config.mask_token_id = None
    tok = build_char_tokenizer()
    tok.mask_token = None
    bare = sv.SBDModel(model.model, tok)
    with pytest.raises(sv.MaskTokenError, match="add_mask_token"):
        sv.decode(bare, "hi")
    assert sv.decode_ntp(bare, "hi", max_new_tokens=2).n_tokens == 2


@pytest.mark.heavy
def test_add_mask_token_survives_save_and_reload(tmp_path):
    model = tiny_model("qwen2")
    tok = build_char_tokenizer()
    tok.mask_token = None
    model.model.config.mask_token_id = None
    tok.add_special_tokens({"additional_special_tokens": []})
    mask_id = sv.add_mask_token(model.model, tok, token="<|MASK2|>")
    assert mask_id == len(tok) - 1 and model.model.get_input_embeddings().weight.shape[0] == len(tok)
    model.model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    again = sv.load_model(tmp_path)
    assert again.mask_token_id == mask_id
    assert sv.decode(again, "ab", max_new_tokens=3, block_size=3).n_tokens == 3


@pytest.mark.parametrize("kwargs, name", [
    (dict(block_size=0), "block_size"), (dict(block_size=65), "block_size"), (dict(gamma=math.nan), "gamma"),
    (dict(gamma=-1.0), "gamma"), (dict(rule="nope"), "rule"), (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(temperature=-0.5), "temperature"), (dict(stop=[""]), "stop"), (dict(rule="top_k", gamma=0.5), "gamma"),
])
def test_bad_arguments_name_themselves(tiny, kwargs, name):
    with pytest.raises(ValueError, match=name):
        sv.decode(tiny, "hi", **kwargs)


def test_bad_prompt_and_model(tiny):
    with pytest.raises(ValueError, match="prompt"):
        sv.decode(tiny, "")
    with pytest.raises(TypeError, match="model"):
        sv.decode("not a model", "hi")


def test_slots_after_a_committed_stop_are_not_decoded():
    """Generate-until: a committed newline ends the block's useful part, even left of masked slots."""
    model, prompt = _scripted("12\n456789abcdefgh")
    original = model.fused

    def newline_first(cache, new_ids, block_ids, n_causal=0):
        causal, logits = original(cache, new_ids, block_ids, n_causal)
        logits[2] *= 10  # the newline slot is by far the most confident
        return causal, logits

    model.fused = newline_first
    trace = sv.decode(model, prompt, gamma=0.0, block_size=8, max_new_tokens=16, stop="\n")
    assert trace.text == "12\n" and trace.stop_reason == "stop"
    # the first call also commits slot 7 (entropy ~1e-2 after a ~0 one fits gamma=0 by eq. 8);
    # slots 3..6 never cost a call
    assert [s.committed_slots for s in trace.steps] == [(2, 7), (1,), (0,)]


def test_decoding_streams_steps_then_gives_the_trace():
    """The public streaming path (what the app uses) gives exactly what ``decode`` gives."""
    model, prompt = _scripted("12\n456789abcdefgh")
    config = sv.DecodeConfig(gamma=0.5, block_size=8, max_new_tokens=16, stop="\n")
    decoding = sv.Decoding(model, prompt, config)
    with pytest.raises(RuntimeError, match="trace"):
        decoding.trace()  # nothing decoded yet
    steps = list(decoding.steps())
    trace = decoding.trace()
    expected = sv.decode(model, prompt, gamma=0.5, block_size=8, max_new_tokens=16, stop="\n")
    assert trace.steps == tuple(steps) and trace.text == expected.text == "12\n"
    assert (trace.output_ids, trace.stop_reason, trace.config) == (expected.output_ids, "stop", expected.config)
    assert [s.commits for s in steps] == [s.commits for s in expected.steps]
    with pytest.raises(RuntimeError, match="steps"):
        next(decoding.steps())  # one Decoding, one decode


def test_decoding_checks_everything_before_the_first_call(tiny):
    short = tiny_model()
    short.model.config.sbd_context_length = 16
    with pytest.raises(ValueError, match="prompt"):
        sv.Decoding(short, "x" * 20)  # raised on construction, not at the first next()
    with pytest.raises(TypeError, match="config"):
        sv.Decoding(tiny, "hi", {"gamma": 0.5})
    with pytest.raises(ValueError, match="prompt"):
        sv.decode_steps(tiny, "")
