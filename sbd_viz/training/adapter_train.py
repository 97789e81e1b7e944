"""Train a gated SBD adapter (``sbd_viz.models.gated_adapter``) on a frozen causal LM, by self-distillation.

``sbd-viz train --adapter --out runs/sbd-adapter`` (options: ``--help``); ``train`` runs it, ``probe`` is its held-out
probe. What a run does, step by step: docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from ..models import gated_adapter
from . import distill
from .options import add_config_arguments, check_options, option, torch_threads
from .train import load_moments, restore_interrupted_save, save_moments, swap_in

LOSSES = ("ce", "kl")


@dataclass
class AdapterTrainConfig:
    # the base and where the run lives
    base: str = option("smollm2-135m", "the frozen base: a named model (smollm2-135m) or a causal LM folder")
    out: str = option(
        "runs/sbd-adapter",
        "run folder: data/ (cached continuations), checkpoint/ (resumed from), final/ (the adapter), log.jsonl",
    )
    # the adapter
    rank: int = option(16, "LoRA rank of every adapted layer")
    alpha: float = option(32.0, "LoRA scale numerator (the update is multiplied by alpha / rank)")
    targets: str = option(
        ",".join(gated_adapter.TARGETS), "comma-separated linear layers to adapt (last part of their names)"
    )
    block_sizes: str = option("4,8", "comma-separated block sizes to train on; each sequence draws one")
    decode_block_size: int = option(
        4, "the block size the adapter's model decodes with by default (recorded in its settings)"
    )
    # the data: prompts and the base's greedy continuations
    chat_prompts: int = option(1500, "chat questions in the data (templates x topics, through the chat template)")
    code_prompts: int = option(2500, "standard-library signatures + docstrings in the data")
    proposed_prompts: int = option(
        0,
        "questions the base proposes itself (sampled as a numbered list, none on a "
        "held-out subject), through the chat template",
    )
    probe_prompts: int = option(24, "held-out prompts of each kind for the probe (never trained on)")
    new_tokens: int = option(64, "greedy tokens generated per prompt (the training targets)", least=1)
    max_prompt_tokens: int = option(256, "prompts longer than this are cut from the left for training")
    data_seed: int = option(0, "seed that draws the prompts")
    # the steps
    batch_size: int = option(8, "sequences per step", least=1)
    lr: float = option(1e-3, "AdamW learning rate (after warm-up; constant)")
    warmup: int = option(20, "steps of linear warm-up (also after a resume: the optimizer's moments restart warm)")
    loss: str = option(
        "ce",
        "the masked slots' loss: ce (cross-entropy on the base's greedy ids) or kl (KL "
        "divergence from the base's next-token distribution at that position)",
        choices=LOSSES,
    )
    decode_like: float = option(
        0.5, "share of blocks masked as a decode leaves them (a written prefix), the rest as the paper trains"
    )
    bf16: bool = option(
        False, "run the forwards in bfloat16 autocast (measured slower than float32 on this CPU: 12.5 s vs 5 s a step)"
    )
    # how long, how often
    max_steps: int = option(100000, "stop after this many steps in all (resumed runs count from the checkpoint)")
    time_budget_min: float = option(0.0, "stop after this many minutes of this run (0: no limit)")
    save_every: int = option(25, "steps between checkpoints", least=1)
    probe_every: int = option(100, "steps between held-out probes", least=1)
    # the machine
    threads: int = option(0, "torch threads (0: OMP_NUM_THREADS if it is set, else every core)")
    seed: int = option(0, "seed of the data order and the masks")
    device: str = option(
        "cpu", "where the base and the adapter run: cpu, cuda, cuda:1, ... (the data is generated there too)"
    )

    def validate(self):
        if not self.ks():
            raise ValueError("block_sizes: give at least one block size, e.g. 4,8")
        if any(k < 2 or k > 64 for k in self.ks()):
            raise ValueError(f"block_sizes: each must be in [2, 64], got {self.block_sizes!r}")
        if not 0 <= self.decode_like <= 1:
            raise ValueError(f"decode_like: must be in [0, 1], got {self.decode_like}")
        check_options(self)
        if self.threads < 0:
            raise ValueError(f"threads: must be >= 0 (0: OMP_NUM_THREADS, else every core), got {self.threads}")
        gated_adapter.AdapterConfig(rank=self.rank, targets=tuple(self.targets.split(",")))

    def ks(self) -> list[int]:
        return [int(k) for k in str(self.block_sizes).split(",") if k.strip()]


# -- data ---------------------------------------------------------------------------------------------
def prompt_sets(cfg: AdapterTrainConfig, tokenizer) -> dict[str, list[str]]:
    """Training and probe prompts of each kind, templated; the probe's are drawn past the training ones."""
    chat = [
        distill.as_chat(tokenizer, q) for q in distill.chat_prompts(cfg.chat_prompts + cfg.probe_prompts, cfg.data_seed)
    ]
    code = distill.code_prompts(cfg.code_prompts + cfg.probe_prompts, cfg.data_seed)
    if len(code) < cfg.code_prompts + cfg.probe_prompts:
        raise ValueError(
            f"code_prompts: this interpreter's standard library has {len(code)} documented functions, "
            f"fewer than {cfg.code_prompts} + {cfg.probe_prompts}"
        )
    sets = {
        "chat": chat[: cfg.chat_prompts],
        "code": code[: cfg.code_prompts],
        "probe_chat": chat[cfg.chat_prompts :],
        "probe_code": code[cfg.code_prompts :],
    }
    distill.check_held_out(sets["chat"], [distill.as_chat(tokenizer, q) for q in distill.HELDOUT_CHAT])
    distill.check_held_out(sets["chat"] + sets["code"], sets["probe_chat"] + sets["probe_code"], topics=False)
    return sets


