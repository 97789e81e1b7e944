"""The SBD training objective: the Fig. 9 mask, the masked copy, the losses, a real step, resume."""

import json

import pytest
import torch

from sbd_viz.analysis.evaluation import training_probe
from sbd_viz.training import data, objective, train, upscale
from sbd_viz import tasks


def test_attention_mask_matches_fig9():
    n, k = 8, 3
    m = objective.sbd_attention_mask(n, k)
    for q in range(2 * n):
        for kv in range(2 * n):
            if q < n:  # clean half: causal, never sees the masked half
                want = kv < n and kv <= q
            elif kv >= n:  # masked half, same block: bidirectional
                want = (q - n) // k == (kv - n) // k
            else:  # masked block b sees clean tokens strictly before its start b*k
                want = kv < ((q - n) // k) * k
            assert bool(m[q, kv]) == want, (q, kv)


def test_mask_rate_is_one_uniform_draw_per_sequence():
    g = torch.Generator().manual_seed(0)
    ids = torch.zeros(400, 256, dtype=torch.long)
    rates = objective.mask_copy(ids, g).float().mean(1)
    # per-row rates spread over (0, 1) like U(0,1): mean ~0.5, sd ~0.29
    assert abs(rates.mean().item() - 0.5) < 0.05 and abs(rates.std().item() - 0.289) < 0.04


def test_prefix_masking_commits_a_prefix_of_each_block_and_is_off_by_default():
    ids = torch.zeros(64, 40, dtype=torch.long)
    paper = objective.mask_copy(ids, torch.Generator().manual_seed(3))
    # prefix_frac 0 draws exactly the paper's masks (old runs resume and reproduce unchanged)
    assert torch.equal(paper, objective.mask_copy(ids, torch.Generator().manual_seed(3), 8, 0.0))
    masked = objective.mask_copy(ids, torch.Generator().manual_seed(3), 8, 1.0)
    blocks = masked.view(64, 5, 8)
    # every block: committed slots first, then masked to its end (a suffix, possibly empty or whole)
    assert torch.equal(blocks, blocks.cummax(-1).values)
    cuts = (~blocks).sum(-1)
    assert cuts.min() == 0 and cuts.max() == 8 and len(cuts.unique()) == 9  # c ~ U{0..8}
    half = objective.mask_copy(torch.zeros(400, 40, dtype=torch.long), torch.Generator().manual_seed(4), 8, 0.5)
    is_prefix = torch.tensor([torch.equal(r.view(5, 8), r.view(5, 8).cummax(-1).values) for r in half])
    assert 0.4 < is_prefix.float().mean() < 0.7  # about half the rows (i.i.d. rows pass by chance only rarely)
    with pytest.raises(ValueError, match="prefix_frac"):
        train.TrainConfig(prefix_frac=1.5).validate()


@pytest.mark.heavy
def test_loss_parts_and_gradient_flow():
    tok = data.build_char_tokenizer()
    model, _ = train._new_model(train.TrainConfig(preset="test-1m"))
    seq = data.TrainingStream(tok, seq_len=32, seed=1).batch(0, 4)
    loss, ntp, matp = objective.sbd_loss(model, seq, tok.mask_token_id, 4, torch.Generator().manual_seed(0))
    assert torch.isclose(loss, ntp + matp)  # summed, no weights
    # a random-init model is near uniform over the 100-token vocabulary
    assert 3.5 < ntp.item() < 5.5 and 3.5 < matp.item() < 5.5
    loss.backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


def test_answer_slots_mark_each_answer_and_its_newline():
    tok = data.build_char_tokenizer()
    stream = data.TrainingStream(tok, seq_len=32, seed=1)
    text = 'xs = [4, 1]\nassert sorted(xs) == [1, 4]\nassert "ab".upper() == "AB"\n'
    ids = torch.tensor([[tok.eos_token_id] + tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]])
    marked = stream.answer_slots(ids)[0]
    assert tok.decode(ids[0][marked]) == '[1, 4]\n"AB"\n'
    # a window that starts inside an answer leaves that answer's head alone, and the next one is whole
    start = 1 + text.index("4]\nassert")
    marked = stream.answer_slots(ids[:, start:])[0]
    assert tok.decode(ids[0, start:][marked]) == '"AB"\n'
    # on real training rows: only the asserts' right-hand sides, newline included
    batch = data.TrainingStream(tok, seq_len=256, seed=2, weights=data.MIXES["v3-lookup"],
                                doc_lines=(4, 16)).batch(0, 4)
    runs = 0
    for row, on in zip(batch, stream.answer_slots(batch)):
        flags, chars = on.tolist(), [tok.decode([t]) for t in row.tolist()]  # one character a token
        for i, flag in enumerate(flags):
            if flag and not flags[i - 1]:  # a run of marked tokens starts right after an assert's " == "
                runs += 1
                line = "".join(chars[:i]).replace(tok.eos_token, "\n").rsplit("\n", 1)[-1]
                assert line.startswith("assert ") and line.endswith(" == "), line
                end = next((j for j in range(i, len(flags)) if not flags[j]), len(flags))
                answer = "".join(chars[i:end])
                assert end == len(flags) or answer.endswith("\n"), answer  # whole, unless the window ends
                assert answer.count("\n") <= 1 and " = " not in answer
    assert runs >= 10  # 18 answers in these four rows


