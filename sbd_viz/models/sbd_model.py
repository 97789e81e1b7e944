"""``SBDModel``: a Hugging Face causal LM + tokenizer + mask token, and the SBD block call.

Only the decoder calls the model, through ``fused_call`` (``block_call``): one forward that appends the
newly final tokens to the KV cache causally and predicts a block of slots that attend to
the whole prefix and bidirectionally to each other (the paper's Fig. 10 inference mask).
Keys/values of the block's slots are dropped after the call, so the cache always equals a
causal prefill of the committed text (exact KV cache).

Verified SBD's tree drafting calls ``tree_call`` instead: the same causal feed, then one block per possible
accepted length, each seeing the fed text up to its own root only (``tree_call_mask``); ``branch_call`` is that
call for a caller that reads only the branch NTP's verdicts choose.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .kinds import ModelKind
from .token_tree import DraftNode, chain, check_parents, depths, grow_tree, token_tree_mask

MASK_TOKEN = "<|mask|>"
DEFAULT_MODEL = "sbd-char-5m"
# The block size a decode uses when none is given: the paper's 16, unless the model folder records the size its
# card measured it at (``config.sbd_block_size``): a decoding choice, so it travels with the weights it was chosen for.
DEFAULT_BLOCK_SIZE = 16
MAX_BLOCK_SIZE = 64  # the largest block any decode accepts (a trace's picture stays readable)


class MaskTokenError(ValueError):
    """The model has no mask token, so it cannot decode with SBD."""


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


def block_call_mask(past: int, n_causal: int, n_block: int) -> torch.Tensor:
    """The Fig. 10 inference mask of one block call: (q, past + q) bool, True = attend, q = n_causal + n_block.

    Rows are the call's inputs: ``n_causal`` newly final tokens (causal over the ``past`` cached positions and
    each other), then ``n_block`` slots, which see every position, the block's own slots included."""
    q = n_causal + n_block
    rows = torch.arange(q)[:, None]
    cols = torch.arange(past + q)[None, :]
    return (cols <= past + rows) | (rows >= n_causal)


def tree_call_mask(past: int, n_causal: int, n_branches: int, k: int) -> torch.Tensor:
    """The mask of one tree call: (q, past + q) bool, True = attend, q = n_causal + n_branches * k.

    Rows are the call's inputs: ``n_causal`` tokens fed causally (each sees the ``past`` cached positions and the
    fed tokens up to itself), whose last ``n_branches`` are the branches' roots; then ``n_branches`` blocks of ``k``
    slots. Block j sees the cache, the fed tokens up to root j (fed row ``n_causal - n_branches + j``) and its own
    slots, both ways: not the fed drafts after its root (it drafts as if they were rejected) nor another block. It is
    the ``token_tree_mask`` of a chain."""
    return token_tree_mask(past, *chain(n_causal, n_branches), k)


def picked(pick: Callable[[torch.Tensor], int], roots: torch.Tensor) -> int:
    """``pick(roots)``, checked: the number of one of the ``len(roots)`` branches."""
    j = pick(roots)
    if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < len(roots):
        raise ValueError(f"pick: must return a branch's number in [0, {len(roots) - 1}], got {j!r}")
    return j


def block_roots(roots: list[int], blocks: list[int] | None) -> list[int]:
    """The fed tokens a token-tree call puts a block after: ``roots[j]`` for each ``j`` in ``blocks`` (None: every
    root); a bad ``blocks`` is a ``ValueError`` naming it."""
    if blocks is None:
        return list(roots)
    if (not blocks or any(isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < len(roots) for j in blocks)
            or list(blocks) != sorted(set(blocks))):
        raise ValueError(f"blocks: must be ascending numbers of roots in [0, {len(roots) - 1}], at least one, "
                         f"got {blocks!r}")
    return [roots[j] for j in blocks]


def picked_block(pick: Callable[[torch.Tensor], int], roots: torch.Tensor,
                 blocks: list[int] | None) -> tuple[int, int | None]:
    """The root ``pick`` chooses (``picked``) and the number among a token-tree call's blocks of the block after it,
    None if no block follows that root."""
    j = picked(pick, roots)
    if blocks is None:
        return j, j
    return j, (blocks.index(j) if j in blocks else None)