def load_data(cfg: AdapterTrainConfig, model, tokenizer, log) -> dict[str, list[dict]]:
    """Each set's rows (prompt ids, greedy continuation ids), generated where the cache lacks them."""
    folder = Path(cfg.out) / "data"
    folder.mkdir(parents=True, exist_ok=True)
    data = {}
    sets = prompt_sets(cfg, tokenizer)
    if cfg.proposed_prompts:
        # none that the templates also ask, none of the held-out or probe questions
        known = distill.chat_prompts(cfg.chat_prompts + cfg.probe_prompts, cfg.data_seed) + distill.HELDOUT_CHAT
        questions = distill.proposed_questions(
            model,
            tokenizer,
            cfg.proposed_prompts,
            folder / "proposed_questions.jsonl",
            seed=cfg.data_seed,
            exclude=known,
            log=lambda s: log(f"proposed: {s}"),
        )
        sets["proposed"] = [distill.as_chat(tokenizer, q) for q in questions]
        distill.check_held_out(sets["proposed"], sets["probe_chat"], topics=False)
    for name, prompts in sets.items():
        data[name] = distill.generate_continuations(
            model,
            tokenizer,
            prompts,
            folder / f"{name}.jsonl",
            cfg.new_tokens,
            32,
            log=lambda s, n=name: log(f"{n}: {s}"),
        )
    return data


# -- one batch of masked blocks -------------------------------------------------------------------------
@dataclass
class Batch:
    ids: torch.Tensor  # (B, L) clean sequences, right-padded
    lengths: list[int]
    block_ids: torch.Tensor  # (B, Q) the blocks' slots: mask id or the revealed token
    positions: torch.Tensor  # (B, Q)
    mask: torch.Tensor  # (B, 1, Q, L + Q) bool: what each block row attends to
    gate: torch.Tensor  # (B, Q) bool: rows of a real block
    targets: torch.Tensor  # (B, Q) the greedy id a masked slot must predict, -100 elsewhere
    slot: torch.Tensor  # (B, Q) each row's slot index in its block


