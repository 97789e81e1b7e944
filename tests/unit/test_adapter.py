"""The gated SBD adapter: its layers act only on the gate's rows, the model it makes writes its base's text under
NTP and verified SBD, training sees what decoding sees, and checkpoints round-trip. On tiny random models; the
shipped SmolLM2 adapter has its own heavy tests (test_adapter_smollm2.py)."""

import argparse
import contextlib
import random
import threading

import pytest
import torch
import transformers as tf

import sbd_viz as sv
from conftest import fused_call, block_call
from sbd_viz.models import gated_adapter
from sbd_viz.models.adapted_lm import AdaptedLM
from sbd_viz.training import adapter_train
from sbd_viz.training.data import build_char_tokenizer


def plain_llama(seed=0, head=8):
    """A tiny random Llama with no mask token (a base as a user has it), and the char tokenizer."""
    tok = build_char_tokenizer()
    config = tf.LlamaConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    with torch.no_grad():  # a sharper head: drafts both agree and disagree with NTP
        model.get_output_embeddings().weight *= head
    return model, tok


def adapted(seed=0, scale=0.3, rank=4, head=8):
    """A tiny base with a random, non-zero adapter attached (``head``: how sharp the base's head is)."""
    model, tok = plain_llama(seed, head)
    config = gated_adapter.AdapterConfig(rank=rank, alpha=2 * rank, base="tiny")
    gate = gated_adapter.attach(model, config)
    torch.manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in gated_adapter.adapter_state(model).items():
            if name.endswith(".B"):
                p.normal_(0, scale)
    return AdaptedLM(model, tok, config, gate, name="tiny-adapted", base_name="tiny")


# -- the layer ----------------------------------------------------------------------------------------------
def lora_reference(linear, A, B, scale, x):
    """A LoRA layer written as its users write it: W x + b + (B (A x)) * alpha / r."""
    return torch.nn.functional.linear(x, linear.weight, linear.bias) + \
        torch.nn.functional.linear(torch.nn.functional.linear(x, A), B) * scale


