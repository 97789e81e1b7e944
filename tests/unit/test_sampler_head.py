"""The sampler head (``sbd_viz.models.sampler_head``): a tree call's drafts chained left to right on a tiny adapted Llama.

References are written as a transformers user writes them: the hidden states from the model's own
``base_model(...).last_hidden_state`` on the text and its masked block, the head as plain ``torch.nn.functional``
calls, the base's text from HF's ``generate``.
"""

import json

import pytest
import torch

import sbd_viz as sv
from conftest import tree_call, branch_call
from sbd_viz import cli
from sbd_viz.models import gated_adapter, sampler_head
from sbd_viz.training import head_train
from test_adapter import adapted, generate_reference

PROMPT = "assert sorted([3, 1, 2]) == "


def with_head(model, seed=0, scale=0.5):
    """``model`` (an ``AdaptedLM``) with a random head whose ``down`` is non-zero, so it moves the drafts."""
    torch.manual_seed(seed)
    head = sampler_head.SamplerHead(model.model.config.hidden_size, 32)
    with torch.no_grad():
        head.down.weight.normal_(0, scale)
        head.norm.weight.uniform_(0.5, 1.5)
    model.head = head.eval()
    return model


def head_reference(head, h, e):
    """The head's formula, by hand: h + down(silu(up([h ; rmsnorm(e)])))."""
    normed = e * torch.rsqrt(e.pow(2).mean(-1, keepdim=True) + head.norm.eps) * head.norm.weight
    x = torch.cat([h, normed], -1)
    up = torch.nn.functional.linear(x, head.up.weight, head.up.bias)
    return h + torch.nn.functional.linear(torch.nn.functional.silu(up), head.down.weight, head.down.bias)


def test_an_untrained_head_leaves_the_slots_as_the_adapter_predicts_them():
    head = sampler_head.SamplerHead(16, 8)
    h, e = torch.randn(5, 16), torch.randn(5, 16)
    assert torch.equal(head(h, e), h)


def test_chain_feeds_each_slot_the_argmax_of_the_slot_before_it():
    torch.manual_seed(0)
    d, V, k = 16, 11, 5
    head = sampler_head.SamplerHead(d, 8)
    with torch.no_grad():
        head.down.weight.normal_()
    embed, out_head = torch.nn.Embedding(V, d), torch.nn.Linear(d, V, bias=False)
    hidden, first = torch.randn(3, k, d), torch.tensor([1, 4, 7])
    with torch.no_grad():
        got = sampler_head.chain(head, hidden, first, embed, out_head)
        for b in range(3):
            previous = int(first[b])
            for s in range(1, k):
                want = head_reference(head, hidden[b, s], embed.weight[previous]) @ out_head.weight.T
                torch.testing.assert_close(got[b, s - 1], want)
                previous = int(want.argmax())
    assert got.shape == (3, k - 1, V)


def chain_by_hand(head, hidden, first, embed, out_head):
    """The chain one slot at a time, as the head's formula reads: (n, k - 1, V)."""
    rows = []
    for b in range(hidden.shape[0]):
        previous, row = int(first[b]), []
        for s in range(1, hidden.shape[1]):
            row.append(head_reference(head, hidden[b, s], embed.weight[previous]) @ out_head.weight.T)
            previous = int(row[-1].argmax())
        rows.append(torch.stack(row))
    return torch.stack(rows)


