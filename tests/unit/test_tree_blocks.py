"""Tree drafting with fewer blocks (``tree_blocks``): a call puts a block after the fed tokens its accepted path most
likely ends at, not after every one. The call with a subset of blocks, where the blocks go, the text (HF's own
greedy ``generate``), a path that ends where no block follows, the rows it saves, the trace and the setting. On tiny
random models: ``sharp_model()`` and the adapted tiny Llama of test_adapter."""

import pytest
import torch

import sbd_viz as sv
from sbd_viz.models.call import ModelCall
from sbd_viz.decoders.verified.tree import TreeDecode, _Node

from conftest import draft_tree_call, fused_call, reference_logits, sharp_model, tiny_model, token_tree_call
from test_adapter import adapted
from test_sampler_head import with_head
from test_tree_drafting import MAKERS, PROMPTS, SETTINGS, generate_reference

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here


def capped(model, prompt, blocks, widths=None, **settings):
    return sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", tree_widths=widths,
                     tree_blocks=blocks, **settings)


# -- the call ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["llama", "adapted"])
def test_a_call_with_fewer_blocks_predicts_each_block_as_a_plain_forward_of_its_path(name):
    """Fed after a cached prefix: x, two siblings after x, a child of the first (parents -1, 0, 0, 1), logits at all
    four and blocks after the second and fourth alone (``blocks=[1, 3]``). The roots' rows are the causal logits of
    each one's path, and each block the logits of its root's path then k masks, both by the model's own forward on
    the whole text (no cache, no decoder code)."""
    model = sharp_model("llama") if name == "llama" else adapted()
    ids = model.encode("assert sorted([3, 1, 2]) == [1, 2, 3]")
    cached, fed = ids[:9], [ids[9], ids[10], ids[12], ids[11]]
    parents, roots, k = [-1, 0, 0, 1], [0, 1, 2, 3], 3
    paths = {0: [0], 1: [0, 1], 2: [0, 2], 3: [0, 1, 3]}
    cache = model.new_cache()
    fused_call(model, cache, cached, [], 1)
    causal, blocks = token_tree_call(model, cache, fed, parents, roots, k, blocks=[1, 3])
    assert causal.shape[0] == 4 and blocks.shape[:2] == (2, k)
    masks = [model.mask_token_id] * k
    for j, root in enumerate(roots):
        text = cached + [fed[i] for i in paths[root]]
        if name == "llama":
            with torch.no_grad():
                plain = model.model(input_ids=torch.tensor([text])).logits[0, -1]
        else:  # the adapter is off on the causal rows: its one-token call is the base's
            plain = fused_call(model, model.new_cache(), text, [], 1)[0][0]
        torch.testing.assert_close(causal[j], plain, atol=1e-4, rtol=1e-4)
    for j, root in enumerate([1, 3]):
        text = cached + [fed[i] for i in paths[root]]
        want = reference_logits(model, text, masks) if name == "llama" else fused_call(model, 
            model.new_cache(), text, masks, 1)[1]
        torch.testing.assert_close(blocks[j], want, atol=1e-4, rtol=1e-4)
    assert cache.get_seq_length() == len(cached) + len(fed)  # every fed token, no block's slot


@pytest.mark.parametrize("blocks", [[], [2, 1], [0, 0], [4], [True], None])
def test_bad_blocks_are_refused_by_name(blocks):
    model = sharp_model()
    if blocks is None:  # None is every root: allowed
        assert token_tree_call(model, model.new_cache(), [5, 6, 7], [-1, 0, 1], [0, 1, 2], 2)[1].shape[0] == 3
        return
    request = ModelCall([5, 6, 7], [model.mask_token_id] * 2, logits_at=[0, 1, 2], parents=[-1, 0, 1],
                        blocks_after=blocks)
    with pytest.raises(ValueError, match="^blocks_after:"):
        model.call(model.new_cache(), request)