@pytest.mark.heavy
def test_answers_only_loss_scores_only_the_marked_tokens():
    tok = data.build_char_tokenizer()
    model, _ = train._new_model(train.TrainConfig(preset="test-1m"))
    stream = data.TrainingStream(tok, seq_len=64, seed=1, weights=data.MIXES["v3-lookup"], doc_lines=(4, 8))
    seq = stream.batch(0, 4)
    on = stream.answer_slots(seq)
    loss = lambda loss_on: objective.sbd_loss(model, seq, tok.mask_token_id, 4, torch.Generator().manual_seed(0),
                                              loss_on)
    with torch.no_grad():
        everything, only_all = loss(None), loss(torch.ones_like(on))
        assert all(torch.isclose(a, b) for a, b in zip(everything, only_all))  # marking all tokens changes nothing
        _, ntp, _ = loss(on)
        logits = model(input_ids=seq[:, :-1]).logits  # the clean half is plain causal attention
        want = torch.nn.functional.cross_entropy(logits[on[:, 1:]], seq[:, 1:][on[:, 1:]])
    assert torch.isclose(ntp, want, atol=1e-5)
    with pytest.raises(ValueError, match="answers_only"):
        train.TrainConfig(answers_only=True, code_frac=0.5, code_dir=".").validate()


@pytest.mark.heavy
def test_masked_half_cannot_leak_into_clean_half():
    """Changing a masked-copy token must not change any clean-half logit (no NTP leak)."""
    model, tok = train._new_model(train.TrainConfig(preset="test-1m"))
    n, k = 16, 4
    ids = torch.randint(3, 90, (1, n))
    noisy = ids.clone()
    attn = objective.sbd_attention_mask(n, k)[None, None]
    pos = torch.arange(n).repeat(2)[None]
    with torch.no_grad():
        a = model(input_ids=torch.cat([ids, noisy], 1), attention_mask=attn, position_ids=pos).logits
        noisy[0, 5] = 1
        b = model(input_ids=torch.cat([ids, noisy], 1), attention_mask=attn, position_ids=pos).logits
    assert torch.allclose(a[0, :n], b[0, :n])
    assert not torch.allclose(a[0, n + 4:n + 8], b[0, n + 4:n + 8])  # its own block does see it
    assert torch.allclose(a[0, n + 8:], b[0, n + 8:])  # later blocks see only the clean half