def block_masks(k: int, rng: random.Random, decode_like: float) -> list[bool]:
    """Which of a block's k slots are masked: as a decode leaves a block (a written prefix of c slots, c = 0 half
    the time), or as the paper trains (each slot masked at one rate drawn for the block). At least one."""
    if rng.random() < decode_like:
        c = 0 if rng.random() < 0.5 else rng.randrange(1, k)
        return [i >= c for i in range(k)]
    rate = rng.random()
    masked = [rng.random() < rate for _ in range(k)]
    if not any(masked):
        masked[rng.randrange(k)] = True
    return masked


def make_batch(
    rows: list[dict],
    k_choices: list[int],
    mask_id: int,
    rng: random.Random,
    decode_like: float,
    max_prompt_tokens: int,
    full_blocks: int | None = None,
) -> Batch:
    """Tile each row's continuation with blocks (a random offset, so blocks start anywhere) and mask them.
    ``full_blocks``: every block of that size fully masked (the probe)."""
    seqs, starts_of, masks_of, ks = [], [], [], []
    for row in rows:
        prompt = row["prompt_ids"][-max_prompt_tokens:]
        seq = prompt + row["ids"]
        k = full_blocks or rng.choice(k_choices)
        P, n = len(prompt), len(seq)
        first = max(0, P + rng.randrange(k) - k + 1) if full_blocks is None else P
        starts = list(range(first, n, k))
        masks = [[True] * k if full_blocks else block_masks(k, rng, decode_like) for _ in starts]
        seqs.append(seq)
        starts_of.append(starts)
        masks_of.append(masks)
        ks.append(k)
    B, L = len(seqs), max(len(s) for s in seqs)
    Q = max(len(st) * k for st, k in zip(starts_of, ks))
    ids = torch.zeros(B, L, dtype=torch.long)
    block_ids = torch.full((B, Q), mask_id, dtype=torch.long)
    positions = torch.zeros(B, Q, dtype=torch.long)
    mask = torch.zeros(B, 1, Q, L + Q, dtype=torch.bool)
    mask[:, 0, :, 0] = True  # padding rows see the first token (a row that sees nothing gives NaN)
    gate = torch.zeros(B, Q, dtype=torch.bool)
    targets = torch.full((B, Q), -100, dtype=torch.long)
    slot = torch.full((B, Q), -1, dtype=torch.long)
    for b, (seq, starts, masks, k) in enumerate(zip(seqs, starts_of, masks_of, ks)):
        ids[b, : len(seq)] = torch.tensor(seq)
        P = len(seq) - len(rows[b]["ids"])
        for j, (s, masked) in enumerate(zip(starts, masks)):
            r0 = j * k
            for i in range(k):
                pos, r = s + i, r0 + i
                positions[b, r] = pos
                gate[b, r] = True
                slot[b, r] = i
                mask[b, 0, r, : max(0, min(s, len(seq)))] = True  # the clean prefix before the block
                mask[b, 0, r, L + r0 : L + r0 + k] = True  # the block's own slots
                in_text = 0 <= pos < len(seq)
                if pos < P or (
                    in_text and not masked[i]
                ):  # a prompt position inside the first block: written, never a target
                    block_ids[b, r] = seq[pos]
                elif in_text:
                    targets[b, r] = seq[pos]
    return Batch(ids, [len(s) for s in seqs], block_ids, positions, mask, gate, targets, slot)


