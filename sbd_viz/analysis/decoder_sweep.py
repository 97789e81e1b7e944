"""One frame over decoders and their knobs on the same items: ``sweep_decoders``, and its speed/quality figure
``sbd_viz.plots.decoder_tradeoff`` (one line per decoder).

Every setting decodes every item greedily with ``sv.decode(..., decoder=...)`` and stops at the end of the line, as
``analysis.sweep`` does; greedy NTP (HF ``generate``) decodes each item once, the reference for ``speedup_calls``
and ``same_as_ntp``. Calls are counted, not timed: a decoder's wall clock depends on how its calls are served.

A decoder whose knob is γ (SBD, verified SBD, remasking) decodes each item once per γ piece holding one of the
``gammas`` (``analysis.pieces.decode_at_gammas``): the other γ of a piece read the same decode, so the frame is the
one decoding every γ gives, from fewer calls (``attrs["calls_run"]`` against ``attrs["calls_direct"]``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

from ..decoders.door import decode
from ..decoders.ntp import NTP
from ..decoders.registry import check_serves, get_decoder
from ..decoders.registry import decoders as registered
from ..decoders.rules import DEFAULT_RULE
from ..models.checks import check_block_size, check_model
from ..tasks.asserts import SuiteItem, score
from .evaluation import STOP
from .pieces import decode_at_gammas, line_of, shares_pieces

DECODER_SWEEP_COLUMNS = (
    "decoder",
    "label",
    "rule",
    "gamma",
    "block_size",
    "settings",
    "knob",
    "knob_value",
    "accuracy",
    "calls",
    "tokens",
    "tokens_per_call",
    "calls_per_token",
    "speedup_calls",
    "same_as_ntp",
    "renoised",
    "n_items",
    "max_new_tokens",
)
SWEPT = ("rule", "gamma", "block_size", "verify")  # the shared settings a sweep runs along, for a decoder taking them


def _settings(specs, axes: dict) -> list[dict]:
    """Every (decoder, settings) the sweep decodes, as ``decode`` keyword arguments: for each decoder, every
    combination of the values in ``axes`` of the settings it takes (its own ones along its spec's ``sweep`` values,
    else at their defaults, unless given)."""
    out = []
    for spec in specs:
        names = [n for n in SWEPT if n in spec.takes] + list(spec.own)
        values = [axes.get(n, spec.sweep.get(n, (spec.own.get(n),))) for n in names]
        out += [dict(decoder=spec.name, **dict(zip(names, combo))) for combo in itertools.product(*values)]
    return out


def _own_settings(spec, setting: dict) -> str:
    """The row's own settings of its decoder besides its knob, as "name value" text ("" with none)."""
    knob = spec.knob.name if spec.knob else None
    return " · ".join(
        f"{n} {setting[n]:g}" if isinstance(setting[n], float) else f"{n} {setting[n]}"
        for n in spec.own
        if n != knob and n in setting
    )


