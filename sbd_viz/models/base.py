"""The model classes' common base: ``ModelBase`` (a transformers model, its tokenizer, its context and vocabulary)
and ``CausalModel``, a causal LM and the one call a decoder makes on it (``call``: a ``sbd_viz.models.call.ModelCall``
answered by a ``Reply``), with its cache and rollback. An SBD model is a causal model with a mask token: its calls
also fill blocks. How a call's rows, positions and mask are laid out: docs/model_call.md."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from .call import ModelCall, Reply
from .token_tree import DraftNode, check_parents, depths, grow_tree, token_tree_mask

DEFAULT_BLOCK_SIZE = 16  # the paper's; a model folder may record its own (``config.sbd_block_size``)
MAX_BLOCK_SIZE = 64  # the largest block any decode accepts (a trace's picture stays readable)


class MaskTokenError(ValueError):
    """The model has no mask token, so it cannot decode with SBD."""


class ModelBase:
    """What every model kind shares: a transformers model, its tokenizer and name; the device; the context it
    was trained on and the check that a decode fits in it; how the vocabulary is spelled. A model kind
    (``sbd_viz.models.kinds``) is one subclass: ``CausalModel`` (the call that causal LMs, SBD models and adapted
    LMs share) or ``sbd_viz.models.diffusion.DiffusionModel`` (DiffusionGemma's canvas)."""

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
    def dtype(self) -> torch.dtype:
        """The weights' dtype (a trace records it)."""
        return self.model.dtype

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

    @property
    def block_size(self) -> int:
        """The block size decodes use when none is given (each model kind says)."""
        raise NotImplementedError(f"{type(self).__name__} says no block size")

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
            raise ValueError(
                f"prompt: {n_prompt} tokens, but model {self.name!r} {self.context_words} "
                f"{limit} tokens (prompt + max_new_tokens must fit in it); shorten the prompt"
            )
        fit = max(n for n in range(limit - n_prompt + 1) if self.tokens_written(n) <= limit - n_prompt)
        as_written = "" if written == max_new_tokens else f" (written as {written}, whole blocks of {self.block_size})"
        raise ValueError(
            f"max_new_tokens: {max_new_tokens} new tokens{as_written} after a {n_prompt}-token prompt "
            f"need {n_prompt + written} positions, but model {self.name!r} {self.context_words} "
            f"{limit}; use max_new_tokens <= {fit} or a shorter prompt"
        )

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
        """Each output token's text as a trace records it (``token_text``; ``sbd_viz.models.causal_lm.CausalLM`` reads
        a byte-level tokenizer's pieces in context, so a character split across tokens shows whole)."""
        return [self.token_text(t) for t in ids]

    def trace_meta(self) -> dict:
        """What a trace records of this model besides its name (``CausalLM``: its kind and special tokens)."""
        return {}


class CausalModel(ModelBase):
    """A causal LM and its tokenizer, and the one call every decoder makes on it (``call``). The call fills blocks
    of mask slots only for a model with a mask token (``mask_token_id``: an SBD model, an adapted LM); a model
    whose blocks are special says so through ``block_rows`` (the rows of a forward that are a block's), ``head``
    (a sampler head that chains a block's slots) and ``split_rows`` (from how many unpicked block rows on a picked
    call runs the output layer after the forward, on the picked block alone; None: never)."""

    kind = "causal"  # a plain causal LM's kind; each subclass names its own
    head: Callable[..., torch.Tensor] | None = None
    split_rows: int | None = None
    candidates: int | None = None  # with a head: how many of a slot's own best tokens the chained draft is among

    def __init__(self, model, tokenizer, name: str | None = None):
        if not hasattr(model, "config") or not callable(model):
            raise TypeError("model: expected a transformers causal LM (a PreTrainedModel)")
        super().__init__(model, tokenizer, name)
        self.eager = getattr(model.config, "_attn_implementation", "sdpa") == "eager"
        # every row's final hidden state (the output layer's input), kept for a call that asks: a sampler head reads
        # the blocks' there, and a picked block's logits are taken there after the forward. Per thread: the app runs
        # one model on several threads at once.
        self._hidden = threading.local()
        base = getattr(model, "base_model", None)
        if base is not None and base is not model:
            base.register_forward_hook(self._keep_hidden)

    @staticmethod
    def load_folder(
        path: str | os.PathLike,
        dtype: torch.dtype = torch.float32,
        trust_remote_code: bool = False,
        device: str | torch.device | None = None,
    ):
        """(transformers model, tokenizer) of a Hugging Face causal LM folder, with SDPA attention (the exact
        block masks need it; see ``attention_mask``)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a per-load progress bar is noise in a CLI or an app log
        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"path: {path} is not a model folder (no config.json)")
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, attn_implementation="sdpa", trust_remote_code=trust_remote_code
        )
        return (model if device is None else model.to(device)), tok  # type: ignore[arg-type]

    @property
    def mask_token_id(self) -> int:
        """The mask token's id; a model without one cannot fill blocks (``MaskTokenError``)."""
        mask_id = self.mask_id
        if mask_id is None:
            raise MaskTokenError(f"model {self.name!r} has no mask token, so its calls cannot fill blocks")
        return mask_id

    @property
    def block_size(self) -> int:
        """The block size decodes use when none is given: ``config.sbd_block_size`` as recorded in the model's folder,
        else ``DEFAULT_BLOCK_SIZE`` (the paper's 16). A bad recorded value raises ``ValueError`` naming the config
        key (``SBDModel.from_pretrained`` reads it, so a bad folder fails at load)."""
        recorded = self.recorded_block_size()
        return DEFAULT_BLOCK_SIZE if recorded is None else recorded

    def recorded_block_size(self) -> int | None:
        """``config.sbd_block_size`` as the model's folder records it, None if it records none; a bad value raises
        ``ValueError`` naming the config key."""
        value = getattr(self.model.config, "sbd_block_size", None)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BLOCK_SIZE:
            raise ValueError(
                f"config.sbd_block_size: model {self.name!r} records {value!r}, but a block size must "
                f"be a whole number in [1, {MAX_BLOCK_SIZE}]; fix its config.json or remove the key"
            )
        return value

    def fingerprint(self) -> str:
        """A short hash of the config and the weights, for caching results per model."""
        h = hashlib.sha256(self.model.config.to_json_string().encode())
        with torch.no_grad():
            for name, p in sorted(self.model.state_dict().items()):
                h.update(name.encode())
                h.update(p.detach().float().flatten()[:: max(1, p.numel() // 4096)].numpy().tobytes())
        return h.hexdigest()[:16]

    # -- the call -------------------------------------------------------------------------------
    def block_rows(self, rows: torch.Tensor | None = None, suffix: int | None = None):
        """A context for one forward whose block rows are ``rows`` (bool, (batch, seq)) or its last ``suffix``
        rows. A model that treats block rows apart (an SBD adapter, ``sbd_viz.models.adapted_lm.AdaptedLM``,
        switches on there and only there) overrides it; here every row is alike, so nothing changes."""
        return contextlib.nullcontext()

    def attention_mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """A bool mask (True = attend; (q, keys), or (batch, q, keys)) as the model's attention takes it, with a
        heads axis: bools for SDPA, 0 / -inf added to the scores for eager attention (which reads bools wrongly)."""
        allowed = allowed[None] if allowed.dim() == 2 else allowed
        if not self.eager:
            return allowed[:, None]
        dtype = self.model.dtype
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[:, None]

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _keep_hidden(self, module, args, output):
        if getattr(self._hidden, "wanted", False):
            self._hidden.value = output[0]

    def forward(
        self,
        cache,
        ids: list[int],
        positions: torch.Tensor,
        mask: torch.Tensor,
        keep: list[int],
        n_block: int,
        hidden: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward of ``ids`` at ``positions`` (q,) under ``mask`` (1, 1, q, past + q), appended to ``cache``,
        its last ``n_block`` rows block slots (``block_rows``), whose keys/values are cropped after it. Returns the
        logits of the rows ``keep`` numbers (len(keep), V), float32, and with ``hidden`` every row's final hidden
        state (1, q, d). If the forward raises, the cache is left exactly as it was."""
        q = len(ids)
        ids_t = torch.tensor([list(ids)], device=self.device)  # (1, q)
        # the last rows as a count, as generate asks for them; any other rows by number
        trailing = list(keep) == list(range(q - len(keep), q))
        to_keep: int | torch.Tensor = len(keep) if trailing else torch.tensor(list(keep))
        # DynamicLayer.update concatenates (never writes in place): keeping the old tensors
        # is enough to restore the cache if the forward fails partway through the layers.
        saved = [(layer.keys, layer.values) for layer in getattr(cache, "layers", [])]
        self._hidden.wanted = hidden
        try:
            with self.block_rows(suffix=n_block):
                out = self.model(
                    input_ids=ids_t,
                    attention_mask=mask.to(self.device),
                    position_ids=positions.to(self.device)[None],
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=to_keep,
                )
            states = self._hidden.value if hidden else None
        except BaseException:
            for layer, (keys, values) in zip(cache.layers, saved):
                layer.keys, layer.values = keys, values
            raise
        finally:
            self._hidden.wanted, self._hidden.value = False, None
        if n_block:
            cache.crop(-n_block)  # drop the slots' keys/values: only final tokens stay cached
        return out.logits[0].float(), states

    @torch.inference_mode()
    def call(self, cache, request: ModelCall) -> Reply:
        """Answer one ``ModelCall`` on ``cache`` (see its fields): the fed tokens' logits asked for, the blocks' (or
        the picked one's) and the tree drafted from it. If the forward raises, the cache is left as it was."""
        t0 = time.perf_counter()
        new_ids, block_ids = list(request.new_ids), list(request.block_ids)
        n, k = len(new_ids), len(block_ids)
        rows, roots = self._rows(request, n, k)
        if not rows and not k:  # a forward that returns nothing
            raise ValueError("request: asks for no logits (logits_at) and no block (block_ids)")
        past = cache.get_seq_length()
        parents = list(range(-1, n - 1)) if request.parents is None else check_parents(request.parents, n)
        fed = past + torch.tensor(depths(parents), dtype=torch.long)
        # block j's slot s sits right after root j, at the position the text's next tokens would take
        starts = torch.tensor([past if r < 0 else int(fed[r]) + 1 for r in roots], dtype=torch.long)
        positions = torch.cat([fed, (starts[:, None] + torch.arange(k)[None, :]).flatten()])
        ids = new_ids + block_ids * len(roots)
        mask = self.attention_mask(token_tree_mask(past, parents, roots, k))
        b = len(roots)
        # a picked call with many blocks: the output layer reads the roots in the forward and the picked block
        # after it (the other blocks' logits would be thrown away)
        split = request.pick is not None and self.split_rows is not None and (b - 1) * k >= self.split_rows
        keep = rows + ([] if split else list(range(n, n + b * k)))
        wants_hidden = split or (request.chained and self.head is not None)
        logits, states = self.forward(cache, ids, positions, mask, keep, b * k, hidden=wants_hidden)
        causal = logits[: len(rows)]
        hidden = None if states is None else states[0, n:].reshape(b, k, states.shape[-1])  # (b, k, d)
        chained = request.chained and self.head is not None
        if request.pick is None:
            blocks = logits[len(rows) :].reshape(b, k, logits.shape[-1])  # (b, k, V)
            if chained and b:
                assert hidden is not None  # a chained call's forward keeps them
                blocks = self.chain(causal[[rows.index(r) for r in roots]], blocks, hidden, self.own_candidates(blocks))
            return Reply(causal, blocks, time.perf_counter() - t0)
        j = request.pick(causal)
        if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < len(rows):
            raise ValueError(f"pick: must return the number of one of the {len(rows)} logits_at rows, got {j!r}")
        if rows[j] not in roots:  # no block follows the picked token
            return Reply(causal, logits.new_zeros((0, k, logits.shape[-1])), time.perf_counter() - t0)
        jb = roots.index(rows[j])
        states_jb = None if hidden is None else hidden[jb]  # (k, d)
        if split:  # the picked block (k, V) through the output layer now: the forward left it out
            assert states_jb is not None
            block = self.model.get_output_embeddings()(states_jb).float()
        else:
            block = logits[len(rows) :].reshape(b, k, logits.shape[-1])[jb]
        own = None
        if chained:
            assert states_jb is not None
            own = self.own_candidates(block[None])
            block = self.chain(causal[j : j + 1], block[None], states_jb[None], own)[0]
        tree: tuple[DraftNode, ...] = ()
        if request.widths is not None:
            children = None
            if chained:
                assert states_jb is not None
                children = self.children(states_jb, None if own is None else own[0])
            tree = tuple(grow_tree(block, request.widths, children))
        return Reply(causal, block[None], time.perf_counter() - t0, tree)

    def _rows(self, request: ModelCall, n: int, k: int) -> tuple[list[int], list[int]]:
        """A call's checked ``logits_at`` rows and the fed tokens its blocks follow (-1: the cache's end)."""
        rows = _fed_numbers(request.logits_at, n, "logits_at")
        if not k:
            if request.blocks_after:
                raise ValueError("blocks_after: the call has no block (block_ids is empty)")
            return rows, []
        if k > MAX_BLOCK_SIZE:
            raise ValueError(f"block_ids: at most {MAX_BLOCK_SIZE} slots, got {k}")
        if request.blocks_after is None:
            return rows, [n - 1]
        roots = _fed_numbers(request.blocks_after, n, "blocks_after", at_least_one=True)
        if request.chained and not set(roots) <= set(rows):
            raise ValueError("blocks_after: a chained block reads its root's logits; each must be in logits_at")
        return rows, roots

    # -- a sampler head's chained drafts (``head``; none here) -----------------------------------
    def own_candidates(self, blocks: torch.Tensor) -> torch.Tensor | None:
        """Each slot's ``candidates`` best tokens by the blocks' own logits (n, k, c), or None (whole vocabulary)."""
        return None

    def chain(
        self, roots: torch.Tensor, blocks: torch.Tensor, hidden: torch.Tensor, own: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The blocks (n, k, V) with slots 1..k-1 chained by the sampler head from each root's (n, V) greedy token."""
        raise NotImplementedError(f"{type(self).__name__} has no sampler head to chain a block's slots")

    def children(self, hidden: torch.Tensor, own: torch.Tensor | None) -> Callable[[int, list[int]], torch.Tensor]:
        """``grow_tree``'s ``children``: slot s's logits after each of some tokens at slot s - 1, by the head."""
        raise NotImplementedError(f"{type(self).__name__} has no sampler head to grow a tree's children")

    def rollback(self, cache, length: int, keep: Sequence[int] = ()) -> None:
        """Cut ``cache`` back to its first ``length`` positions (verified decoding's rollback), then the positions
        in ``keep`` (ascending, each at or after ``length``: a token tree's accepted path)."""
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


def _fed_numbers(values, n: int, name: str, at_least_one: bool = False) -> list[int]:
    """``values`` as ascending numbers of a call's ``n`` fed tokens, else a ``ValueError`` naming ``name``."""
    numbers = list(values)
    if (
        (at_least_one and not numbers)
        or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n for v in numbers)
        or numbers != sorted(set(numbers))
    ):
        least = ", at least one" if at_least_one else ""
        raise ValueError(f"{name}: must be ascending numbers of fed tokens in [0, {n - 1}]{least}, got {numbers!r}")
    return numbers
