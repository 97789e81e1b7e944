"""Tree drafting for verified SBD (``drafting="tree"``): the tree call's mask and logits, the text (HF's own greedy
``generate`` on an untouched copy of the model), stops and EOS, the cache after every call, the trace, and the call
it saves where single drafting wastes one. On tiny random models: ``sharp_model()`` and the adapted tiny Llama of
test_adapter (a random, non-zero gated adapter)."""

import pytest
import torch

import sbd_viz as sv
from sbd_viz.decoders.sbd import SBD, DecodeConfig, Decoding
from sbd_viz.models.token_tree import tree_call_mask

from conftest import fake_blocks, fused_call, reference_logits, sharp_model, tiny_model, token_tree_call, tree_call
from test_adapter import adapted, plain_llama

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here

PROMPTS = ["assert 1 + 2 == ", "x = [3, 1", "def f(a):", "hi"]


def tree(model, prompt, **settings):
    return sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", **settings)


def single(model, prompt, **settings):
    return sv.decode(model, prompt, decoder="sbd", verify=True, **settings)


# -- the tree call ---------------------------------------------------------------------------------------------
def test_the_tree_mask_written_out():
    """One cached position, three fed rows (the last two are roots), two blocks of two slots."""
    got = tree_call_mask(past=1, n_causal=3, n_branches=2, k=2).int().tolist()
    assert got == [
        # cache, fed 0..2, block 0, block 1
        [1, 1, 0, 0, 0, 0, 0, 0],  # fed rows: causal
        [1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 1, 1, 0, 0],  # block 0: up to root 0 (fed row 1) and itself
        [1, 1, 1, 0, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0, 1, 1],  # block 1: up to root 1 (fed row 2) and itself, not block 0
        [1, 1, 1, 1, 0, 0, 1, 1],
    ]


def _prefill(model, ids):
    """A cache holding a causal prefill of ``ids``, by the model's plain forward (no decoder code)."""
    cache = model.new_cache()
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache


def _same_cache(a, b) -> float:
    assert a.get_seq_length() == b.get_seq_length()
    return max(float((x - y).abs().max()) for la, lb in zip(a.layers, b.layers)
               for x, y in ((la.keys, lb.keys), (la.values, lb.values)))


TREE_MODELS = {
    "llama": lambda: sharp_model("llama"),
    "qwen3": lambda: sharp_model("qwen3"),
    "gpt_neox": lambda: sharp_model("gpt_neox"),
    "llama-eager": lambda: tiny_model("llama", seed=2, attn="eager"),
    "adapted": lambda: adapted(),
}


