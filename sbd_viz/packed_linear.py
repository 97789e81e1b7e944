"""Linear layers that multiply by a copy of their weight prepacked for oneDNN: a decode's small calls at their cost.

A decode on a CPU is a run of small calls: ``generate`` feeds one row a call, verified SBD the last accepted token,
its drafts and a block of mask slots (5 to 20 rows). torch's CPU ``nn.Linear`` hands every call to MKL's sgemm,
which on this machine class makes a call of 5 rows cost nearly twice one of 1 row, although reading the weights,
which the rows share, is most of the work. oneDNN, which torch also ships, multiplies by a copy of the weight
reordered once into its own blocked layout (the reorder ``torch.compile``'s CPU freezing pass does): a one-row call
is faster than with MKL, and a few rows cost little more than one (``bench/CALL_COST.md`` measures both, call shape
by call shape). ``pack`` switches a model's ``nn.Linear`` layers to ``PackedLinear`` in place (the same module,
parameters and hooks; only its class changes), so every caller of the model, ``generate`` included, runs the same
kernels.

A packed layer multiplies by the packed copy only where it may: float32 on the CPU, no gradient wanted (training
goes through ``F.linear`` as before), and a weight unchanged since it was packed (an in-place update, as an
optimizer's step, is packed again at the next call). oneDNN sums in another order than MKL, so logits differ from
``nn.Linear``'s in the last bits (about 1e-4 on SmolLM2's); greedy text differs only where two tokens tie that
closely. ``sv.load_model`` packs the model it loads (``packed=False`` keeps torch's kernels); the packed copies take
as much memory again as the linear weights.
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


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` whose inference calls multiply by its weight prepacked for oneDNN. Made by ``pack`` from an
    ``nn.Linear`` (its class switched in place), never built directly."""

    _packed: tuple | None = None  # (the weight's identity and version when packed, the packed copy)

    def _key(self) -> tuple:
        w = self.weight
        try:
            version = w._version
        except RuntimeError:  # an inference tensor keeps no version: it cannot be changed in place either
            version = None
        return w.data_ptr(), version, w.dtype, tuple(w.shape)

    def packed_weight(self) -> torch.Tensor:
        """The packed copy of the weight, packed again if the weight changed since."""
        key = self._key()
        if self._packed is None or self._packed[0] != key:
            with torch.no_grad():
                self._packed = key, torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), None)
        return self._packed[1]

    def _may_pack(self, x: torch.Tensor) -> bool:
        w, b = self.weight, self.bias
        if x.device.type != "cpu" or x.dtype != torch.float32 or w.dtype != torch.float32 or w.device.type != "cpu":
            return False
        if b is not None and b.dtype != torch.float32:
            return False
        wants_grad = x.requires_grad or w.requires_grad or (b is not None and b.requires_grad)
        return x.numel() > 0 and not (torch.is_grad_enabled() and wants_grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._may_pack(x):
            return F.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight(), bias, "none", [], "")


def pack(module: nn.Module) -> int:
    """Switch every plain ``nn.Linear`` in ``module`` to ``PackedLinear`` in place and pack its weight now (not at the
    first call). Returns how many layers it switched; 0 where this torch cannot pack (``available``)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    if not available():
        return 0
    n = 0
    for layer in module.modules():
        if type(layer) is nn.Linear:
            layer.__class__ = PackedLinear
            if layer.weight.dtype == torch.float32 and layer.weight.device.type == "cpu":
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
            layer.__class__ = nn.Linear
            n += 1
    return n


def count(module: nn.Module) -> int:
    """How many of ``module``'s layers are packed."""
    return sum(type(layer) is PackedLinear for layer in module.modules())
