"""The stop rule and the mask id, on every decode path: a stop string that is a special token ends the output
there (nothing follows it, reason "stop"), and no output ever holds the mask id, even from a model that ranks the
mask first. The models are tiny random Llamas with a word-level tokenizer whose stop string ``<|end|>`` is a
special token, as a chat model's is; the stop token is made likely, so it lands inside blocks."""

import random

import pytest
import torch

import sbd_viz as sv
from sbd_viz.decoders.base import Proposal, find_stop, propose
from sbd_viz.decoders.jacobi import JacobiDecoding
from sbd_viz.decoders.remask import RemaskDecoding
from sbd_viz.decoders.sbd import DecodeConfig, Decoding
from sbd_viz.models.sbd_model import add_mask_token

END = "<|end|>"
WORDS = [f"w{i}" for i in range(24)]
N = 24  # max_new_tokens: three blocks of 8
SEEDS = (0, 1)
GAMMAS = (0.5, 2.0)


def word_model(seed: int, mask_bias: float = 0.0):
    """A random 2-layer Llama over a word vocabulary; ``<|end|>`` is a special token and likely (a +1 bias), EOS
    unlikely (stops come from the stop string); ``mask_bias`` added to the mask's logit (huge: the model ranks the
    mask first everywhere, its causal rows included)."""
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # "abcdef": HF's StopStringCriteria spells each token after tokenizing "abcdef"; a vocabulary that cannot
    # spell it makes generate(stop_strings=...) raise, so the reference below could not be built.
    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", END, "abcdef"] + WORDS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="<eos>")
    tok.add_special_tokens({"additional_special_tokens": [END]})
    config = tf.LlamaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=128, eos_token_id=tok.eos_token_id,
                            pad_token_id=tok.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    hf = tf.LlamaForCausalLM(config).eval()
    mask_id = add_mask_token(hf, tok)
    head = hf.get_output_embeddings()
    with torch.no_grad():
        head.weight *= 8  # peaky distributions: several slots per call at γ 0.5 and 2
        bias = torch.zeros(head.weight.shape[0])
        bias[tok.convert_tokens_to_ids(END)] = 1.0
        bias[tok.eos_token_id] = -20.0
        bias[mask_id] = mask_bias
        head.bias = torch.nn.Parameter(bias)
    return sv.SBDModel(hf, tok, name=f"word-{seed}")


def prompts(seed: int, n: int = 4) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]


@pytest.fixture(scope="module")
def models():
    return {(seed, bias): word_model(seed, bias) for seed in SEEDS for bias in (0.0, 50.0)}


@pytest.fixture(scope="module")
def references():
    return {}


def assert_clean(model, trace):
    """No mask id; the stop, if written, ends the output (nothing follows it) with reason "stop"."""
    ids = list(trace.output_ids)
    assert model.mask_token_id not in ids, ids
    text = model.tokenizer.decode(ids, skip_special_tokens=False)
    if END in text:
        assert text.index(END) == len(text) - len(END), text
        assert trace.stop_reason == "stop"
    else:
        assert (trace.stop_reason, len(ids)) == ("length", N), (trace.stop_reason, ids)


def run(decoding):
    for _ in decoding.steps():
        pass
    return decoding.trace()


def reference(model, prompt: str) -> list[int]:
    """Greedy NTP as a transformers user writes it: generate with stop_strings and the tokenizer (and the mask token
    suppressed, as no decode here writes it)."""
    ids = torch.tensor([model.encode(prompt)])
    out = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N, do_sample=False,
                               stop_strings=[END], tokenizer=model.tokenizer, suppress_tokens=[model.mask_token_id],
                               pad_token_id=model.tokenizer.eos_token_id)
    return out[0, ids.shape[1]:].tolist()


PATHS = {
    "sbd": lambda m, p, g: run(Decoding(m, p, DecodeConfig(gamma=g, block_size=8, max_new_tokens=N, stop=END))),
    "verified": lambda m, p, g: run(Decoding(m, p, DecodeConfig(gamma=g, block_size=8, max_new_tokens=N, stop=END,
                                                                 verify=True))),
    "remask": lambda m, p, g: run(RemaskDecoding(m, p, DecodeConfig(gamma=g, block_size=8, max_new_tokens=N,
                                                                    stop=END))),
    "jacobi": lambda m, p, g: run(JacobiDecoding(m, p, DecodeConfig(block_size=8, max_new_tokens=N, stop=END))),
}