@pytest.mark.parametrize("name", list(TREE_MODELS))
@pytest.mark.parametrize("cached, fed, n_branches, k", [(10, 4, 3, 4), (0, 14, 1, 5), (12, 2, 2, 1), (6, 8, 8, 3)])
def test_each_branch_of_a_tree_call_is_a_fused_call_of_its_own_prefix(name, cached, fed, n_branches, k):
    """Block j of a tree call (``cached`` tokens in the cache, ``fed`` tokens fed, the last ``n_branches`` of them
    roots) equals a fused call of the text up to root j and k masks, on a fresh cache; row j is that text's NTP
    row; afterwards the cache is a causal prefill of everything fed (no block key kept)."""
    model = TREE_MODELS[name]()
    ids = model.encode("assert sorted([3, 1, 2]) == [1, 2, 3]")[: cached + fed]
    cache = model.new_cache()
    if cached:
        fused_call(model, cache, ids[:cached], [], 1)
    causal, blocks = tree_call(model, cache, ids[cached:], n_branches, k)
    assert causal.shape[0] == blocks.shape[0] == n_branches and blocks.shape[1] == k
    masks = [model.mask_token_id] * k
    for j in range(n_branches):
        text = ids[: cached + fed - n_branches + j + 1]
        ntp_row, block = fused_call(model, model.new_cache(), text, masks, 1)
        torch.testing.assert_close(blocks[j], block, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(causal[j], ntp_row[0], atol=1e-4, rtol=1e-4)
        if name in ("llama", "qwen3", "gpt_neox"):  # and an uncached plain forward with a bool mask (SDPA's;
            # the adapter needs its gate)
            torch.testing.assert_close(blocks[j], reference_logits(model, text, masks), atol=1e-4, rtol=1e-4)
    assert _same_cache(cache, _prefill(model, ids)) <= 1e-4


def test_the_tree_call_on_an_adapted_model_has_the_bases_causal_rows_and_adapted_blocks():
    """The adapter is on for the block rows only: the roots' logits are the untouched base's plain forward, and
    the blocks are not what the same call gives with the adapter at zero."""
    model, zero = adapted(), adapted(scale=0.0)
    ids = model.encode("def f(a): return a")
    base, _ = plain_llama()
    with torch.no_grad():
        want = base(input_ids=torch.tensor([ids])).logits[0, -3:]
    causal, blocks = tree_call(model, model.new_cache(), ids, 3, 4)
    torch.testing.assert_close(causal, want, atol=1e-4, rtol=1e-4)
    _, plain_blocks = tree_call(zero, zero.new_cache(), ids, 3, 4)
    assert (blocks - plain_blocks).abs().max() > 1e-2


def test_a_failed_tree_call_leaves_the_cache_as_it_was_and_bad_sizes_are_refused():
    model = sharp_model()
    ids = model.encode("assert 1 + 2 == ")
    cache = model.new_cache()
    fused_call(model, cache, ids, [], 1)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    with pytest.raises(IndexError):
        tree_call(model, cache, [5, 10 ** 6], 2, 4)  # no such token: the embedding fails inside the forward
    assert cache.get_seq_length() == len(ids)
    assert all(torch.equal(layer.keys, k) and torch.equal(layer.values, v)
               for layer, (k, v) in zip(cache.layers, before))
    with pytest.raises(ValueError, match="^n_branches:"):
        tree_call(model, cache, [5, 6], 3, 4)
    with pytest.raises(ValueError, match="^blocks_after:"):  # a tree call of no slots asks for no block
        tree_call(model, cache, [5, 6], 2, 0)
    with pytest.raises(ValueError, match="^block_ids:"):
        tree_call(model, cache, [5, 6], 2, 65)


# -- the text: HF's own greedy generate ------------------------------------------------------------------------
def likely_eos(hf_model, tokenizer, like: str) -> None:
    """Make EOS the argmax wherever ``like`` was, by a bigger copy of its head row: outputs then end with EOS
    inside a block. Done alike to the decoded model and to its untouched copy."""
    head = hf_model.get_output_embeddings().weight
    with torch.no_grad():
        head[tokenizer.eos_token_id] = 1.2 * head[tokenizer.convert_tokens_to_ids(like)]


MAKERS = {  # (the model to decode with, an untouched copy of it for generate)
    "sharp": (lambda: sharp_model(), lambda: sharp_model().model),
    "adapted": (lambda: adapted(), lambda: plain_llama()[0]),  # the base, never adapted: its text is the base's
}
# where EOS is made likely: a token the model writes mid-text (the adapted base repeats its prompt's last
# character, so there it ends 'def f(a):' at once)
EOS_LIKE = {"sharp": "[", "adapted": ":"}


def generate_reference(hf_model, tokenizer, prompt_ids, n, stop, mask_id):
    """Greedy NTP as a transformers user writes it: generate with stop_strings and the tokenizer; the mask token
    suppressed (no decode here writes it; the base has none)."""
    ids = torch.tensor([prompt_ids])
    extra = {"stop_strings": [stop], "tokenizer": tokenizer} if stop else {}
    if mask_id < hf_model.get_output_embeddings().weight.shape[0]:
        extra["suppress_tokens"] = [mask_id]
    out = hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id, **extra)
    return out[0, ids.shape[1]:].tolist()


SETTINGS = [  # (rule, gamma, block_size, max_new_tokens, stop)
    ("entropy_bounded", 0.5, 4, 13, None),  # the length limit inside a block
    ("entropy_bounded", 2.0, 8, 30, None),
    ("top_k", 3, 3, 17, "["),  # a stop string
    ("top_k", 8, 8, 21, "Q"),
    ("confidence_threshold", 0.3, 6, 15, "1"),
    ("left_to_right", 0.0, 2, 11, None),
    ("entropy_bounded", 0.5, 1, 7, None),  # block size 1: nothing is drafted
]