def sweep_decoders(
    model,
    suite_or_prompts: Iterable[SuiteItem | str],
    decoders: Sequence[str] | None = None,
    rule: str = DEFAULT_RULE,
    gammas: Sequence[float] = (0.1, 0.5, 1.0, 2.0),
    block_sizes: Sequence[int | None] = (None,),
    verify: Sequence[bool] = (False, True),
    max_new_tokens: int = 64,
    reuse_pieces: bool = True,
    **values,
):
    """A tidy DataFrame (``DECODER_SWEEP_COLUMNS``): one row per decoder setting plus one NTP row.

    ``decoders``: registered names (``sv.decoders()``; None: every one that serves the model, NTP aside, which is
    always measured). Each decoder runs along the settings it takes: ``gammas`` and ``rule``, ``verify``,
    ``block_sizes`` (None: the model's), and its own settings' values given as keywords (``values``: a setting's
    name and a sequence of values), else its spec's ``sweep`` values, else their defaults. A row's ``label`` is its
    decoder's (its variant's, e.g. "verified SBD"); ``knob``/``knob_value`` name the knob its decoder's line runs
    along (its spec's ``knob``), ``settings`` its other own settings. ``accuracy`` is exact match (NaN for plain
    prompts); ``speedup_calls`` is NTP's calls over the setting's; ``same_as_ntp`` the fraction of items whose text
    is NTP's; ``renoised`` the slots a decoder took back.

    ``reuse_pieces`` (default True): a γ decoder decodes each γ piece once (see the module's docstring; False
    decodes every γ). ``attrs``: ``calls_run`` (model calls of the decodes run, NTP's included) and
    ``calls_direct`` (the calls of decoding every setting on its own: the rows' calls and NTP's summed)."""
    import pandas as pd

    model = check_model(model)
    if not isinstance(reuse_pieces, bool):
        raise ValueError(f"reuse_pieces: must be True or False, got {reuse_pieces!r}")
    items = list(suite_or_prompts)
    if not items or not all(isinstance(i, (SuiteItem, str)) for i in items):
        raise ValueError("suite_or_prompts: need one or more tasks.SuiteItem or prompt strings")
    if decoders is None:
        specs = [s for s in registered(model) if s is not NTP]
    else:
        specs = []
        for name in decoders:
            try:
                spec = get_decoder(name)
                check_serves(spec, model)
            except ValueError as exc:
                raise ValueError(f"decoders: {exc} (NTP is always measured)") from None
            specs.append(spec)
    own = {n for s in specs for n in s.own}
    stray = [n for n in values if n not in own]
    if stray:
        raise ValueError(f"{stray[0]}: not a setting of any decoder swept ({', '.join(s.name for s in specs)})")
    prompts = [i.prompt if isinstance(i, SuiteItem) else i for i in items]
    scored = all(isinstance(i, SuiteItem) for i in items)
    sizes = [check_block_size(k, model) for k in block_sizes]
    axes = {
        "rule": (rule,),
        "gamma": tuple(gammas),
        "block_size": tuple(sizes),
        "verify": tuple(verify),
        **{k: tuple(v) for k, v in values.items()},
    }
    settings = _settings(specs, axes)
    ntp = [decode(model, p, NTP.name, max_new_tokens=max_new_tokens, stop=STOP) for p in prompts]
    ntp_calls = sum(t.nfe for t in ntp)
    rows = [_row({"decoder": NTP.name}, items, ntp, ntp, ntp_calls, scored, max_new_tokens)]
    calls_run = ntp_calls
    lines: dict[tuple, list] = {}  # a γ decoder's settings but γ -> per prompt, its traces at the line's γ
    for setting in settings:
        spec = get_decoder(setting["decoder"])
        if reuse_pieces and "gamma" in setting and shares_pieces(spec, setting):
            key = line_of(setting)
            if key not in lines:
                gammas_of_line = [s["gamma"] for s in settings if line_of(s) == key]
                other = {k: v for k, v in setting.items() if k not in ("decoder", "rule", "gamma")}
                decoded = [
                    decode_at_gammas(
                        model,
                        p,
                        gammas_of_line,
                        setting["decoder"],
                        setting.get("rule", rule),
                        max_new_tokens=max_new_tokens,
                        stop=STOP,
                        **other,
                    )
                    for p in prompts
                ]
                calls_run += sum(d.calls for d in decoded)
                lines[key] = decoded
            traces = [d.traces[setting["gamma"]] for d in lines[key]]
        else:
            traces = [decode(model, p, max_new_tokens=max_new_tokens, stop=STOP, **setting) for p in prompts]
            calls_run += sum(t.nfe for t in traces)
        rows.append(_row(setting, items, traces, ntp, ntp_calls, scored, max_new_tokens))
    df = pd.DataFrame(rows, columns=list(DECODER_SWEEP_COLUMNS))
    df.attrs.update(calls_run=calls_run, calls_direct=int(df["calls"].sum()))
    return df


def _row(setting, items, traces, ntp, ntp_calls, scored, max_new_tokens) -> dict:
    calls, tokens = sum(t.nfe for t in traces), sum(t.n_tokens for t in traces)
    spec = get_decoder(setting["decoder"])
    knob = spec.knob.name if spec.knob else None
    return {
        "decoder": setting["decoder"],
        "label": spec.label_of(setting),
        "rule": setting.get("rule"),
        "gamma": setting.get("gamma", math.nan),
        "block_size": setting.get("block_size", math.nan),
        "settings": _own_settings(spec, setting),
        "knob": knob,
        "knob_value": setting.get(knob, math.nan) if knob else math.nan,
        "accuracy": sum(score(i, t.text) for i, t in zip(items, traces)) / len(items) if scored else math.nan,
        "calls": calls,
        "tokens": tokens,
        "tokens_per_call": tokens / calls,
        "calls_per_token": calls / tokens if tokens else math.nan,
        "speedup_calls": ntp_calls / calls,
        "same_as_ntp": sum(t.text == n.text for t, n in zip(traces, ntp)) / len(items),
        "renoised": sum(len(s.renoised) for t in traces for s in t.steps),
        "n_items": len(items),
        "max_new_tokens": max_new_tokens,
    }