@pytest.mark.parametrize("head", [True, False])
@pytest.mark.parametrize("split", [0, 10 ** 6])
def test_a_picked_root_without_a_block_gets_none_and_with_one_its_block(head, split):
    """``draft_tree_call`` with ``blocks``: the picked root's block is the same as in a call with a block after
    every root (and the same tree), whether the output layer runs once or twice (``split_rows``); a picked root
    with no block after it gets None and no tree."""
    model = with_head(adapted()) if head else adapted()
    model.split_rows = split
    fed = model.encode("assert sorted([3, 1, 2]) == [1,")[-6:]
    parents, roots, k = [-1, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5], 4
    _, every, every_tree = draft_tree_call(model, model.new_cache(), fed, parents, roots, k, pick=lambda r: 3,
                                                 widths=(2, 2))
    causal, block, tree = draft_tree_call(model, model.new_cache(), fed, parents, roots, k, pick=lambda r: 3,
                                                widths=(2, 2), blocks=[0, 3])
    torch.testing.assert_close(block, every, atol=1e-4, rtol=1e-4)
    assert [(n.slot, n.token_id, n.parent) for n in tree] == [(n.slot, n.token_id, n.parent) for n in every_tree]
    none = draft_tree_call(model, model.new_cache(), fed, parents, roots, k, pick=lambda r: 2, widths=(2, 2),
                                 blocks=[0, 3])
    assert none[1] is None and none[2] == [] and none[0].shape[0] == len(roots)


# -- where the blocks go -------------------------------------------------------------------------------------------
def test_the_blocks_go_where_the_path_most_likely_ends():
    """x; after it a (path probability 0.6) and b (0.3); after a, c (0.5 of a: 0.3). The path ends at x with
    probability 1 - 0.6 - 0.3 = 0.1, at a 0.6 - 0.3 = 0.3, at b 0.3, at c 0.3: one block goes after a (the first of
    the likeliest, in the order fed), three after a, b and c, and four or more after every fed token (None)."""
    nodes = [_Node(1, 11, -1, False, -1, 1, 0.6), _Node(2, 13, 0, False, -1, 2, 0.3),
             _Node(1, 12, -1, False, 0, 1, 0.3)]
    decode = TreeDecode(sharp_model(), sv.DecodeConfig(verify=True), [1, 2], lambda s: None, None, (2, 1),
                             blocks=1)
    decode.nodes = nodes
    rows = {-1: 0, 0: 1, 1: 2, 2: 3}  # x, a, c, b in the order fed
    assert decode._blocks(rows) == (1,)
    decode.max_blocks = 3
    assert decode._blocks(rows) == (1, 2, 3)
    decode.max_blocks = 4
    assert decode._blocks(rows) is None
    decode.nodes = [n._replace(prob=p) for n, p in zip(nodes, (0.3, 0.1, 0.2))]  # now x is likeliest: 1 - 0.5
    decode.max_blocks = 1
    assert decode._blocks(rows) == (0,)


# -- the text: HF's own greedy generate ------------------------------------------------------------------------
@pytest.mark.heavy
@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("widths, blocks", [(None, 1), ((3, 1, 1), 1), ((2, 2, 2, 2), 2)])
def test_fewer_blocks_write_hf_generates_text(kind, widths, blocks):
    make, untouched = MAKERS[kind]
    model, reference = make(), untouched()
    for prompt in PROMPTS:
        for rule, gamma, k, n, stop in SETTINGS:
            want = generate_reference(reference, model.tokenizer, model.encode(prompt), n, stop, model.mask_token_id)
            trace = capped(model, prompt, blocks, widths, rule=rule, gamma=gamma, block_size=k, max_new_tokens=n,
                           stop=stop)
            assert list(trace.output_ids) == want, (prompt, rule, gamma, k, n, stop)
            assert trace.config["tree_blocks"] == blocks