@pytest.mark.slow
def test_short_run_learns_saves_and_resumes(tmp_path):
    out = tmp_path / "run"
    cfg = dict(out=str(out), preset="test-1m", seq_len=48, batch_size=8, max_steps=30, warmup=5, lr=3e-3,
               probe_per_family=0, ckpt_every_min=0.0, log_every=5)
    final = train.train(train.TrainConfig(**cfg))
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    ntp = [r["ntp"] for r in log if "ntp" in r]
    matp = [r["matp"] for r in log if "matp" in r]
    assert ntp[-1] < ntp[0] - 0.3, ntp  # both halves of the objective learn
    assert matp[-1] < matp[0] - 0.3, matp
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 30
    import sbd_viz as sv

    model = sv.load_model(final)
    assert model.mask_token_id == 1
    assert model.context_length == 48  # the trained window, recorded in the model's folder
    assert sv.decode(model, "assert 1 == ", max_new_tokens=4, block_size=4).n_tokens == 4
    # resume: continues from step 30 to 40 instead of starting over
    train.train(train.TrainConfig(**{**cfg, "max_steps": 40}))
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 40
    # a fine-tune of the final weights that keeps AdamW's moments: its step count goes on from 40
    tune = tmp_path / "tune"
    train.train(train.TrainConfig(**{**cfg, "out": str(tune), "base": str(final), "max_steps": 5,
                                     "optimizer_from": str(out / "checkpoint")}))
    assert json.loads((tune / "checkpoint" / "state.json").read_text())["adam_step"] == 45


@pytest.mark.slow
def test_two_process_accelerate_run_completes(tmp_path):
    """``accelerate launch --multi_gpu --num_processes 2`` trains with two ranks on this CPU-only machine.

    (accelerate 1.x's ``--cpu`` flag picks its single-process launcher whatever ``--num_processes``
    says; ``--multi_gpu`` goes through torchrun, and with no GPU the ranks talk over gloo.)"""
    import os
    import subprocess
    import sys

    from conftest import free_port

    out = tmp_path / "run2"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "sbd_viz", "train",
           "--preset", "test-1m", "--out", str(out), "--seq-len", "32", "--batch-size", "4", "--max-steps", "6",
           "--warmup", "2", "--probe-per-family", "0", "--log-every", "2", "--no-bf16", "--threads", "1"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    cmd[cmd.index("--num_machines"):cmd.index("--num_machines")] = ["--main_process_port", str(free_port())]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 6
    assert state["tokens"] == 6 * 4 * 32 * 2  # both ranks' batches count: two processes really ran
    assert (out / "final" / "model.safetensors").is_file()
    # the two ranks draw different rows from the same seed
    tok = data.build_char_tokenizer()
    rank0 = data.TrainingStream(tok, seq_len=32, seed=0, rank=0).batch(0, 4)
    rank1 = data.TrainingStream(tok, seq_len=32, seed=0, rank=1).batch(0, 4)
    assert not torch.equal(rank0, rank1)


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="preset"):
        train.TrainConfig(preset="huge").validate()
    with pytest.raises(ValueError, match="min_block"):
        train.TrainConfig(min_block=5, max_block=2).validate()
    with pytest.raises(ValueError, match="optimizer_from"):
        train.TrainConfig(optimizer_from="runs/x/checkpoint").validate()  # no --base
    with pytest.raises(ValueError, match="optimizer_from"):
        train.TrainConfig(base="sbd_viz/weights/sbd-char-5m", optimizer_from="no/such/checkpoint").validate()
    for decay in (1.0, -0.1):
        with pytest.raises(ValueError, match="ema_decay"):
            train.TrainConfig(ema_decay=decay).validate()


def test_weight_average_moves_by_one_minus_decay_and_round_trips(tmp_path):
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.fill_(0.0)
    ema = train.WeightAverage(layer, decay=0.75)
    with torch.no_grad():
        layer.weight.fill_(3.0)
        layer.bias.fill_(-4.0)
    ema.update()  # 0.75 * old + 0.25 * new
    assert torch.equal(ema.average["weight"], torch.full((2, 2), 1.5))
    assert torch.equal(ema.average["bias"], torch.full((2,), -1.0))
    ema.save(tmp_path / "ema.safetensors")
    again = train.WeightAverage(torch.nn.Linear(2, 2), decay=0.75)
    again.load(tmp_path / "ema.safetensors")
    assert torch.equal(again.average["weight"], ema.average["weight"])
    again.copy_to_model()
    assert torch.equal(again.params["bias"], torch.full((2,), -1.0))
    with pytest.raises(ValueError, match="weight average"):
        train.WeightAverage(torch.nn.Linear(3, 2), decay=0.5).load(tmp_path / "ema.safetensors")