def _as_attention(allowed: torch.Tensor, eager_dtype: torch.dtype | None) -> torch.Tensor:
    """A (q, past + q) bool mask as a model's attention takes it: (1, 1, q, past + q); ``eager_dtype``: the dtype
    of an eager-attention model, which adds the mask to its scores (0 / -inf, not bools), else None."""
    if eager_dtype is None:
        return allowed[None, None]
    return torch.zeros(allowed.shape, dtype=eager_dtype).masked_fill(~allowed, torch.finfo(eager_dtype).min)[None, None]


@dataclass(frozen=True)
class ModelCall:
    """A forward a decode asks for: ``fused_call`` feeding ``new_ids`` causally and predicting the block ``block_ids``.

    The reply is a ``sbd_viz.decoders.base.Reply``: the logits of the last ``n_causal`` causal positions
    (n_causal, V), the block's logits (len(block_ids), V), float32, and the forward's wall time.
    """

    new_ids: list[int]
    block_ids: list[int]
    n_causal: int = 0


@dataclass(frozen=True)
class TreeCall:
    """A forward tree drafting asks for: ``tree_call`` feeding ``new_ids`` causally, the last ``n_branches`` of
    them the roots of ``n_branches`` blocks of ``block_size`` mask slots.

    The reply is a ``Reply`` whose ``causal`` holds the roots' logits (n_branches, V) and whose ``block`` holds
    every block's (n_branches, block_size, V), float32; or, given ``pick`` (the roots' logits -> a branch's number,
    ``branch_call``), the picked branch's block alone (block_size, V)."""

    new_ids: list[int]
    n_branches: int
    block_size: int
    pick: Callable[[torch.Tensor], int] | None = None


@dataclass(frozen=True)
class DraftTreeCall:
    """A forward that checks a token tree and drafts one: ``draft_tree_call`` feeding ``new_ids`` as the tree
    ``parents`` gives, a block of ``block_size`` mask slots after each fed token in ``roots`` (``blocks``: after
    those of them, by their numbers among the roots; None: after each); ``pick`` (the roots' logits -> a root's
    number) chooses the block whose drafts become the next tree, ``widths`` its candidates per slot
    (``SBDModel.draft_tree``).

    The reply is a ``Reply`` whose ``causal`` holds the roots' logits (len(roots), V), ``block`` the picked
    block's (block_size, V) and ``tree`` its ``DraftNode``s; ``block`` is None and ``tree`` empty when no block
    follows the picked root."""

    new_ids: list[int]
    parents: list[int]
    roots: list[int]
    block_size: int
    pick: Callable[[torch.Tensor], int]
    widths: tuple[int, ...]
    blocks: tuple[int, ...] | None = None


@dataclass(frozen=True)
class CacheCut:
    """A rollback a verified decode asks for: keep the cache's first ``length`` positions, then the positions in
    ``keep`` (ascending, each at or after ``length``: a token tree's accepted path). The reply is None."""

    length: int
    keep: tuple[int, ...] = ()


def default_model_path() -> Path:
    """The shipped model: ``$SBD_VIZ_MODEL``, else the copy installed with the package (``sbd_viz/weights/``)."""
    if os.environ.get("SBD_VIZ_MODEL"):
        return Path(os.environ["SBD_VIZ_MODEL"])
    path = Path(__file__).resolve().parents[1] / "weights" / DEFAULT_MODEL
    if path.is_dir():
        return path
    raise FileNotFoundError(
        f"path: the shipped model {path} is missing from this installation of sbd_viz; "
        "pass path=... or set SBD_VIZ_MODEL to a model folder")


