"""One frame over decoders and their knobs on the same items: ``sweep_decoders``, and its speed/quality figure
``sbd_viz.plots.decoder_tradeoff`` (one line per decoder).

Every setting decodes every item greedily with ``sv.decode(..., decoder=...)`` and stops at the end of the line, as
``analysis.sweep`` does; greedy NTP (HF ``generate``) decodes each item once, the reference for ``speedup_calls``
and ``same_as_ntp``. Calls are counted, not timed: a decoder's wall clock depends on how its calls are served.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from ..checks import check_model
from .evaluation import STOP
from ..decoders.lookup import DEFAULT_LOOKUP_TOKENS
from ..decoders.parallel import DECODERS, decode
from ..decoders.remask import DEFAULT_REMASK_THRESHOLD
from ..rules import DEFAULT_RULE
from ..tasks import SuiteItem, score

DECODER_SWEEP_COLUMNS = ("decoder", "label", "rule", "gamma", "block_size", "remask_threshold", "knob", "knob_value",
                         "accuracy",
                         "calls", "tokens", "tokens_per_call", "calls_per_token", "speedup_calls", "same_as_ntp",
                         "renoised", "n_items", "max_new_tokens")
KNOBS = {"jacobi": "block_size", "prompt_lookup": "prompt_lookup_num_tokens"}  # the knob a line runs along; else γ


def _settings(decoders, rule, gammas, block_sizes, thresholds, lookup_tokens, verify) -> list[dict]:
    """Every (decoder, knobs) the sweep decodes, as ``decode`` keyword arguments."""
    out = []
    for name in decoders:
        if name not in DECODERS or name == "ntp":
            raise ValueError(f"decoders: unknown decoder {name!r}; choose from "
                             f"{', '.join(d for d in DECODERS if d != 'ntp')} (NTP is always measured)")
        if name in ("sbd", "remask"):
            for gamma in gammas:
                for k in block_sizes:
                    base = dict(decoder=name, rule=rule, gamma=gamma, block_size=k)
                    if name == "sbd":
                        out += [{**base, "verify": v} for v in verify]
                    else:
                        out += [{**base, "remask_threshold": t} for t in thresholds]
        elif name == "jacobi":
            out += [dict(decoder=name, block_size=k) for k in block_sizes]
        else:
            out += [dict(decoder=name, prompt_lookup_num_tokens=n) for n in lookup_tokens]
    return out


def _label(setting: dict) -> str:
    name = setting["decoder"]
    return "verified sbd" if setting.get("verify") else name


def sweep_decoders(model, suite_or_prompts: Iterable[SuiteItem | str],
                   decoders: Sequence[str] = ("sbd", "remask", "jacobi", "prompt_lookup"),
                   rule: str = DEFAULT_RULE, gammas: Sequence[float] = (0.1, 0.5, 1.0, 2.0),
                   block_sizes: Sequence[int | None] = (None,), verify: Sequence[bool] = (False, True),
                   remask_thresholds: Sequence[float] = (DEFAULT_REMASK_THRESHOLD,),
                   lookup_tokens: Sequence[int] = (DEFAULT_LOOKUP_TOKENS,), max_new_tokens: int = 64):
    """A tidy DataFrame (``DECODER_SWEEP_COLUMNS``): one row per decoder setting plus one NTP row.

    ``gammas`` and ``rule`` apply to SBD and remasking, ``verify`` to SBD, ``block_sizes`` (None: the model's)
    to SBD, remasking and Jacobi, ``remask_thresholds`` to remasking, ``lookup_tokens`` to prompt lookup. A
    row's ``knob``/``knob_value`` name the knob its decoder's line runs along (γ for SBD and remasking, the
    block for Jacobi, the draft length for prompt lookup). ``accuracy`` is exact match (NaN
    for plain prompts); ``speedup_calls`` is NTP's calls over the setting's; ``same_as_ntp`` the fraction of
    items whose text is NTP's; ``renoised`` the slots remasking took back."""
    import pandas as pd

    model = check_model(model)
    items = list(suite_or_prompts)
    if not items or not all(isinstance(i, (SuiteItem, str)) for i in items):
        raise ValueError("suite_or_prompts: need one or more tasks.SuiteItem or prompt strings")
    prompts = [i.prompt if isinstance(i, SuiteItem) else i for i in items]
    scored = all(isinstance(i, SuiteItem) for i in items)
    sizes = [model.block_size if k is None else k for k in block_sizes]
    settings = _settings(decoders, rule, gammas, sizes, remask_thresholds, lookup_tokens, verify)
    ntp = [decode(model, p, decoder="ntp", max_new_tokens=max_new_tokens, stop=STOP) for p in prompts]
    ntp_calls = sum(t.nfe for t in ntp)
    rows = [_row({"decoder": "ntp"}, items, ntp, ntp, ntp_calls, scored, max_new_tokens)]
    for setting in settings:
        traces = [decode(model, p, max_new_tokens=max_new_tokens, stop=STOP, **setting) for p in prompts]
        rows.append(_row(setting, items, traces, ntp, ntp_calls, scored, max_new_tokens))
    return pd.DataFrame(rows, columns=list(DECODER_SWEEP_COLUMNS))


def _row(setting, items, traces, ntp, ntp_calls, scored, max_new_tokens) -> dict:
    calls, tokens = sum(t.nfe for t in traces), sum(t.n_tokens for t in traces)
    knob = KNOBS.get(setting["decoder"], "gamma" if "gamma" in setting else None)
    return {"decoder": setting["decoder"], "label": _label(setting), "rule": setting.get("rule"),
            "gamma": setting.get("gamma", math.nan), "block_size": setting.get("block_size", math.nan),
            "remask_threshold": setting.get("remask_threshold", math.nan),
            "knob": knob, "knob_value": setting.get(knob, math.nan) if knob else math.nan,
            "accuracy": sum(score(i, t.text) for i, t in zip(items, traces)) / len(items) if scored else math.nan,
            "calls": calls, "tokens": tokens, "tokens_per_call": tokens / calls, "calls_per_token": calls / tokens
            if tokens else math.nan, "speedup_calls": ntp_calls / calls,
            "same_as_ntp": sum(t.text == n.text for t, n in zip(traces, ntp)) / len(items),
            "renoised": sum(len(s.renoised) for t in traces for s in t.steps), "n_items": len(items),
            "max_new_tokens": max_new_tokens}
