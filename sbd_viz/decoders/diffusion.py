"""Block diffusion (DiffusionGemma) through the same API: load its folder, decode with transformers' own
``generate``, and record every denoising step into a ``Trace``.

``decode`` and ``record`` run and record one decode; ``DiffusionDecoding`` is its registered decoder (``SPECS``).
How DiffusionGemma's sampler works and how the recording listens: docs/decoders.md.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import torch

from .._version import __version__
from ..models.diffusion import RULE, DiffusionModel
from ..trace.checks import check_whole
from ..trace.data import Trace
from .config import DecodeConfig
from .recorder import CanvasRecorder
from .registry import DecoderSpec, Knob


class _Listener:
    """The streamer ``generate`` reports to: each step's logits (``put_draft``), each finished canvas (``put``).
    The sampler's acceptance and the encoder passes come from the hooks ``record`` installs."""

    _takes_logits = True  # put_draft gets the logits the sampler read, not only the argmax

    def __init__(self, recorder: CanvasRecorder):
        self.rec = recorder
        self.sampler: Any = None  # transformers' sampler for this generate call, kept by record's prepare_sampler
        self.accepted_canvas: torch.Tensor | None = None  # the canvas the sampler last renoised
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # generate puts the prompt first
            self.prompt_seen = True
            return
        self.rec.end_block(value[0])

    def put_draft(self, logits=None, value=None) -> None:
        assert self.sampler is not None and self.accepted_canvas is not None  # the sampler ran before its first draft
        self.rec.step(logits[0], self.sampler.accepted_token_mask[0].cpu(), self.accepted_canvas[0].cpu())

    def end(self) -> None:
        pass


def generate_kwargs(
    model: DiffusionModel, gamma: float, max_new_tokens: int, max_denoising_steps: int | None, adaptive_stopping: bool
) -> dict:
    """The keyword arguments ``decode`` gives ``generate`` (besides the streamer), so a caller can run the
    same ``generate`` unrecorded: adaptive stopping off is a stability threshold no canvas can reach.

    γ travels in ``sampler_config``: ``generate`` reads the sampler's bound only from an
    ``EntropyBoundSamplerConfig`` (a bare ``entropy_bound=`` keyword is left over unread, and the sampler keeps
    its default 0.1)."""
    from transformers import EntropyBoundSamplerConfig

    kwargs = {
        "max_new_tokens": max_new_tokens,
        "disable_compile": True,
        "sampler_config": EntropyBoundSamplerConfig(entropy_bound=float(gamma)),
    }
    if max_denoising_steps is not None:
        kwargs["max_denoising_steps"] = max_denoising_steps
    if not adaptive_stopping:
        steps = max_denoising_steps or model.model._prepare_generation_config(None)[0].max_denoising_steps
        kwargs["stability_threshold"] = steps
    if model.model.generation_config.eos_token_id is None and model.eos_ids:
        kwargs["eos_token_id"] = list(model.eos_ids)
    pad = model.model.config.get_text_config().pad_token_id
    if model.model.generation_config.pad_token_id is None and pad is not None:
        kwargs["pad_token_id"] = pad  # tokens after the end are pad, so tokens_per_forward counts the text's
    return kwargs


class _Settings(NamedTuple):
    """``decode``'s arguments that are ``DecodeConfig``'s settings, in their order, for ``_check`` (which a registered
    decode gives its ``DecodeConfig``)."""

    rule: str
    gamma: float
    block_size: int | None
    max_new_tokens: int
    temperature: float | None
    seed: int
    stop: Any
    gap_free: bool
    top_n: int
    verify: bool


