"""sbd_viz: see and measure Set Block Decoding (SBD).

    import sbd_viz as sv
    model = sv.load_model()                      # the shipped model
    trace = sv.decode(model, "assert 48 + 37 == ", gamma=0.1)
    trace.text, trace.nfe, trace.tokens_per_call, trace.gap_fills()
"""

import functools
import inspect

from ._version import __version__
from .decoders.sbd import DecodeConfig, Decoding, decode as _decode_sbd, decode_ntp, decode_steps
from .decoders.batch import BatchDecoding, decode_batch
from .model import MaskTokenError, SBDModel, add_mask_token, default_model_path
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
from .analysis.ladder import Ladder, gamma_ladder
from .analysis.incoherence import failure_report, incoherence_report
from .decoders import parallel
from .decoders.parallel import DECODERS
from .analysis.decoder_sweep import sweep_decoders


def load_model(path=None, dtype=None, device=None):
    """Load an SBD model folder; ``path=None`` loads the shipped default model. A DiffusionGemma folder
    (config.json's model_type ``diffusion_gemma``) loads as a ``sbd_viz.decoders.diffusion.DiffusionModel``.

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
    return SBDModel.from_pretrained(path or default_model_path(), dtype=dtype or torch.float32, device=device)


@functools.wraps(_decode_sbd)
def decode(model, prompt, *args, decoder="sbd", **kwargs):
    if isinstance(model, DiffusionModel):  # block diffusion: transformers' own generate, recorded
        if decoder not in ("sbd", "diffusion_gemma"):
            raise ValueError(f"decoder: a DiffusionGemma model decodes with its own sampler, got {decoder!r}")
        return diffusion.decode(model, prompt, *args, **kwargs)
    if decoder == "sbd":
        return _decode_sbd(model, prompt, *args, **kwargs)
    names = list(inspect.signature(_decode_sbd).parameters)[2:]  # positional arguments in SBD's order
    return parallel.decode(model, prompt, decoder=decoder, **dict(zip(names, args)), **kwargs)


decode.__doc__ += """
    A ``DiffusionModel`` (``load_model`` of a DiffusionGemma folder) decodes with ``sbd_viz.decoders.diffusion.decode``:
    the same arguments (those that mean nothing for it are refused), plus ``max_denoising_steps`` and
    ``adaptive_stopping``.

    ``decoder``: ``"sbd"`` (the default), ``"remask"``, ``"jacobi"``, ``"prompt_lookup"`` or ``"ntp"``
    (``sbd_viz.decoders.parallel``): the other block decoders, recorded into the same kind of trace.
"""


def explore(model, prompt, **decode_kwargs):
    """An ipywidgets explorer of one prompt (see ``sbd_viz.widgets.explore``); imports ipywidgets only when called."""
    from .widgets import explore as _explore

    return _explore(model, prompt, **decode_kwargs)


__all__ = [
    "BatchDecoding", "COMMIT_RULES", "Candidate", "Check", "Commit", "DecodeConfig", "Decoding", "DiffusionModel", "Draft", "GapFill", "MaskTokenError", "Pass", "RULES", "Rollback",
    "SBDModel", "SlotView", "CommitRule", "Step", "Trace", "TraceFormatError", "add_mask_token", "decode",
    "decode_batch", "decode_ntp", "decode_steps", "default_model_path", "diffusion", "evaluate", "explore", "load_model", "tasks",
    "analysis", "divergence", "divergence_report", "first_divergence", "gap_fill_events", "gap_fill_report",
    "gap_free_ablation", "sweep", "teacher_forced_ntp", "Ladder", "gamma_ladder", "failure_report",
    "incoherence_report", "parallel", "DECODERS", "sweep_decoders",
]
