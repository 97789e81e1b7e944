"""A gated SBD adapter: low-rank updates that act only on the rows of the block being filled.

``Gate`` holds which rows are on for the forward under way; ``attach`` puts the adapter into a model;
``save``/``load`` read and write its weights (safetensors) and settings (JSON). Why the gate leaves the base model's
text as it was: docs/models.md.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from .packed_linear import state_key

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
WEIGHTS = "adapter.safetensors"
SETTINGS = "adapter.json"


@dataclass
class AdapterConfig:
    """What an adapter is: its rank and scale, the linear layers it adapts (their names' last part), the base it was
    trained on, and ``extra`` (what training records: block sizes, data, steps)."""

    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = TARGETS
    base: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"rank: must be a whole number >= 1, got {self.rank!r}")
        unknown = sorted(set(self.targets) - set(TARGETS))
        if unknown or not self.targets:
            raise ValueError(f"targets: must be a non-empty subset of {TARGETS}, got {list(self.targets)}")
        self.targets = tuple(self.targets)


class Gate:
    """Which rows of the forward under way carry the adapter: ``None`` (none: the base model), or a bool tensor
    (batch, seq) with True on the block's rows. ``suffix`` is set when the on rows are the last ``suffix`` of
    every sequence (the block call), so a layer computes the update on those rows only.

    The switch is per thread: the app decodes one model on several threads at once (a click's decode beside the
    γ map's background decodes), and one thread's block call must not switch the adapter on for another's
    causal rows, whose logits must stay the base's."""

    def __init__(self):
        self._state = threading.local()

    @property
    def rows(self) -> torch.Tensor | None:
        return getattr(self._state, "rows", None)

    @property
    def suffix(self) -> int | None:
        return getattr(self._state, "suffix", None)

    @contextlib.contextmanager
    def on(self, rows: torch.Tensor | None = None, suffix: int | None = None):
        """Within the block: the adapter on for ``rows`` (bool, (batch, seq)) or for the last ``suffix`` rows,
        on this thread."""
        if (rows is None) == (suffix is None):
            raise ValueError("rows, suffix: give exactly one")
        saved = self.rows, self.suffix
        self._state.rows, self._state.suffix = rows, suffix
        try:
            yield self
        finally:
            self._state.rows, self._state.suffix = saved


class GatedLoRALinear(nn.Module):
    """``base(x)`` plus a rank-``r`` update on the rows the gate holds. ``B`` starts at zero, so a new adapter
    changes nothing until trained."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, gate: Gate):
        super().__init__()
        self.base, self.gate, self.scale = base, gate, alpha / rank
        self.A = nn.Parameter(torch.empty(rank, base.in_features, dtype=torch.float32))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=torch.float32))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear (and LoRA) initialise a weight

    _factors: tuple | None = None  # ((A's and B's state_key), (A.T, B.T) contiguous, batch of 1)

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(self.A.dtype) @ self.A.T @ self.B.T * self.scale).to(x.dtype)

    def _transposed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``A.T`` and ``B.T``, contiguous, as (1, in, r) and (1, r, out): made again whenever A or B changed (an
        optimizer's step), so a decode's batched products read them without a transpose a call."""
        a, b = self._parameters["A"], self._parameters["B"]
        assert a is not None and b is not None  # the adapter's own parameters
        key = state_key(a), state_key(b)
        if self._factors is None or self._factors[0] != key:
            self._factors = key, (a.detach().T.contiguous()[None], b.detach().T.contiguous()[None])
        return self._factors[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (batch, seq, in)
        y = self.base(x)
        if self.gate.suffix is not None:
            k = self.gate.suffix
            if k == 0:
                return y
            if x.shape[0] == 1 and x.dtype == y.dtype == self.A.dtype and not torch.is_grad_enabled():
                # a decode's block call: the update added in place to the block's rows of the base's fresh output,
                # in one multiply-add, not written into a new copy of every row. A call runs this in each of its
                # adapted layers (210 on SmolLM2), where each op's fixed cost outweighs the small matmuls: so two
                # batched products on factors transposed once, four ops in all (on a 2-core AMD EPYC, 1 thread, 8
                # rows: 99 against 110 us a layer with its base product, 78 us alone).
                at, bt = self._transposed()
                y[:, -k:].baddbmm_(torch.bmm(x[:, -k:], at), bt, alpha=self.scale)
                return y
            return torch.cat([y[:, :-k], y[:, -k:] + self.delta(x[:, -k:])], dim=1)
        rows = self.gate.rows
        if rows is None or not bool(rows.any()):
            return y
        out = y.clone()  # the rows off the gate are copied, not recomputed: the base's values bit for bit
        out[rows] = y[rows] + self.delta(x[rows])
        return out


class MaskEmbedding(nn.Module):
    """The base's embedding table, plus one learned vector for the mask id (one past the table's last row)."""

    def __init__(self, base: nn.Embedding):
        super().__init__()
        self.base = base
        self.mask_id = base.num_embeddings
        with torch.no_grad():  # start at the mean embedding: a neutral token
            self.vector = nn.Parameter(base.weight.float().mean(0).clone())

    @property
    def weight(self) -> torch.Tensor:  # what code reading ``get_input_embeddings().weight`` expects
        return self.base.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # ids: (batch, seq) -> (batch, seq, hidden)
        is_mask = ids == self.mask_id
        out = self.base(ids.masked_fill(is_mask, 0))
        if not bool(is_mask.any()):
            return out
        return torch.where(is_mask[..., None], self.vector.to(out.dtype), out)


def attach(model, config: AdapterConfig) -> Gate:
    """Put a fresh adapter (``B`` at zero) into ``model`` in place; the base's own weights are frozen. Returns the
    gate every adapted layer reads. ``model.config.mask_token_id`` is set to the mask id."""
    for p in model.parameters():
        p.requires_grad_(False)
    gate = Gate()
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in config.targets
    ]
    if not targets:
        raise ValueError(f"targets: model {type(model).__name__} has no linear layer named {list(config.targets)}")
    for name, module in targets:
        parent_name, child = name.rsplit(".", 1)
        parent = model.get_submodule(parent_name)
        setattr(parent, child, GatedLoRALinear(module, config.rank, config.alpha, gate))
    embedding = MaskEmbedding(model.get_input_embeddings())
    model.set_input_embeddings(embedding)
    model.config.mask_token_id = embedding.mask_id
    return gate


def adapter_state(model) -> dict[str, torch.Tensor]:
    """The adapter's own tensors (the LoRA factors and the mask vector), by name."""
    return {name: p for name, p in model.named_parameters() if name.endswith((".A", ".B", "vector"))}


def parameter_count(model) -> int:
    return sum(p.numel() for p in adapter_state(model).values())


def save(model, config: AdapterConfig, folder, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write the adapter's tensors (in ``dtype``) and its settings to ``folder``; the base is not written."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().to(dtype).contiguous() for name, t in adapter_state(model).items()}
    save_file(tensors, str(folder / WEIGHTS))
    write_config(config, folder)
    return folder


def write_config(config: AdapterConfig, folder) -> Path:
    """Write an adapter's settings (``adapter.json``) into ``folder``."""
    path = Path(folder) / SETTINGS
    path.write_text(json.dumps(asdict(config), indent=2, sort_keys=True) + "\n")
    return path


def read_config(folder) -> AdapterConfig:
    folder = Path(folder)
    try:
        raw = json.loads((folder / SETTINGS).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"path: {folder} holds no adapter ({SETTINGS} is missing)") from None
    return AdapterConfig(
        rank=raw["rank"],
        alpha=raw["alpha"],
        targets=tuple(raw["targets"]),
        base=raw.get("base", ""),
        extra=raw.get("extra", {}),
    )


def load(model, folder) -> tuple[AdapterConfig, Gate]:
    """Attach the adapter saved in ``folder`` to ``model`` (in place, weights in float32). Returns its config and
    gate. Refuses a file whose tensors do not match the model's layers, naming what differs."""
    from safetensors.torch import load_file

    config = read_config(folder)
    gate = attach(model, config)
    saved = load_file(str(Path(folder) / WEIGHTS))
    own = adapter_state(model)
    missing, extra = sorted(set(own) - set(saved)), sorted(set(saved) - set(own))
    if missing or extra:
        raise ValueError(
            f"path: the adapter in {folder} does not fit this model (missing {missing[:3]}, unexpected {extra[:3]})"
        )
    with torch.no_grad():
        for name, p in own.items():
            if saved[name].shape != p.shape:
                raise ValueError(
                    f"path: adapter tensor {name} has shape {tuple(saved[name].shape)}, the model's "
                    f"layer needs {tuple(p.shape)}"
                )
            p.copy_(saved[name].float())
    return config, gate
