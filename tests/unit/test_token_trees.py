"""Token trees for verified SBD's tree drafting (``tree_widths``): the token-tree call's mask, logits and cache, the
tree a block drafts (with and without a sampler head), the text (HF's own greedy ``generate``), the drafts an
alternative saves, and the trace. On tiny random models: ``sharp_model()`` and the adapted tiny Llama of
test_adapter."""

import json

import pytest
import torch

import sbd_viz as sv
from sbd_viz.models.token_tree import grow_tree, token_tree_mask
from sbd_viz.trace.words import step_text
from sbd_viz.trace.data import TraceFormatError

from conftest import draft_tree_call, fake_blocks, fused_call, reference_logits, sharp_model, tiny_model, token_tree_call
from test_adapter import adapted, generate_reference as adapted_generate
from test_sampler_head import head_reference, with_head
from test_tree_drafting import MAKERS, PROMPTS, SETTINGS, _prefill, _same_cache, generate_reference

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here


def token_tree(model, prompt, widths, **settings):
    return sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", tree_widths=widths, **settings)


# -- the call ----------------------------------------------------------------------------------------------------
def test_the_token_tree_mask_written_out():
    """One cached position; fed x, then a and b after x, then c after a; blocks of one slot after x and after a."""
    got = token_tree_mask(past=1, parents=[-1, 0, 0, 1], roots=[0, 1], k=1).int().tolist()
    assert got == [
        # cache, x, a, b, c, block after x, block after a
        [1, 1, 0, 0, 0, 0, 0],  # x
        [1, 1, 1, 0, 0, 0, 0],  # a: x and itself
        [1, 1, 0, 1, 0, 0, 0],  # b: x and itself, not its sibling a
        [1, 1, 1, 0, 1, 0, 0],  # c: x, a and itself
        [1, 1, 0, 0, 0, 1, 0],  # the block after x
        [1, 1, 1, 0, 0, 0, 1],  # the block after a
    ]


TREE_MODELS = {
    "llama": lambda: sharp_model("llama"),
    "gpt_neox": lambda: sharp_model("gpt_neox"),
    "llama-eager": lambda: tiny_model("llama", seed=2, attn="eager"),
    "adapted": lambda: adapted(),
}