@pytest.mark.heavy
def test_a_save_killed_midway_keeps_the_last_complete_checkpoint(tmp_path, monkeypatch):
    """A session's end kills a run at any moment, also while it saves: resume must find the last whole
    checkpoint, never one whose weights are a save newer than its optimizer moments and step count."""
    import safetensors.torch

    cfg = train.TrainConfig(out=str(tmp_path), preset="test-1m", seq_len=32)
    model, tok = train._new_model(cfg)
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.zeros(1, 4, dtype=torch.long), labels=torch.zeros(1, 4, dtype=torch.long)).loss.backward()
    adamw.step()
    ckpt = tmp_path / "checkpoint"
    train._save_checkpoint(ckpt, model, tok, adamw, {"step": 10})
    saved = {n: p.detach().clone() for n, p in model.named_parameters()}

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed while saving the optimizer moments")
    monkeypatch.setattr(safetensors.torch, "save_file", killed)
    with pytest.raises(KeyboardInterrupt):
        train._save_checkpoint(ckpt, model, tok, adamw, {"step": 20})
    monkeypatch.undo()

    train.restore_interrupted_save(ckpt)  # nothing to put back: the kill left only a ".tmp" folder
    fresh, _ = train._new_model(cfg)
    state = train._load_checkpoint(ckpt, fresh, torch.optim.AdamW(fresh.parameters(), lr=1e-3))
    assert state["step"] == 10
    assert all(torch.equal(p, saved[n]) for n, p in fresh.named_parameters())
    assert (tmp_path / "checkpoint.tmp" / "model.safetensors").is_file()  # the kill came after the weights

    # killed between the two renames: the last checkpoint sits under its ".old" name and is put back
    train._save_checkpoint(ckpt, model, tok, adamw, {"step": 30})
    ckpt.rename(tmp_path / "checkpoint.old")
    train.restore_interrupted_save(ckpt)
    assert json.loads((ckpt / "state.json").read_text())["step"] == 30
    assert not (tmp_path / "checkpoint.old").exists() and not (tmp_path / "checkpoint.tmp").exists()


@pytest.mark.slow
def test_weight_average_starts_from_the_base_and_survives_a_resume(tmp_path):
    """With a decay a hair under 1 the average stays on the run's first weights, across a resume;
    restarting it from the checkpoint would put it on the step-3 weights instead."""
    from safetensors.torch import load_file

    import sbd_viz as sv

    small = dict(preset="test-1m", seq_len=32, batch_size=4, warmup=1, lr=3e-3, probe_per_family=0, log_every=1)
    base = train.train(train.TrainConfig(out=str(tmp_path / "base"), max_steps=2, **small))
    cfg = dict(small, out=str(tmp_path / "tune"), base=str(base), ema_decay=1 - 1e-7, max_steps=3)
    train.train(train.TrainConfig(**cfg))
    assert (tmp_path / "tune" / "checkpoint" / "ema.safetensors").is_file()
    final = train.train(train.TrainConfig(**{**cfg, "max_steps": 5}))  # resumes at step 3
    first, raw = load_file(str(base / "model.safetensors")), load_file(str(final / "model.safetensors"))
    average = load_file(str(final.parent / "final_ema" / "model.safetensors"))
    assert first.keys() == average.keys() == raw.keys()
    assert max((raw[n] - first[n]).abs().max().item() for n in first) > 1e-3  # the run moved the weights
    assert max((average[n] - first[n]).abs().max().item() for n in first) < 1e-5  # the average barely did
    model = sv.load_model(final.parent / "final_ema")
    assert sv.decode(model, "assert 1 == ", max_new_tokens=4, block_size=4).n_tokens == 4


