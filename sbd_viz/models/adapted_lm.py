"""``AdaptedLM``: a pretrained causal LM with a gated SBD adapter (``sbd_viz.models.gated_adapter``), base frozen, on
only for the rows of the block being filled, so the prefix's cache and every next-token logit are the base's and
verified SBD writes the base's greedy text. It loads ``"smollm2-135m-sbd"`` (the adapter shipped in this package)
or an adapter folder; an adapter may carry a sampler head. More: docs/models.md.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from . import causal_lm, gated_adapter, sampler_head
from .base import DEFAULT_BLOCK_SIZE
from .causal_lm import CausalLM
from .kinds import ModelKind

KIND = "SBD adapter on a frozen base"
# A picked call (``ModelCall.pick``) needs logits at the roots and at one block. The output layer
# (49,152 x 576) read for the roots in the forward and again for the picked block after it costs one more pass over
# its weights; its rows for the blocks left unpicked cost compute. Paired on a 2-core AMD EPYC, 1 thread, in
# one-token calls, the output layer once / twice: 1 branch 1.13 / 1.27, 2 branches 1.42 / 1.51, 4 branches (12
# rows unpicked) 1.97 / 1.92, token trees 2,1,1 (20 rows unpicked) 2.78 / 2.62, 3,1,1 3.63 / 3.34, 4,2,1 6.78 / 6.03.
SPLIT_ROWS = 12  # from this many unpicked block rows on, the output layer runs twice
SHIPPED = {"smollm2-135m-sbd": "smollm2-135m"}  # shipped adapter name -> the named base it adapts


def shipped_folder(name: str) -> Path:
    return Path(__file__).resolve().parents[1] / "weights" / name


class AdaptedLM(CausalLM):
    """A ``CausalLM`` whose block calls carry a gated SBD adapter. ``base_name`` names the frozen base,
    ``adapter`` is the adapter's ``AdapterConfig`` and ``gate`` the switch its layers read; ``head`` its sampler
    head, if it has one (a ``chained`` call chains the drafts with it). Its kind is ``"adapted"`` (``MODEL_KIND``): the
    SBD decoders and the causal ones serve it."""

    kind = "adapted"
    head: sampler_head.SamplerHead | None
    kind_label = KIND

    def __init__(
        self,
        model,
        tokenizer,
        adapter: gated_adapter.AdapterConfig,
        gate: gated_adapter.Gate,
        name: str | None = None,
        source: str | None = None,
        base_name: str | None = None,
        head: sampler_head.SamplerHead | None = None,
    ):
        super().__init__(model, tokenizer, name=name, source=source)
        self.adapter, self.gate, self.head = adapter, gate, head
        # how many of the adapter's own best tokens at a slot the head's chained draft is chosen among; None: the
        # whole vocabulary (sampler_head.CANDIDATES says why so few do)
        self.candidates: int | None = sampler_head.CANDIDATES
        self.split_rows = SPLIT_ROWS  # a picked call's unpicked block rows from which its output layer runs twice
        self.base_name = base_name or adapter.base
        block = adapter.extra.get("block_size")
        if block is not None:
            model.config.sbd_block_size = int(block)

    @property
    def block_size(self) -> int:
        recorded = self.recorded_block_size()
        return DEFAULT_BLOCK_SIZE if recorded is None else recorded

    @property
    def mask_token_id(self) -> int:
        return int(self.model.config.mask_token_id)

    @property
    def adapter_parameters(self) -> int:
        return gated_adapter.parameter_count(self.model)

    @property
    def description(self) -> str:
        n = self.adapter_parameters
        head = (
            ""
            if self.head is None
            else (
                f" · a sampler head ({sampler_head.parameter_count(self.head) / 1e6:.2f}M parameters) chains tree "
                "drafting's drafts"
            )
        )
        return (
            f"{self.name}: SBD adapter on {self.base_name}, base frozen · adapter rank {self.adapter.rank} on "
            f"{', '.join(self.adapter.targets)} · {n / 1e6:.2f}M adapter parameters "
            f"({n * 2 / 1e6:.1f} MB in bf16) · on only for the block's rows, so NTP and verified SBD write "
            f"the base's text{head} · block size {self.block_size}"
            + ("" if self.weights is None else f" · base weights: {self.weights}")
        )

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

    # -- the sampler head (CausalModel.call chains a block with it) ---------------------------------
    def own_candidates(self, blocks: torch.Tensor) -> torch.Tensor | None:
        """Each slot's ``candidates`` best tokens by the adapter's own logits (n, k, c), or None (whole vocabulary)."""
        return None if self.candidates is None else sampler_head.own_candidates(blocks, self.candidates)

    def chain(
        self, roots: torch.Tensor, blocks: torch.Tensor, hidden: torch.Tensor, own: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The blocks (n, k, V) with slots 1..k-1 chained from each root's (n, V) token, the adapter's own argmaxes
        as the guess and ``own`` (``own_candidates``) as each slot's candidates; slot 0 as it was."""
        assert self.head is not None, "a call chains a block only with a sampler head"
        chained = sampler_head.chain(
            self.head,
            hidden,
            roots.argmax(-1),
            self.model.get_input_embeddings(),
            self.model.get_output_embeddings(),
            guess=blocks.argmax(-1),
            candidates=own,
        )
        return torch.cat([blocks[:, :1], chained.float()], 1)

    def children(self, hidden: torch.Tensor, own: torch.Tensor | None):
        """A token tree's children by the head: slot s's logits after each of ``tokens`` at slot s - 1, from the
        block's hidden states (k, d), among each slot's own candidates (k, c) if given."""
        head = self.head
        assert head is not None, "a call grows a tree's children only with a sampler head"
        embed, out_head = self.model.get_input_embeddings(), self.model.get_output_embeddings()

        def children(slot: int, tokens: list[int]) -> torch.Tensor:
            x = head(hidden[slot].expand(len(tokens), -1), embed(torch.tensor(tokens, device=self.device)))
            if own is None:
                return sampler_head.output_logits(out_head, x).float()
            return sampler_head.candidate_logits(out_head, x[None], own[slot].expand(len(tokens), -1)[None])[0].float()

        return children