class ModelBase:
    """What every model kind shares: a transformers model, its tokenizer and name; the device; the context it
    was trained on and the check that a decode fits in it; how the vocabulary is spelled. A model kind
    (``sbd_viz.models.kinds``: ``SBDModel``, ``sbd_viz.models.diffusion.DiffusionModel``) is one subclass: it
    checks its model's type and adds what only it has (SBD's block call, DiffusionGemma's canvas)."""

    # How an error names the context: "was trained on a context of N" (recorded at training), or the architecture's.
    context_words = "was trained on a context of"

    def __init__(self, model, tokenizer, name: str | None = None):
        if not callable(getattr(tokenizer, "encode", None)):
            raise TypeError("tokenizer: expected a transformers tokenizer")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self._text_cache: dict[int, str] = {}

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Every id that ends the text (a model kind whose config lists several says so)."""
        return () if self.eos_token_id is None else (int(self.eos_token_id),)

    @property
    def mask_id(self) -> int | None:
        """The mask token's id, or None if the model has none. No decode ever writes it."""
        mask_id = getattr(self.model.config, "mask_token_id", None)
        if mask_id is None:
            mask_id = self.tokenizer.mask_token_id
        return None if mask_id is None else int(mask_id)

    @property
    def context_length(self) -> int | None:
        """Positions the model was trained on: ``config.sbd_context_length`` as recorded by ``sbd-viz train``,
        else the (text) config's ``max_position_embeddings``, else None (no known limit)."""
        config = self.model.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        for name in ("sbd_context_length", "max_position_embeddings", "n_positions"):
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    def tokens_written(self, max_new_tokens: int) -> int:
        """The positions a decode of ``max_new_tokens`` may fill (a model that writes whole blocks rounds up)."""
        return max_new_tokens

    def check_fits(self, n_prompt: int, max_new_tokens: int) -> None:
        """Raise ``ValueError`` naming ``prompt`` or ``max_new_tokens`` if the decode could run past the context.

        ``n_prompt`` counts the prompt's tokens (with BOS). Beyond the trained context a model
        silently writes nonsense, so the limit is enforced before any call.
        """
        limit, written = self.context_length, self.tokens_written(max_new_tokens)
        if limit is None or n_prompt + written <= limit:
            return
        if n_prompt >= limit:
            raise ValueError(f"prompt: {n_prompt} tokens, but model {self.name!r} {self.context_words} "
                             f"{limit} tokens (prompt + max_new_tokens must fit in it); shorten the prompt")
        fit = max(n for n in range(limit - n_prompt + 1) if self.tokens_written(n) <= limit - n_prompt)
        as_written = "" if written == max_new_tokens else f" (written as {written}, whole blocks of {self.block_size})"
        raise ValueError(f"max_new_tokens: {max_new_tokens} new tokens{as_written} after a {n_prompt}-token prompt "
                         f"need {n_prompt + written} positions, but model {self.name!r} {self.context_words} "
                         f"{limit}; use max_new_tokens <= {fit} or a shorter prompt")

    def encode(self, text: str) -> list[int]:
        """Prompt ids, with the tokenizer's BOS if it adds one (as in training)."""
        return list(self.tokenizer(text).input_ids)

    def token_text(self, token_id: int) -> str:
        """One token's text as the tokenizer spells it alone (special tokens kept)."""
        if token_id not in self._text_cache:
            self._text_cache[token_id] = self.tokenizer.decode([token_id])
        return self._text_cache[token_id]

    def text(self, ids) -> str:
        """The ids' text as a reader sees it: special tokens skipped."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def raw_text(self, ids) -> str:
        """The ids' text with special tokens kept: where a stop is looked for (a chat model's stop string is a
        special token)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def output_texts(self, prompt_ids, ids) -> list[str]:
        """Each output token's text as a trace records it (``token_text``; ``sbd_viz.models.causal_lm.CausalLM`` reads a
        byte-level tokenizer's pieces in context, so a character split across tokens shows whole)."""
        return [self.token_text(t) for t in ids]

    def trace_meta(self) -> dict:
        """What a trace records of this model besides its name (``CausalLM``: its kind and special tokens)."""
        return {}