@pytest.mark.heavy
def test_masked_slot_probe_reads_the_right_positions():
    """An oracle that knows the clean text scores 1.0 on both halves; a random model is near chance."""
    from types import SimpleNamespace

    import sbd_viz as sv
    from conftest import tiny_model

    assert sv.analysis.evaluation.masked_slot_accuracy is objective.masked_slot_accuracy  # still read from there
    tiny = tiny_model()
    vocab = len(tiny.tokenizer)

    def oracle(input_ids, attention_mask, position_ids):
        n = input_ids.shape[1] // 2
        clean = input_ids[0, :n]
        nxt = torch.cat([clean[1:], clean[-1:]])  # causal position i predicts x_{i+1}
        logits = torch.cat([torch.nn.functional.one_hot(nxt, vocab), torch.nn.functional.one_hot(clean, vocab)])
        return SimpleNamespace(logits=logits[None].float())

    cheat = SimpleNamespace(model=oracle, tokenizer=tiny.tokenizer, mask_token_id=tiny.mask_token_id,
                            device=torch.device("cpu"), token_text=tiny.token_text)
    perfect = objective.masked_slot_accuracy(cheat, n_windows=4)
    assert perfect["matp_accuracy"] == 1.0 and perfect["ntp_accuracy"] == 1.0
    assert perfect["n_slots"] > 0 and 0 < perfect["unigram_accuracy"] < 0.5
    chance = objective.masked_slot_accuracy(tiny, n_windows=4)
    assert chance["matp_accuracy"] < perfect["unigram_accuracy"] + 0.1
    assert chance["n_slots"] == perfect["n_slots"] and chance["unigram_accuracy"] == perfect["unigram_accuracy"]
    with pytest.raises(ValueError, match="block_size"):
        objective.masked_slot_accuracy(tiny, block_size=0)


@pytest.mark.heavy
def test_decoder_state_accuracy_builds_each_state_it_names():
    """An oracle that knows a masked slot only when the slot before it is committed: right in every later call's
    state but slot 0's, wrong in every first call's; NTP right throughout."""
    from types import SimpleNamespace

    from conftest import tiny_model

    tiny = tiny_model()
    vocab, mask = len(tiny.tokenizer), tiny.mask_token_id

    def oracle(input_ids, attention_mask, position_ids):
        n = input_ids.shape[1] // 2
        clean, noisy = input_ids[:, :n], input_ids[:, n:]
        nxt = torch.cat([clean[:, 1:], clean[:, -1:]], 1)
        left_committed = torch.cat([torch.zeros_like(noisy[:, :1]), noisy[:, :-1]], 1) != mask
        guess = torch.where(left_committed, clean, torch.full_like(clean, mask))  # the mask id is never an answer
        logits = torch.cat([torch.nn.functional.one_hot(nxt, vocab), torch.nn.functional.one_hot(guess, vocab)], 1)
        return SimpleNamespace(logits=logits.float())

    cheat = SimpleNamespace(model=oracle, tokenizer=tiny.tokenizer, mask_token_id=mask, device=torch.device("cpu"))
    r = objective.decoder_state_accuracy(cheat, n_windows=3, seq_len=64, block_size=8)
    assert r["ntp"] == [1.0] * 8 and r["whole_block"] == [0.0] * 8
    assert r["committed_prefix"] == [0.0] + [1.0] * 7
    assert min(r["n_chars"]) > 0 and r["ntp_right_prefix_wrong"] == r["n_chars"][0]
    assert r["prefix_right_ntp_wrong"] == 0
    real = objective.decoder_state_accuracy(tiny, n_windows=2, seq_len=64, block_size=8)
    assert real["committed_prefix"][0] == real["whole_block"][0]  # slot 0 with nothing committed: one state
    assert all(0.0 <= v <= 1.0 for key in ("ntp", "committed_prefix", "whole_block") for v in real[key])
    with pytest.raises(ValueError, match="n_windows"):
        objective.decoder_state_accuracy(tiny, n_windows=0)


@pytest.mark.heavy
def test_a_run_that_ends_between_log_lines_still_logs_and_saves(tmp_path):
    """A schedule (or a time budget) can end before the first log line: the log still gets the last steps."""
    out = tmp_path / "short"
    final = train.train(train.TrainConfig(out=str(out), preset="test-1m", seq_len=32, batch_size=4, max_steps=3,
                                          warmup=1, probe_per_family=0, log_every=100))
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [3] and log[0]["ntp"] > 0
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 3
    assert state["config"]["bf16"] == train.bf16_is_native()  # left unset, resolved for this hardware
    assert (final / "model.safetensors").is_file()