def _check(model, prompt, config: _Settings | DecodeConfig, max_denoising_steps) -> None:
    """Refuse what DiffusionGemma cannot do: ``config`` holds ``decode``'s settings (``_Settings``) or is a registered
    decode's ``DecodeConfig``."""
    if not isinstance(model, DiffusionModel):
        raise TypeError(f"model: expected an sbd_viz DiffusionModel (see sv.load_model), got {type(model).__name__}")
    if not isinstance(prompt, str):
        raise ValueError(f"prompt: must be a string, got {type(prompt).__name__}")
    if config.verify:
        raise ValueError("verify: DiffusionGemma has no verified decoding (no causal head to check drafts against)")
    if config.gap_free:
        raise ValueError("gap_free: DiffusionGemma's sampler accepts any slot of the canvas; it has no gap-free mode")
    if config.rule != RULE:
        raise ValueError(
            f"rule: DiffusionGemma's sampler is the {RULE!r} rule (γ = its entropy_bound), got {config.rule!r}"
        )
    if config.block_size not in (None, model.canvas_length):
        raise ValueError(
            f"block_size: model {model.name!r} writes canvases of {model.canvas_length} tokens; "
            f"got {config.block_size!r}"
        )
    if config.temperature not in (None, 0, 0.0):
        raise ValueError(
            "temperature: DiffusionGemma follows its generation config's temperature schedule "
            f"(t_max to t_min); got {config.temperature!r}"
        )
    if config.stop:
        raise ValueError("stop: DiffusionGemma stops at its end-of-text token only; got stop strings")
    gamma = config.gamma
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma > 0:
        raise ValueError(f"gamma: must be a number > 0 (the sampler's entropy_bound, in nats), got {gamma!r}")
    for name, value in (
        ("max_new_tokens", config.max_new_tokens),
        ("seed", config.seed),
        ("top_n", config.top_n),
        ("max_denoising_steps", 1 if max_denoising_steps is None else max_denoising_steps),
    ):
        check_whole(value, name, 0 if name == "seed" else 1)