@pytest.mark.parametrize("guess", ["none", "right", "wrong", "right then wrong"])
def test_a_guess_changes_the_passes_through_the_output_layer_never_the_chain(guess, monkeypatch):
    """``chain``'s guess of the tokens slots 1..k-2 get: the logits are the slot-by-slot chain's whatever it is; a
    right guess takes one pass through the output layer, a wrong one (or none) more than one."""
    torch.manual_seed(1)
    d, V, k = 16, 11, 6
    head = sampler_head.SamplerHead(d, 8)
    with torch.no_grad():
        head.down.weight.normal_(0, 2.0)
    embed, out_head = torch.nn.Embedding(V, d), torch.nn.Linear(d, V, bias=False)
    hidden, first = torch.randn(2, k, d), torch.tensor([3, 9])
    with torch.no_grad():
        want = chain_by_hand(head, hidden, first, embed, out_head)
    right = torch.cat([first[:, None], want.argmax(-1)], 1)  # (n, k): slot s's chained token at column s
    wrong = (right + 1) % V
    given = {"none": None, "right": right, "wrong": wrong,
             "right then wrong": torch.cat([right[:, :3], wrong[:, 3:]], 1)}[guess]
    passes, real = [], sampler_head.output_logits
    monkeypatch.setattr(sampler_head, "output_logits", lambda layer, x: passes.append(len(x)) or real(layer, x))
    with torch.no_grad():
        got = sampler_head.chain(head, hidden, first, embed, out_head, guess=given)
    torch.testing.assert_close(got, want)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    # rows per pass: the slots not yet final, of both blocks. A right guess: all five final at once; right up to
    # slot 3: slots 1..3, then 4 and 5 (5 again if the guess pass 2 reads for it is wrong); a wrong guess (none is
    # one: every slot reads slot 0's token) finalizes less
    assert passes[0] == 10
    if guess == "right":
        assert passes == [10]
    elif guess == "right then wrong":
        assert passes[:2] == [10, 4] and len(passes) <= 3
    else:
        assert 2 <= len(passes) <= k - 1


@pytest.mark.parametrize("bias", [False, True])
def test_chain_among_candidates_takes_each_slots_argmax_among_its_own(bias):
    """With ``candidates``, slot s's logits are the head's at its candidates and -inf elsewhere, and the slot after it
    reads the best of them; a chain among candidates that hold the whole chain's argmaxes is the whole chain."""
    torch.manual_seed(2)
    d, V, k, c = 16, 40, 5, 6
    head = sampler_head.SamplerHead(d, 8)
    with torch.no_grad():
        head.down.weight.normal_(0, 2.0)
    embed, out_head = torch.nn.Embedding(V, d), torch.nn.Linear(d, V, bias=bias)
    hidden, first = torch.randn(2, k, d), torch.tensor([3, 9])
    candidates = torch.stack([torch.randperm(V)[:c] for _ in range(2 * k)]).reshape(2, k, c)
    with torch.no_grad():
        got = sampler_head.chain(head, hidden, first, embed, out_head, candidates=candidates)
        for b in range(2):
            previous = int(first[b])
            for s in range(1, k):
                full = torch.nn.functional.linear(head_reference(head, hidden[b, s], embed.weight[previous]),
                                                  out_head.weight, out_head.bias)
                want = torch.full((V,), -torch.inf)
                want[candidates[b, s]] = full[candidates[b, s]]
                torch.testing.assert_close(got[b, s - 1], want)
                previous = int(want.argmax())
        whole = chain_by_hand(head, hidden, first, embed, out_head)
        holding = torch.cat([candidates[:, 1:, :-1], whole.argmax(-1)[..., None]], -1)  # each slot's argmax is in
        among = sampler_head.chain(head, hidden, first, embed, out_head, candidates=torch.cat(
            [candidates[:, :1], holding], 1))
    assert torch.equal(among.argmax(-1), whole.argmax(-1))
    assert not torch.equal(got.argmax(-1), whole.argmax(-1))  # random candidates move the drafts