@pytest.mark.heavy  # whole decodes on a dozen tiny models: seconds each
@pytest.mark.parametrize("mask_bias", [0.0, 50.0], ids=["random", "proposes-mask"])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_path_stops_at_a_special_token_and_never_writes_the_mask(models, references, path, mask_bias):
    stopped = 0
    for seed in SEEDS:
        model = models[seed, mask_bias]
        for prompt in prompts(seed):
            for gamma in GAMMAS:
                trace = PATHS[path](model, prompt, gamma)
                assert_clean(model, trace)
                stopped += trace.stop_reason == "stop"
                if path in ("verified", "jacobi"):  # greedy NTP's text by construction
                    key = seed, mask_bias, prompt
                    references.setdefault(key, reference(model, prompt))
                    assert list(trace.output_ids) == references[key]
    assert stopped >= 4  # the stop token does land in the outputs: the rule is exercised


@pytest.mark.heavy  # whole decodes on a dozen tiny models: seconds each
@pytest.mark.parametrize("mask_bias", [0.0, 50.0], ids=["random", "proposes-mask"])
def test_decode_ntp_equals_generate_with_stop_strings(models, references, mask_bias):
    for seed in SEEDS:
        model = models[seed, mask_bias]
        for prompt in prompts(seed):
            trace = sv.decode_ntp(model, prompt, max_new_tokens=N, stop=END)
            assert_clean(model, trace)
            key = seed, mask_bias, prompt
            references.setdefault(key, reference(model, prompt))
            assert list(trace.output_ids) == references[key]


@pytest.mark.heavy  # whole decodes on a dozen tiny models: seconds each
@pytest.mark.parametrize("mask_bias", [0.0, 50.0], ids=["random", "proposes-mask"])
def test_decode_batch_stops_and_never_writes_the_mask(models, mask_bias):
    for seed in SEEDS:
        model = models[seed, mask_bias]
        ps = prompts(seed)
        for gamma, verify in ((2.0, False), (0.5, True)):
            settings = dict(gamma=gamma, block_size=8, max_new_tokens=N, stop=END, verify=verify)
            batched = sv.decode_batch(model, ps, batch_size=3, **settings)  # a row's place goes to the next prompt
            for trace in batched:
                assert_clean(model, trace)
            assert [t.output_ids for t in batched] == [sv.decode(model, p, **settings).output_ids for p in ps]


def test_the_mask_model_ranks_the_mask_first():
    """The second route is exercised: without the exclusion, every argmax would be the mask id."""
    model = word_model(0, 50.0)
    logits = model.model(torch.tensor([model.encode("w1 w2 w3")])).logits[0]
    assert (logits.argmax(-1) == model.mask_token_id).all()


@pytest.mark.heavy  # whole decodes on a dozen tiny models: seconds each
def test_the_stop_lands_inside_blocks(models):
    """Plain SBD commits the stop token with slots still open right of it (where the mask ids used to leak from)."""
    inside = 0
    for seed in SEEDS:
        for prompt in prompts(seed):
            trace = PATHS["sbd"](models[seed, 0.0], prompt, 2.0)
            end = trace.stop_reason == "stop" and (len(trace.output_ids) % 8) != 0
            inside += end
    assert inside >= 2


def test_find_stop_sees_special_tokens(models):
    model = models[0, 0.0]
    end = model.tokenizer.convert_tokens_to_ids(END)
    ids = model.encode("w1 w2") + [end] + model.encode("w3")
    found = find_stop(model, ids, 1, (END,))
    assert (found.index, found.reason) == (3, "stop")
    assert END not in model.text(ids)  # the reader's text skips it; the stop rule does not


def test_propose_never_samples_the_mask_and_records_the_model_s_probabilities():
    model = word_model(0, 0.0)
    mask_id = model.mask_token_id
    logits = torch.zeros(64, model.model.config.vocab_size)
    logits[:, mask_id] = 3.0  # the mask is the likeliest token of every slot
    gen = torch.Generator().manual_seed(0)
    for temperature in (0.0, 1.0):
        p = propose(model, logits, temperature, gen)
        assert isinstance(p, Proposal)
        assert (p.tokens != mask_id).all()
        probs = torch.softmax(logits, -1)
        assert torch.allclose(p.confidence, probs.gather(-1, p.tokens[:, None]).squeeze(-1))  # not renormalised
        assert torch.allclose(p.entropy, -(probs * probs.log()).sum(-1))  # of the model's distribution
