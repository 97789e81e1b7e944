"""``DiffusionModel``: a DiffusionGemma block-diffusion model and its tokenizer, with its limits as data (the canvas,
the context), and its model kind. Its sampler and recording are ``sbd_viz.decoders.diffusion``'s."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import torch

from .base import ModelBase
from .kinds import ModelKind

RULE = "entropy_bounded"  # the one commit rule DiffusionGemma's sampler implements


def model_type() -> str:
    """config.json's ``model_type`` of the models this module loads, as transformers names it."""
    from transformers import DiffusionGemmaConfig

    return DiffusionGemmaConfig.model_type


def is_diffusion_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a DiffusionGemma model (its config.json's model_type or architectures say so)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return data.get("model_type") == model_type() or any(
        str(a).startswith("DiffusionGemma") for a in data.get("architectures") or ()
    )


class DiffusionModel(ModelBase):
    """A DiffusionGemma model and its tokenizer, with its limits as data: the canvas (``block_size``) and
    the context. It has no verified decoding and no gap-free mode (``supports_verify``, ``supports_gap_free``)."""

    kind = "diffusion"  # the decoder registry's model kind: its own sampler serves it
    supports_verify = False
    supports_gap_free = False
    rules = (RULE,)
    gamma_slider = (0.01, 2.0, 0.01)  # (lo, hi, step): the sampler refuses an entropy_bound of 0
    context_words = "has a context of"

    def __init__(self, model, tokenizer, name: str | None = None):
        if getattr(getattr(model, "config", None), "model_type", None) != model_type():
            raise TypeError("model: expected a DiffusionGemmaForBlockDiffusion (transformers)")
        super().__init__(model, tokenizer, name)
        # the recording hooks sit on the model itself, so two recorded decodes (the app's two at a time) take turns
        self.recording = threading.Lock()

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike, dtype: torch.dtype = torch.float32, device: str | torch.device | None = None
    ) -> DiffusionModel:
        from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(path)
        if not is_diffusion_folder(path):
            raise FileNotFoundError(f"path: {path} is not a DiffusionGemma model folder (config.json's model_type)")
        tok = AutoTokenizer.from_pretrained(path)
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(path, dtype=dtype)
        # transformers declares .to with functools.wraps(nn.Module.to): typeshed's _Wrapped is no method, so mypy
        # reads device as self
        moved = model if device is None else model.to(device)  # type: ignore[arg-type]
        return cls(moved, tok, name=path.name)

    # -- limits -------------------------------------------------------------------------------
    @property
    def canvas_length(self) -> int:
        return int(self.model.config.canvas_length)

    @property
    def block_size(self) -> int:
        """The canvas: the tokens one block writes (fixed by the model)."""
        return self.canvas_length

    def tokens_written(self, max_new_tokens: int) -> int:
        """``generate`` writes whole canvases: the new tokens rounded up to a multiple of the canvas."""
        k = self.canvas_length
        return -(-max_new_tokens // k) * k

    # -- vocabulary ------------------------------------------------------------------------------
    @property
    def eos_ids(self) -> tuple[int, ...]:
        """The ids that end the text: the generation config's, else the text config's, else the tokenizer's."""
        for value in (
            self.model.generation_config.eos_token_id,
            self.model.config.get_text_config().eos_token_id,
            self.tokenizer.eos_token_id,
        ):
            if value is not None:
                return tuple(value) if isinstance(value, (list, tuple)) else (int(value),)
        return ()

    def encode(self, prompt: str) -> list[int]:
        """The prompt's ids, with BOS once: a prompt from a chat template already starts with it."""
        bos = self.tokenizer.bos_token
        return list(self.tokenizer(prompt, add_special_tokens=not (bos and prompt.startswith(bos))).input_ids)


MODEL_KIND = ModelKind(
    "diffusion",
    "a DiffusionGemma model (DiffusionModel)",
    DiffusionModel,
    opens=is_diffusion_folder,
    load=DiffusionModel.from_pretrained,
)