@pytest.mark.parametrize("name", list(TREE_MODELS))
def test_each_root_of_a_token_tree_call_is_a_fused_call_of_its_own_path(name):
    """Fed after a cached prefix: x, then two siblings after x, a child of each, a grandchild of the second (by
    fed row: parents -1, 0, 0, 1, 2, 4). Every root's NTP row and block equal a fused call of its path's text and k
    masks on a fresh cache (and, on the plain models, an uncached forward); keeping a path with ``rollback`` leaves
    a causal prefill of that path."""
    model = TREE_MODELS[name]()
    ids = model.encode("assert sorted([3, 1, 2]) == [1, 2, 3]")
    cached, fed = ids[:9], [ids[9], ids[10], ids[12], ids[11], ids[13], ids[14]]
    parents, roots, k = [-1, 0, 0, 1, 2, 4], [0, 1, 2, 4, 5], 3
    paths = {0: [0], 1: [0, 1], 2: [0, 2], 3: [0, 1, 3], 4: [0, 2, 4], 5: [0, 2, 4, 5]}
    cache = model.new_cache()
    fused_call(model, cache, cached, [], 1)
    causal, blocks = token_tree_call(model, cache, fed, parents, roots, k)
    assert causal.shape[0] == blocks.shape[0] == len(roots) and blocks.shape[1] == k
    masks = [model.mask_token_id] * k
    for j, root in enumerate(roots):
        text = cached + [fed[i] for i in paths[root]]
        ntp_row, block = fused_call(model, model.new_cache(), text, masks, 1)
        torch.testing.assert_close(causal[j], ntp_row[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(blocks[j], block, atol=1e-4, rtol=1e-4)
        if name in ("llama", "gpt_neox"):
            torch.testing.assert_close(blocks[j], reference_logits(model, text, masks), atol=1e-4, rtol=1e-4)
            with torch.no_grad():
                plain = model.model(input_ids=torch.tensor([text])).logits[0, -1]
            torch.testing.assert_close(causal[j], plain, atol=1e-4, rtol=1e-4)
    assert cache.get_seq_length() == len(cached) + len(fed)  # every fed token, no block's slot
    model.rollback(cache, len(cached) + 1, keep=(len(cached) + 2, len(cached) + 4, len(cached) + 5))
    assert _same_cache(cache, _prefill(model, cached + [fed[i] for i in paths[5]])) <= 1e-4


def test_rollback_keeps_a_prefix_by_cropping_and_refuses_bad_positions():
    model = sharp_model()
    ids = model.encode("assert 1 + 2 == 3")
    cache = model.new_cache()
    fused_call(model, cache, ids, [], 1)
    model.rollback(cache, 5, keep=(5, 6))  # a prefix: the same as cutting to 7
    assert _same_cache(cache, _prefill(model, ids[:7])) <= 1e-4
    for keep in [(4,), (6, 5), (7,), (5, 5)]:
        with pytest.raises(ValueError, match="^keep:"):
            model.rollback(cache, 5, keep=keep)
    assert cache.get_seq_length() == 7  # a refused keep leaves the cache as it was


@pytest.mark.parametrize("parents, roots, message", [
    ([-1, 1], [0], "^parents:"), ([0], [0], "^parents:"), ([-1, 0], [2], "^logits_at:"), ([-1, 0], [], "^blocks_after:"),
])
def test_a_bad_tree_is_refused_by_name(parents, roots, message):
    model = sharp_model()
    with pytest.raises(ValueError, match=message):
        token_tree_call(model, model.new_cache(), [5, 6], parents, roots, 2)


# -- the tree a block drafts ---------------------------------------------------------------------------------------
def test_grow_tree_takes_the_best_tokens_per_slot_depth_first_with_the_chain_first():
    block = torch.full((4, 6), -5.0)
    block[1, [2, 4, 1]] = torch.tensor([3.0, 2.0, 1.0])  # slot 1: best 2, then 4, then 1
    block[2, [5, 0]] = torch.tensor([3.0, 2.0])
    block[3, [3]] = 3.0
    nodes = grow_tree(block, (2, 2))  # slot 3 takes one (past the end of the widths)
    got = [(n.slot, n.token_id, n.parent) for n in nodes]
    assert got == [(1, 2, -1), (2, 5, 0), (3, 3, 1), (2, 0, 0), (3, 3, 3),
                   (1, 4, -1), (2, 5, 5), (3, 3, 6), (2, 0, 5), (3, 3, 8)]
    assert nodes[0].prob == pytest.approx(float(torch.softmax(block[1], -1)[2]))
    assert [(n.slot, n.token_id) for n in grow_tree(block, (1, 1, 1))] == [(1, 2), (2, 5), (3, 3)]


def test_grow_tree_asks_children_only_off_the_chain():
    block = torch.zeros(3, 4)
    block[1, 1], block[1, 2], block[2, 3] = 2.0, 1.0, 2.0
    asked = []

    def children(slot, tokens):
        asked.append((slot, tokens))
        out = torch.zeros(len(tokens), 4)
        out[:, 0] = 5.0
        return out

    nodes = grow_tree(block, (2,), children)
    assert asked == [(2, [2])]  # the chain's slot 2 is the block's own row
    assert [(n.slot, n.token_id, n.parent) for n in nodes] == [(1, 1, -1), (2, 3, 0), (1, 2, -1), (2, 0, 2)]


def test_with_a_head_an_alternatives_children_read_its_token():
    """The head grows the tree: the chain is the chained block's argmax path, and the children of slot 1's second
    candidate are the head's best at slot 2 after reading that candidate (the formula by hand on the block's own
    hidden states, the output layer restricted to the adapter's own best tokens there)."""
    model = with_head(adapted())
    fed = model.encode("assert sorted([3, 1, 2]) == ")
    k, widths = 4, (2, 3)
    hidden = {}
    hook = model.model.base_model.register_forward_hook(lambda m, a, out: hidden.__setitem__("h", out[0][0, -k:]))
    try:
        roots, block, nodes = draft_tree_call(model, model.new_cache(), fed, list(range(-1, len(fed) - 1)),
                                                    [len(fed) - 1], k, pick=lambda r: 0, widths=widths)
    finally:
        hook.remove()
    chain = [n.token_id for n in nodes[: k - 1]]
    assert chain == block[1:].argmax(-1).tolist()
    second = next(n for n in nodes if n.slot == 1 and n.token_id != chain[0])
    at = nodes.index(second)
    kids = [n.token_id for n in nodes if n.parent == at]
    _, blocks = token_tree_call(model, model.new_cache(), fed, list(range(-1, len(fed) - 1)), [len(fed) - 1], k)
    own = blocks[0, 2].topk(model.candidates).indices
    embed, out = model.model.get_input_embeddings().weight, model.model.get_output_embeddings().weight
    with torch.no_grad():
        logits = head_reference(model.head, hidden["h"][2], embed[second.token_id]) @ out[own].T
    assert kids == own[logits.topk(3).indices].tolist()


# -- the text: HF's own greedy generate ------------------------------------------------------------------------
@pytest.mark.heavy
@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("widths", [(3, 1, 1), (2, 2, 2, 2)])
def test_a_token_tree_writes_hf_generates_text(kind, widths):
    make, untouched = MAKERS[kind]
    model, reference = make(), untouched()
    for prompt in PROMPTS:
        for rule, gamma, k, n, stop in SETTINGS:
            want = generate_reference(reference, model.tokenizer, model.encode(prompt), n, stop, model.mask_token_id)
            trace = token_tree(model, prompt, widths, rule=rule, gamma=gamma, block_size=k, max_new_tokens=n,
                               stop=stop)
            assert list(trace.output_ids) == want, (prompt, rule, gamma, k, n, stop)
            assert trace.config["tree_widths"] == list(widths)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_widths_of_one_are_tree_drafting(kind):
    """A tree of one candidate a slot is tree drafting's chain: the same calls, rows, commits and checks."""
    model = MAKERS[kind][0]()
    for prompt in PROMPTS:
        settings = dict(rule="entropy_bounded", gamma=2.0, block_size=5, max_new_tokens=24)
        chain = sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", **settings)
        tree = token_tree(model, prompt, (1, 1, 1, 1), **settings)
        assert tree.output_ids == chain.output_ids
        assert [(s.n_input, s.commits, s.checks, s.rollback, s.check_only) for s in tree.steps] == [
            (s.n_input, s.commits, s.checks, s.rollback, s.check_only) for s in chain.steps]
        assert all(not s.alternatives for s in tree.steps)


def second_best_drafter(model, prompt, ntp_ids, wrong_at):
    """Make the blocks of ``model``'s calls predict NTP's own token at each generated position, but a wrong one first
    (NTP's second) at ``wrong_at``; the roots' rows (the verifier) are untouched. Undo with ``del model.call``."""
    n_prompt = len(model.encode(prompt))
    vocab = model.model.get_output_embeddings().weight.shape[0]

    def fake(block, start):
        first = start - n_prompt  # generated position of the block's slot 0
        block[:] = -10.0
        for i in range(block.shape[0]):
            g = first + i
            right = ntp_ids[g] if g < len(ntp_ids) else ntp_ids[-1]
            block[i, right] = 10.0
            if g in wrong_at:
                wrong = next(t for t in range(right + 1, right + 4) if t % vocab != model.mask_token_id) % vocab
                block[i, wrong] = 11.0
        return block

    return fake_blocks(model, fake)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_second_candidate_saves_the_calls_a_chain_loses(kind):
    """Blocks of 4, every slot drafted, the best candidate wrong at three positions and the second right. The chain
    rejects those it drafts and starts again from NTP's token there; a tree of two candidates at every slot had
    drafted NTP's token as the alternative, and drafts after it, so the same call goes on past it. Same text,
    fewer calls. The trace shows the switch as a rejection of the chain's draft whose correction is the
    alternative the step before recorded, written as NTP's token, with the taken alternatives after it."""
    model = MAKERS[kind][0]()
    prompt, n, wrong = "assert 7 == ", 30, {5, 13, 22}
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n)
    settings = dict(rule="top_k", gamma=4, block_size=4, max_new_tokens=n)
    second_best_drafter(model, prompt, ntp.output_ids, wrong_at=wrong)
    try:
        chain = token_tree(model, prompt, (1, 1, 1), **settings)
        tree = token_tree(model, prompt, (2, 2, 2), **settings)
    finally:
        del model.call
    assert chain.output_ids == tree.output_ids == ntp.output_ids
    assert tree.nfe < chain.nfe
    assert sum(s.n_input for s in tree.steps) / tree.nfe > sum(s.n_input for s in chain.steps) / chain.nfe
    n_prompt = len(tree.prompt_ids)
    rejected = {c.position - n_prompt for c in tree.checks() if not c.accepted}
    assert len(rejected) >= 2 and rejected <= wrong  # a wrong position may fall on an exact token
    for s in tree.rollbacks():
        (check,) = s.rejected
        before = tree.steps[s.call - 1]
        offered = [a for a in before.alternatives if before.block_start + a.slot == check.position]
        assert check.ntp_token_id in [a.token_id for a in offered]  # the tree had drafted NTP's token there
        assert s.commits[0].ntp and s.commits[0].token_id == check.ntp_token_id
        assert s.block_start == check.position == s.rollback.position
    assert any(sum(c.ntp for c in s.commits) > 1 for s in tree.rollbacks())  # alternatives after the switch held
    assert [s.commits for s in chain.steps] != [s.commits for s in tree.steps]
    last = {s.block_start + c.slot: c.token_id for s in tree.steps for c in s.commits}
    assert [last[n_prompt + g] for g in range(tree.n_tokens)] == list(tree.output_ids)  # the views' "kept"
    assert len(tree.token_calls()) == tree.n_tokens
    assert "the tree's alternative there" in sv.trace_summary(tree)
    assert "a token tree of" in step_text(tree, tree.steps[1])
    page = sv.save_html(tree)  # the cells' hovers: the switch, the alternatives taken, those offered
    for words in ("alternative here: the call went on along it", "an alternative the token tree drafted, taken",
                  "alternatives here: "):
        assert words in page


def test_the_trace_of_a_token_tree_reads_back_and_a_bad_alternative_is_refused(tmp_path):
    model = sharp_model()
    trace = token_tree(model, "x = [3, 1", (3, 2, 1), rule="entropy_bounded", gamma=2.0, block_size=6,
                       max_new_tokens=24)
    assert any(s.alternatives for s in trace.steps)
    again = sv.load_trace(trace.save(tmp_path / "tree.json"))
    assert again == trace and again.config["tree_widths"] == [3, 2, 1]
    d = json.loads(trace.to_json())  # the file as a reader has it
    step = next(s for s in d["steps"] if s.get("alternatives"))
    step["alternatives"][0]["parent"] = 5
    with pytest.raises(TraceFormatError, match="alternatives"):
        sv.trace_from_dict(d)


# -- the setting -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("settings, message", [
    (dict(tree_widths=(2, 1), verify=True), r"^tree_widths: a token tree is a way of tree drafting"),
    (dict(tree_widths=(0, 1), verify=True, drafting="tree"), r"^tree_widths: must be whole numbers in \[1, 16\]"),
    (dict(tree_widths=(), verify=True, drafting="tree"), r"^tree_widths: must be whole numbers"),
    (dict(tree_widths="3;1", verify=True, drafting="tree"), r"^tree_widths: must be a list"),
    (dict(tree_widths=31, verify=True, drafting="tree"), r"^tree_widths: must be a list"),
    (dict(tree_widths=(2.0,), verify=True, drafting="tree"), r"^tree_widths: must be whole numbers"),
])
def test_bad_tree_widths_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        sv.decode(tiny_model(), "hi", decoder="sbd", max_new_tokens=4, **settings)