@pytest.mark.heavy
@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("eos", [False, True], ids=["no-eos", "eos"])
def test_tree_drafting_writes_hf_generates_text(kind, eos):
    make, untouched = MAKERS[kind]
    model, reference = make(), untouched()
    if eos:
        likely_eos(model.model, model.tokenizer, EOS_LIKE[kind])
        likely_eos(reference, model.tokenizer, EOS_LIKE[kind])
    reasons = set()
    for prompt in PROMPTS:
        for rule, gamma, k, n, stop in SETTINGS:
            want = generate_reference(reference, model.tokenizer, model.encode(prompt), n, stop, model.mask_token_id)
            trace = tree(model, prompt, rule=rule, gamma=gamma, block_size=k, max_new_tokens=n, stop=stop)
            ntp = sv.decode_ntp(model, prompt, max_new_tokens=n, stop=stop)
            setting = (prompt, rule, gamma, k, n, stop)
            assert list(trace.output_ids) == want, setting
            assert (trace.stop_reason, trace.text) == (ntp.stop_reason, ntp.text), setting
            assert trace.config["drafting"] == "tree" and trace.verified
            reasons.add(trace.stop_reason)
    assert reasons >= {"length", "eos" if eos else "stop"}  # the stops really were exercised


# -- the drafts, controlled: an oracle that drafts NTP's text but at chosen positions -----------------------------
def oracle_drafter(model, prompt, ntp_ids, wrong_at):
    """Make ``model``'s block slots (single drafting's calls and tree drafting's) predict NTP's own token at each
    generated position, but a wrong one at ``wrong_at``; the causal rows (the verifier) are untouched. Undo with
    ``del model.call``."""
    n_prompt = len(model.encode(prompt))
    vocab = model.model.get_output_embeddings().weight.shape[0]

    def token_at(g):
        tok = ntp_ids[g] if g < len(ntp_ids) else ntp_ids[-1]
        if g in wrong_at:
            tok = next(t for t in range(tok + 1, tok + 4) if t % vocab != model.mask_token_id) % vocab
        return tok

    def fake(block, start):  # (k, V) -> slot i holds position start + i's token, sharply
        out = torch.full_like(block, -10.0)
        for i in range(block.shape[0]):
            out[i, token_at(start - n_prompt + i)] = 10.0
        return out

    return fake_blocks(model, fake)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_tree_drafting_saves_the_call_single_drafting_wastes(kind):
    """Blocks of 8, every slot drafted, one wrong draft at generated position 6: single drafting checks block 0's
    tail with block 1's first call, rejects it there and throws that call's block away; tree drafting's same call
    writes the correction and drafts on from the branch after it."""
    model = MAKERS[kind][0]()
    prompt, k, n = "assert 7 == ", 8, 38
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n)
    settings = dict(rule="top_k", gamma=k, block_size=k, max_new_tokens=n)
    oracle_drafter(model, prompt, ntp.output_ids, wrong_at={6})
    try:
        one, many = single(model, prompt, **settings), tree(model, prompt, **settings)
    finally:
        del model.call
    assert one.output_ids == many.output_ids == ntp.output_ids
    wasted = [s for s in one.rollbacks() if not s.masked]  # single: a rollback that kept none of its predictions
    assert len(wasted) == 1 and wasted[0].rollback.n_discarded == k
    (fix,) = many.rollbacks()
    assert fix.rollback.position - len(many.prompt_ids) == 6 and fix.commits[0].ntp
    assert [c.slot for c in fix.commits] == list(range(k))  # the correction, then seven new drafts
    # tree, call by call: token 0 (drafts 1..7); 1..6 (the fix at 6, drafts 7..13); then 8 tokens a call to 30
    # (drafts 31..37 reach the limit); a last call checks them. Single spends a call more: the one it wasted.
    assert (many.nfe, one.nfe) == (6, 7)


@pytest.mark.parametrize("wrong_at", [set(), {1}, {3, 9}, {7, 8, 15}, {2, 5, 11, 12, 13}])
@pytest.mark.parametrize("k", [3, 8])
def test_with_the_same_drafts_tree_drafting_never_takes_more_calls(wrong_at, k):
    model = sharp_model()
    prompt, n = "hi", 26
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n)
    settings = dict(rule="top_k", gamma=k, block_size=k, max_new_tokens=n)
    oracle_drafter(model, prompt, ntp.output_ids, wrong_at)
    try:
        one, many = single(model, prompt, **settings), tree(model, prompt, **settings)
    finally:
        del model.call
    assert one.output_ids == many.output_ids == ntp.output_ids
    assert many.nfe <= one.nfe
    # NTP rejects exactly the wrong drafts it sees (a wrong position the exact token writes is never drafted)
    assert all(c.accepted == (c.position - len(many.prompt_ids) not in wrong_at) for c in many.checks())