def decode(
    model: DiffusionModel,
    prompt: str,
    rule: str = RULE,
    gamma: float = 0.1,
    block_size: int | None = None,
    max_new_tokens: int = 64,
    temperature: float | None = None,
    seed: int = 0,
    stop=None,
    gap_free: bool = False,
    top_n: int = 5,
    verify: bool = False,
    *,
    max_denoising_steps: int | None = None,
    adaptive_stopping: bool = True,
) -> Trace:
    """Decode ``prompt`` with DiffusionGemma's own ``generate`` after ``torch.manual_seed(seed)``, and record it.

    ``gamma`` is the sampler's ``entropy_bound``; ``max_denoising_steps`` caps the decoder forwards per canvas
    (None: the model's generation config); ``adaptive_stopping=False`` runs every canvas to that cap. The
    trace's ``output_ids`` are ``generate``'s new tokens up to its first end-of-text (whole canvases: up to
    ``canvas_length - 1`` more than ``max_new_tokens``), and ``trace.nfe`` its decoder forwards. ``block_size``,
    ``rule``, ``verify``, ``gap_free``, ``temperature`` and ``stop`` exist for SBD's signature: any value that
    means something else for this model is refused. The arguments are in ``sv.decode``'s order, which calls this
    for a ``DiffusionModel``.
    """
    settings = _Settings(rule, gamma, block_size, max_new_tokens, temperature, seed, stop, gap_free, top_n, verify)
    _check(model, prompt, settings, max_denoising_steps)
    prompt_ids = model.encode(prompt)
    model.check_fits(len(prompt_ids), max_new_tokens)
    kwargs = generate_kwargs(model, gamma, max_new_tokens, max_denoising_steps, adaptive_stopping)
    resolved = model.model._prepare_generation_config(None, **kwargs)[0]
    if resolved.sampler_config.entropy_bound != float(gamma):  # the sampler must read γ, or the slider lies
        raise RuntimeError(
            f"gamma: generate's sampler resolved entropy_bound={resolved.sampler_config.entropy_bound}, "
            f"not {float(gamma)}"
        )
    config = {
        "decoder": "diffusion_gemma",
        "rule": RULE,
        "gamma": float(gamma),
        "block_size": model.canvas_length,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "top_n": top_n,
        "adaptive_stopping": adaptive_stopping,
        "max_denoising_steps": resolved.max_denoising_steps,
        "t_min": resolved.t_min,
        "t_max": resolved.t_max,
        "stability_threshold": resolved.stability_threshold,
        "confidence_threshold": resolved.confidence_threshold,
        "entropy_of": "the tempered logits the sampler read",
        "verify": False,
        "gap_free": False,
    }
    meta = {
        "sbd_viz_version": __version__,
        "torch": torch.__version__,
        "dtype": str(model.model.dtype),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    recorder = CanvasRecorder(
        prompt_ids,
        model.canvas_length,
        model.token_text,
        prompt=prompt,
        text=model.text,
        eos_ids=model.eos_ids,
        config=config,
        model_id=model.name,
        meta=meta,
        top_n=top_n,
    )
    record(model, torch.tensor([prompt_ids], device=model.device), recorder, seed, **kwargs)
    return recorder.trace()


class DiffusionDecoding:
    """One DiffusionGemma decode, built as every registered decoder is (``decoding(model, prompt, config, **own)``):
    ``config`` gives γ, the seed, the length and ``top_n`` (``rule`` must be ``entropy_bounded``, ``block_size``
    the canvas, ``stop`` empty); ``max_denoising_steps`` and ``adaptive_stopping`` are its own. ``steps()`` runs
    transformers' ``generate`` (the loop is its own) and then yields the recorded steps; ``trace()`` after."""

    def __init__(
        self,
        model: DiffusionModel,
        prompt: str,
        config,
        max_denoising_steps: int | None = None,
        adaptive_stopping: bool = True,
    ):
        _check(model, prompt, config, max_denoising_steps)
        model.check_fits(len(model.encode(prompt)), config.max_new_tokens)
        self.model, self.prompt, self.config = model, prompt, config
        self.own: dict[str, Any] = dict(max_denoising_steps=max_denoising_steps, adaptive_stopping=adaptive_stopping)
        self._trace: Trace | None = None

    def steps(self):
        if self._trace is not None:
            raise RuntimeError("steps: this DiffusionDecoding has already run; make a new one to decode again")
        c = self.config
        self._trace = decode(
            self.model,
            self.prompt,
            c.rule,
            c.gamma,
            c.block_size,
            c.max_new_tokens,
            None,
            c.seed,
            None,
            False,
            c.top_n,
            False,
            **self.own,
        )
        yield from self._trace.steps

    def trace(self) -> Trace:
        if self._trace is None:
            raise RuntimeError("trace: the decode has not finished; iterate its steps to the end first")
        return self._trace


DIFFUSION_GEMMA = DecoderSpec(
    name="diffusion_gemma",
    label="DiffusionGemma sampler",
    decoding=DiffusionDecoding,
    model="diffusion",
    takes=("rule", "gamma", "block_size", "seed"),
    own={"max_denoising_steps": None, "adaptive_stopping": True},
    knob=Knob("gamma", *DiffusionModel.gamma_slider),
    color="#E69F00",
)
SPECS = (DIFFUSION_GEMMA,)


@torch.no_grad()
def record(
    model: DiffusionModel, input_ids: torch.Tensor, recorder: CanvasRecorder, seed: int | None = None, **generate_kwargs
):
    """Run ``model.model.generate(input_ids, **generate_kwargs)`` (after ``torch.manual_seed(seed)`` if given)
    with ``recorder`` listening; returns ``generate``'s output. Batch size 1."""
    if input_ids.shape[0] != 1:
        raise ValueError(f"input_ids: one prompt at a time, got a batch of {input_ids.shape[0]}")
    hf, listener = model.model, _Listener(recorder)
    prepare = hf._prepare_sampler

    def prepare_sampler(generation_config):  # keep the sampler, and the accepted canvas it renoises
        sampler = listener.sampler = prepare(generation_config)
        renoise = sampler.renoise_canvas

        def renoise_canvas(accepted_canvas, cur_step):
            listener.accepted_canvas = accepted_canvas
            return renoise(accepted_canvas, cur_step)

        sampler.renoise_canvas = renoise_canvas
        return sampler

    started: list[float] = []
    with model.recording:
        hooks = [
            hf.model.encoder.register_forward_pre_hook(
                lambda m, a, kw: started.append(time.perf_counter()), with_kwargs=True
            ),
            hf.model.encoder.register_forward_hook(
                lambda m, a, kw, out: recorder.encoder(kw["input_ids"].shape[1], time.perf_counter() - started[-1]),
                with_kwargs=True,
            ),
        ]
        hf._prepare_sampler = prepare_sampler
        try:
            if seed is not None:
                torch.manual_seed(seed)
            return hf.generate(input_ids, streamer=listener, **generate_kwargs)
        finally:
            del hf._prepare_sampler
            for hook in hooks:
                hook.remove()