@pytest.mark.parametrize("bias", [False, True])
def test_the_output_layers_product_for_few_rows_is_the_layers_own(bias):
    """``output_logits`` takes the product another way for 1 to 8 rows (speed): the values are the layer's own up to
    rounding, so the drafts (argmaxes) are the same, for every row count on either side of that range."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 500, bias=bias)
    for n in range(1, 12):
        x = torch.randn(n, 32)
        with torch.no_grad():
            got, want = sampler_head.output_logits(layer, x), torch.nn.functional.linear(x, layer.weight, layer.bias)
        assert got.shape == (n, 500)
        torch.testing.assert_close(got, want)
        assert torch.equal(got.argmax(-1), want.argmax(-1))


@pytest.mark.parametrize("candidates", [sampler_head.CANDIDATES, 3, None])
def test_a_tree_calls_slots_are_chained_on_each_branchs_exact_token_and_its_roots_stay_the_bases(candidates):
    """Each slot's logits are the head's at the adapter's own ``candidates`` best tokens there, -inf elsewhere (None:
    the whole vocabulary), and the slot after it reads the best of them."""
    model = with_head(adapted())
    model.candidates = candidates
    k, text = 4, model.encode(PROMPT)
    drafts = model.encode("[1,")  # two drafts after the prompt: three branches
    fed = text + drafts
    plain = adapted()  # the same adapter without a head
    roots, blocks = tree_call(model, model.new_cache(), fed, 3, k)
    plain_roots, plain_blocks = tree_call(plain, plain.new_cache(), fed, 3, k)
    assert torch.equal(roots, plain_roots) and torch.equal(blocks[:, 0], plain_blocks[:, 0])
    assert not torch.allclose(blocks[:, 1:], plain_blocks[:, 1:])  # the head moved the drafts
    net, mask_id = model.model, model.mask_token_id
    for j in range(3):
        prefix = fed[:len(fed) - 2 + j]  # branch j: the text with the first j drafts
        n = len(prefix)
        ids = torch.tensor([prefix + [mask_id] * k])
        allowed = torch.ones(n + k, n + k, dtype=torch.bool).tril()
        allowed[n:, n:] = True  # the block sees itself whole
        with torch.no_grad():
            with model.gate.on(suffix=k):
                h = net.base_model(input_ids=ids, attention_mask=allowed[None, None]).last_hidden_state[0, n:]
            exact = net(input_ids=torch.tensor([prefix])).logits[0, -1].argmax()  # the gate off: the base
            torch.testing.assert_close(blocks[j, 0], net.get_output_embeddings()(h[0]), atol=1e-4, rtol=1e-4)
        previous = int(exact)
        for s in range(1, k):
            with torch.no_grad():
                full = net.get_output_embeddings()(head_reference(model.head, h[s], net.get_input_embeddings()(
                    torch.tensor(previous))))
                own = net.get_output_embeddings()(h[s])  # the adapter's own slot logits: its best are the candidates
            if candidates is None:
                want = full
            else:
                kept = own.topk(candidates).indices
                assert len(kept) < len(full)  # the vocabulary is larger: the candidates leave tokens out
                want = torch.full_like(full, -torch.inf)
                want[kept] = full[kept]
            torch.testing.assert_close(blocks[j, s], want, atol=1e-4, rtol=1e-4)
            previous = int(want.argmax())


@pytest.mark.parametrize("head", [True, False])
def test_a_branch_call_is_the_tree_calls_picked_branch(head):
    """``branch_call``: the roots and the picked branch's block are ``tree_call``'s (with a head: that branch chained
    alone); the cache is left as ``tree_call`` leaves it; a pick that names no branch is refused."""
    model = with_head(adapted()) if head else adapted()
    fed, k = model.encode(PROMPT) + model.encode("[1,"), 4
    roots, blocks = tree_call(model, model.new_cache(), fed, 3, k)
    seen = []
    for j in range(3):
        cache = model.new_cache()
        got_roots, block = branch_call(model, cache, fed, 3, k, pick=lambda r: seen.append(r) or j)
        assert torch.equal(seen[-1], got_roots)  # pick reads the roots' logits
        torch.testing.assert_close(got_roots, roots, atol=1e-4, rtol=1e-4)  # with a head, only they reach the
        # output layer in the forward, so its product runs on fewer rows: equal to the last bits
        torch.testing.assert_close(block, blocks[j], atol=1e-4, rtol=1e-4)
        assert cache.get_seq_length() == len(fed)
    for bad in (3, -1, 1.0, True):
        with pytest.raises(ValueError, match="pick"):
            branch_call(model, model.new_cache(), fed, 3, k, pick=lambda r: bad)


@pytest.mark.parametrize("block_size,gamma", [(4, 0.5), (4, 8.0), (8, 2.0)])
def test_with_a_head_verified_tree_drafting_still_writes_the_bases_generate_and_its_drafts_move(block_size, gamma):
    ref = generate_reference(0, adapted().encode(PROMPT), 24)
    runs = {}
    for name, model in (("head", with_head(adapted())), ("none", adapted())):
        runs[name] = sv.decode(model, PROMPT, decoder="sbd", verify=True, drafting="tree", block_size=block_size,
                               gamma=gamma, max_new_tokens=24)
        assert list(runs[name].output_ids) == ref
    drafted = {name: [c.token_id for s in t.steps for c in s.commits if not c.ntp] for name, t in runs.items()}
    assert drafted["head"] != drafted["none"]


def test_a_head_round_trips_beside_its_adapter_and_a_missing_file_is_refused(tmp_path):
    model = with_head(adapted())
    gated_adapter.save(model.model, gated_adapter.AdapterConfig(rank=4, alpha=8, base="tiny",
                                                                extra={"sampler_head": {"width": 32}}), tmp_path)
    sampler_head.save(model.head, tmp_path)
    back = sampler_head.load(tmp_path, model.model.config.hidden_size, {"width": 32})
    for name, p in back.state_dict().items():
        assert torch.equal(p, model.head.state_dict()[name].to(torch.bfloat16).float())
    assert sampler_head.load(tmp_path, 64, None) is None  # settings that record no head: none
    (tmp_path / sampler_head.WEIGHTS).unlink()
    with pytest.raises(FileNotFoundError, match="^folder: .*sampler head"):
        sampler_head.load(tmp_path, 64, {"width": 32})
    with pytest.raises(ValueError, match="^width: "):
        sampler_head.SamplerHead(64, 0)


def test_collected_slots_pair_each_slot_with_the_token_before_it():
    model = adapted()
    prompt, ids = model.encode("assert f(1) == "), model.encode("[1, 2, 3, 4, 5, 6]")
    rows = [{"prompt_ids": prompt, "ids": ids}]
    slots = head_train.collect(model.model, model.gate, rows, 4, model.mask_token_id, log=lambda s: None)
    text = prompt + ids
    # blocks of 4 tile the continuation from its first token; slots 1..3 of each full block are kept
    want = [(text[len(prompt) + b * 4 + s - 1], text[len(prompt) + b * 4 + s], s)
            for b in range(len(ids) // 4) for s in range(1, 4)]
    got = list(zip(slots["previous"].tolist(), slots["targets"].tolist(), slots["slot"].tolist()))
    assert got[:len(want)] == want
    assert slots["hidden"].shape == (len(got), model.model.config.hidden_size)


def test_collected_slots_are_reused_only_for_the_adapter_rows_and_block_size_they_were_collected_for(tmp_path):
    """``OUT/hidden.safetensors`` is read back only when the adapter's weights, the rows and the block size are the
    ones it was collected for; another of any of them (or a cache that records none) is collected again."""
    from safetensors.torch import save_file

    model = adapted()
    folder = tmp_path / "adapter"
    gated_adapter.save(model.model, model.adapter, folder)
    prompt = model.encode("assert f(1) == ")
    rows = [{"prompt_ids": prompt, "ids": model.encode("[1, 2, 3, 4, 5, 6]")}]
    path, made = tmp_path / "hidden.safetensors", []

    def run(rows_, k):
        def make():
            made.append(k)
            return head_train.collect(model.model, model.gate, rows_, k, model.mask_token_id, log=lambda s: None)
        return head_train.collected(path, make, head_train.slots_key(folder, rows_, k), log=lambda s: None)

    first = run(rows, 4)
    again = run(rows, 4)
    assert made == [4] and torch.equal(first["hidden"], again["hidden"])  # the same settings: read back
    other_k = run(rows, 2)
    assert made == [4, 2] and other_k["hidden"].shape[0] != first["hidden"].shape[0]
    run(rows[:1] + [{"prompt_ids": prompt, "ids": model.encode("[7, 8, 9, 10]")}], 2)  # other rows
    assert made == [4, 2, 2]
    with torch.no_grad():  # other adapter weights in the same folder
        next(p for n, p in model.model.named_parameters() if n.endswith(".B")).add_(1.0)
    gated_adapter.save(model.model, model.adapter, folder)
    run(rows, 4)
    assert made == [4, 2, 2, 4]
    save_file({"hidden": first["hidden"]}, str(path))  # a cache that records nothing
    run(rows, 4)
    assert made == [4, 2, 2, 4, 4]


def test_a_checkpoint_resumes_only_for_the_slots_and_width_it_was_trained_on(tmp_path):
    """``resumed_state``: no checkpoint, None; one of a head trained on these slots at this width, its state; one
    trained on others (or recording none) is refused, naming ``--out``: resuming it would train on another
    adapter's head."""
    ckpt = tmp_path / "checkpoint"
    key = {"adapter_sha256": "a" * 64, "rows_sha256": "b" * 64, "rows": 3, "block_size": 4, "width": 8}
    assert head_train.resumed_state(ckpt, key) is None
    head = sampler_head.SamplerHead(16, 8)
    state = {"epoch": 1, "seconds": 2.0, "trained_on": key}
    head_train._save_checkpoint(ckpt, head, torch.optim.AdamW(head.parameters()), state)
    assert head_train.resumed_state(ckpt, dict(key))["epoch"] == 1
    for change in ({"adapter_sha256": "c" * 64}, {"rows": 4}, {"block_size": 8}, {"width": 16}):
        (name, value), = change.items()
        with pytest.raises(ValueError, match=f"out: .*other settings \\({name} {key[name]}, not {value}\\)"):
            head_train.resumed_state(ckpt, {**key, **change})
    state.pop("trained_on")
    head_train._save_checkpoint(ckpt, head, torch.optim.AdamW(head.parameters()), state)
    with pytest.raises(ValueError, match="none recorded"):
        head_train.resumed_state(ckpt, key)