def gated_layer():
    """(base linear, gate, a gated rank-4 layer on it with a non-zero B, an input of 2 x 5 rows)."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8)
    gate = gated_adapter.Gate()
    layer = gated_adapter.GatedLoRALinear(linear, rank=4, alpha=8.0, gate=gate)
    with torch.no_grad():
        layer.B.normal_()
    return linear, gate, layer, torch.randn(2, 5, 16)


def test_a_gated_layer_is_its_base_off_the_gate_and_a_lora_on_it():
    linear, gate, layer, x = gated_layer()
    plain = linear(x)
    assert torch.equal(layer(x), plain)  # no gate: the base, bit for bit
    full = lora_reference(linear, layer.A, layer.B, 2.0, x)
    with gate.on(suffix=2):
        y = layer(x)
    assert torch.equal(y[:, :3], plain[:, :3])
    torch.testing.assert_close(y[:, 3:], full[:, 3:])
    rows = torch.tensor([[True, False, False, True, False], [False, False, True, False, False]])
    with gate.on(rows=rows):
        y = layer(x)
    torch.testing.assert_close(y[rows], full[rows])
    assert torch.equal(y[~rows], plain[~rows])
    assert gate.rows is None and gate.suffix is None  # the context restores the gate


@pytest.mark.parametrize("rows", [1, 2], ids=["one sequence", "two sequences"])
@pytest.mark.parametrize("mode", ["inference", "no_grad", "grad"])
def test_a_block_call_adds_the_update_to_the_blocks_rows_only(rows, mode):
    """A decode's block call (one sequence, no autograd) adds the update in place to the base's output; training
    (autograd on) and a batch take the copy. Either way: the rows before the block are the base's bit for bit, the
    block's rows the LoRA of a user's reference, and the gradient reaches A and B when autograd is on."""
    linear, gate, layer, x = gated_layer()
    x = x[:rows]
    plain = linear(x).detach()
    full = lora_reference(linear, layer.A, layer.B, 2.0, x).detach()
    context = {"inference": torch.inference_mode, "no_grad": torch.no_grad, "grad": contextlib.nullcontext}[mode]
    with context(), gate.on(suffix=2):
        y = layer(x)
    assert torch.equal(y[:, :3].detach(), plain[:, :3])
    torch.testing.assert_close(y[:, 3:].detach(), full[:, 3:])
    if mode == "grad":
        y[:, 3:].sum().backward()
        assert layer.A.grad is not None and layer.B.grad.abs().sum() > 0


def test_a_decodes_block_call_reads_the_factors_as_they_are_after_a_training_step():
    """The decode path keeps A.T and B.T transposed between calls; a step that changes A and B in place (as an
    optimizer's does, between a training run's probe decodes) must reach the next block call."""
    linear, gate, layer, x = gated_layer()
    x = x[:1]
    for _ in range(2):
        with torch.no_grad(), gate.on(suffix=2):
            y = layer(x)
        torch.testing.assert_close(y[:, 3:], lora_reference(linear, layer.A, layer.B, 2.0, x)[:, 3:].detach())
        with torch.no_grad():
            layer.A.mul_(-0.5)
            layer.B.add_(1.0)


def test_one_threads_block_call_leaves_another_threads_rows_to_the_base():
    """The app decodes one model on two threads (a click beside the γ map's background decodes): while one thread
    holds the gate on, a forward on another thread is the base's, bit for bit, and the first still gets its LoRA."""
    linear, gate, layer, x = gated_layer()
    held, seen, done = threading.Event(), {}, threading.Event()

    def block_call():
        with gate.on(suffix=5):
            held.set()
            done.wait(timeout=60)
            seen["block"] = layer(x)

    worker = threading.Thread(target=block_call)
    worker.start()
    assert held.wait(timeout=60)
    seen["other"] = layer(x)  # this thread never switched the gate on
    done.set()
    worker.join()
    assert torch.equal(seen["other"], linear(x))
    torch.testing.assert_close(seen["block"], lora_reference(linear, layer.A, layer.B, 2.0, x))


def test_the_gate_takes_exactly_one_of_rows_and_suffix():
    gate = gated_adapter.Gate()
    with pytest.raises(ValueError, match="rows, suffix"):
        with gate.on():
            pass
    with pytest.raises(ValueError, match="rows, suffix"):
        with gate.on(rows=torch.ones(1, 2, dtype=torch.bool), suffix=1):
            pass


def test_a_new_adapter_changes_nothing_and_the_mask_has_its_own_vector():
    model, tok = plain_llama()
    table = model.get_input_embeddings().weight.detach().clone()
    ids = torch.tensor([[5, 9, 11, 3]])
    before = model(input_ids=ids).logits
    gate = gated_adapter.attach(model, gated_adapter.AdapterConfig(rank=4, base="tiny"))
    mask_id = model.config.mask_token_id
    assert mask_id == table.shape[0]  # one past the base's vocabulary: no row of the base is taken
    with gate.on(suffix=4):
        after = model(input_ids=ids).logits
    assert torch.equal(before, after)  # B starts at zero
    emb = model.get_input_embeddings()
    out = emb(torch.tensor([[5, mask_id]]))
    assert torch.equal(out[0, 0], table[5]) and torch.equal(out[0, 1], emb.vector)
    assert torch.equal(model.get_output_embeddings().weight, table)  # the tied head is untouched


def test_adapter_config_refuses_bad_settings_by_name():
    with pytest.raises(ValueError, match="rank"):
        gated_adapter.AdapterConfig(rank=0)
    with pytest.raises(ValueError, match="targets"):
        gated_adapter.AdapterConfig(targets=("q_proj", "lm_head"))


@pytest.mark.parametrize("name", ["batch_size", "new_tokens", "save_every", "probe_every"])
def test_the_training_options_refuse_a_count_below_one_by_name(name):
    adapter_train.AdapterTrainConfig(**{name: 1}).validate()
    with pytest.raises(ValueError, match=f"^{name}: must be >= 1, got 0$"):
        adapter_train.AdapterTrainConfig(**{name: 0}).validate()


# -- the model: the base's text -----------------------------------------------------------------------------
def generate_reference(seed, prompt_ids, n, head=8):
    """HF's own greedy ``generate`` on a fresh copy of the base, never adapted."""
    model, tok = plain_llama(seed, head)
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=n, do_sample=False, min_new_tokens=n,
                         pad_token_id=tok.pad_token_id, eos_token_id=None)
    return out[0, len(prompt_ids):].tolist()


