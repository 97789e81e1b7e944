"""SBD training: the loop that minimises the paper's objective (``objective.sbd_loss``), through Accelerate.

``train`` runs it, from scratch (``--preset``) or as a fine-tune of any HF causal LM folder (``--base``); ``main`` is
its command line. Its schedule, checkpoints, and several processes through Accelerate: docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from .data import MIXES
from .objective import sbd_loss
from .options import add_config_arguments, torch_threads
from .upscale import deepen_layers, widen_model

# Model shapes for from-scratch runs. "char-5m" is the shipped model's shape (its card; why this size:
# docs/model_history.md); "test-1m" is for tests and smoke runs.
PRESETS: dict[str, dict[str, Any]] = {  # LlamaConfig keyword arguments
    "char-5m": dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=704),
    "char-10m": dict(hidden_size=320, num_hidden_layers=8, num_attention_heads=5, intermediate_size=896),
    "test-1m": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=352),
}


@dataclass
class TrainConfig:
    out: str = "runs/char-5m"
    preset: str = "char-5m"
    base: str | None = None
    seq_len: int = 128
    batch_size: int = 32
    lr: float = 1.5e-3
    min_lr_frac: float = 0.1
    warmup: int = 100
    max_steps: int = 5200  # about the shipped model's from-scratch run (5,202 steps, its card)
    time_budget_min: float = 0.0  # > 0: the schedule also ends after this many minutes
    min_block: int = 2
    max_block: int = 16
    seed: int = 0
    mix: str = "v3"  # family weights, a key of MIXES
    doc_min_lines: int = 3  # items per training document: long documents fill long windows
    doc_max_lines: int = 8
    distractors: int = 0  # up to this many extra assignments shuffled into each context item's setup
    follow_ups: int = 0  # up to this many more asserts on each context item's assignments
    answers_only: bool = False  # score only the asserts' answers (TrainingStream.answer_slots); prompts stay context
    code_frac: float = 0.0
    code_dir: str | None = None
    ckpt_every_min: float = 10.0
    log_every: int = 25
    probe_per_family: int = 10
    threads: int = 0
    deepen: int = 1  # with --base: repeat each layer this many times (a depth-upscaled copy, see upscale.deepen_layers)
    widen: int = 0  # with --base: widen the hidden size to this (a width-upscaled copy, see upscale.widen_model)
    bf16: bool | None = None  # None: bf16 autocast only where the hardware runs it natively (see bf16_is_native)
    # A run's checkpoint folder: AdamW starts from its moments, so a fine-tune that continues that run keeps the
    # optimizer's memory instead of restarting it from zero (a restart at full lr dips accuracy before it recovers).
    optimizer_from: str | None = None
    # > 0: also keep an exponential moving average of the weights (decay per step), saved as ``final_ema`` beside
    # ``final``, starting from the run's first weights. The average keeps NTP's gains with less of the raw
    # weights' drift on the masked side; the shipped model is such an average.
    ema_decay: float = 0.0
    # > 0 departs from the paper: this share of the rows is masked as the decoder leaves a block between calls
    # (each block's first slots committed, the rest masked; objective.mask_copy) instead of i.i.d.
    prefix_frac: float = 0.0

    def validate(self):
        if self.preset not in PRESETS and not self.base:
            raise ValueError(f"preset: unknown preset {self.preset!r}; choose from {sorted(PRESETS)}")
        if not 1 <= self.min_block <= self.max_block:
            raise ValueError(
                f"min_block/max_block: need 1 <= min_block <= max_block, got {self.min_block}, {self.max_block}"
            )
        if self.mix not in MIXES:
            raise ValueError(f"mix: unknown family mix {self.mix!r}; choose from {sorted(MIXES)}")
        if not 1 <= self.doc_min_lines <= self.doc_max_lines:
            raise ValueError(
                f"doc_min_lines/doc_max_lines: need 1 <= min <= max, got {self.doc_min_lines}, {self.doc_max_lines}"
            )
        if self.deepen > 1 and not self.base:
            raise ValueError("deepen: only a --base model can be deepened (a preset sets its own depth)")
        if self.widen and not self.base:
            raise ValueError("widen: only a --base model can be widened (a preset sets its own width)")
        if self.widen < 0:
            raise ValueError(f"widen: must be >= 0 (0 keeps the width), got {self.widen}")
        if self.optimizer_from and (not self.base or self.deepen > 1 or self.widen):
            raise ValueError("optimizer_from: needs --base with the checkpoint's own shape (no deepen or widen)")
        if self.optimizer_from and not (Path(self.optimizer_from) / "optimizer.safetensors").exists():
            raise ValueError(
                f"optimizer_from: no optimizer.safetensors in {self.optimizer_from!r} (give a run's checkpoint folder)"
            )
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay: need 0 <= ema_decay < 1 (0 keeps no average), got {self.ema_decay}")
        if not 0.0 <= self.prefix_frac <= 1.0:
            raise ValueError(
                f"prefix_frac: need 0 <= prefix_frac <= 1 (0 is the paper's masking), got {self.prefix_frac}"
            )
        if self.answers_only and self.code_frac > 0:
            raise ValueError("answers_only: code documents hold no asserts to score; use code_frac 0 with it")
        for name in ("distractors", "follow_ups"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")
        for name in ("seq_len", "batch_size", "max_steps", "log_every", "deepen"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")


def bf16_is_native() -> bool:
    """Whether bf16 autocast runs natively here: a CUDA GPU with bf16, or a CPU with AVX-512 BF16 or AMX.

    Elsewhere it is emulated: on this project's AVX2 CPU a step cost 65 s in bf16 against 2.3 s in fp32
    (measured side by side, 32 x 128 characters), so the default is fp32 there.
    """
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # private, so looked up with care
    return any(getattr(cpu, name, lambda: False)() for name in checks)


def _new_model(cfg: TrainConfig):
    from transformers import LlamaConfig, LlamaForCausalLM

    from .data import build_char_tokenizer

    tok = build_char_tokenizer()
    # LlamaConfig takes rope_theta and attn_implementation through PreTrainedConfig's **kwargs, which its dataclass
    # __init__ (as transformers declares it) does not show
    config = LlamaConfig(  # type: ignore[call-arg]
        vocab_size=len(tok),
        max_position_embeddings=max(512, cfg.seq_len),
        tie_word_embeddings=True,
        rope_theta=10000.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        attn_implementation="sdpa",
        **PRESETS[cfg.preset],
    )
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(config)
    model.config.mask_token_id = tok.mask_token_id
    return model, tok


def _base_model(cfg: TrainConfig):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..models import causal_lm
    from ..models.sbd_model import add_mask_token

    assert cfg.base is not None  # a run from a base model
    if causal_lm.is_named(cfg.base) or str(cfg.base).endswith(".gguf"):  # e.g. smollm2-135m: its converted copy
        loaded = causal_lm.load(cfg.base)
        model, tok = loaded.model, loaded.tokenizer
    else:
        tok = AutoTokenizer.from_pretrained(cfg.base)
        model = AutoModelForCausalLM.from_pretrained(cfg.base, dtype=torch.float32, attn_implementation="sdpa")
    add_mask_token(model, tok)
    return model, tok


def trained_context(model, cfg: TrainConfig) -> int:
    """The context (positions) the model will have been trained on, recorded in its config.

    A from-scratch model knows ``seq_len`` positions. A base model keeps what it knew before
    (its recorded ``sbd_context_length``, else ``max_position_embeddings``) or ``seq_len`` if
    longer, never more than its position table.
    """
    limit = getattr(model.config, "max_position_embeddings", None) or cfg.seq_len
    if not cfg.base:
        return min(cfg.seq_len, limit)
    before = getattr(model.config, "sbd_context_length", None) or limit
    return min(limit, max(cfg.seq_len, before))


def _lr_factor(cfg: TrainConfig, step: int, elapsed: float) -> tuple[float, float]:
    """(lr multiplier, schedule progress in [0, 1]): linear warmup, cosine to ``min_lr_frac``."""
    progress = step / cfg.max_steps
    if cfg.time_budget_min > 0:
        progress = max(progress, elapsed / (60 * cfg.time_budget_min))
    progress = min(progress, 1.0)
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup, progress
    cos = 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.min_lr_frac + (1 - cfg.min_lr_frac) * cos, progress


def _save_checkpoint(path: Path, model, tok, optimizer, state: dict, ema=None):
    """Weights, tokenizer, optimizer moments (and the weight average) as safetensors, counters as JSON (no pickle).

    Written into a sibling folder and swapped in whole: a run killed while saving (a session's end kills its
    processes at any moment) keeps its last complete checkpoint instead of one with some files a save newer.
    """
    tmp = _sibling(path, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    save_moments(tmp / "optimizer.safetensors", dict(model.named_parameters()), optimizer, state)
    if ema:
        ema.save(tmp / "ema.safetensors")
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    swap_in(tmp, path)


def swap_in(tmp: Path, path: Path) -> None:
    """Put the whole folder ``tmp`` in the place of ``path``: the old one is renamed aside first, so a kill between
    the two renames leaves it under ``.old`` (``restore_interrupted_save`` puts it back), never half a folder."""
    old = _sibling(path, "old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(f"{path.name}.{suffix}")


def restore_interrupted_save(path: Path):
    """Put back the last checkpoint of a run killed between the two renames of a save (it sits under the
    ``.old`` name). A ``.tmp`` folder is an unfinished save and is never read."""
    old = _sibling(path, "old")
    if not (path / "state.json").exists() and (old / "state.json").exists():
        shutil.rmtree(path, ignore_errors=True)
        old.rename(path)


def _load_checkpoint(path: Path, model, optimizer) -> dict:
    from safetensors.torch import load_file

    state = json.loads((path / "state.json").read_text())
    weights = load_file(str(path / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # Tied embeddings are stored once; anything else missing is a real mismatch.
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise ValueError(f"checkpoint {path}: weights do not match the model ({missing[:3]}, {unexpected[:3]})")
    if model.config.tie_word_embeddings:
        model.tie_weights()
    _load_moments(path, model, optimizer)
    return state


def save_moments(file: Path, named: dict, optimizer, state: dict) -> None:
    """Write ``optimizer``'s AdamW moments of the parameters in ``named`` (name -> parameter) to ``file``
    (safetensors, by name); their step count goes into ``state["adam_step"]``."""
    from safetensors.torch import save_file

    names = {id(p): n for n, p in named.items()}
    moments = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            st = optimizer.state.get(p)
            if st:
                moments[names[id(p)] + ".exp_avg"] = st["exp_avg"].contiguous()
                moments[names[id(p)] + ".exp_avg_sq"] = st["exp_avg_sq"].contiguous()
                state["adam_step"] = float(st["step"])
    save_file(moments, str(file))


def load_moments(file: Path, named: dict, optimizer, adam_step: float) -> None:
    """Put the AdamW moments ``save_moments`` wrote to ``file`` into ``optimizer``, by parameter name."""
    from safetensors.torch import load_file

    moments = load_file(str(file))
    for name, p in named.items():
        if name + ".exp_avg" in moments:
            if moments[name + ".exp_avg"].shape != p.shape:
                raise ValueError(
                    f"checkpoint {file.parent}: its optimizer moments for {name} do not fit the model's shape"
                )
            optimizer.state[p] = {
                "step": torch.tensor(adam_step),
                "exp_avg": moments[name + ".exp_avg"],
                "exp_avg_sq": moments[name + ".exp_avg_sq"],
            }


def _load_moments(path: Path, model, optimizer) -> float:
    """Put a checkpoint's AdamW moments into ``optimizer``, by parameter name; returns their step count."""
    adam_step = json.loads((path / "state.json").read_text())["adam_step"]
    load_moments(path / "optimizer.safetensors", dict(model.named_parameters()), optimizer, adam_step)
    return adam_step