def is_adapter_source(path) -> bool:
    """Whether ``load_model(path)`` should load an ``AdaptedLM``: a shipped adapter's name, or a folder holding one."""
    if isinstance(path, (str, os.PathLike)) and str(path) in SHIPPED and not Path(path).exists():
        return True
    return isinstance(path, (str, os.PathLike)) and (Path(path) / gated_adapter.SETTINGS).is_file()


def adapter_folder(path) -> tuple[str, Path]:
    """(name, folder) of a shipped adapter's name or an adapter folder; a shipped one missing from this
    installation is refused by name."""
    if str(path) in SHIPPED and not Path(path).exists():
        name, folder = str(path), shipped_folder(str(path))
        if not (folder / gated_adapter.SETTINGS).is_file():
            raise FileNotFoundError(
                f"path: the adapter {name!r} is missing from this installation of sbd_viz ({folder})"
            )
        return name, folder
    return Path(path).name, Path(path)


def load(path, dtype: torch.dtype = torch.float32, device=None, cache: bool = True) -> AdaptedLM:
    """An ``AdaptedLM`` from a shipped adapter's name or an adapter folder (its settings name the base)."""
    t0 = time.perf_counter()
    name, folder = adapter_folder(path)
    config = gated_adapter.read_config(folder)
    if not config.base:
        raise ValueError(f"path: {folder / gated_adapter.SETTINGS} names no base model ('base')")
    base = causal_lm.load(config.base, dtype=torch.float32, cache=cache)
    model = base.model
    _, gate = gated_adapter.load(model, folder)
    head = sampler_head.load(folder, model.config.hidden_size, config.extra.get("sampler_head"))
    if dtype != torch.float32:
        model = model.to(dtype)
        head = head.to(dtype) if head is not None else None
    if device is not None:
        model = model.to(device)
        head = head.to(device) if head is not None else None
    loaded = AdaptedLM(
        model.eval(), base.tokenizer, config, gate, name=name, source=str(folder), base_name=config.base, head=head
    )
    loaded.loaded_from, loaded.load_seconds = base.loaded_from, time.perf_counter() - t0
    loaded.weights = base.weights  # the base's: its GGUF file, or the Hub's
    return loaded


# An adapted LM's model kind: an SBD model (the adapter drafts the blocks) and a causal LM (the base's logits)
MODEL_KIND = ModelKind(
    "adapted",
    "an SBD adapter on a frozen causal LM (AdaptedLM): it reads the mask slots' predictions with the adapter on",
    AdaptedLM,
    opens=is_adapter_source,
    load=load,
    also=("sbd", "causal"),
)
