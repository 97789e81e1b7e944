"""Roofline projections: what a trace's calls would cost on the hardware people deploy on.

``Hardware`` and ``ModelShape`` (the named ones in ``HARDWARE`` / ``MODELS``), ``forward_time`` (eq. 15),
``slowdown`` (Table 3), ``wallclock_speedup`` (Table 4), ``project`` and ``project_frame``. The paper's model, the two
modes, and how the printed tables were reverse-engineered: docs/roofline.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..decoders.ntp import NTP
from ..trace.checks import check_number, check_whole
from ..trace.data import Trace
from .signature import same_signature

MODES = ("corrected", "paper")
DEFAULT_HARDWARE = "h100-fp8"
DEFAULT_MODEL = "paper-8b"
THIS_CPU = "this-cpu"
TIB = 1024**4


@dataclass(frozen=True)
class Hardware:
    """A device at one precision: two roofs (FLOP/s, bytes/s) and the bytes per element it moves."""

    name: str
    peak_flops: float  # FLOP/s of the weight GEMMs at this precision, dense (no sparsity)
    attn_flops: float  # FLOP/s of the fused attention kernel
    bandwidth: float  # bytes/s of main memory
    weight_bytes: float  # bytes per weight
    act_bytes: float  # bytes per activation element a kernel reads or writes
    kv_bytes: float  # bytes per cached key / value element
    source: str = ""

    def __post_init__(self):
        for f in fields(self)[1:7]:
            v = getattr(self, f.name)
            check_number(v, f.name, 0, lo_open=True, note=f" (hardware {self.name!r})")

    @property
    def ridge(self) -> float:
        """FLOP per byte where a GEMM turns compute-bound."""
        return self.peak_flops / self.bandwidth


@dataclass(frozen=True)
class ModelShape:
    """The shapes a forward touches: a decoder-only transformer with grouped-query attention."""

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int  # the FFN's inner size (intermediate_size)
    gated: bool  # SwiGLU-style FFN: gate, up and down matrices; else up and down
    vocab: int = 0  # LM head width; 0 = not modelled (the paper's code has none)
    source: str = ""

    def __post_init__(self):
        for f in fields(self)[1:7]:
            v = getattr(self, f.name)
            check_whole(v, f.name, 1, note=f" (model {self.name!r})")
        check_whole(self.vocab, "vocab", 0, note=f" (model {self.name!r})")


# -- the records ---------------------------------------------------------------------------------
HARDWARE = {
    # The paper's Appendix A.2 constants: FP8 dense 1978e12 (NVIDIA's H100 SXM datasheet prints 3,958
    # TFLOPS FP8 with sparsity, i.e. 1,979 dense), attention in BF16 at 989e12, and 3.35 TB/s read as
    # 3.35 * 1024**4 B/s (the datasheet means 3.35e12; the paper's reading is ~10% higher). Weights,
    # activations and KV at one byte, as in the printed code.
    "h100-fp8": Hardware(
        "h100-fp8", 1978e12, 989e12, 3.35 * TIB, 1, 1, 1, "paper Appendix A.2 (H100 SXM, FP8 weights, BF16 attention)"
    ),
    # NVIDIA H100 SXM5 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity -> 989.5 dense; HBM3 3.35 TB/s.
    "h100-bf16": Hardware(
        "h100-bf16",
        989.5e12,
        989.5e12,
        3.35e12,
        2,
        2,
        2,
        "NVIDIA H100 SXM5 datasheet: 989.5 TFLOPS BF16 dense, 3.35 TB/s HBM3",
    ),
    # NVIDIA H200 SXM datasheet: the H100's compute (BF16 1,979 TFLOPS sparse -> 989.5 dense); HBM3e 4.8 TB/s.
    "h200-bf16": Hardware(
        "h200-bf16",
        989.5e12,
        989.5e12,
        4.8e12,
        2,
        2,
        2,
        "NVIDIA H200 SXM datasheet: 989.5 TFLOPS BF16 dense, 4.8 TB/s HBM3e",
    ),
    # NVIDIA A100 80GB SXM datasheet: BF16 Tensor Core 312 TFLOPS dense (624 sparse); HBM2e 2,039 GB/s.
    "a100-bf16": Hardware(
        "a100-bf16",
        312e12,
        312e12,
        2.039e12,
        2,
        2,
        2,
        "NVIDIA A100 80GB SXM datasheet: 312 TFLOPS BF16 dense, 2,039 GB/s HBM2e",
    ),
}

MODELS = {
    # The paper's "standard 8B": hidden 4096, FFN 4 x hidden, 32 heads of 128, 8 KV heads. Two FFN
    # matrices and no LM head, as its code has; 32 layers (the paper does not say; ratios ignore it).
    "paper-8b": ModelShape("paper-8b", 32, 4096, 32, 8, 128, 16384, False, 0, "paper Appendix A.2 'standard 8B'"),
    # meta-llama/Llama-3.1-8B config.json: hidden_size 4096, intermediate_size 14336, 32 layers,
    # 32 heads, 8 KV heads, head_dim 128, vocab 128256, SwiGLU, untied LM head.
    "llama-3.1-8b": ModelShape(
        "llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, True, 128256, "meta-llama/Llama-3.1-8B config.json"
    ),
    # Qwen/Qwen3-8B config.json: hidden_size 4096, intermediate_size 12288, 36 layers, 32 heads,
    # 8 KV heads, head_dim 128, vocab 151936, SwiGLU, untied LM head.
    "qwen-3-8b": ModelShape("qwen-3-8b", 36, 4096, 32, 8, 128, 12288, True, 151936, "Qwen/Qwen3-8B config.json"),
}

# FFNs with two matrices (up, down); every other architecture is taken as gated (gate, up, down).
_UNGATED = {"gpt2", "gpt_neox", "gptj", "gpt_neo", "gpt_bigcode", "opt", "bloom", "falcon", "phi", "starcoder2"}
_DENSE_AND_EXPERTS = {"diffusion_gemma_text", "gemma4_text"}  # MoE layers that also keep a dense MLP


# -- looking records up ------------------------------------------------------------------------
def cpu_json_path() -> Path:
    """Where the measured ``"this-cpu"`` entry lives: ``$SBD_VIZ_ROOFLINE_CPU``, else ``roofline_cpu.json`` in the
    package (measured on the project's 2-core machine by ``bench/scripts/bench_roofline.py``)."""
    env = os.environ.get("SBD_VIZ_ROOFLINE_CPU")
    return Path(env) if env else Path(__file__).resolve().parent / "roofline_cpu.json"


def _load_cpu() -> Hardware | None:
    path = cpu_json_path()
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(
            f"hardware: {path} is not valid JSON ({exc}); re-run python bench/scripts/bench_roofline.py"
        ) from exc
    names = [f.name for f in fields(Hardware)][1:7]
    if not isinstance(d, dict) or any(n not in d for n in names):
        raise ValueError(f"hardware: {path} lacks {names}; re-run python bench/scripts/bench_roofline.py")
    return Hardware(THIS_CPU, **{n: d[n] for n in names}, source=str(d.get("source", str(path))))


def hardware_names() -> tuple[str, ...]:
    """The named hardware entries; ``"this-cpu"`` only once ``bench/scripts/bench_roofline.py`` has measured it."""
    return tuple(HARDWARE) + ((THIS_CPU,) if cpu_json_path().is_file() else ())


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def get_hardware(hardware: str | Hardware) -> Hardware:
    """A ``Hardware`` record from a name (see ``hardware_names()``) or the record itself."""
    if isinstance(hardware, Hardware):
        return hardware
    if hardware == THIS_CPU:
        hw = _load_cpu()
        if hw is None:
            raise ValueError(
                f"hardware: 'this-cpu' has not been measured on this machine ({cpu_json_path()} "
                "does not exist); run `python bench/scripts/bench_roofline.py` to measure it, or pick one "
                f"of {list(HARDWARE)}"
            )
        return hw
    if isinstance(hardware, str) and hardware in HARDWARE:
        return HARDWARE[hardware]
    raise ValueError(
        f"hardware: unknown {hardware!r}; known: {list(hardware_names())} "
        f"(or '{THIS_CPU}' after bench/scripts/bench_roofline.py), or pass a roofline.Hardware"
    )


def shape_from_config(config: Any, name: str | None = None) -> ModelShape:
    """A ``ModelShape`` from a transformers config (``PretrainedConfig`` or its dict), a loaded HF model,
    or an ``sbd_viz.SBDModel`` (its ``.model.config``). GPT-2 style names (``n_embd``...) are understood."""
    if hasattr(config, "model") and hasattr(config.model, "config"):  # an SBDModel (or an HF model)
        name = name or getattr(config, "name", None)
        config = config.model.config
    elif hasattr(config, "config") and not isinstance(config, dict):  # a PreTrainedModel
        config = config.config
    get = config.get if isinstance(config, dict) else (lambda key, default=None: getattr(config, key, default))
    path = str(get("_name_or_path") or get("name_or_path") or "").rstrip("/")
    text = get("text_config")
    if text is not None:  # a multimodal config (DiffusionGemma): the text model's shapes
        # as a dict: its per-layer attributes (head_dim) read as the global value
        get = (text if isinstance(text, dict) else text.to_dict()).get

    def first(*keys):
        for key in keys:
            value = get(key)
            if value is not None:
                return value
        return None

    hidden = first("hidden_size", "n_embd", "d_model")
    n_heads = first("num_attention_heads", "n_head", "num_heads")
    n_layers = first("num_hidden_layers", "n_layer", "num_layers")
    if not all(isinstance(v, int) for v in (hidden, n_heads, n_layers)):
        raise ValueError(
            "config: needs hidden_size, num_attention_heads and num_hidden_layers (or the GPT-2 names "
            f"n_embd, n_head, n_layer); got {hidden!r}, {n_heads!r}, {n_layers!r}"
        )
    model_type = str(first("model_type") or "")
    ffn, source = first("intermediate_size", "n_inner", "ffn_dim") or 4 * hidden, model_type or "unknown type"
    experts, top_k, expert_ffn = first("num_experts"), first("top_k_experts"), first("moe_intermediate_size")
    if model_type in _DENSE_AND_EXPERTS and experts and top_k and expert_ffn:
        # each layer runs its dense MLP and top_k of its experts: the FFN's active inner size is their sum
        # (one token's view: a call of many tokens may read more experts' weights than this counts)
        ffn += top_k * expert_ffn
        source += f"; MoE: {top_k} of {experts} experts active, beside the dense MLP"
    return ModelShape(
        name=name or os.path.basename(path) or model_type or "model",
        n_layers=n_layers,
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=first("num_key_value_heads", "num_kv_heads") or n_heads,
        head_dim=first("head_dim") or hidden // n_heads,
        ffn=ffn,
        gated=model_type not in _UNGATED,
        vocab=first("vocab_size") or 0,
        source=f"config ({source})",
    )


def get_model(model: Any) -> ModelShape:
    """A ``ModelShape`` from a name (see ``model_names()``), a record, a config, an HF model or an SBDModel."""
    if isinstance(model, ModelShape):
        return model
    if isinstance(model, str):
        if model in MODELS:
            return MODELS[model]
        raise ValueError(
            f"model: unknown {model!r}; known: {list(MODELS)}, or pass a transformers config, "
            "an sbd_viz.SBDModel or a roofline.ModelShape"
        )
    if model is None or isinstance(model, (int, float, bool)):
        raise ValueError(f"model: expected a name {list(MODELS)}, a config or a ModelShape, got {model!r}")
    return shape_from_config(model)


def _whole(name: str, value: Any, lo: int) -> int:
    return check_whole(value, name, lo)


def _mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {list(MODES)}, got {mode!r}")
    return mode


# -- eq. 15: one forward ---------------------------------------------------------------------------
def _gemm(m: int, k: int, n: int, hw: Hardware) -> tuple[float, float, float]:
    """(FLOPs, bytes, peak FLOP/s) of an (m, k) @ (k, n) product: weights read once, inputs and outputs moved."""
    return 2.0 * m * k * n, k * n * hw.weight_bytes + (m * k + m * n) * hw.act_bytes, hw.peak_flops


def kernels(
    q: int, kv_len: int, batch: int, hw: Hardware, shape: ModelShape, mode: str, logits: int
) -> list[tuple[str, float, float, float, int]]:
    """Every kernel of one forward as ``(name, FLOPs, bytes, peak FLOP/s, repeats)``; see ``forward_time``."""
    m, h, d = batch * q, shape.hidden, shape.n_heads * shape.head_dim
    if mode == "paper":  # the printed code's two shape errors, kept on purpose; keys: the cache only
        kv_width, inner, ffn_in, keys = shape.n_heads * shape.n_kv_heads, h * shape.ffn, 1, kv_len
    else:  # the new tokens' keys are attended too (a prefill at kv_len 0 still has attention)
        kv_width, inner, ffn_in = shape.n_kv_heads * shape.head_dim, shape.ffn, 2 if shape.gated else 1
        keys = kv_len + q
    attn = (
        4.0 * batch * shape.n_heads * q * keys * shape.head_dim,  # QK^T and PV
        batch * (2 * q * d * hw.act_bytes + 2 * keys * shape.n_kv_heads * shape.head_dim * hw.kv_bytes),
        hw.attn_flops,
    )
    L = shape.n_layers
    out = [
        ("q_proj", *_gemm(m, h, d, hw), L),
        ("k_proj", *_gemm(m, h, kv_width, hw), L),
        ("v_proj", *_gemm(m, h, kv_width, hw), L),
        ("attention", *attn, L),
        ("o_proj", *_gemm(m, d, h, hw), L),
        ("ffn_in", *_gemm(m, h, inner, hw), L * ffn_in),
        ("ffn_out", *_gemm(m, inner, h, hw), L),
    ]
    if mode == "corrected" and shape.vocab and logits:
        out.append(("lm_head", *_gemm(batch * logits, h, shape.vocab, hw), 1))
    return out


def _time(ks) -> float:
    return sum(n * max(flops / peak, nbytes / bw) for _, flops, nbytes, peak, n, bw in ks)


def _resolved(
    q: int,
    kv_len: int,
    batch: int = 1,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    model: Any = DEFAULT_MODEL,
    mode: str = "corrected",
    logits: int | None = None,
) -> list[tuple]:
    """One forward's kernels (``kernels``), each with its hardware's bandwidth: the parameters of ``forward_time``
    and ``compute_and_memory``, checked."""
    q, kv_len, batch = _whole("q", q, 1), _whole("kv_len", kv_len, 0), _whole("batch", batch, 1)
    logits = q if logits is None else _whole("logits", logits, 0)
    if logits > q:
        raise ValueError(f"logits: at most q = {q} rows can reach the LM head, got {logits}")
    hw, shape = get_hardware(hardware), get_model(model)
    ks = kernels(q, kv_len, batch, hw, shape, _mode(mode), logits)
    return [(*k, hw.bandwidth) for k in ks]


@same_signature(_resolved)
def forward_time(*args: Any, **kwargs: Any) -> float:
    """Seconds of one forward of ``q`` new tokens per sequence over a cache of ``kv_len`` tokens (eq. 15).

    ``batch`` sequences run together, each with the same ``q`` and ``kv_len``. Each kernel costs
    ``max(FLOPs / peak, bytes / bandwidth)``; the projections and the FFN are GEMMs over ``batch * q`` rows that read
    their weights once; attention is one fused kernel over ``kv_len + q`` keys (``kv_len`` in paper mode, as the printed
    code). ``logits``: rows per sequence that go through the LM head (default ``q``; an SBD block call needs its ``k``
    slots, an NTP step 1); only shapes with a ``vocab`` have one.
    """
    return _time(_resolved(*args, **kwargs))


@same_signature(_resolved)
def compute_and_memory(*args: Any, **kwargs: Any) -> tuple[float, float]:
    """The forward's two roofs summed over its kernels: (seconds at peak FLOP/s, seconds at full bandwidth);
    arguments as ``forward_time``'s."""
    ks = _resolved(*args, **kwargs)
    return sum(n * f / p for _, f, _, p, n, _ in ks), sum(n * b / bw for _, _, b, _, n, bw in ks)


def knee_tokens(
    batch: int = 1,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    model: Any = DEFAULT_MODEL,
    kv_len: int = 16,
    mode: str = "corrected",
    max_tokens: int = 2**20,
) -> int | None:
    """The fewest tokens per sequence at which a forward's compute time reaches its memory time
    (where the time per call starts to grow with the tokens in it); None beyond ``max_tokens``."""
    hardware, model = get_hardware(hardware), get_model(model)  # once: "this-cpu" is read from a file
    _whole("max_tokens", max_tokens, 1)

    def compute_bound(q):
        c, m = compute_and_memory(q, kv_len, batch, hardware, model, mode)
        return c >= m

    hi = 1
    while not compute_bound(hi):  # the compute share only grows with q: double, then bisect
        if hi >= max_tokens:
            return None
        hi = min(2 * hi, max_tokens)
    lo = hi // 2  # not compute-bound (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


# -- Tables 3 and 4 --------------------------------------------------------------------------------
def slowdown(
    block_size: int,
    kv_len: int = 16,
    batch: int = 1,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    model: Any = DEFAULT_MODEL,
    mode: str = "corrected",
) -> float:
    """One block forward (``block_size`` slots, their logits) over one NTP forward (1 token), same cache (Table 3)."""
    _whole("block_size", block_size, 1)
    hw, shape = get_hardware(hardware), get_model(model)
    return forward_time(block_size, kv_len, batch, hw, shape, mode, logits=block_size) / forward_time(
        1, kv_len, batch, hw, shape, mode, logits=1
    )


def wallclock_speedup(
    nfe_speedup: float,
    block_size: int,
    kv_len: int = 16,
    batch: int = 1,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    model: Any = DEFAULT_MODEL,
    mode: str = "corrected",
) -> float:
    """Eq. 16-17 (Table 4): ``k * t(1) / (t(2k) + (l - 1) * t(k))`` with ``l = k / nfe_speedup`` calls per block.

    A block's first call carries the previous block's ``k`` final tokens and its own ``k`` slots
    (``2k`` tokens, ``k`` logits); its other ``l - 1`` calls carry the ``k`` slots; NTP makes ``k``
    one-token calls for the same tokens.
    """
    k = _whole("block_size", block_size, 1)
    if isinstance(nfe_speedup, bool) or not isinstance(nfe_speedup, (int, float)) or not 1 <= nfe_speedup <= k:
        raise ValueError(
            f"nfe_speedup: must be a number in [1, block_size = {k}] (tokens per call), got {nfe_speedup!r}"
        )
    hw, shape = get_hardware(hardware), get_model(model)
    calls = k / nfe_speedup
    t1 = forward_time(1, kv_len, batch, hw, shape, mode, logits=1)
    first = forward_time(2 * k, kv_len, batch, hw, shape, mode, logits=k)
    rest = forward_time(k, kv_len, batch, hw, shape, mode, logits=k)
    return k * t1 / (first + (calls - 1) * rest)


# -- traces ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One model call as the roofline sees it."""

    tokens: int  # new tokens fed per sequence (causal tokens + block slots)
    kv_len: int  # tokens already in the cache
    logits: int  # rows that need logits


def trace_calls(trace) -> list[Call]:
    """Each call of a trace: tokens fed, cache length before it, logit rows.

    SBD (``sbd_viz.decode``): a block's first call feeds the tokens that just became final (the
    prompt, then the previous block) plus the ``k`` slots; its later calls feed the ``k`` slots;
    the cache holds everything before the block's first fed token. NTP (``decode_ntp``): the
    prompt, then one token per call. Verified SBD (``verify=True``): each call feeds contiguous
    positions (the last accepted token, the drafts it checks, then the block from its first open
    slot; a checking-only call feeds drafts alone), and every causal row needs logits. Recorded
    ``n_input`` is used when present; unverified traces without it are rebuilt from the block
    structure, which gives the same numbers. Tree drafting (``drafting="tree"``): each call feeds the last accepted
    token, the drafts after it and a block of slots after each, all with logits; with a token tree, every candidate
    it checks and a block after each, all with logits too (an upper bound: the decode scores the unpicked blocks
    only where that is cheaper than a second pass over the output layer); with fewer blocks a call than fed tokens,
    the blocks it fed (its recorded ``n_input``).
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace: expected an sbd_viz.Trace, got {type(trace).__name__}")
    if not trace.steps:
        raise ValueError("trace: has no calls (no steps), so there is nothing to project")
    ntp = trace.config.get("decoder") == NTP.name
    calls, prev_size, n_prompt = [], None, len(trace.prompt_ids)
    for s in trace.steps:
        if ntp:
            fed = s.n_input or (n_prompt if s.call == 0 else 1)
            calls.append(Call(fed, s.block_start - fed, 1))
        elif trace.verified:
            # Verified SBD feeds contiguous positions from the last accepted token x: the drafts it checks, then
            # the block from its first open slot (tree drafting: a block after each draft), every row scored but
            # the prompt's before x. The cache ends at x: just before the first checked draft, else where the
            # fed rows, ending at the block's end, begin.
            kv = s.checks[0].position - 1 if s.checks else s.block_start + s.block_size - s.n_input
            # the first call's causal rows are the prompt: only its last row needs logits
            calls.append(Call(s.n_input, kv, s.n_input if kv else s.n_input - n_prompt + 1))
        else:
            causal = (
                (s.n_input - s.block_size)
                if s.n_input
                else (0 if s.step else n_prompt if prev_size is None else prev_size)
            )
            calls.append(Call(causal + s.block_size, s.block_start - causal, s.block_size))
        prev_size = s.block_size
    return calls


def ntp_calls(trace) -> list[Call]:
    """The same final text decoded one token per call: the prompt's prefill (which yields the first
    token), then one call per further output token."""
    n_prompt, n_out = len(trace.prompt_ids), max(1, trace.n_tokens)
    return [Call(n_prompt, 0, 1)] + [Call(1, n_prompt + i - 1, 1) for i in range(1, n_out)]


def _calls_time(calls: Iterable[Call], batch, hw, shape, mode) -> float:
    return sum(forward_time(c.tokens, c.kv_len, batch, hw, shape, mode, logits=c.logits) for c in calls)


def project(
    trace,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    model: Any = DEFAULT_MODEL,
    batch: int = 1,
    mode: str = "corrected",
) -> dict:
    """A trace's calls costed on ``hardware`` for ``model``, against the same text decoded by NTP.

    ``trace`` is one ``Trace`` or several (totals are summed). ``batch`` sequences shaped like the
    trace run in lockstep (each call costs ``forward_time(..., batch)``); times are per batch step.

    The prompt is counted on both sides, as each decoder reads it: SBD's first call carries the
    prompt fused with the first block (``P + k`` tokens), NTP's first call is the prompt's prefill
    (``P`` tokens), which yields the first token. ``prefill_s`` is that prefill alone, and
    ``decode_speedup`` compares what comes after it (NaN when nothing does).

    Returns a dict: ``sbd_s`` (seconds of the trace's own calls; for an NTP trace, its NTP calls),
    ``ntp_s``, ``speedup`` (``ntp_s / sbd_s``; exactly 1.0 for an NTP trace), ``prefill_s``,
    ``decode_speedup``, ``sbd_calls``, ``ntp_calls``, ``tokens`` and the settings.
    """
    traces = [trace] if isinstance(trace, Trace) else list(trace) if isinstance(trace, (list, tuple)) else [trace]
    if not traces:
        raise ValueError("trace: no traces given")
    hw, shape, _ = get_hardware(hardware), get_model(model), _mode(mode)
    batch = _whole("batch", batch, 1)
    sbd_s = ntp_s = prefill_s = 0.0
    sbd_n = ntp_n = tokens = 0
    for t in traces:
        own, ref = trace_calls(t), ntp_calls(t)
        sbd_s += _calls_time(own, batch, hw, shape, mode)
        ntp_s += _calls_time(ref, batch, hw, shape, mode)
        prefill_s += _calls_time(ref[:1], batch, hw, shape, mode)
        sbd_n, ntp_n, tokens = sbd_n + len(own), ntp_n + len(ref), tokens + t.n_tokens
    after = sbd_s - prefill_s
    return {
        "sbd_s": sbd_s,
        "ntp_s": ntp_s,
        "speedup": ntp_s / sbd_s,
        "prefill_s": prefill_s,
        "decode_speedup": (ntp_s - prefill_s) / after if after > 0 else float("nan"),
        "sbd_calls": sbd_n,
        "ntp_calls": ntp_n,
        "tokens": tokens,
        "hardware": hw.name,
        "model": shape.name,
        "batch": batch,
        "mode": mode,
    }


def project_frame(
    df,
    hardware: Iterable[str | Hardware] | str | Hardware = (DEFAULT_HARDWARE,),
    model: Any = DEFAULT_MODEL,
    batch: int = 1,
    mode: str = "corrected",
    column: str = "trace",
):
    """A copy of ``df`` with a ``projected_speedup_<hardware>`` column per hardware, one value per row.

    Each row needs its ``Trace`` in ``column``: e.g. ``pd.DataFrame(sv.evaluate(model, suite,
    keep_traces=True)["rows"])``. A ``sweep()`` frame cannot be projected: its rows hold only
    totals (calls, tokens), and the roofline needs every call's token count and cache length.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a pandas DataFrame, got {type(df).__name__}")
    if column not in df.columns:
        raise ValueError(
            f"df: no {column!r} column. The roofline needs each call's tokens and cache length, "
            "which only a Trace holds (a sweep() row has totals only); pass "
            "pd.DataFrame(sv.evaluate(model, suite, keep_traces=True)['rows'])"
        )
    bad = [i for i, t in df[column].items() if not isinstance(t, Trace)]
    if bad:
        raise ValueError(f"df: column {column!r} must hold an sbd_viz.Trace in every row; rows {bad[:5]} do not")
    hws = [hardware] if isinstance(hardware, (str, Hardware)) else list(hardware)
    if not hws:
        raise ValueError(f"hardware: give at least one of {list(hardware_names())}")
    out = df.copy()
    for hw in map(get_hardware, hws):
        out[f"projected_speedup_{hw.name}"] = [project(t, hw, model, batch, mode)["speedup"] for t in df[column]]
    return out


# -- the CLI: sbd-viz roofline ----------------------------------------------------------------------
PAPER_KV = (16, 2**22)  # the paper's two KV lengths
PAPER_NFE = (2, 4, 8)  # Table 4's rows


def kv_label(kv: int) -> str:
    """A KV length as the paper's tables print it: a power of two from 1024 up as ``2^k``."""
    return f"2^{kv.bit_length() - 1}" if kv >= 1024 and kv & (kv - 1) == 0 else str(kv)


def table3(hardware, model, batches, kvs, blocks, mode) -> str:
    """Table 3 in the paper's layout (markdown): block forward over NTP forward."""
    head = "| batch | KV length | " + " | ".join(f"block {k}" for k in blocks) + " |"
    lines = [head, "|" + " --- |" * (len(blocks) + 2)]
    for b in batches:
        for kv in kvs:
            cells = " | ".join(f"{slowdown(k, kv, b, hardware, model, mode):.3f}" for k in blocks)
            lines.append(f"| {b} | {kv_label(kv)} | {cells} |")
    return "\n".join(lines)


def table4(hardware, model, batches, kvs, blocks, nfes, mode) -> str:
    """Table 4 in the paper's layout (markdown): ``a / b / c`` over blocks, later KV lengths after an arrow."""
    lines = ["| NFE speedup | " + " | ".join(f"batch {b}" for b in batches) + " |", "|" + " --- |" * (len(batches) + 1)]
    for nfe in nfes:
        cells = []
        for b in batches:
            runs = [
                " / ".join(
                    f"{wallclock_speedup(nfe, k, kv, b, hardware, model, mode):.3f}" if nfe <= k else "-"
                    for k in blocks
                )
                for kv in kvs
            ]
            cells.append(runs[0] + "".join(f" (→ {r})" for r in runs[1:]))
        lines.append(f"| {nfe:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