def block_logits(model, gate: gated_adapter.Gate, batch: Batch, bf16: bool, teacher: bool = False):
    """(B, Q, V) logits of the batch's block rows: the clean sequences run once through the base (no gradient),
    then the blocks on top of their cache with the adapter on. With ``teacher``: (those logits, the base's own
    next-token logits for each scored row, ``(N, V)`` in the order of ``batch.targets >= 0``), the clean pass's
    at position j - 1 for the row at position j (its head applied to the last hidden state: a model whose logits
    are more than that, e.g. soft-capped, is not supported)."""
    from transformers import DynamicCache

    device = model.device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    cache = DynamicCache(config=model.config)
    ids = batch.ids.to(device)
    with torch.no_grad(), autocast:
        if teacher:
            hidden = model.base_model(input_ids=ids, past_key_values=cache, use_cache=True).last_hidden_state
            b, r = (batch.targets >= 0).nonzero(as_tuple=True)
            rows = hidden[b.to(device), batch.positions[b, r].to(device) - 1]
            base_logits = model.get_output_embeddings()(rows).float()
        else:
            model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    with autocast, gate.on(rows=batch.gate.to(device)):
        out = model(
            input_ids=batch.block_ids.to(device),
            attention_mask=batch.mask.to(device),
            position_ids=batch.positions.to(device),
            past_key_values=cache,
            use_cache=True,
        )
    logits = out.logits.float()  # (B, Q, V), on the model's device
    return (logits, base_logits) if teacher else logits


def slot_loss(logits: torch.Tensor, batch: Batch, loss: str, base_logits: torch.Tensor | None = None):
    """The training loss over the scored (masked, in-text) rows: ``ce`` against the base's greedy ids, or ``kl``:
    KL(base || adapter) per row, averaged (``base_logits`` from ``block_logits(..., teacher=True)``)."""
    scored = batch.targets.to(logits.device) >= 0
    if loss == "ce":
        return torch.nn.functional.cross_entropy(logits[scored], batch.targets.to(logits.device)[scored])
    if loss == "kl":
        assert base_logits is not None, "kl: needs the base's logits (block_logits(..., teacher=True))"
        return torch.nn.functional.kl_div(
            torch.log_softmax(logits[scored], -1),
            torch.log_softmax(base_logits, -1),
            log_target=True,
            reduction="batchmean",
        )
    raise ValueError(f"loss: must be one of {', '.join(LOSSES)}, got {loss!r}")


# -- the probe ------------------------------------------------------------------------------------------
@torch.no_grad()
def probe(model, gate, rows: list[dict], k: int, mask_id: int, bf16: bool, batch_size: int = 8) -> dict:
    """Fully masked blocks of ``k`` tiling each held-out continuation from its first token: per-slot argmax
    accuracy against the base's greedy ids, and ``single_tpc``: verified SBD's tokens per call if each call's
    first slot is NTP's own token and the drafts after it are kept up to the first wrong one."""
    hits = torch.zeros(k)
    seen = torch.zeros(k)
    runs = []
    rng = random.Random(0)
    for i in range(0, len(rows), batch_size):
        batch = make_batch(rows[i : i + batch_size], [k], mask_id, rng, 1.0, 10**9, full_blocks=k)
        logits = block_logits(model, gate, batch, bf16).cpu()
        right = (logits.argmax(-1) == batch.targets) & (batch.targets >= 0)
        valid = batch.targets >= 0
        for s in range(k):
            hits[s] += right[batch.slot == s].sum()
            seen[s] += valid[batch.slot == s].sum()
        B, Q = right.shape
        for b in range(B):
            for r0 in range(0, Q, k):
                if not bool(valid[b, r0 : r0 + k].all()):
                    continue
                run = 1
                for s in range(1, k):
                    if not bool(right[b, r0 + s]):
                        break
                    run += 1
                runs.append(run)
    acc = (hits / seen.clamp(min=1)).tolist()
    return {
        "slot_accuracy": [round(a, 4) for a in acc],
        "single_tpc": round(sum(runs) / max(1, len(runs)), 4),
        "blocks": len(runs),
    }