@pytest.mark.heavy
def test_threads_zero_keeps_omp_num_threads_and_a_number_sets_it(tmp_path, monkeypatch):
    """threads=0 under OMP_NUM_THREADS (a test worker, a notebook kernel it starts) keeps torch's count: two threads
    beside another busy process run many times slower; a number given is what torch runs."""
    import torch

    small = dict(preset="test-1m", seq_len=32, batch_size=2, max_steps=1, warmup=1, probe_per_family=0)
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        torch.set_num_threads(1)
        train.train(train.TrainConfig(out=str(tmp_path / "zero"), threads=0, **small))
        assert torch.get_num_threads() == 1
        train.train(train.TrainConfig(out=str(tmp_path / "two"), threads=2, **small))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.heavy
@pytest.mark.parametrize("first, run", [("no", True), ("bf16", False)])
def test_a_run_trains_at_its_own_precision_in_a_process_that_already_made_an_accelerator(tmp_path, first, run):
    """lm-eval's ``hf`` model (or an earlier run) leaves accelerate's one state per process at some precision; a run
    at the other precision trains at its own instead of failing (CI on a CPU with native bf16 failed so)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state()  # a clean process's state (earlier tests here trained), as accelerate's tests do
    Accelerator(cpu=True, mixed_precision=first)  # as another user of accelerate in this process would
    small = dict(preset="test-1m", seq_len=32, batch_size=2, max_steps=1, warmup=1, probe_per_family=0)
    train.train(train.TrainConfig(out=str(tmp_path), bf16=run, **small))
    assert AcceleratorState().mixed_precision == ("bf16" if run else "no")
    assert json.loads((tmp_path / "checkpoint" / "state.json").read_text())["config"]["bf16"] is run


def test_bf16_flag_is_automatic_unless_given():
    import argparse

    p = argparse.ArgumentParser()
    train.add_arguments(p)
    assert p.parse_args([]).bf16 is None
    assert p.parse_args(["--no-bf16"]).bf16 is False and p.parse_args(["--bf16"]).bf16 is True
    assert isinstance(train.bf16_is_native(), bool)


@pytest.mark.heavy
def test_probe_asks_only_for_what_fits_a_short_context():
    """A from-scratch run at a short window (its trained context) must still get a probe, not an error."""
    model, tok = train._new_model(train.TrainConfig(preset="test-1m"))
    longest = max(len(tok(i.prompt)["input_ids"]) for i in tasks.load_suite(split="test", per_family=1))
    model.config.sbd_context_length = longest + 20  # under the probe's 64 new tokens
    model.eval()
    probe = training_probe(model, tok, per_family=1)
    assert 0.0 <= probe["ntp_acc"] <= 1.0 and 0.0 <= probe["sbd_acc"] <= 1.0


def _small_model_off_its_init():
    """The test-1m model in eval mode, its weights moved away from the init's symmetries (zero and
    constant parts), so that an upscale that broke the function would show in the logits."""
    model, tok = train._new_model(train.TrainConfig(preset="test-1m"))
    for p in model.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    return model.eval(), tok


@pytest.mark.heavy
def test_a_deepened_model_computes_what_it_did_and_decodes_with_its_cache():
    """Depth upscaling: twice the layers, the same logits, and a cached decode equal to the base's."""
    import sbd_viz as sv

    model, tok = _small_model_off_its_init()
    ids = torch.tensor([tok("assert sorted([3, 1, 2]) == ")["input_ids"]])
    before = model(ids).logits
    prompt = "assert len([1, 2]) == "
    base = sv.decode(sv.SBDModel(model, tok), prompt, max_new_tokens=12, gamma=0.3)
    deep = upscale.deepen_layers(model, 2)
    assert deep.config.num_hidden_layers == 4 and len(deep.model.layers) == 4
    assert torch.allclose(deep(ids).logits, before, atol=1e-5)
    assert [layer.self_attn.layer_idx for layer in deep.model.layers] == [0, 1, 2, 3]
    again = sv.decode(sv.SBDModel(deep, tok), prompt, max_new_tokens=12, gamma=0.3)
    assert again.output_ids == base.output_ids and again.nfe == base.nfe
    with pytest.raises(ValueError, match="deepen"):
        train.TrainConfig(deepen=2).validate()
    with pytest.raises(ValueError, match="deepen"):
        upscale.deepen_layers(torch.nn.Linear(2, 2), 2)  # no Llama-style layers to repeat