@pytest.mark.parametrize("block_size,gamma", [(4, 0.1), (4, 2.0), (8, 0.5), (8, 4.0)])
def test_verified_sbd_and_ntp_on_an_adapted_model_write_the_bases_generate(block_size, gamma):
    model = adapted()
    prompt = "assert sorted([3, 1, 2]) == "
    ref = generate_reference(0, model.encode(prompt), 20)
    ntp = sv.decode(model, prompt, decoder="ntp", max_new_tokens=20)
    verified = sv.decode(model, prompt, decoder="sbd", verify=True, block_size=block_size, gamma=gamma,
                         max_new_tokens=20)
    assert list(ntp.output_ids) == ref
    assert list(verified.output_ids) == ref
    assert verified.nfe < 21  # it did draft: some drafts were kept (a control on the adapter's reach)


def test_the_adapter_drives_the_blocks_so_moving_it_changes_plain_sbd():
    prompt = "assert sorted([3, 1, 2]) == "
    outs = {scale: sv.decode(adapted(scale=scale), prompt, decoder="sbd", block_size=8, gamma=4.0,
                             max_new_tokens=16).output_ids for scale in (0.0, 0.3)}
    assert outs[0.0] != outs[0.3]


def test_an_adapted_model_says_what_it_is():
    model = adapted()
    assert model.kind == "adapted" and sv.model_kinds.kind_of(model).is_a("sbd")
    assert "SBD adapter on tiny, base frozen" in model.description
    assert model.token_text(model.mask_token_id) == "<|mask|>"
    assert "sbd" in [spec.name for spec in sv.decoders(model)]


def test_an_adapter_folder_round_trips_and_a_wrong_one_is_refused(tmp_path):
    model = adapted()
    gated_adapter.save(model.model, model.adapter, tmp_path / "a")
    fresh, _ = plain_llama()
    config, gate = gated_adapter.load(fresh, tmp_path / "a")
    assert config.rank == 4 and config.base == "tiny"
    saved = gated_adapter.adapter_state(model.model)
    for name, p in gated_adapter.adapter_state(fresh).items():
        assert torch.equal(p, saved[name].to(torch.bfloat16).float())
    other, _ = plain_llama()
    other_cfg = gated_adapter.AdapterConfig(rank=2, base="tiny")
    gated_adapter.attach(other, other_cfg)
    gated_adapter.save(other, gated_adapter.AdapterConfig(rank=4, base="tiny"), tmp_path / "b")  # settings lie
    with pytest.raises(ValueError, match="path: adapter tensor"):
        gated_adapter.load(plain_llama()[0], tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="path"):
        gated_adapter.read_config(tmp_path / "missing")


# -- training sees what decoding sees -----------------------------------------------------------------------
def rows_of(model, n=3, seed=0):
    rng = random.Random(seed)
    return [{"prompt_ids": [rng.randrange(3, 90) for _ in range(rng.randrange(5, 9))],
             "ids": [rng.randrange(3, 90) for _ in range(rng.randrange(10, 14))]} for _ in range(n)]


def test_a_training_block_row_gets_the_logits_a_decoding_block_call_gets():
    model = adapted()
    mask_id = model.mask_token_id
    rows = rows_of(model)
    batch = adapter_train.make_batch(rows, [4], mask_id, random.Random(3), 0.5, 10 ** 9)
    logits = adapter_train.block_logits(model.model, model.gate, batch, bf16=False)
    checked = 0
    for b, row in enumerate(rows):
        seq = row["prompt_ids"] + row["ids"]
        for r0 in range(0, int(batch.gate[b].sum()), 4):
            start = int(batch.positions[b, r0])
            cache = model.new_cache()
            _, block = fused_call(model, cache, seq[:start], batch.block_ids[b, r0:r0 + 4].tolist())
            torch.testing.assert_close(logits[b, r0:r0 + 4], block, atol=2e-4, rtol=1e-4)
            checked += 1
    assert checked >= 6


def test_every_continuation_token_is_a_slot_of_exactly_one_block():
    model = adapted()
    rows = rows_of(model, n=4, seed=1)
    for k in (2, 4, 8):
        batch = adapter_train.make_batch(rows, [k], model.mask_token_id, random.Random(k), 1.0, 10 ** 9)
        for b, row in enumerate(rows):
            P, n = len(row["prompt_ids"]), len(row["prompt_ids"]) + len(row["ids"])
            covered = sorted(int(p) for p, on in zip(batch.positions[b], batch.gate[b]) if on and P <= p < n)
            assert covered == list(range(P, n))
            targets = batch.targets[b][batch.targets[b] >= 0]
            assert len(targets) >= 1