# -- checkpoints -----------------------------------------------------------------------------------------
def save_checkpoint(folder: Path, model, config, optimizer, state: dict):
    """The adapter (float32), AdamW's moments and the counters, written beside and swapped in whole."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    gated_adapter.save(model, config, tmp, dtype=torch.float32)
    save_moments(tmp / "optimizer.safetensors", gated_adapter.adapter_state(model), optimizer, state)
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    swap_in(tmp, folder)


def restore(folder: Path, model, optimizer) -> dict:
    """Load a checkpoint (or a resume point with the adapter alone: its moments then restart, with the warm-up)."""
    from safetensors.torch import load_file

    restore_interrupted_save(folder)  # a run killed between a save's two renames
    saved = load_file(str(folder / gated_adapter.WEIGHTS))
    own = gated_adapter.adapter_state(model)
    with torch.no_grad():
        for name, p in own.items():
            p.copy_(saved[name].float())
    if (folder / "state.json").exists():
        state = json.loads((folder / "state.json").read_text())
    else:  # a resume point (e.g. the shipped adapter): its settings record how far it was trained
        extra = gated_adapter.read_config(folder).extra
        state = {
            "step": int(extra.get("steps", 0)),
            "tokens": int(extra.get("scored_tokens", 0)),
            "seconds": float(extra.get("train_seconds", 0.0)),
            "epoch": int(extra.get("epoch", 0)),
            "position": int(extra.get("position", 0)),
            "data": extra.get("data"),
            "seed": extra.get("seed"),
        }
    moments_file = folder / "optimizer.safetensors"
    if moments_file.exists() and "adam_step" in state:
        load_moments(moments_file, own, optimizer, state["adam_step"])
        state["warm"] = True
    return state


# -- the run ---------------------------------------------------------------------------------------------
def train(cfg: AdapterTrainConfig, resume_from: str | None = None) -> Path:
    from ..models import causal_lm

    cfg.validate()
    torch.set_num_threads(torch_threads(cfg.threads))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "log.jsonl"

    def log(message):
        print(message, flush=True)

    base = causal_lm.load(cfg.base, device=torch.device(cfg.device) if cfg.device != "cpu" else None)
    model, tok = base.model, base.tokenizer
    data = load_data(cfg, model, tok, log)
    train_rows = data["chat"] + data["code"] + data.get("proposed", [])
    probe_rows = {"chat": data["probe_chat"], "code": data["probe_code"]}

    config = gated_adapter.AdapterConfig(
        rank=cfg.rank, alpha=cfg.alpha, targets=tuple(cfg.targets.split(",")), base=cfg.base
    )
    gate = gated_adapter.attach(model, config)
    mask_id = model.config.mask_token_id
    params = list(gated_adapter.adapter_state(model).values())
    for p in params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    ckpt = out / "checkpoint"
    state = {"step": 0, "tokens": 0, "epoch": 0, "position": 0, "seconds": 0.0}
    source = ckpt if (ckpt / gated_adapter.WEIGHTS).exists() else (Path(resume_from) if resume_from else None)
    if source is not None:
        state.update(keep_order(restore(source, model, optimizer), cfg))
        log(f"resumed from {source} at step {state['step']}")
    warm_from = None if state.pop("warm", False) else state["step"]  # moments rebuilt: warm up again
    rng = random.Random(cfg.seed + 1000 * state["step"])

    def order(epoch):
        idx = list(range(len(train_rows)))
        random.Random(cfg.seed + epoch).shuffle(idx)
        return idx

    idx = order(state["epoch"])
    t_run = time.perf_counter()
    model.train(False)  # no dropout in the base; the adapter has none
    while state["step"] < cfg.max_steps:
        if cfg.time_budget_min and time.perf_counter() - t_run > 60 * cfg.time_budget_min:
            break
        t0 = time.perf_counter()
        if state["position"] + cfg.batch_size > len(idx):
            state["epoch"] += 1
            state["position"] = 0
            idx = order(state["epoch"])
        rows = [train_rows[i] for i in idx[state["position"] : state["position"] + cfg.batch_size]]
        state["position"] += cfg.batch_size
        batch = make_batch(rows, cfg.ks(), mask_id, rng, cfg.decode_like, cfg.max_prompt_tokens)
        if cfg.loss == "kl":
            logits, base_logits = block_logits(model, gate, batch, cfg.bf16, teacher=True)
        else:
            logits, base_logits = block_logits(model, gate, batch, cfg.bf16), None
        targets = batch.targets.to(logits.device)
        scored = targets >= 0
        loss = slot_loss(logits, batch, cfg.loss, base_logits)
        factor = 1.0 if warm_from is None else min(1.0, (state["step"] - warm_from + 1) / cfg.warmup)
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * factor
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        acc = float((logits[scored].argmax(-1) == targets[scored]).float().mean())
        state["step"] += 1
        state["tokens"] += int(scored.sum())
        state["seconds"] += time.perf_counter() - t0
        entry: dict[str, Any] = {
            "step": state["step"],
            "loss": round(float(loss.detach()), 4),
            "acc": round(acc, 4),
            **({"ce": round(float(slot_loss(logits.detach(), batch, "ce")), 4)} if cfg.loss != "ce" else {}),
            "scored": state["tokens"],
            "step_s": round(time.perf_counter() - t0, 2),
            "lr": cfg.lr * factor,
        }
        if state["step"] % cfg.probe_every == 0:
            entry["probe"] = {
                name: probe(model, gate, rows_, cfg.decode_block_size, mask_id, cfg.bf16)
                for name, rows_ in probe_rows.items()
            }
        with log_path.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        log(json.dumps(entry))
        if state["step"] % cfg.save_every == 0:
            save_checkpoint(ckpt, model, _final_config(config, cfg, state), optimizer, state)
    save_checkpoint(ckpt, model, _final_config(config, cfg, state), optimizer, state)
    final = gated_adapter.save(model, _final_config(config, cfg, state), out / "final")
    log(f"saved {final}")
    return final


def data_settings(cfg: AdapterTrainConfig) -> dict:
    """What fixes the training rows (their order in an epoch: these and ``seed``)."""
    return {
        "chat_prompts": cfg.chat_prompts,
        "code_prompts": cfg.code_prompts,
        "proposed_prompts": cfg.proposed_prompts,
        "new_tokens": cfg.new_tokens,
        "data_seed": cfg.data_seed,
    }


def keep_order(state: dict, cfg: AdapterTrainConfig) -> dict:
    """A resume point's place in the data order (epoch, position) holds only for the data it was trained on:
    on other data the new run starts its order at the beginning."""
    data, seed = state.pop("data", None), state.pop("seed", None)
    if (data is not None and data != data_settings(cfg)) or (seed is not None and seed != cfg.seed):
        state["epoch"] = state["position"] = 0
    return state


def _final_config(config, cfg: AdapterTrainConfig, state: dict) -> gated_adapter.AdapterConfig:
    extra = {
        "block_size": cfg.decode_block_size,
        "trained_block_sizes": cfg.ks(),
        "steps": state["step"],
        "scored_tokens": state["tokens"],
        "train_seconds": round(state["seconds"], 1),
        "epoch": state["epoch"],
        "position": state["position"],
        "data": data_settings(cfg),
        "seed": cfg.seed,
        "command": "sbd-viz train --adapter "
        + " ".join(
            f"--{f.name.replace('_', '-')} {getattr(cfg, f.name)}"
            for f in fields(cfg)
            if getattr(cfg, f.name) != f.default and f.name not in ("out", "time_budget_min", "threads", "device")
        ),
    }
    return gated_adapter.AdapterConfig(
        rank=config.rank, alpha=config.alpha, targets=config.targets, base=config.base, extra=extra
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p, AdapterTrainConfig)
    p.add_argument(
        "--resume-from",
        default=None,
        help="an adapter folder to start from when OUT has no checkpoint (e.g. the shipped adapter, "
        "sbd_viz/weights/smollm2-135m-sbd)",
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="sbd-viz train --adapter", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    resume = args.resume_from
    cfg = AdapterTrainConfig(**{f.name: getattr(args, f.name) for f in fields(AdapterTrainConfig)})
    train(cfg, resume_from=resume)


if __name__ == "__main__":
    main()