class WeightAverage:
    """An exponential moving average of a model's parameters, in fp32, by parameter name."""

    def __init__(self, model, decay: float):
        self.decay = decay
        self.params = dict(model.named_parameters())  # tied weights appear once
        self.average = {n: p.detach().float().clone() for n, p in self.params.items()}

    @torch.no_grad()
    def update(self):
        for name, p in self.params.items():
            self.average[name].lerp_(p.detach().float(), 1.0 - self.decay)

    def save(self, path: Path):
        from safetensors.torch import save_file

        save_file({n: t.contiguous() for n, t in self.average.items()}, str(path))

    def load(self, path: Path):
        from safetensors.torch import load_file

        saved = load_file(str(path))
        if saved.keys() != self.average.keys() or any(saved[n].shape != t.shape for n, t in self.average.items()):
            raise ValueError(f"{path}: its weight average does not fit the model")
        self.average = {n: t.float() for n, t in saved.items()}

    @torch.no_grad()
    def copy_to_model(self):
        """Overwrite the model's parameters with the average (done once, after the raw weights are saved)."""
        for name, p in self.params.items():
            p.copy_(self.average[name].to(p.dtype))


def _accelerator(cfg: TrainConfig):
    """The run's Accelerator, at the run's own precision. Accelerate keeps one state per process and refuses a
    second Accelerator at another precision: a notebook that ran lm-eval's ``hf`` model or an earlier run in the
    other precision would make this run fail. So a run in such a process clears that state first, as accelerate's
    own test cases do between tests. A launched run (``accelerate launch``) builds its first Accelerator here and
    never takes that path."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, is_initialized

    precision = "bf16" if cfg.bf16 else "no"
    if is_initialized() and AcceleratorState().mixed_precision != precision:
        AcceleratorState._reset_state()  # private, but the one way accelerate offers; the process's device stays
    return Accelerator(cpu=not torch.cuda.is_available(), mixed_precision=precision)


def train(cfg: TrainConfig, probe: Callable[[Any, Any, int], dict] | None = None) -> Path:
    """Train (or resume) into ``cfg.out``; returns the folder holding the final model. ``probe(model, tokenizer,
    per_family)`` measures each checkpoint (``sbd-viz train`` passes ``sbd_viz.analysis.evaluation.training_probe``);
    None: no probe."""
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    from .data import TrainingStream, code_documents

    cfg.validate()
    if cfg.bf16 is None:
        cfg = replace(cfg, bf16=bf16_is_native())  # resolved here, so logs and checkpoints record the choice
    hf_logging.disable_progress_bar()  # per-save progress bars would flood the training log
    acc = _accelerator(cfg)
    torch.set_num_threads(torch_threads(cfg.threads, acc.num_processes))
    out, ckpt = Path(cfg.out), Path(cfg.out) / "checkpoint"
    model, tok = _base_model(cfg) if cfg.base else _new_model(cfg)
    if cfg.deepen > 1:
        deepen_layers(model, cfg.deepen)
    if cfg.widen:
        model = widen_model(model, cfg.widen)
    model.config.sbd_context_length = trained_context(model, cfg)  # saved with every checkpoint
    mask_id = model.config.mask_token_id
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    adamw = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    state: dict[str, Any] = {"step": 0, "elapsed": 0.0, "tokens": 0, "config": asdict(cfg)}
    if acc.is_main_process:  # one rank renames, before any rank looks for the checkpoint
        restore_interrupted_save(ckpt)
    acc.wait_for_everyone()
    if (ckpt / "state.json").exists():
        state = _load_checkpoint(ckpt, model, adamw)
        acc.print(f"resumed from {ckpt} at step {state['step']} ({state['elapsed'] / 60:.1f} min)")
    elif cfg.optimizer_from:
        adam_step = _load_moments(Path(cfg.optimizer_from), model, adamw)
        acc.print(f"AdamW moments from {cfg.optimizer_from} ({adam_step:.0f} steps)")
    # The prepared optimizer wraps ``adamw`` itself (its state is moved in place), so checkpoints read ``adamw``.
    model, optimizer = acc.prepare(model, adamw)
    raw = acc.unwrap_model(model)
    ema = WeightAverage(raw, cfg.ema_decay) if cfg.ema_decay > 0 else None
    if ema and state["step"] > 0:  # a resume: the average goes on from the checkpoint's
        if (ckpt / "ema.safetensors").exists():
            ema.load(ckpt / "ema.safetensors")
        else:
            acc.print(f"no weight average in {ckpt}: it starts from the weights at step {state['step']}")
    code = code_documents(cfg.code_dir) if cfg.code_frac > 0 else None
    stream = TrainingStream(
        tok,
        cfg.seq_len,
        cfg.seed,
        acc.process_index,
        MIXES[cfg.mix],
        code,
        cfg.code_frac,
        (cfg.doc_min_lines, cfg.doc_max_lines),
        cfg.distractors,
        cfg.follow_ups,
    )
    log_path = out / "train_log.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    acc.print(f"params {sum(p.numel() for p in raw.parameters()):,}; config {json.dumps(asdict(cfg))}")

    step, t0, last_ckpt = state["step"], time.time() - state["elapsed"], time.time()
    ntp_hist, matp_hist = [], []
    logged = step  # the last step with a log line
    bar = tqdm(total=cfg.max_steps, initial=step, disable=not acc.is_main_process, mininterval=30)
    model.train()
    while True:
        factor, progress = _lr_factor(cfg, step, time.time() - t0)
        if progress >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * factor
        # Block size and mask draws depend only on (seed, step): a resumed run continues exactly.
        k = random.Random(f"{cfg.seed}-k-{step}").randint(cfg.min_block, cfg.max_block)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step * 101 + acc.process_index)
        with acc.autocast():
            seq = stream.batch(step, cfg.batch_size)
            loss_on = stream.answer_slots(seq) if cfg.answers_only else None
            loss, ntp, matp = sbd_loss(model, seq, mask_id, k, gen, loss_on, cfg.prefix_frac)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if ema:
            ema.update()
        step += 1
        state["tokens"] += cfg.batch_size * cfg.seq_len * acc.num_processes
        ntp_hist.append(ntp.item())
        matp_hist.append(matp.item())
        bar.update(1)
        if step % cfg.log_every == 0 and acc.is_main_process:
            logged = _log(bar, log_path, cfg, step, t0, factor, ntp_hist, matp_hist, state, logged)
        if time.time() - last_ckpt > 60 * cfg.ckpt_every_min:
            last_ckpt = _checkpoint(acc, cfg, ckpt, raw, tok, adamw, ema, state, step, t0, log_path, model, probe)
    bar.close()
    if step > logged and acc.is_main_process:  # a time budget can end between log lines: log the rest
        _log(bar, log_path, cfg, step, t0, factor, ntp_hist, matp_hist, state, logged)
    _checkpoint(acc, cfg, ckpt, raw, tok, adamw, ema, state, step, t0, log_path, model, probe)
    if acc.is_main_process:
        raw.save_pretrained(out / "final")
        tok.save_pretrained(out / "final")
        if ema:
            ema.copy_to_model()
            raw.save_pretrained(out / "final_ema")
            tok.save_pretrained(out / "final_ema")
    acc.wait_for_everyone()
    acc.end_training()  # destroys a launch's process group before exit (a live gloo group can abort a rank there)
    return out / "final"


def _log(bar, log_path, cfg, step, t0, factor, ntp_hist, matp_hist, state, logged) -> int:
    """One log line: the mean losses of the steps since the last line; returns ``step``."""
    n = min(step - logged, len(ntp_hist))  # fewer right after a resume
    rec = {
        "step": step,
        "min": round((time.time() - t0) / 60, 2),
        "lr": cfg.lr * factor,
        "ntp": sum(ntp_hist[-n:]) / n,
        "matp": sum(matp_hist[-n:]) / n,
        "tokens": state["tokens"],
    }
    bar.write(json.dumps(rec))
    with log_path.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    return step


def _checkpoint(
    acc,
    cfg,
    ckpt,
    raw,
    tok,
    optimizer,
    ema,
    state,
    step,
    t0,
    log_path,
    model,
    probe: Callable[[Any, Any, int], dict] | None,
) -> float:
    state.update(step=step, elapsed=time.time() - t0)
    if acc.is_main_process:
        _save_checkpoint(ckpt, raw, tok, optimizer, state, ema)
        if probe is not None and cfg.probe_per_family > 0:
            model.eval()
            try:
                rec = {"step": step, "probe": probe(raw, tok, cfg.probe_per_family)}
            except Exception as exc:  # the probe must never kill a long run
                rec = {"step": step, "probe_error": repr(exc)}
            model.train()
            acc.print(json.dumps(rec))
            with log_path.open("a") as f:
                f.write(json.dumps(rec) + "\n")
    acc.wait_for_everyone()
    return time.time()


HELP = {
    "out": "run folder: checkpoint/ (resumed from), final/ (the model), train_log.jsonl",
    "preset": f"model shape of a from-scratch run: one of {', '.join(PRESETS)}",
    "base": "fine-tune this causal LM folder instead of a preset (the paper's recipe on a pretrained model)",
    "seq_len": "tokens per training window",
    "batch_size": "windows per step",
    "lr": "AdamW peak learning rate (after warm-up; cosine decay follows)",
    "min_lr_frac": "the cosine schedule ends at lr times this",
    "warmup": "steps of linear warm-up",
    "max_steps": "steps of the schedule (the shipped character model ran 5,202)",
    "time_budget_min": "also end the schedule after this many minutes (0: no limit)",
    "min_block": "smallest block size drawn per step (the paper draws k from 2..16)",
    "max_block": "largest block size drawn per step",
    "seed": "seed of the data, the masks and the initial weights",
    "mix": f"task-family weights of the character data: one of {', '.join(MIXES)}",
    "doc_min_lines": "fewest items per training document (long documents fill long windows)",
    "doc_max_lines": "most items per training document",
    "distractors": "up to this many extra assignments shuffled into each context item's setup",
    "follow_ups": "up to this many more asserts on each context item's assignments",
    "answers_only": "score only the asserts' answers; the prompts stay context",
    "code_frac": "share of windows drawn from Python source files (--code-dir) instead of the task families",
    "code_dir": "folder of .py files for --code-frac (default: this interpreter's standard library)",
    "ckpt_every_min": "minutes between checkpoints",
    "log_every": "steps between log lines",
    "probe_per_family": "held-out items per task family in the accuracy probe at each checkpoint",
    "threads": "torch threads per process (0: OMP_NUM_THREADS if it is set, else the cores divided among the "
    "processes)",
    "deepen": "with --base: repeat each layer this many times (a depth-upscaled copy)",
    "widen": "with --base: widen the hidden size to this (0 keeps the width)",
    "bf16": "bfloat16 autocast (left out: only where the hardware runs it natively)",
    "optimizer_from": "a run's checkpoint folder whose AdamW moments this run starts from",
    "ema_decay": "> 0: also keep and save (final_ema) a moving average of the weights with this decay per step",
    "prefix_frac": "share of rows masked as a decode leaves a block (a written prefix) instead of the paper's i.i.d. "
    "masks",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p, TrainConfig, HELP)


def main(argv=None, probe: Callable[[Any, Any, int], dict] | None = None) -> None:
    p = argparse.ArgumentParser(prog="sbd-viz train", description=__doc__.split("\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    print(train(TrainConfig(**vars(args)), probe))
