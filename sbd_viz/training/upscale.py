"""Upscaled copies of a trained model that start out computing exactly what it computes.

The cheap way to ask whether a deeper or wider model pays for itself inside a small training budget:
one trained from scratch would spend the budget relearning what the trained model knows, so the copy
starts from the trained model's function. The added parts start silent (their writes into the residual
stream are zero) and training decides what they become (``sbd-viz train --base M --deepen 2`` or
``--widen HIDDEN``). Both work on Llama-style models (``LlamaForCausalLM``:
``model.layers[i].self_attn.{q,k,v,o}_proj``, ``.mlp.{gate,up,down}_proj``, RMS norms), the
architecture ``sbd-viz train`` builds.
"""

from __future__ import annotations

import copy
import math

import torch

# The projections that write into the residual stream: whatever an upscale adds to them starts at zero.
_WRITERS = ("self_attn.o_proj.weight", "mlp.down_proj.weight", "embed_tokens.weight")


def _check_llama(model, what: str) -> None:
    first = next(iter(getattr(getattr(model, "model", None), "layers", None) or []), None)
    if not (hasattr(getattr(first, "self_attn", None), "o_proj") and hasattr(getattr(first, "mlp", None), "down_proj")):
        raise ValueError(
            f"{what}: needs Llama-style layers (model.layers[i].self_attn.o_proj, .mlp.down_proj); "
            f"{type(model).__name__} has none"
        )


def deepen_layers(model, times: int):
    """Repeat each decoder layer ``times`` times, in place; the model still computes exactly what it did.

    Every copy after the first gets zero output projections (attention ``o_proj``, MLP ``down_proj``),
    so it adds nothing to the residual stream until training moves it. The copies start from trained
    weights instead of noise, the cheap way to ask whether depth pays for itself.
    """
    if times < 1:
        raise ValueError(f"times: must be >= 1, got {times}")
    _check_llama(model, "deepen")
    layers = []
    for layer in model.model.layers:
        layers.append(layer)
        for _ in range(times - 1):
            twin = copy.deepcopy(layer)
            for name, p in twin.named_parameters():
                if name.endswith(_WRITERS):
                    torch.nn.init.zeros_(p)
            layers.append(twin)
    for i, layer in enumerate(layers):
        layer.self_attn.layer_idx = i  # each layer owns its slot of the KV cache
    model.model.layers = torch.nn.ModuleList(layers)
    model.config.num_hidden_layers = len(layers)
    return model


def widen_model(model, hidden_size: int):
    """A copy of ``model`` with a wider residual stream, more attention heads and a wider MLP, that
    computes exactly what ``model`` computes (up to float rounding).

    ``hidden_size`` must be a multiple of the head size: the added width is whole new heads of the same
    size, and the MLP grows in proportion. The new residual dimensions start at zero: the embedding's
    and every writer's (``o_proj``, ``down_proj``) new entries are zero, so no layer writes there and
    no new head or MLP unit reaches the old dimensions yet. Their readers (``q/k/v``, ``gate/up``) get
    the fresh model's random init on the new entries, so gradients reach every new part: the writers
    from the first step, the new heads' and the new dimensions' readers once those writers have moved
    (the second step). RMS norms average over the wider stream, so their weights shrink by
    ``sqrt(old / new)`` and their epsilon by ``old / new`` to give the same output. Needs tied input and
    output embeddings and no biases.
    """
    _check_llama(model, "widen")
    cfg = model.config
    old, head = cfg.hidden_size, getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if hidden_size <= old or hidden_size % head:
        raise ValueError(
            f"hidden_size: must be a multiple of the head size {head} above the model's {old}, got {hidden_size}"
        )
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        raise ValueError("widen: biases are not supported (a writer's bias would need zero padding)")
    if cfg.num_key_value_heads != cfg.num_attention_heads or not cfg.tie_word_embeddings:
        raise ValueError(
            "widen: needs one key/value head per attention head and tied embeddings "
            f"(got {cfg.num_key_value_heads} kv heads for {cfg.num_attention_heads}, "
            f"tie_word_embeddings={cfg.tie_word_embeddings})"
        )
    wide_cfg = copy.deepcopy(cfg)
    wide_cfg.hidden_size, wide_cfg.head_dim = hidden_size, head
    wide_cfg.num_attention_heads = wide_cfg.num_key_value_heads = hidden_size // head
    wide_cfg.intermediate_size = round(cfg.intermediate_size * hidden_size / old)
    wide_cfg.rms_norm_eps = cfg.rms_norm_eps * old / hidden_size  # with the weights' shrink: the same norm exactly
    wide = type(model)(wide_cfg).to(next(model.parameters()).dtype)
    shrink = math.sqrt(old / hidden_size)
    trained = model.state_dict()
    with torch.no_grad():
        for name, p in wide.named_parameters():  # the tied lm_head is the embedding: set once
            w = trained[name]
            if w.dim() == 1:  # an RMS norm's weight
                p.fill_(w.mean().item() * shrink)
                p[: len(w)] = w * shrink
                continue
            if name.endswith(_WRITERS):
                p.zero_()
            p[: w.shape[0], : w.shape[1]] = w
    if wide.lm_head.weight.data_ptr() != wide.model.embed_tokens.weight.data_ptr():
        raise ValueError("widen: the widened copy did not tie its embeddings")
    return wide