# -- the cache and the trace -------------------------------------------------------------------------------------
def _decode_checking_cache(model, prompt, ntp_ids, **settings):
    """A tree-drafting decode that, after every call, compares its KV cache with a fresh causal prefill of the
    prompt and NTP's text up to the cache's length: it must hold exactly the accepted text but its last token."""
    caches = []
    real_new_cache = model.new_cache

    def new_cache():
        caches.append(real_new_cache())
        return caches[-1]

    model.new_cache = new_cache
    try:
        decoding = Decoding(model, prompt, DecodeConfig(verify=True, **settings), drafting="tree")
        prompt_ids = decoding.prompt_ids
        for step in decoding.steps():
            n = caches[0].get_seq_length()
            if step.rollback is not None:
                assert n == step.rollback.position  # cut back to exactly the accepted text
            fresh = _prefill(model, list(prompt_ids) + list(ntp_ids[: n - len(prompt_ids)]))
            assert _same_cache(caches[0], fresh) <= 1e-4
    finally:
        del model.new_cache
    return SBD.trace(decoding)


@pytest.mark.parametrize("drafter", ["model", "oracle"])
def test_the_cache_is_a_prefill_of_the_accepted_text_after_every_call(drafter):
    model = sharp_model()
    prompt = "assert 1 + 2 == "
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=24)
    if drafter == "oracle":
        oracle_drafter(model, prompt, ntp.output_ids, wrong_at={2, 9, 10, 17})
    try:
        trace = _decode_checking_cache(model, prompt, ntp.output_ids, rule="top_k", gamma=5, block_size=5,
                                       max_new_tokens=24)
    finally:
        model.__dict__.pop("call", None)
    assert trace.output_ids == ntp.output_ids
    assert trace.rollbacks()  # a draft was rejected, so the cache was cut back


@pytest.mark.heavy  # the page's figure
def test_the_trace_records_every_call_as_the_views_read_it(tmp_path, monkeypatch):
    model = sharp_model()
    prompt = "assert 1 + 2 == "
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=30, top_n=1)
    fed = []
    real = sv.SBDModel.call

    def counted(self, cache, request):
        if self is model:  # this model's calls alone
            fed.append(len(request.new_ids) + len(request.blocks_after) * len(request.block_ids))
        return real(self, cache, request)

    monkeypatch.setattr(sv.SBDModel, "call", counted)
    trace = tree(model, prompt, rule="entropy_bounded", gamma=2.0, block_size=6, max_new_tokens=30)
    assert trace.output_ids == ntp.output_ids
    assert trace.nfe == len(fed) and [s.n_input for s in trace.steps] == fed  # every row fed, every forward
    n_prompt = len(trace.prompt_ids)
    assert trace.rollbacks() and trace.accepted_fraction > 0  # drafts were both rejected and accepted
    for s in trace.steps:
        assert s.commits[0].slot == 0 and s.commits[0].ntp  # slot 0 is NTP's exact token, never drafted
        assert [c.slot for c in s.commits] == list(range(len(s.commits)))  # the drafts are a prefix
        assert s.commits[0].token_id == ntp.output_ids[s.block_start - n_prompt]
    for c in trace.checks():  # NTP's teacher-forced verdicts
        g = c.position - n_prompt
        assert c.ntp_token_id == ntp.output_ids[g] and c.accepted == (c.token_id == c.ntp_token_id)
        assert c.ntp_prob == pytest.approx(ntp.steps[g].slots[0].top[0].prob, abs=1e-4)
    last = {s.block_start + c.slot: c.token_id for s in trace.steps for c in s.commits}
    assert [last[n_prompt + g] for g in range(trace.n_tokens)] == list(trace.output_ids)  # the views' "kept"
    assert len(trace.token_calls()) == trace.n_tokens
    again = sv.load_trace(trace.save(tmp_path / "tree.json"))  # the file checks pass
    assert again == trace and again.config["drafting"] == "tree"
    assert "verified" in sv.trace_summary(trace) and "rollback" in sv.trace_summary(trace)
    assert "block 0" in sv.save_html(trace)


def test_a_decode_whose_drafts_reach_the_end_ends_with_a_checking_only_call():
    """Every draft right: the last call checks the last drafts, which reach the length limit, and commits nothing."""
    model = sharp_model()
    prompt, n = "hi", 12
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n)
    oracle_drafter(model, prompt, ntp.output_ids, wrong_at=set())
    try:
        trace = tree(model, prompt, rule="top_k", gamma=4, block_size=4, max_new_tokens=n)
    finally:
        del model.call
    assert trace.output_ids == ntp.output_ids
    # 4 tokens a call (the exact one and three drafts checked by the next), the last call only checks
    assert trace.nfe == 4 and [s.check_only for s in trace.steps] == [False, False, False, True]
    last = trace.steps[-1]
    assert last.commits == () and len(last.checks) == 3 and all(c.accepted for c in last.checks)
    assert last.block == trace.steps[-2].block  # the checking call is a step of the drafts' block