@pytest.mark.heavy
def test_a_widened_model_computes_what_it_did_and_every_new_weight_learns():
    """Width upscaling: two more heads, a wider MLP, the same logits and decode, and a gradient into
    every new part (a zero block nothing reaches would never train)."""
    import sbd_viz as sv
    from sbd_viz.training.objective import sbd_loss

    model, tok = _small_model_off_its_init()  # hidden 128: 4 heads of 32
    ids = torch.tensor([tok("assert sorted([3, 1, 2]) == ")["input_ids"]])
    prompt = "assert len([1, 2]) == "
    base = sv.decode(sv.SBDModel(model, tok), prompt, max_new_tokens=12, gamma=0.3)
    wide = upscale.widen_model(model, 192).eval()
    c = wide.config
    assert (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size) == (192, 6, 6, 528)
    assert wide.model.layers[0].self_attn.q_proj.weight.shape == (192, 192)
    assert torch.allclose(wide(ids).logits, model(ids).logits, atol=1e-5)
    again = sv.decode(sv.SBDModel(wide, tok), prompt, max_new_tokens=12, gamma=0.3)
    assert again.output_ids == base.output_ids and again.nfe == base.nfe
    assert model.config.hidden_size == 128  # the base is left as it was
    wide.train()
    batch = torch.tensor([tok("assert 1 + 2 == 3\nassert sorted([2, 1]) == [1, 2]\n")["input_ids"]])
    for step in range(2):  # the new heads' readers and the new dims' readers see a gradient from step 2
        wide.zero_grad()
        loss, _, _ = sbd_loss(wide, batch, wide.config.mask_token_id, 4, torch.Generator().manual_seed(step))
        loss.backward()
        with torch.no_grad():
            for p in wide.parameters():
                p -= 0.05 * p.grad
    attn, mlp = wide.model.layers[0].self_attn, wide.model.layers[0].mlp
    new_parts = {"embedding, new dims": wide.model.embed_tokens.weight.grad[:, 128:],
                 "q_proj, new heads": attn.q_proj.weight.grad[128:], "v_proj, new dims": attn.v_proj.weight.grad[:, 128:],
                 "o_proj, new heads": attn.o_proj.weight.grad[:128, 128:], "o_proj, new dims": attn.o_proj.weight.grad[128:],
                 "up_proj, new units": mlp.up_proj.weight.grad[352:], "down_proj, new dims": mlp.down_proj.weight.grad[128:],
                 "down_proj, new units": mlp.down_proj.weight.grad[:, 352:],
                 "norm, new dims": wide.model.layers[1].input_layernorm.weight.grad[128:]}
    for part, grad in new_parts.items():
        assert grad.abs().sum() > 0, part
    with pytest.raises(ValueError, match="hidden_size"):
        upscale.widen_model(model, 200)  # not whole heads
    with pytest.raises(ValueError, match="hidden_size"):
        upscale.widen_model(model, 128)
    with pytest.raises(ValueError, match="widen"):
        train.TrainConfig(widen=192).validate()
    with pytest.raises(ValueError, match="widen"):
        upscale.widen_model(torch.nn.Linear(2, 2), 192)


def test_code_documents_keep_each_files_vocabulary_characters_and_skip_tests_and_short_files(tmp_path):
    from sbd_viz.training.data import code_documents

    body = "def f(x):\n\treturn 'naïve café' + x  # ✓ ünïcode, \x0c form feed\n" * 4
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(body, encoding="utf-8")
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(body, encoding="utf-8")
    kept = "".join(ch for ch in body if ch in "\n\t" or " " <= ch <= "~")  # newline, tab and printable ASCII
    assert code_documents(tmp_path, min_chars=50) == [kept]
    assert "ï" not in kept and "\x0c" not in kept and "return 'nave caf' + x" in kept