def test_tree_widths_is_a_setting_of_sbds_spec_and_of_the_cli():
    from sbd_viz.cli import build_parser
    from sbd_viz.decoders.sbd import SBD

    assert SBD.own["tree_widths"] is None
    model = sharp_model()
    for flag in ("3,1,1", "[3, 1, 1]"):
        args = build_parser().parse_args(["trace", "hi", "--verify", "--drafting", "tree", "--tree-widths", flag])
        trace = sv.decode(model, "hi", decoder="sbd", verify=True, drafting="tree", tree_widths=args.tree_widths,
                          max_new_tokens=8)
        assert trace.config["tree_widths"] == [3, 1, 1]
    plain = sv.decode(model, "hi", decoder="sbd", verify=True, drafting="tree", max_new_tokens=8)
    assert "tree_widths" not in plain.config  # the chain writes the file it always wrote


def test_an_adapted_model_with_a_head_writes_the_bases_text_with_a_tree():
    ref = adapted_generate(0, adapted().encode("assert sorted([3, 1, 2]) == "), 24)
    trace = token_tree(with_head(adapted()), "assert sorted([3, 1, 2]) == ", (3, 2, 1), block_size=4, gamma=2.0,
                       max_new_tokens=24)
    assert list(trace.output_ids) == ref
    assert any(s.alternatives for s in trace.steps)



