"""What a decoder asks of a model: one forward (``ModelCall``) answered by a ``Reply``, a cache cut (``CacheCut``), and
the ``Model`` protocol every decodable model meets. How a call is laid out (rows, positions, the attention mask):
docs/model_call.md."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from .token_tree import DraftNode


@dataclass(frozen=True)
class ModelCall:
    """One forward. ``new_ids`` are fed after the cache, each seeing the cache, its ancestors among them and itself
    (``parents``: each one's parent by number, -1 after the cache; None: a chain, each after the one before), at
    the position after its parent's; every fed token stays cached.

    - ``logits_at``: the fed tokens (by number, ascending) whose next-token logits come back (``Reply.causal``);
    - ``block_ids``: a block (mask ids in its open slots) predicted after each fed token in ``blocks_after`` (None:
      one block after the last fed token, or after the cache when nothing is fed); each block sees its root's path
      and its own slots both ways, and its keys and values are dropped after the call;
    - ``pick`` (the ``logits_at`` rows' logits -> one of their numbers) reads one block, the one after the fed token
      it picks: the reply holds that block alone, none if no block follows it; ``widths`` then drafts a token tree
      from it (``Reply.tree``);
    - ``chained``: a model with a sampler head chains each returned block's slots 1.. from its root's greedy token
      (its root must be in ``logits_at``).
    """

    new_ids: Sequence[int]
    block_ids: Sequence[int] = ()
    logits_at: Sequence[int] = ()
    parents: Sequence[int] | None = None
    blocks_after: Sequence[int] | None = None
    pick: Callable[[torch.Tensor], int] | None = None
    widths: tuple[int, ...] | None = None
    chained: bool = False

    @classmethod
    def fused(cls, new_ids: Sequence[int], block_ids: Sequence[int] = (), n_causal: int = 0) -> ModelCall:
        """The block call: ``new_ids`` fed as a chain, the logits after its last ``n_causal`` tokens, and
        ``block_ids`` predicted after all of them (the paper's fused call; ``n_causal`` 0: the block alone)."""
        n = len(new_ids)
        if not 0 <= n_causal <= n:
            raise ValueError(f"n_causal: must be in [0, {n}] (the tokens fed), got {n_causal}")
        return cls(list(new_ids), list(block_ids), tuple(range(n - n_causal, n)))

    @property
    def is_fused(self) -> bool:
        """A chain whose logits come from its last fed tokens and whose one block (if any) follows them all: the
        call that many decodes' requests can share one forward (``sv.decode_batch``)."""
        n = len(self.new_ids)
        return (
            self.parents is None
            and self.blocks_after is None
            and self.pick is None
            and not self.chained
            and tuple(self.logits_at) == tuple(range(n - len(self.logits_at), n))
        )

    @property
    def n_causal(self) -> int:
        """How many of the last fed tokens' logits come back (a fused call's ``logits_at``)."""
        if not self.is_fused:
            raise ValueError("n_causal: only a fused call (ModelCall.fused) has its logits at its last fed tokens")
        return len(self.logits_at)


@dataclass(frozen=True)
class Reply:
    """A model's answer to a ``ModelCall``, every field of one shape: ``causal`` (len(logits_at), V) the next-token
    logits at the fed tokens asked for, ``blocks`` (n, k, V) the blocks' slot logits in ``blocks_after``'s order
    (with ``pick``: the picked one alone, n = 1, or none, n = 0), float32; ``seconds`` the forward's wall time;
    ``tree`` the token tree drafted from the picked block (``widths``), empty otherwise."""

    causal: torch.Tensor
    blocks: torch.Tensor
    seconds: float
    tree: tuple[DraftNode, ...] = field(default=())


@dataclass(frozen=True)
class CacheCut:
    """A rollback a verified decode asks for: keep the cache's first ``length`` positions, then the positions in
    ``keep`` (ascending, each at or after ``length``: a token tree's accepted path). The reply is None."""

    length: int
    keep: tuple[int, ...] = ()


@runtime_checkable
class Model(Protocol):
    """What a decoder may ask of a model: its name and kind, its vocabulary, the context it fits, a cache and the
    one call on it. ``sbd_viz.models.base.CausalModel`` and every model built on it meet it."""

    name: str
    kind: str
    model: Any  # the transformers model: greedy NTP runs its own ``generate``

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def mask_id(self) -> int | None: ...

    @property
    def mask_token_id(self) -> int: ...

    @property
    def eos_token_id(self) -> int | None: ...

    @property
    def block_size(self) -> int: ...

    def check_fits(self, n_prompt: int, max_new_tokens: int) -> None: ...

    def encode(self, text: str) -> list[int]: ...

    def token_text(self, token_id: int) -> str: ...

    def text(self, ids: Sequence[int]) -> str: ...

    def raw_text(self, ids: Sequence[int]) -> str: ...

    def output_texts(self, prompt_ids: Sequence[int], ids: Sequence[int]) -> list[str]: ...

    def trace_meta(self) -> dict[str, Any]: ...

    def new_cache(self) -> Any: ...

    def call(self, cache: Any, request: ModelCall) -> Reply: ...

    def rollback(self, cache: Any, length: int, keep: tuple[int, ...] = ()) -> None: ...