@pytest.mark.parametrize("kind", list(MAKERS))
def test_one_block_a_call_feeds_fewer_rows_and_writes_the_same_text(kind):
    """``tree_blocks`` is a control: one block a call feeds fewer rows in all than a block after every fed token,
    and some of its calls end where no block follows (a step of one slot, NTP's token, no drafts) after which the
    next call feeds x alone and drafts afresh. The text is NTP's either way."""
    model = MAKERS[kind][0]()
    prompt = "x = [3, 1"
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=40)
    settings = dict(rule="entropy_bounded", gamma=2.0, block_size=4, max_new_tokens=40)
    every = capped(model, prompt, None, (2, 2, 1), **settings)
    one = capped(model, prompt, 1, (2, 2, 1), **settings)
    assert one.output_ids == every.output_ids == ntp.output_ids
    assert sum(s.n_input for s in one.steps) < sum(s.n_input for s in every.steps)
    cut = [i for i, s in enumerate(one.steps[:-1]) if s.block_size == 1 and not s.check_only]
    assert cut, "no call ended where no block followed"
    for i in cut:
        step, after = one.steps[i], one.steps[i + 1]
        assert [c.ntp for c in step.commits] == [True] and not step.alternatives
        assert after.n_input == 1 + after.block_size and not after.checks  # x alone and a block after it
        assert after.block_start == step.block_start + 1


def test_the_words_say_where_the_blocks_went_and_where_none_followed():
    from sbd_viz.trace.words import step_text

    trace = capped(sharp_model(), "x = [3, 1", 1, (2, 2, 1), rule="entropy_bounded", gamma=2.0, block_size=4,
                   max_new_tokens=40)
    cut = next(i for i, s in enumerate(trace.steps[:-1]) if s.block_size == 1 and s.call > 0)
    words = step_text(trace, trace.steps[cut])
    assert "at most 1 block of masked slots, where its path was likeliest to end" in words
    assert "no block followed NTP's token in this call" in words
    assert "no drafts to check" in step_text(trace, trace.steps[cut + 1])
    every = capped(sharp_model(), "x = [3, 1", None, (2, 2, 1), rule="entropy_bounded", gamma=2.0, block_size=4,
                   max_new_tokens=40)
    assert not any("no block followed" in step_text(every, s) for s in every.steps)


def test_a_trace_with_fewer_blocks_reads_back(tmp_path):
    trace = capped(sharp_model(), "x = [3, 1", 1, (2, 1), rule="entropy_bounded", gamma=2.0, block_size=4,
                   max_new_tokens=30)
    again = sv.load_trace(trace.save(tmp_path / "capped.json"))
    assert again == trace and again.config["tree_blocks"] == 1


# -- the setting -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("settings, message", [
    (dict(tree_blocks=1, verify=True), r"^tree_blocks: it limits tree drafting's blocks"),
    (dict(tree_blocks=0, verify=True, drafting="tree"), r"^tree_blocks: must be a whole number >= 1"),
    (dict(tree_blocks=1.5, verify=True, drafting="tree"), r"^tree_blocks: must be a whole number"),
    (dict(tree_blocks=True, verify=True, drafting="tree"), r"^tree_blocks: must be a whole number"),
    (dict(tree_blocks="one", verify=True, drafting="tree"), r"^tree_blocks: must be a whole number"),
])
def test_bad_tree_blocks_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        sv.decode(tiny_model(), "hi", decoder="sbd", max_new_tokens=4, **settings)


def test_tree_blocks_is_a_setting_of_sbds_spec_and_of_the_cli():
    from sbd_viz.cli import build_parser
    from sbd_viz.decoders.sbd import SBD

    assert SBD.own["tree_blocks"] is None
    model = sharp_model()
    args = build_parser().parse_args(["trace", "hi", "--verify", "--drafting", "tree", "--tree-blocks", "2"])
    trace = sv.decode(model, "hi", decoder="sbd", verify=True, drafting="tree", tree_blocks=args.tree_blocks,
                      max_new_tokens=8)
    assert trace.config["tree_blocks"] == 2 and "tree_widths" not in trace.config
    plain = sv.decode(model, "hi", decoder="sbd", verify=True, drafting="tree", max_new_tokens=8)
    assert "tree_blocks" not in plain.config  # a block after every fed token writes the file it always wrote