@pytest.mark.parametrize("head", [True, False])
def test_a_picked_call_takes_the_output_layer_once_or_twice_with_the_same_result(head):
    """``split_rows``: from that many unpicked block rows on, a picked call takes the output layer for the roots in
    the forward and for the picked block after it, not for every block. Either way the same logits and tree."""
    model = with_head(adapted()) if head else adapted()
    fed = model.encode("assert sorted([3, 1, 2]) == [1,")
    parents, roots, k = [-1, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5], 4
    rows = []
    hook = model.model.get_output_embeddings().register_forward_hook(lambda m, a, out: rows.append(a[0].shape[-2]))
    got = {}
    try:
        for split in (0, 10 ** 6):
            model.split_rows, rows[:] = split, []
            got[split] = draft_tree_call(model, model.new_cache(), fed[-6:], parents, roots, k, pick=lambda r: 3,
                                               widths=(2, 2))
            got[split] += (sum(rows),)
    finally:
        hook.remove()
    (r_split, b_split, t_split, n_split), (r_once, b_once, t_once, n_once) = got[0], got[10 ** 6]
    assert n_split == len(roots) + k and n_once == len(roots) * (1 + k)  # the rows the output layer took
    torch.testing.assert_close(r_split, r_once, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b_split, b_once, atol=1e-4, rtol=1e-4)
    assert [(n.slot, n.token_id, n.parent) for n in t_split] == [(n.slot, n.token_id, n.parent) for n in t_once]