def test_block_masks_follow_the_two_schemes():
    rng = random.Random(0)
    decode_like = [adapter_train.block_masks(8, rng, 1.0) for _ in range(200)]
    assert all(m == sorted(m) for m in decode_like)  # written prefix, then masks
    assert any(all(m) for m in decode_like) and any(not m[0] for m in decode_like)
    paper = [adapter_train.block_masks(8, rng, 0.0) for _ in range(200)]
    assert all(any(m) for m in paper) and any(m != sorted(m) for m in paper)


def trainable():
    """A tiny base with a zero adapter whose tensors train, their AdamW, and one batch of blocks to train on."""
    model = adapted(scale=0.0)
    params = list(gated_adapter.adapter_state(model.model).values())
    for p in params:
        p.requires_grad_(True)
    batch = adapter_train.make_batch(rows_of(model), [4], model.mask_token_id, random.Random(0), 0.5, 10 ** 9)
    return model, torch.optim.AdamW(params, lr=3e-3), batch


def test_training_steps_lower_the_loss_and_a_checkpoint_resumes_them(tmp_path):
    model, optimizer, batch = trainable()
    scored = batch.targets >= 0
    losses = []
    for _ in range(12):
        logits = adapter_train.block_logits(model.model, model.gate, batch, bf16=False)
        loss = torch.nn.functional.cross_entropy(logits[scored], batch.targets[scored])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.1
    adapter_train.save_checkpoint(tmp_path / "ckpt", model.model, model.adapter, optimizer, {"step": 12})
    other = adapted(scale=0.0)
    other_params = list(gated_adapter.adapter_state(other.model).values())
    other_opt = torch.optim.AdamW(other_params, lr=3e-3)
    state = adapter_train.restore(tmp_path / "ckpt", other.model, other_opt)
    assert state["step"] == 12 and state["warm"]
    for (name, p), q in zip(gated_adapter.adapter_state(model.model).items(), other_params):
        assert torch.equal(p, q), name
        assert torch.equal(optimizer.state[p]["exp_avg_sq"], other_opt.state[q]["exp_avg_sq"])


def test_the_kl_teacher_is_the_bases_own_next_token_distribution_at_each_scored_slot():
    model = adapted()  # a non-zero adapter: the teacher must still be the base's
    rows = rows_of(model, n=3, seed=2)
    batch = adapter_train.make_batch(rows, [4], model.mask_token_id, random.Random(5), 0.5, 10 ** 9)
    logits, base_logits = adapter_train.block_logits(model.model, model.gate, batch, bf16=False, teacher=True)
    torch.testing.assert_close(logits, adapter_train.block_logits(model.model, model.gate, batch, bf16=False))
    b, r = (batch.targets >= 0).nonzero(as_tuple=True)
    assert base_logits.shape == (len(b), logits.shape[-1]) and len(b) >= 10
    with torch.no_grad():  # HF's own forward of each clean row alone, the adapter's gate off
        whole = [model.model(input_ids=torch.tensor([row["prompt_ids"] + row["ids"]])).logits[0] for row in rows]
    for n, (bb, rr) in enumerate(zip(b.tolist(), r.tolist())):
        torch.testing.assert_close(base_logits[n], whole[bb][int(batch.positions[bb, rr]) - 1], atol=2e-4, rtol=1e-4)


def test_the_loss_option_picks_cross_entropy_or_kl_to_the_base():
    model = adapted()
    batch = adapter_train.make_batch(rows_of(model), [4], model.mask_token_id, random.Random(0), 0.5, 10 ** 9)
    with torch.no_grad():
        logits, base_logits = adapter_train.block_logits(model.model, model.gate, batch, bf16=False, teacher=True)
    scored = batch.targets >= 0
    ce = adapter_train.slot_loss(logits, batch, "ce")
    torch.testing.assert_close(ce, torch.nn.functional.cross_entropy(logits[scored], batch.targets[scored]))
    kl = adapter_train.slot_loss(logits, batch, "kl", base_logits)
    p, q = torch.softmax(base_logits, -1), torch.softmax(logits[scored], -1)
    torch.testing.assert_close(kl, (p * (p.log() - q.log())).sum(-1).mean(), atol=1e-4, rtol=1e-4)
    assert float(kl) > 0.01 and abs(float(kl) - float(ce)) > 0.01
    assert float(adapter_train.slot_loss(base_logits_as_rows(base_logits, batch), batch, "kl", base_logits)) < 1e-5
    with pytest.raises(ValueError, match="loss"):
        adapter_train.slot_loss(logits, batch, "mse")
    with pytest.raises(ValueError, match="loss"):
        adapter_train.AdapterTrainConfig(loss="mse").validate()


