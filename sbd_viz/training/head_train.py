"""Train a sampler head (``sbd_viz.models.sampler_head``) on a frozen SBD adapter and its frozen base.

``sbd-viz train --sampler-head --out runs/sampler-head`` (options: ``--help``); ``train`` runs it, ``collect``
gathers the slots it learns from. What a run does, step by step: docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from ..models import gated_adapter, sampler_head
from . import adapter_train
from .options import add_config_arguments, check_options, option, torch_threads
from .train import load_moments, restore_interrupted_save, save_moments, swap_in


@dataclass
class HeadTrainConfig:
    adapter: str = option("smollm2-135m-sbd", "the frozen adapter: a shipped adapter's name or an adapter folder")
    data_from: str = option(
        adapter_train.AdapterTrainConfig.out,  # the adapter run's own default
        "the adapter run's folder: its data/ holds the base's continuations (generated there if missing)",
    )
    out: str = option(
        "runs/sampler-head",
        "run folder: hidden.safetensors (the collected slots), checkpoint/, "
        "final/ (the adapter with its head), log.jsonl",
    )
    width: int = option(1152, "the head's hidden width", least=1)
    block_size: int = option(4, "size of the fully masked blocks that tile each continuation", least=2)
    rows: int = option(0, "continuations to collect from, in a shuffled order (0: all)", least=0)
    epochs: int = option(4, "passes over the collected slots", least=1)
    batch_size: int = option(256, "slots per step", least=1)
    lr: float = option(1e-3, "AdamW learning rate (constant)")
    threads: int = option(0, "torch threads (0: OMP_NUM_THREADS if it is set, else every core)", least=0)
    seed: int = option(0, "seed of the rows' order and the steps' order")


@torch.no_grad()
def collect(model, gate, rows: list[dict], k: int, mask_id: int, batch_size: int = 8, log=print) -> dict:
    """For slot s >= 1 of every fully masked block of ``k`` tiling each row's continuation: ``hidden`` (n, d)
    its final hidden state (float16), ``previous`` (n,) the true token at slot s - 1, ``targets`` (n,) the base's
    greedy token there, ``slot`` (n,) s, ``block`` (n,) a number per block (slots of a block are consecutive)."""
    out: dict[str, list] = {"hidden": [], "previous": [], "targets": [], "slot": [], "block": []}
    rng, n_blocks = random.Random(0), 0
    head_in = model.get_output_embeddings()
    for i in range(0, len(rows), batch_size):
        batch = adapter_train.make_batch(rows[i : i + batch_size], [k], mask_id, rng, 1.0, 10**9, full_blocks=k)
        kept: dict[str, torch.Tensor] = {}
        hook = head_in.register_forward_pre_hook(lambda module, args, kept=kept: kept.update(hidden=args[0]))
        try:
            adapter_train.block_logits(model, gate, batch, bf16=False)
        finally:
            hook.remove()
        scored = (batch.targets >= 0) & (batch.slot >= 1)
        b, r = scored.nonzero(as_tuple=True)
        out["hidden"].append(kept["hidden"][b, r].half().cpu())
        out["previous"].append(batch.ids[b, batch.positions[b, r] - 1])
        out["targets"].append(batch.targets[b, r])
        out["slot"].append(batch.slot[b, r])
        out["block"].append(n_blocks + b * batch.targets.shape[1] + r // k)
        n_blocks += batch.targets.numel()
        log(f"collected {min(i + batch_size, len(rows))}/{len(rows)} rows")
    return {name: torch.cat(parts) for name, parts in out.items()}


def chain_tpc(right: torch.Tensor, slot: torch.Tensor, block: torch.Tensor, k: int) -> float:
    """Tokens per call of verified SBD's tree drafting if each call writes NTP's token (slot 0) and the drafts
    after it up to the first wrong one: 1 + the leading run of ``right`` over slots 1..k-1, averaged over the
    blocks whose every slot is scored (``right``, ``slot``, ``block`` as ``collect`` orders them)."""
    runs = []
    _ids, counts = torch.unique_consecutive(block, return_counts=True)
    start = 0
    for n in counts.tolist():
        if n == k - 1:
            run = 1
            for s in range(start, start + n):
                if not bool(right[s]):
                    break
                run += 1
            runs.append(run)
        start += n
    return sum(runs) / max(1, len(runs))


@torch.no_grad()
def probe(head, slots: dict, embed, out_head, k: int) -> dict:
    """Per-slot argmax accuracy and ``chain_tpc``, with ``head`` (chained on the true previous token) and
    without it (the adapter's own slot logits), on collected ``slots``."""
    result = {}
    for name, chained in (("adapter", False), ("head", True)):
        hidden = slots["hidden"].float()
        if chained:
            hidden = head(hidden, embed(slots["previous"]))
        right = out_head(hidden).argmax(-1) == slots["targets"]
        result[name] = {
            "slot_accuracy": [round(float(right[slots["slot"] == s].float().mean()), 4) for s in range(1, k)],
            "single_tpc": round(chain_tpc(right, slots["slot"], slots["block"], k), 4),
        }
    return result


def train_epoch(head, optimizer, slots: dict, embed, out_head, batch_size: int, seed: int) -> float:
    """One pass over the collected ``slots`` in an order drawn with ``seed``: cross-entropy of the chained logits
    (the true previous token) against the targets. Returns the mean loss."""
    n, total = len(slots["targets"]), 0.0
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    for i in range(0, n, batch_size):
        j = order[i : i + batch_size]
        logits = out_head(head(slots["hidden"][j].float(), embed(slots["previous"][j])))
        loss = torch.nn.functional.cross_entropy(logits, slots["targets"][j])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += float(loss.detach()) * len(j)
    return total / n


def collected(path: Path, make, key: dict, log=print) -> dict:
    """The slots cached at ``path`` if they were collected for ``key`` (what they depend on: the adapter's weights,
    the rows, the block size), else ``make()``'s, cached with ``key`` in the file's metadata. A cache collected for
    another key (another ``--adapter``, ``--rows`` or ``--block-size`` into the same ``--out``) is collected again,
    never reused."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    want = {name: json.dumps(value) for name, value in key.items()}
    if path.is_file():
        with safe_open(str(path), "pt") as f:
            have = f.metadata() or {}
        if have == want:
            return load_file(str(path))
        log(f"{path} was collected for other settings ({have or 'unrecorded'}): collecting again")
    slots = make()
    tmp = path.with_name(path.name + ".tmp")
    save_file({name: t.contiguous() for name, t in slots.items()}, str(tmp), metadata=want)
    tmp.replace(path)
    return slots


def slots_key(adapter_folder: Path, rows: list[dict], k: int) -> dict:
    """What the collected slots depend on: the adapter's weights (their SHA-256), the rows (theirs), the block size."""
    import hashlib

    weights = hashlib.sha256((adapter_folder / gated_adapter.WEIGHTS).read_bytes()).hexdigest()
    text = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    return {"adapter_sha256": weights, "rows_sha256": text, "rows": len(rows), "block_size": k}


def train(cfg: HeadTrainConfig) -> Path:
    from ..models import adapted_lm, causal_lm

    check_options(cfg)
    torch.set_num_threads(torch_threads(cfg.threads))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(message):
        print(message, flush=True)

    _, folder = adapted_lm.adapter_folder(cfg.adapter)
    config = gated_adapter.read_config(folder)
    base = causal_lm.load(config.base)
    model, tok = base.model, base.tokenizer
    recorded = config.extra.get("data", {})
    data_cfg = adapter_train.AdapterTrainConfig(out=cfg.data_from, **recorded)
    data = adapter_train.load_data(data_cfg, model, tok, log)
    _, gate = gated_adapter.load(model, folder)
    model.eval()
    mask_id, k = model.config.mask_token_id, cfg.block_size
    rows = data["chat"] + data["code"] + data.get("proposed", [])
    random.Random(cfg.seed).shuffle(rows)
    rows = rows[: cfg.rows or len(rows)]
    key = slots_key(folder, rows, k)
    trained_on = {**key, "width": cfg.width}  # what a checkpoint's head was trained on
    ckpt = out / "checkpoint"
    restore_interrupted_save(ckpt)
    state = resumed_state(ckpt, trained_on)  # before collecting: a refusal costs nothing
    slots = collected(out / "hidden.safetensors", lambda: collect(model, gate, rows, k, mask_id, log=log), key, log)
    probes = {
        name: collect(model, gate, data[f"probe_{name}"], k, mask_id, log=lambda s: None) for name in ("chat", "code")
    }
    embed, out_head = model.get_input_embeddings(), model.get_output_embeddings()
    resumed = state is not None
    if state is None:
        state = {"epoch": 0, "seconds": 0.0, "trained_on": trained_on}
    if resumed:
        loaded = sampler_head.load(ckpt, model.config.hidden_size, {"width": cfg.width})
        assert loaded is not None  # its settings name a head
        head = loaded.train()
    else:
        head = sampler_head.SamplerHead(model.config.hidden_size, cfg.width)
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=0.0)
    if resumed:
        load_moments(ckpt / "optimizer.safetensors", dict(head.named_parameters()), optimizer, state["adam_step"])
        log(f"resumed from {ckpt} after epoch {state['epoch']}")
    n = len(slots["targets"])
    while state["epoch"] < cfg.epochs:
        t0 = time.perf_counter()
        loss = train_epoch(head, optimizer, slots, embed, out_head, cfg.batch_size, cfg.seed * 1000 + state["epoch"])
        state["epoch"] += 1
        state["seconds"] += time.perf_counter() - t0
        entry = {
            "epoch": state["epoch"],
            "loss": round(loss, 4),
            "slots": n,
            "epoch_s": round(time.perf_counter() - t0, 1),
            "probe": {name: probe(head, s, embed, out_head, k) for name, s in probes.items()},
        }
        with (out / "log.jsonl").open("a") as f:
            f.write(json.dumps(entry) + "\n")
        log(json.dumps(entry))
        _save_checkpoint(ckpt, head, optimizer, state)
    return save_final(out / "final", folder, config, head, cfg, state, n)


