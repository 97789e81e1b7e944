"""``SBDModel``: a causal LM fine-tuned for SBD, with its mask token: its calls also fill blocks of mask slots
(``sbd_viz.models.base.CausalModel.call``), each block's slots attending to the prefix and to each other (the
paper's Fig. 10 inference mask), their keys and values dropped after the call so the cache always equals a causal
prefill of the committed text (exact KV cache). Its model kind, the shipped model's path and ``add_mask_token``."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .base import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, CausalModel, MaskTokenError, ModelBase
from .kinds import ModelKind

MASK_TOKEN = "<|mask|>"
DEFAULT_MODEL = "sbd-char-5m"
__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_MODEL",
    "MASK_TOKEN",
    "MAX_BLOCK_SIZE",
    "MaskTokenError",
    "ModelBase",
    "SBDModel",
    "add_mask_token",
    "default_model_path",
]


def add_mask_token(model, tokenizer, token: str = MASK_TOKEN) -> int:
    """Give a base model a mask token: a new special token with its own embedding row.

    The id is stored as ``model.config.mask_token_id``, so ``save_pretrained`` + reload keeps
    it with no extra argument. Returns the id. A no-op if the tokenizer already has one.
    """
    if tokenizer.mask_token_id is None:
        tokenizer.add_special_tokens({"mask_token": token})
    mask_id = tokenizer.mask_token_id
    emb = model.get_input_embeddings()
    if mask_id >= emb.weight.shape[0]:
        old = emb.weight.shape[0]
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        with torch.no_grad():  # start the new row(s) at the mean embedding, a neutral token
            emb = model.get_input_embeddings()
            emb.weight[old:] = emb.weight[:old].mean(0)
    model.config.mask_token_id = mask_id
    return mask_id


WEIGHTS = Path(__file__).resolve().parents[1] / "weights"  # the checkpoints shipped with the package


def shipped_folder(source) -> Path | None:
    """The folder of the model shipped in this package under the name ``source`` (``"sbd-char-5m"``), where no local
    path of that name exists; else None."""
    if not isinstance(source, (str, os.PathLike)) or Path(source).exists():
        return None
    folder = WEIGHTS / str(source)
    return folder if (folder / "config.json").is_file() else None


def default_model_path() -> Path:
    """The shipped model: ``$SBD_VIZ_MODEL`` (the first, where it lists several), else the copy installed with the
    package (``sbd_viz/weights/``)."""
    named = os.environ.get("SBD_VIZ_MODEL", "").split(",")[0].strip()  # the app's menu takes a list: its first
    if named:
        return Path(named)
    path = WEIGHTS / DEFAULT_MODEL
    if path.is_dir():
        return path
    raise FileNotFoundError(
        f"path: the shipped model {path} is missing from this installation of sbd_viz; "
        "pass path=... or set SBD_VIZ_MODEL to a model folder"
    )


class SBDModel(CausalModel):
    """A causal LM ready for SBD decoding.

    ``SBDModel(hf_model, hf_tokenizer)`` wraps loaded objects; ``SBDModel.from_pretrained(path)``
    loads a folder (no ``trust_remote_code`` unless asked). The mask token id comes from
    ``config.mask_token_id`` or the tokenizer's mask token. Its kind is ``"sbd"`` (``MODEL_KIND``).
    """

    kind = "sbd"

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        dtype: torch.dtype = torch.float32,
        trust_remote_code: bool = False,
        device: str | torch.device | None = None,
    ) -> SBDModel:
        path = shipped_folder(path) or path  # a shipped model by its name, as README's models table gives it
        model, tokenizer = cls.load_folder(path, dtype, trust_remote_code, device)
        loaded = cls(model, tokenizer, name=Path(path).name)
        loaded.block_size  # noqa: B018 -- a bad recorded block size fails here, at load, not mid-decode
        return loaded

    @property
    def mask_token_id(self) -> int:
        mask_id = self.mask_id
        if mask_id is None:
            raise MaskTokenError(
                f"model {self.name!r} has no mask token, so it cannot decode with SBD. Fine-tune it for SBD "
                "(sbd-viz train --base DIR adds one), or call sbd_viz.add_mask_token(model, tokenizer) first; "
                "NTP decoding (decode_ntp) works without one"
            )
        return mask_id


# SBD's model kind: every SBD decoder and every causal one serves it. ``sv.load_model`` asks it last, so it opens any
# folder no other kind opens (``from_pretrained`` names what is wrong with one that is not an SBD model).
MODEL_KIND = ModelKind(
    "sbd",
    "an SBD-trained model (SBDModel): it reads the mask slots' predictions",
    SBDModel,
    opens=lambda source: True,
    load=SBDModel.from_pretrained,
    also=("causal",),
)
