"""Linear layers that multiply by a copy of their weight prepacked for oneDNN: a decode's small calls at their cost.

``pack`` switches a model's ``nn.Linear`` layers to ``PackedLinear`` in place, ``unpack`` back. Why oneDNN, and when
a packed layer uses its packed copy: docs/models.md.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn


@functools.cache
def available() -> bool:
    """Whether this torch can pack: built with oneDNN (mkldnn) and its packed linear op working here."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(2, 3), None)
        out = torch.ops.mkldnn._linear_pointwise(torch.ones(1, 3), w, None, "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return bool(torch.equal(out, torch.full((1, 2), 3.0)))


# A layer with fewer weights stays nn.Linear: for a small layer oneDNN's op costs more a call than MKL's product
# saves (1 thread, in cache: a 256 x 256 layer 23 against 17 us for one row and 52 against 35 for 16 rows; a 576 x 576
# one 43 against 45 and 136 against 175). The character model's layers are all below it, SmolLM2's large ones above.
MIN_WEIGHTS = 1 << 18


def state_key(t: torch.Tensor) -> tuple:
    """What names ``t``'s values as they are now: its address and its in-place version, so a copy derived from it
    (a packed or transposed weight) is made again after an optimizer's step changes it."""
    try:
        return t.data_ptr(), t._version
    except RuntimeError:  # an inference tensor keeps no version: it cannot be changed in place either
        return t.data_ptr(), None


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` whose calls without gradient multiply by its weight prepacked for oneDNN. Made by ``pack``
    from an ``nn.Linear`` (its class switched in place), never built directly."""

    _packed: tuple | None = None  # ((the weight's address, its version) when packed, the packed copy or None)

    def packed_weight(self) -> torch.Tensor | None:
        """The packed copy of the weight, packed again if the weight changed since; None where it cannot be (not
        float32 on the CPU)."""
        w, b = self._parameters["weight"], self._parameters["bias"]
        assert w is not None  # a linear layer's weight (its bias may be None)
        key = state_key(w)
        cached = self._packed
        if cached is not None and cached[0] == key:
            return cached[1]
        packed = None
        if w.dtype == torch.float32 and w.device.type == "cpu" and (b is None or b.dtype == torch.float32):
            with torch.no_grad():
                packed = torch.ops.mkldnn._reorder_linear_weight(w.detach(), None)
        self._packed = key, packed
        return packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # a gradient wanted (training), another dtype or device: torch's own product. This runs once per layer per
        # call, so it reads the module's dicts directly (nn.Module's attribute lookup costs microseconds).
        if torch.is_grad_enabled() or x.dtype != torch.float32 or x.device.type != "cpu" or not x.numel():
            return F.linear(x, self.weight, self.bias)
        packed = self.packed_weight()
        if packed is None:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, packed, self._parameters["bias"], "none", [], "")


def pack(module: nn.Module, min_weights: int | None = None) -> int:
    """Switch every plain ``nn.Linear`` in ``module`` with at least ``min_weights`` weights (default
    ``MIN_WEIGHTS``) to ``PackedLinear`` in place, and pack its weight now (not at the first call). Returns how many
    layers it switched; 0 where this torch cannot pack (``available``)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    least = MIN_WEIGHTS if min_weights is None else min_weights
    if isinstance(least, bool) or not isinstance(least, int) or least < 0:
        raise ValueError(f"min_weights: expected a whole number >= 0, got {min_weights!r}")
    if not available():
        return 0
    n = 0
    for layer in module.modules():
        if type(layer) is nn.Linear and layer.weight.numel() >= least:
            layer.__class__ = PackedLinear
            assert isinstance(layer, PackedLinear)
            layer.packed_weight()
            n += 1
    return n


def unpack(module: nn.Module) -> int:
    """Switch every ``PackedLinear`` in ``module`` back to ``nn.Linear`` (torch's kernels), dropping the packed
    copies. Returns how many."""
    n = 0
    for layer in module.modules():
        if type(layer) is PackedLinear:
            layer.__dict__.pop("_packed", None)
            plain: nn.Module = layer  # (typed as a module: its class is about to change)
            plain.__class__ = nn.Linear
            n += 1
    return n


def count(module: nn.Module) -> int:
    """How many of ``module``'s layers are packed."""
    return sum(type(layer) is PackedLinear for layer in module.modules())