def test_chain_tpc_counts_the_leading_run_of_each_full_block():
    right = torch.tensor([True, True, False, False, True, True, True, True, True])
    slot = torch.tensor([1, 2, 3, 1, 2, 3, 1, 2, 3])
    block = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert head_train.chain_tpc(right, slot, block, 4) == pytest.approx((3 + 1 + 4) / 3)


def test_training_epochs_lower_the_loss_and_lift_the_probe():
    model = adapted()
    prompt = model.encode("assert f(1) == ")
    rows = [{"prompt_ids": prompt, "ids": model.encode(t)} for t in ("[1, 2, 3, 4, 5, 6, 7, 8]", "'abcabcabcabc'",
                                                                      "(0, 0, 1, 1, 2, 2, 3, 3)")]
    slots = head_train.collect(model.model, model.gate, rows, 4, model.mask_token_id, log=lambda s: None)
    embed, out_head = model.model.get_input_embeddings(), model.model.get_output_embeddings()
    head = sampler_head.SamplerHead(model.model.config.hidden_size, 64)
    optimizer = torch.optim.AdamW(head.parameters(), lr=3e-3)
    losses = [head_train.train_epoch(head, optimizer, slots, embed, out_head, 8, seed) for seed in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    got = head_train.probe(head, slots, embed, out_head, 4)
    assert got["head"]["single_tpc"] > got["adapter"]["single_tpc"]


def test_the_final_folder_records_the_head_and_loads_as_a_model(tmp_path):
    model = with_head(adapted())
    adapter = tmp_path / "adapter"
    gated_adapter.save(model.model, model.adapter, adapter)
    cfg = head_train.HeadTrainConfig(adapter=str(adapter), width=32, epochs=2)
    final = head_train.save_final(tmp_path / "final", adapter, model.adapter, model.head, cfg,
                                  {"epoch": 2, "seconds": 1.0}, 123)
    recorded = json.loads((final / gated_adapter.SETTINGS).read_text())["extra"]["sampler_head"]
    assert recorded["width"] == 32 and recorded["slots"] == 123 and "--width 32" in recorded["command"]
    assert (final / gated_adapter.WEIGHTS).read_bytes() == (adapter / gated_adapter.WEIGHTS).read_bytes()
    back = sampler_head.load(final, model.model.config.hidden_size, recorded)
    assert back.width == 32


def test_the_sampler_head_flag_offers_its_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--sampler-head", "--help"])
    text = capsys.readouterr().out
    for flag in ("--adapter", "--data-from", "--width", "--epochs", "--rows", "--block-size"):
        assert flag in text