def resumed_state(ckpt: Path, trained_on: dict) -> dict | None:
    """The checkpoint's state if ``ckpt`` holds one of a head trained on ``trained_on`` (``slots_key`` and the
    width), None if it holds none. One trained on other slots or at another width is refused by name: resuming it
    would go on training a head made for another adapter, other rows or another block size."""
    if not (ckpt / sampler_head.WEIGHTS).is_file():
        return None
    state = json.loads((ckpt / "state.json").read_text())
    had = state.get("trained_on")
    if had != trained_on:
        differ = (
            "none recorded"
            if had is None
            else "; ".join(
                f"{name} {had.get(name)}, not {value}" for name, value in trained_on.items() if had.get(name) != value
            )
        )
        raise ValueError(
            f"out: {ckpt} holds a head trained on other settings ({differ}): give another --out, or "
            f"remove {ckpt} to start over"
        )
    return state


def _save_checkpoint(folder: Path, head, optimizer, state: dict) -> None:
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sampler_head.save(head, tmp, dtype=torch.float32)
    save_moments(tmp / "optimizer.safetensors", dict(head.named_parameters()), optimizer, state)
    (tmp / "state.json").write_text(json.dumps(state) + "\n")
    swap_in(tmp, folder)


def save_final(
    final: Path, adapter_folder: Path, config, head, cfg: HeadTrainConfig, state: dict, n_slots: int
) -> Path:
    """The adapter's weights, its settings with the head recorded, and the head in bf16, in ``final``."""
    final.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(adapter_folder) / gated_adapter.WEIGHTS, final / gated_adapter.WEIGHTS)
    command = "sbd-viz train --sampler-head " + " ".join(
        f"--{f.name.replace('_', '-')} {getattr(cfg, f.name)}"
        for f in fields(cfg)
        if getattr(cfg, f.name) != f.default and f.name not in ("out", "threads", "data_from")
    )
    recorded = {
        **sampler_head.settings(head),
        "epochs": state["epoch"],
        "slots": n_slots,
        "block_size": cfg.block_size,
        "train_seconds": round(state["seconds"], 1),
        "command": command.strip(),
    }
    extra = {**config.extra, "sampler_head": recorded}
    config = gated_adapter.AdapterConfig(
        rank=config.rank, alpha=config.alpha, targets=config.targets, base=config.base, extra=extra
    )
    gated_adapter.write_config(config, final)
    sampler_head.save(head, final)
    return final


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p, HeadTrainConfig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="sbd-viz train --sampler-head", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    train(HeadTrainConfig(**{f.name: getattr(args, f.name) for f in fields(HeadTrainConfig)}))


if __name__ == "__main__":
    main()