class SBDModel(ModelBase):
    """A causal LM ready for SBD decoding.

    ``SBDModel(hf_model, hf_tokenizer)`` wraps loaded objects; ``SBDModel.from_pretrained(path)``
    loads a folder (no ``trust_remote_code`` unless asked). The mask token id comes from
    ``config.mask_token_id`` or the tokenizer's mask token. Its kind is ``"sbd"`` (``MODEL_KIND``).
    """

    kind = "sbd"

    def __init__(self, model, tokenizer, name: str | None = None):
        if not hasattr(model, "config") or not callable(model):
            raise TypeError("model: expected a transformers causal LM (a PreTrainedModel)")
        super().__init__(model, tokenizer, name)
        self._eager = getattr(model.config, "_attn_implementation", "sdpa") == "eager"

    @staticmethod
    def load_folder(path: str | os.PathLike, dtype: torch.dtype = torch.float32, trust_remote_code: bool = False,
                    device: str | torch.device | None = None):
        """(transformers model, tokenizer) of a Hugging Face causal LM folder, with SDPA attention (the exact
        block masks need it; see ``_mask``)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a per-load progress bar is noise in a CLI or an app log
        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"path: {path} is not a model folder (no config.json)")
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa",
                                                     trust_remote_code=trust_remote_code)
        return (model if device is None else model.to(device)), tok

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype: torch.dtype = torch.float32,
                        trust_remote_code: bool = False, device: str | torch.device | None = None) -> "SBDModel":
        loaded = cls(*cls.load_folder(path, dtype, trust_remote_code, device), name=Path(path).name)
        loaded.block_size  # noqa: B018 -- a bad recorded block size fails here, at load, not mid-decode
        return loaded

    # -- vocabulary ---------------------------------------------------------------------
    @property
    def mask_token_id(self) -> int:
        mask_id = self.mask_id
        if mask_id is None:
            raise MaskTokenError(
                f"model {self.name!r} has no mask token, so it cannot decode with SBD. Fine-tune it for SBD "
                "(sbd-viz train --base DIR adds one), or call sbd_viz.add_mask_token(model, tokenizer) first; "
                "NTP decoding (decode_ntp) works without one")
        return mask_id

    @property
    def block_size(self) -> int:
        """The block size decodes use when none is given: ``config.sbd_block_size`` as recorded in the
        model's folder, else ``DEFAULT_BLOCK_SIZE`` (16, the paper's). A bad recorded value raises
        ``ValueError`` naming the config key (``from_pretrained`` reads it, so a bad folder fails at load)."""
        value = getattr(self.model.config, "sbd_block_size", None)
        if value is None:
            return DEFAULT_BLOCK_SIZE
        # checked here, not with checks.check_block_size: checks reads this module, and this error names the file
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BLOCK_SIZE:
            raise ValueError(f"config.sbd_block_size: model {self.name!r} records {value!r}, but a block size must "
                             f"be a whole number in [1, {MAX_BLOCK_SIZE}]; fix its config.json or remove the key")
        return value

    def fingerprint(self) -> str:
        """A short hash of the config and the weights, for caching results per model."""
        h = hashlib.sha256(self.model.config.to_json_string().encode())
        with torch.no_grad():
            for name, p in sorted(self.model.state_dict().items()):
                h.update(name.encode())
                h.update(p.detach().float().flatten()[:: max(1, p.numel() // 4096)].numpy().tobytes())
        return h.hexdigest()[:16]

    # -- the block call -------------------------------------------------------------------
    def block_rows(self, rows: torch.Tensor | None = None, suffix: int | None = None):
        """A context for one forward whose block rows are ``rows`` (bool, (batch, seq)) or its last ``suffix``
        rows. A model that treats block rows apart (an SBD adapter, ``sbd_viz.models.adapted_lm.AdaptedLM``, switches on
        there and only there) overrides it; a plain SBD model treats every row alike, so nothing changes."""
        return contextlib.nullcontext()

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _mask(self, past: int, n_causal: int, n_block: int) -> torch.Tensor:
        """(1, 1, q, past + q) mask: the new final tokens causal, the block sees everything."""
        return _as_attention(block_call_mask(past, n_causal, n_block), self.model.dtype if self._eager else None)

    def _forward(self, cache, ids: list[int], positions: torch.Tensor, mask: torch.Tensor,
                 n_keep: int | torch.Tensor, n_block: int) -> torch.Tensor:
        """One forward of ``ids`` at ``positions`` (q,) under ``mask`` (1, 1, q, past + q), appended to ``cache``,
        its last ``n_block`` rows block slots (``block_rows``), whose keys/values are cropped after it. Returns
        the logits of the last ``n_keep`` rows (n_keep, V), or of the rows ``n_keep`` numbers (a 1-D tensor),
        float32. If the forward raises, the cache is left exactly as it was."""
        ids_t = torch.tensor([list(ids)], device=self.device)  # (1, q)
        # DynamicLayer.update concatenates (never writes in place): keeping the old tensors
        # is enough to restore the cache if the forward fails partway through the layers.
        saved = [(layer.keys, layer.values) for layer in getattr(cache, "layers", [])]
        try:
            with self.block_rows(suffix=n_block):
                out = self.model(input_ids=ids_t, attention_mask=mask.to(self.device),
                                 position_ids=positions.to(self.device)[None], past_key_values=cache,
                                 use_cache=True, logits_to_keep=n_keep)
        except BaseException:
            for layer, (keys, values) in zip(cache.layers, saved):
                layer.keys, layer.values = keys, values
            raise
        if n_block:
            cache.crop(-n_block)  # drop the slots' keys/values: only final tokens stay cached
        return out.logits[0].float()

    @torch.inference_mode()
    def block_call(self, cache, new_ids: list[int], block_ids: list[int]) -> torch.Tensor:
        """One forward: append ``new_ids`` to ``cache`` causally and predict ``block_ids``' slots.

        ``new_ids`` are tokens that just became final (the prompt on the first call, the
        previous block afterwards, or nothing); ``block_ids`` is the block with mask ids in its
        masked slots. Returns the block's logits, float32 (k, V). The block's keys/values are
        not kept; if the forward raises, the cache is left exactly as it was.
        """
        if len(block_ids) < 1:
            raise ValueError("block_ids: the block must have at least one slot")
        return self.fused_call(cache, new_ids, block_ids)[1]

    @torch.inference_mode()
    def fused_call(self, cache, new_ids: list[int], block_ids: list[int],
                   n_causal: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``block_call`` that also returns the logits of the last ``n_causal`` causal positions.

        The logits at a causally fed token are NTP's prediction of the token after it, for free:
        verified decoding checks its drafts with them. ``block_ids`` may be empty (a causal-only
        call: the final check). Returns (n_causal, V) and (k, V), float32.
        """
        n, k = len(new_ids), len(block_ids)
        if not 0 <= n_causal <= n:
            raise ValueError(f"n_causal: must be in [0, {n}] (the tokens fed causally), got {n_causal}")
        if n_causal + k < 1:  # logits_to_keep=0 would mean "every position", not none
            raise ValueError("block_ids: empty, so n_causal must be at least 1")
        past = cache.get_seq_length()
        logits = self._forward(cache, list(new_ids) + list(block_ids), torch.arange(past, past + n + k),
                               self._mask(past, n, k), n_causal + k, k)  # (n_causal + k, V)
        return logits[:n_causal], logits[n_causal:]

    @torch.inference_mode()
    def tree_call(self, cache, new_ids: list[int], n_branches: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward of tree drafting: append ``new_ids`` to ``cache`` causally, and predict one block of ``k``
        mask slots after each of the last ``n_branches`` fed tokens (the roots).

        Verified SBD feeds the last accepted token and the drafts after it: root j is the text with the first j
        drafts accepted, and block j (``tree_call_mask``: it sees the fed text up to its root only) predicts the
        k positions after it, as a ``fused_call`` of that text and k masks does. Returns the roots' logits
        (n_branches, V), each NTP's verdict on the next draft, and the blocks' (n_branches, k, V), float32.
        Every fed token stays cached and every block's keys/values are dropped: the caller cuts the rejected
        drafts off with ``rollback``. If the forward raises, the cache is left exactly as it was."""
        return self.token_tree_call(cache, new_ids, *chain(len(new_ids), n_branches), k)

    @torch.inference_mode()
    def token_tree_call(self, cache, new_ids: list[int], parents: list[int], roots: list[int], k: int,
                        blocks: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``tree_call`` of a token tree: append ``new_ids`` to ``cache``, each fed token seeing its ancestors
        (``parents``: each one's parent among the fed tokens, -1 after the cache) at the position after its
        parent's, and predict one block of ``k`` mask slots after each fed token in ``roots`` (``blocks``: after
        those of them, by their numbers among the roots; None: after each) (``token_tree_mask``). Returns the roots'
        logits (len(roots), V) and the blocks' (number of blocks, k, V), float32. Every fed token stays cached, in
        the order fed: the caller keeps the accepted path with ``rollback``'s ``keep``. If the forward raises, the
        cache is left exactly as it was."""
        blocked = block_roots(roots, blocks)
        ids, positions, mask = self._tree_inputs(cache, new_ids, parents, blocked, k)
        n, r, b = len(new_ids), len(roots), len(blocked)
        # only the roots' rows (wherever they were fed) and the blocks' reach the output layer
        logits = self._forward(cache, ids, positions, mask, torch.tensor(list(roots) + list(range(n, n + b * k))),
                               b * k)
        return logits[:r], logits[r:].reshape(b, k, -1)

    def _tree_inputs(self, cache, new_ids: list[int], parents: list[int], roots: list[int],
                     k: int) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """A token-tree call's checked inputs: its ids (the fed tokens, then a block of mask slots after each root),
        their positions and its attention mask (``token_tree_call``)."""
        n = len(new_ids)
        parents = check_parents(parents, n)
        if not roots or any(isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n for r in roots):
            raise ValueError(f"roots: must be a non-empty list of fed tokens' numbers in [0, {n - 1}], got {roots!r}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_BLOCK_SIZE:
            raise ValueError(f"k: must be a whole number in [1, {MAX_BLOCK_SIZE}], got {k!r}")
        past, r = cache.get_seq_length(), len(roots)
        fed = past + torch.tensor(depths(parents))
        # block j's slot s sits right after root j, at the position the text's next tokens would take
        slots = fed[list(roots)][:, None] + 1 + torch.arange(k)[None, :]  # (r, k)
        positions = torch.cat([fed, slots.flatten()])
        ids = list(new_ids) + [self.mask_token_id] * (r * k)
        mask = _as_attention(token_tree_mask(past, parents, list(roots), k), self.model.dtype if self._eager else None)
        return ids, positions, mask

    @torch.inference_mode()
    def draft_tree_call(self, cache, new_ids: list[int], parents: list[int], roots: list[int], k: int,
                        pick: Callable[[torch.Tensor], int], widths: tuple[int, ...],
                        blocks: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor | None, list[DraftNode]]:
        """``token_tree_call`` for a caller that reads one block, the one after the root ``pick`` chooses from the
        roots' logits, and drafts a token tree from it (``draft_tree``). Returns the roots' logits, that block's
        (k, V) and the tree's nodes; None and no nodes if no block follows that root (``blocks``)."""
        roots_logits, found = self.token_tree_call(cache, new_ids, parents, roots, k, blocks)
        _, j = picked_block(pick, roots_logits, blocks)
        if j is None:
            return roots_logits, None, []
        return roots_logits, found[j], self.draft_tree(found[j], widths)

    def draft_tree(self, block: torch.Tensor, widths: tuple[int, ...]) -> list[DraftNode]:
        """The token tree a block's slot logits (k, V) draft (``grow_tree``): the best ``widths[s - 1]`` tokens at
        slot s after each node at slot s - 1 (1 past the end of ``widths``). A plain SBD model predicts each slot
        whatever the slots before it get, so every node at a slot has the same candidates."""
        return grow_tree(block, widths)

    @torch.inference_mode()
    def branch_call(self, cache, new_ids: list[int], n_branches: int, k: int,
                    pick: Callable[[torch.Tensor], int]) -> tuple[torch.Tensor, torch.Tensor]:
        """``tree_call`` for a caller that reads one branch, the one ``pick`` chooses from the roots' logits
        (verified SBD: the branch after the drafts NTP accepts). Returns the roots' logits (n_branches, V) and that
        branch's block (k, V). A model that works per branch after the forward (``AdaptedLM``'s sampler head)
        does that work for the picked branch alone."""
        roots, blocks = self.tree_call(cache, new_ids, n_branches, k)
        return roots, blocks[picked(pick, roots)]

    def rollback(self, cache, length: int, keep: tuple[int, ...] = ()) -> None:
        """Cut ``cache`` back to its first ``length`` positions (verified decoding's rollback), then the positions
        in ``keep`` (ascending, each at or after ``length``: a token tree's accepted path, ``token_tree_call``)."""
        current = cache.get_seq_length()
        if not 0 <= length <= current:
            raise ValueError(f"length: must be in [0, {current}] (the cached positions), got {length}")
        keep = tuple(keep)
        if any(not length <= a < b for a, b in zip(keep, keep[1:] + (current,))):
            raise ValueError(f"keep: must be ascending positions in [{length}, {current - 1}], got {list(keep)!r}")
        if keep == tuple(range(length, length + len(keep))):  # a prefix: a crop
            length, keep = length + len(keep), ()
        if keep:
            rows = torch.tensor(list(range(length)) + list(keep), device=self.device)
            for layer in cache.layers:  # transformers 5's DynamicLayer: (batch, heads, positions, head_dim)
                layer.keys, layer.values = layer.keys[:, :, rows], layer.values[:, :, rows]
        elif length < current:  # crop(n) with n > 0 raises on transformers 5's cache; crop(0) does nothing
            cache.crop(length - current)


# SBD's model kind: every SBD decoder and every causal one serves it. ``sv.load_model`` asks it last, so it opens any
# folder no other kind opens (``from_pretrained`` names what is wrong with one that is not an SBD model).
MODEL_KIND = ModelKind("sbd", "an SBD-trained model (SBDModel): it reads the mask slots' predictions", SBDModel,
                       opens=lambda source: True, load=SBDModel.from_pretrained, also=("causal",))
