"""The argument checks that read a model: a block size (the model's own by default) and a model of this package.
Each returns its argument, or raises naming it (as ``sbd_viz.trace.checks``)."""

from __future__ import annotations

from ..trace.checks import check_whole
from .base import MAX_BLOCK_SIZE, CausalModel


def check_block_size(value, model=None, name: str = "block_size") -> int:
    """A block size: a whole number in [1, ``MAX_BLOCK_SIZE``]. None means the model's own (``model.block_size``:
    the one its folder records, else 16), the one place that default is resolved."""
    if value is None:
        if model is None:
            raise ValueError(f"{name}: None means the model's block size, but no model was given")
        return model.block_size
    return check_whole(value, name, 1, MAX_BLOCK_SIZE)


def check_model(model, name: str = "model") -> CausalModel:
    """A model a decoder can call: a ``CausalModel`` (an SBD model, a causal LM, an adapted LM)."""
    if not isinstance(model, CausalModel):
        raise TypeError(f"{name}: expected a model of sbd_viz (see sv.load_model), got {type(model).__name__}")
    return model