def test_the_loss_flag_offers_its_choices_and_refuses_another_by_name(capsys):
    parser = argparse.ArgumentParser()
    adapter_train.add_arguments(parser)
    assert parser.parse_args(["--loss", "kl"]).loss == "kl" and parser.parse_args([]).loss == "ce"
    with pytest.raises(SystemExit):
        parser.parse_args(["--loss", "mse"])
    assert "--loss" in capsys.readouterr().err
    assert "{ce,kl}" in parser.format_help()


def base_logits_as_rows(base_logits, batch):
    """(B, Q, V) logits whose scored rows are ``base_logits`` (an adapter that had learned the base exactly)."""
    out = torch.zeros(*batch.targets.shape, base_logits.shape[-1])
    out[batch.targets >= 0] = base_logits
    return out


def test_kl_training_steps_bring_the_slots_toward_the_bases_distribution():
    model, optimizer, batch = trainable()
    losses = []
    for _ in range(12):
        logits, base_logits = adapter_train.block_logits(model.model, model.gate, batch, bf16=False, teacher=True)
        loss = adapter_train.slot_loss(logits, batch, "kl", base_logits)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.1


def test_batched_decoding_carries_the_adapter_on_the_block_rows_as_one_decode_does():
    model = adapted()
    prompts = ["assert sorted([3, 1, 2]) == ", "assert 4 + 5 == ", "x = 1"]
    single = [sv.decode(model, p, decoder="sbd", block_size=4, gamma=1.0, max_new_tokens=12) for p in prompts]
    batched = sv.decode_batch(model, prompts, decoder="sbd", block_size=4, gamma=1.0, max_new_tokens=12,
                              batch_size=3)
    for one, many in zip(single, batched):
        assert list(many.output_ids) == list(one.output_ids)
        assert many.nfe == one.nfe
    # the control: the same batch without the adapter's rows decodes otherwise
    plain = sv.decode_batch(adapted(scale=0.0), prompts, decoder="sbd", block_size=4, gamma=1.0,
                            max_new_tokens=12, batch_size=3)
    assert [t.output_ids for t in plain] != [t.output_ids for t in batched]


def test_a_resume_point_without_moments_restarts_them_and_keeps_the_count(tmp_path):
    model = adapted()
    config = gated_adapter.AdapterConfig(rank=4, alpha=8.0, base="tiny", extra={"steps": 40, "scored_tokens": 900})
    gated_adapter.save(model.model, config, tmp_path / "point")  # bf16, no optimizer: what a session commits
    other = adapted(scale=0.0)
    params = list(gated_adapter.adapter_state(other.model).values())
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    state = adapter_train.restore(tmp_path / "point", other.model, optimizer)
    assert state["step"] == 40 and state["tokens"] == 900 and not state.get("warm")  # moments rebuilt: warm up
    assert state["epoch"] == 0 and state["position"] == 0  # a point that records no place starts the order
    assert not optimizer.state
    saved = gated_adapter.adapter_state(model.model)
    for name, p in gated_adapter.adapter_state(other.model).items():
        assert torch.equal(p, saved[name].to(torch.bfloat16).float())


def test_a_resume_point_keeps_its_place_in_the_data_order_only_on_the_same_data(tmp_path):
    cfg = adapter_train.AdapterTrainConfig(proposed_prompts=2000)
    model = adapted()
    state = {"step": 70, "tokens": 1500, "seconds": 9.0, "epoch": 2, "position": 48}
    config = adapter_train._final_config(gated_adapter.AdapterConfig(rank=4, alpha=8.0, base="tiny"), cfg, state)
    gated_adapter.save(model.model, config, tmp_path / "point")
    for data, place in [({}, (2, 48)), ({"proposed_prompts": 800}, (0, 0)), ({"data_seed": 1}, (0, 0)),
                        ({"seed": 3}, (0, 0))]:
        other = adapted(scale=0.0)
        optimizer = torch.optim.AdamW(list(gated_adapter.adapter_state(other.model).values()), lr=1e-3)
        restored = adapter_train.keep_order(adapter_train.restore(tmp_path / "point", other.model, optimizer),
                                            adapter_train.AdapterTrainConfig(**{"proposed_prompts": 2000, **data}))
        assert (restored["epoch"], restored["position"]) == place, data
        assert restored["step"] == 70 and "data" not in restored and "seed" not in restored
