"""The walkthroughs' exercise answers are true: each answer's claims, decoded as the answer says.

The answers sit in collapsed Markdown cells that the notebook never runs, so nothing in an executed notebook checks
them; here the exercise is run on the same setup as its notebook (same items, same lengths) and each claim the
answer makes is asserted.
"""

import pytest

import sbd_viz as sv


@pytest.fixture(scope="module")
def parallel():
    """Notebook 6's setup: the shipped model, its held-out items, and the example item (the one NTP takes the most
    calls on)."""
    model = sv.load_model()
    suite = sv.tasks.load_suite("pyasserts", split="test", per_family=3)
    ntp = [sv.decode(model, item.prompt, decoder="ntp", max_new_tokens=64, stop="\n") for item in suite]
    ex = max(range(len(suite)), key=lambda i: ntp[i].nfe)
    return model, suite[ex].prompt, ntp[ex]


def test_notebook_6_exercise_1_prompt_lookup_draft_length(parallel):
    """"the text is NTP's every time, and the calls hardly move"."""
    model, prompt, ntp = parallel
    short, long = (sv.decode(model, prompt, decoder="prompt_lookup", prompt_lookup_num_tokens=n, max_new_tokens=64,
                             stop="\n") for n in (2, 20))
    assert short.text == long.text == ntp.text
    assert abs(short.nfe - long.nfe) <= 0.1 * ntp.nfe


def test_notebook_6_exercise_2_jacobi_block_sizes(parallel):
    """"The text is NTP's at both sizes ... at block 2 a call keeps at most 2 tokens, so block 16, whose best call keeps
    more, needs fewer calls ... on this item block 16 needs more calls than the block Jacobi uses by default, the
    model's own"."""
    model, prompt, ntp = parallel
    two, sixteen, default = (sv.decode(model, prompt, decoder="jacobi", max_new_tokens=64, stop="\n", **kw)
                             for kw in (dict(block_size=2), dict(block_size=16), {}))
    assert two.text == sixteen.text == ntp.text
    best = {t.config["block_size"]: max(len(s.commits) for s in t.steps) for t in (two, sixteen)}
    assert best[2] <= 2 < best[16]
    assert sixteen.nfe < two.nfe
    assert default.config["block_size"] == model.block_size and sixteen.nfe > default.nfe


def test_notebook_6_exercise_3_remask_thresholds(parallel):
    """"At threshold 1 every pending gap fill is ... remasked once ... At threshold 0 nothing is remasked, but it is
    still not plain SBD: ... a block may need an extra call"."""
    model, prompt, _ = parallel
    one, zero = (sv.decode(model, prompt, decoder="remask", remask_threshold=th, max_new_tokens=64, stop="\n")
                 for th in (1.0, 0.0))
    plain = sv.decode(model, prompt, decoder="sbd", max_new_tokens=64, stop="\n")
    assert sum(len(s.renoised) for s in one.steps) > 0 and sum(len(s.renoised) for s in zero.steps) == 0
    assert zero.nfe >= plain.nfe


@pytest.fixture(scope="module")
def smol():
    """Notebook 7's setup: SmolLM2 through its chat template, at most 24 new tokens."""

    model = sv.load_model("smollm2-135m")
    return model, lambda text: sv.chat_prompt(model, text)


def test_notebook_7_exercise_1_longer_drafts_take_fewer_calls_on_the_quote(smol):
    model, chat = smol
    quote = chat("Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank.")
    short, long = (sv.decode(model, quote, decoder="prompt_lookup", prompt_lookup_num_tokens=n, max_new_tokens=24)
                   for n in (2, 20))
    assert short.output_ids == long.output_ids == sv.decode(model, quote, decoder="ntp", max_new_tokens=24).output_ids
    assert long.nfe < short.nfe


def test_notebook_7_exercise_2_a_poem_hardly_saves_calls(smol):
    model, chat = smol
    poem = chat("Write a short poem about the sea.")
    lookup = sv.decode(model, poem, decoder="prompt_lookup", max_new_tokens=24)
    ntp = sv.decode(model, poem, decoder="ntp", max_new_tokens=24)
    assert lookup.output_ids == ntp.output_ids and ntp.nfe - lookup.nfe <= 0.25 * ntp.nfe


def test_notebook_7_exercise_3_untrained_verified_sbd_stays_at_one_token_per_call(smol):
    model, chat = smol
    base = sv.load_model("smollm2-135m")
    sv.add_mask_token(base.model, base.tokenizer)
    untrained = sv.SBDModel(base.model, base.tokenizer, name="untrained")
    question = chat("What is the capital of France? Answer in one sentence.")
    ntp = sv.decode(model, question, decoder="ntp", max_new_tokens=24)
    for gamma in (0.0, 5.0):
        t = sv.decode(untrained, question, decoder="sbd", gamma=gamma, verify=True, block_size=8, max_new_tokens=24)
        assert t.output_ids == ntp.output_ids and t.tokens_per_call < 1.25