def test_every_gamma_in_the_traces_range_gives_the_same_decode():
    model = sharp_model()
    trace = tree(model, "x = [3, 1", rule="entropy_bounded", gamma=1.0, block_size=6, max_new_tokens=24)
    r = trace.gamma_range
    assert 1.0 in r
    inside = [g for g in (r.lo, (r.lo + min(r.hi, 50.0)) / 2) if g in r]
    assert inside
    for gamma in inside:
        other = tree(model, "x = [3, 1", rule="entropy_bounded", gamma=gamma, block_size=6, max_new_tokens=24)
        assert [s.commits for s in other.steps] == [s.commits for s in trace.steps]


# -- the setting -----------------------------------------------------------------------------------------------
def test_drafting_is_a_setting_of_sbds_spec_listed_where_settings_are():
    from sbd_viz.cli import build_parser

    assert "drafting" in SBD.settings and SBD.own["drafting"] == "single"
    args = build_parser().parse_args(["trace", "hi", "--verify", "--drafting", "tree"])
    assert args.drafting == "tree"
    model = sharp_model()
    plain = sv.decode(model, "hi", decoder="sbd", verify=True, max_new_tokens=8, block_size=4)
    assert "drafting" not in plain.config  # single drafting writes the file it always wrote
    by_tree = sv.decode(model, "hi", verify=True, drafting="tree", max_new_tokens=8, block_size=4)
    assert by_tree.config["drafting"] == "tree" and by_tree.output_ids == plain.output_ids


@pytest.mark.parametrize("settings, message", [
    (dict(drafting="forest", verify=True), r"^drafting: must be one of 'single', 'tree', got 'forest'"),
    (dict(drafting=None, verify=True), r"^drafting: must be one of"),
    (dict(drafting="tree"), r"^drafting: tree drafting is a mode of verified SBD"),
    (dict(drafting="tree", temperature=0.7), r"^drafting: .*temperature 0, got temperature=0.7"),
    (dict(drafting="tree", verify=True, temperature=0.7), r"^verify: .*temperature"),
])
def test_a_bad_drafting_is_refused_by_name(settings, message):
    model = tiny_model()
    with pytest.raises(ValueError, match=message):
        sv.decode(model, "hi", decoder="sbd", max_new_tokens=4, **settings)


def test_a_decoder_without_the_setting_refuses_it_by_name():
    with pytest.raises(ValueError, match=r"^drafting: .*does not take it"):
        sv.decode(tiny_model(), "hi", decoder="ntp", drafting="tree", max_new_tokens=4)


def test_batched_decoding_refuses_tree_drafting_by_name():
    from conftest import sharp_model

    with pytest.raises(ValueError, match="drafting"):
        sv.decode_batch(sharp_model(), ["assert 1 + 1 == "], decoder="sbd", verify=True, drafting="tree",
                        max_new_tokens=4)


def test_a_tree_calls_words_say_what_it_fed_and_what_a_rejection_replaced():
    from sbd_viz.trace.words import step_text

    model = adapted(head=1)
    trace = sv.decode(model, "def f(a):", decoder="sbd", verify=True, drafting="tree", block_size=4, gamma=2.0,
                      max_new_tokens=16)
    texts = [step_text(trace, s) for s in trace.steps[1:] if not s.check_only]
    assert texts and all("one after each possible accepted length (tree drafting)" in t for t in texts)
    rejected = [step_text(trace, s) for s in trace.steps if s.rollback is not None]
    assert rejected and all("replaced by this call's own (tree drafting)" in t for t in rejected)
    assert not any("0 drafts after it dropped" in t for t in rejected)
    # a call that fed m drafts fed m + 1 blocks (one per possible accepted length), away from the length limit
    full = 0
    for s in trace.steps[1:]:
        m = sum(not c.ntp for c in trace.steps[s.call - 1].commits)
        if not s.check_only and s.n_input == (m + 1) * (1 + 4):
            assert f"{m} draft(s) causally" in step_text(trace, s) and f"+ {m + 1} block(s)" in step_text(trace, s)
            full += 1
    assert full
