"""The suite sweep: SBD's settings (rule, γ, block size, gap-free or not, verified or not) scored on the suite beside
NTP, one row per setting, with an on-disk JSON cache so that a repeated sweep is instant (``sweep``), and each
setting beside its gap-free twin (``gap_free_ablation``). Sweeps over other decoders and their knobs are
``sbd_viz.analysis.decoder_sweep``.

pandas is imported inside the functions that return frames, so ``import sbd_viz`` stays light.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from .._version import __version__
from ..decoders.config import DecodeConfig
from ..decoders.ntp import NTP
from ..decoders.sbd import SBD
from ..models.base import CausalModel
from ..models.checks import check_block_size, check_model
from ..tasks.asserts import SuiteItem
from ..trace.checks import check_whole
from .evaluation import STOP, Plan, is_main_process, main_decides, split_items
from .gaps import agreement_counts
from .pieces import PieceStore, line_of

CACHE_VERSION = 1  # bump when the cached row's meaning changes: old files then simply miss

SWEEP_SETTING = ("rule", "gamma", "block_size", "gap_free", "verify")  # what a row's decodes were given
SWEEP_COLUMNS = (
    *SWEEP_SETTING,
    "accuracy",
    "calls_per_token",
    "tokens_per_call",
    "speedup_calls",
    "speedup_wall",
    "gap_fill_rate",
    "n_gap_fills",
    "ntp_agreement",
    "same_as_ntp",
    "accuracy_with_gaps",
    "accuracy_without_gaps",
    "n_with_gaps",
    "n_items",
    "calls",
    "tokens",
    "wall_time",
    "ntp_wall_time",
    "batch_size",
    "speed_batch_size",
    "max_new_tokens",
    "fingerprint",
    "measured_at",
)


def _as_items(suite_or_prompts) -> tuple[list[SuiteItem], bool]:
    """Suite items as given, or plain prompts wrapped as items with no answer; and whether they are scored."""
    if isinstance(suite_or_prompts, (str, SuiteItem)):
        suite_or_prompts = [suite_or_prompts]
    items = list(suite_or_prompts)
    if not items:
        raise ValueError("suite_or_prompts: no items or prompts to decode")
    if all(isinstance(x, SuiteItem) for x in items):
        return items, True
    if all(isinstance(x, str) and x for x in items):
        return [SuiteItem(prompt=p, answer="", family="prompt") for p in items], False
    raise ValueError("suite_or_prompts: must be suite items (tasks.load_suite) or non-empty prompt strings, not a mix")


def _settings(rules, gammas, block_sizes, gap_free, max_new_tokens, verify=(False,)) -> list[dict]:
    """Every combination, each validated by ``DecodeConfig`` before anything runs (errors name the argument)."""
    lists = {}
    for name, values in (
        ("rules", rules),
        ("gammas", gammas),
        ("block_sizes", block_sizes),
        ("gap_free", gap_free),
        ("verify", verify),
    ):
        # a single value is a list of one: sweep(..., gammas=0.1) works
        lists[name] = [values] if isinstance(values, str) or not hasattr(values, "__iter__") else list(values)
        if not lists[name]:
            raise ValueError(f"{name}: must not be empty")
    rules, gammas, block_sizes, gap_free, verify = lists.values()
    # numpy integers (np.arange) are whole numbers too; DecodeConfig wants a Python int
    block_sizes = [int(b) if hasattr(b, "__index__") and not isinstance(b, bool) else b for b in block_sizes]
    for name, flags in (("gap_free", gap_free), ("verify", verify)):
        if not all(isinstance(f, bool) for f in flags):
            raise ValueError(f"{name}: must be a list of booleans, e.g. (False, True), got {flags!r}")
    out = []
    for rule in rules:
        for gamma in gammas:
            for block_size in block_sizes:
                for free in gap_free:
                    for checked in verify:
                        DecodeConfig(
                            rule=rule,
                            gamma=gamma,
                            block_size=block_size,
                            max_new_tokens=max_new_tokens,
                            gap_free=free,
                            verify=checked,
                        )
                        out.append(
                            {
                                "rule": rule,
                                "gamma": float(gamma),
                                "block_size": block_size,
                                "gap_free": bool(free),
                                "verify": bool(checked),
                            }
                        )
    return out


def _tokenizer_hash(model: CausalModel) -> str:
    vocab = sorted(model.tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(vocab).encode()).hexdigest()[:16]


def _items_hash(items: list[SuiteItem]) -> str:
    payload = json.dumps([[i.prompt, i.answer, i.family] for i in items])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _cache_key(model_id: dict, setting: dict, items_hash: str, n_items: int, max_new_tokens: int) -> dict:
    return {
        "cache_version": CACHE_VERSION,
        "sbd_viz": __version__,
        **model_id,
        **setting,
        "max_new_tokens": max_new_tokens,
        "stop": list(STOP),
        "items": items_hash,
        "n_items": n_items,
    }


def _cache_path(cache_dir: Path, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir / f"sweep-{digest}.json"


def _json_safe(value):
    """NaN/inf are not JSON: store them as null (read back as NaN by the frame)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _read_cache(path: Path, key: dict) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # missing or damaged: recompute and overwrite
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("row"), dict):
        return None
    if not isinstance(data.get("ntp"), dict):
        return None
    return data


def _write_cache(path: Path, key: dict, row: dict, ntp: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "key": key,
        "row": {k: _json_safe(v) for k, v in row.items()},
        "ntp": {k: _json_safe(v) for k, v in ntp.items()},
    }
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False))
    tmp.replace(path)  # atomic: a crash never leaves half a file behind


def _mean(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def _plan(
    model, items: list, setting: dict, max_new_tokens: int, batch_size: int, speed_batch_size: int | None
) -> Plan:
    """A row's evaluation: SBD at ``setting`` (``SWEEP_SETTING``'s values) beside NTP on ``items``, as ``evaluate``
    plans it."""
    return Plan(
        model,
        items,
        **setting,
        decoder=SBD.name,
        max_new_tokens=max_new_tokens,
        measure_speedup=True,
        stop=STOP,
        batch_size=batch_size,
        speed_batch_size=speed_batch_size,
    )


def _measure(
    model: CausalModel,
    items: list[SuiteItem],
    scored: bool,
    setting: dict,
    max_new_tokens: int,
    progress: bool,
    batch_size: int = 1,
    speed_batch_size: int | None = 1,
    pieces: dict[int, PieceStore] | None = None,
) -> tuple[dict, dict, tuple[int, int]]:
    """Run one setting (paired with NTP on every item, as ``evaluate`` does) and summarise it; also the model calls
    of the decodes run and of those read off a piece measured before, ``(run, reused)``.

    ``pieces``: a ``PieceStore`` per item of this process's share (by its place in the share), holding the rows
    measured at other γ of the same line (the setting but γ): an item whose piece holding this γ is there takes
    that row (its decode at this γ, NTP's beside it, their seconds and teacher-forced counts) instead of decoding
    again; each row measured here is added. Under ``accelerate launch`` every process decodes and teacher-forces its
    share of the items; only plain numbers are gathered."""
    plan = _plan(model, items, setting, max_new_tokens, batch_size, speed_batch_size)
    with split_items(items) as (share, gather):
        known = [pieces[i].find(setting["gamma"]) if pieces is not None else None for i in range(len(share))]
        fresh = plan.rows([item for item, k in zip(share, known) if k is None], keep_traces=True, progress=progress)
        traces, ntp_traces = [r.pop("trace") for r in fresh], [r.pop("ntp_trace") for r in fresh]
        mine = agreement_counts(model, traces, batch_size)
        ntps = agreement_counts(model, ntp_traces, batch_size)
        for r, trace, ntp_trace, (agree, n), (ntp_agree, ntp_n) in zip(fresh, traces, ntp_traces, mine, ntps):
            r.update(
                tf_agree=agree,
                tf_tokens=n,
                ntp_tf_agree=ntp_agree,
                ntp_tf_tokens=ntp_n,
                same=trace.output_ids == ntp_trace.output_ids,
            )
        rows, run, reused, measured = [], 0, 0, iter(zip(fresh, traces))
        for i, k in enumerate(known):
            if k is None:
                r, trace = next(measured)
                run += r["nfe"] + r["ntp_nfe"]
                if pieces is not None:
                    pieces[i].add(trace, dict(r))
            else:  # the same decode as at the γ it was measured at: every number of the row is the same
                r = dict(k)
                reused += r["nfe"] + r["ntp_nfe"]
            rows.append(r)
        rows = gather(rows)
        run, reused = map(sum, zip(*gather([(run, reused)])))
    result = plan.summary(rows)
    agree, total = sum(r["tf_agree"] for r in rows), sum(r["tf_tokens"] for r in rows)
    ntp_agree, ntp_total = sum(r["ntp_tf_agree"] for r in rows), sum(r["ntp_tf_tokens"] for r in rows)
    # r["gap_fills"] counts the kept ones (Trace.kept_gap_fills): only they can change the answer
    with_gaps = [r["correct"] for r in rows if r["gap_fills"]]
    without_gaps = [r["correct"] for r in rows if not r["gap_fills"]]
    nan = float("nan")
    ntp = result["ntp"]
    row = {
        **setting,
        "accuracy": result["accuracy"] if scored else nan,
        "calls_per_token": result["calls_per_token"],
        "tokens_per_call": result["tokens_per_call"],
        "speedup_calls": result["speedup_calls"],
        "speedup_wall": result["speedup_wall"],
        "gap_fill_rate": result["gap_fill_rate"],
        "n_gap_fills": sum(r["gap_fills"] for r in rows),
        "ntp_agreement": agree / total if total else nan,
        "same_as_ntp": sum(r["same"] for r in rows) / len(items),
        "accuracy_with_gaps": _mean(with_gaps) if scored else nan,
        "accuracy_without_gaps": _mean(without_gaps) if scored else nan,
        "n_with_gaps": len(with_gaps),
        "n_items": len(items),
        "calls": result["calls"],
        "tokens": result["tokens"],
        "wall_time": result["wall_time"],
        "ntp_wall_time": ntp["wall_time"],
        "batch_size": batch_size,
        "speed_batch_size": speed_batch_size if speed_batch_size is not None else nan,
        "max_new_tokens": max_new_tokens,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    ntp_row = {
        "accuracy": ntp["accuracy"] if scored else nan,
        "calls": ntp["calls"],
        "tokens": ntp["tokens"],
        "wall_time": ntp["wall_time"],
        "ntp_agreement": ntp_agree / ntp_total if ntp_total else nan,
        "batch_size": batch_size,
        "speed_batch_size": row["speed_batch_size"],
        "measured_at": row["measured_at"],
    }
    return row, ntp_row, (run, reused)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _ntp_row(ntp: dict, n_items: int, max_new_tokens: int, fingerprint: str) -> dict:
    """The NTP reference row. NTP is decoded beside every setting; its calls and outputs are the
    same each time, so the first setting's paired run stands for it. Speedups are 1 by definition."""
    nan = float("nan")
    tokens, calls = ntp["tokens"], ntp["calls"]
    return {
        "rule": NTP.name,
        "gamma": nan,
        "block_size": 1,
        "gap_free": False,
        "verify": False,
        "accuracy": ntp["accuracy"],
        "calls_per_token": calls / tokens if tokens else nan,
        "tokens_per_call": tokens / calls if calls else nan,
        "speedup_calls": 1.0,
        "speedup_wall": 1.0 if _finite(ntp["wall_time"]) else nan,
        "gap_fill_rate": 0.0,
        "n_gap_fills": 0,
        "ntp_agreement": ntp["ntp_agreement"],
        "same_as_ntp": 1.0,
        "accuracy_with_gaps": nan,
        "accuracy_without_gaps": ntp["accuracy"],
        "n_with_gaps": 0,
        "n_items": n_items,
        "calls": calls,
        "tokens": tokens,
        "wall_time": ntp["wall_time"],
        "ntp_wall_time": ntp["wall_time"],
        "batch_size": ntp.get("batch_size", 1),
        "speed_batch_size": ntp.get("speed_batch_size", 1),
        "max_new_tokens": max_new_tokens,
        "fingerprint": fingerprint,
        "measured_at": ntp["measured_at"],
    }


class SweepStopped(RuntimeError):
    """Raised by ``sweep`` when its ``stop`` event is set: the settings after it were not measured."""


def sweep(
    model: CausalModel,
    suite_or_prompts,
    rules: Sequence[str] = ("entropy_bounded",),
    gammas: Sequence[float] = (0.0, 0.1, 0.35, 1.0),
    block_sizes: Sequence[int] | None = None,
    gap_free: Sequence[bool] = (False,),
    max_new_tokens: int = 64,
    cache_dir: str | os.PathLike | None = ".sbd_cache",
    progress: bool = True,
    verify: Sequence[bool] = (False,),
    batch_size: int = 1,
    speed_batch_size: int | None = 1,
    reuse_pieces: bool = True,
    stop=None,
):
    """Score every (rule, gamma, block_size, gap_free, verify) on the same items, beside NTP; a tidy DataFrame.

    One row per setting plus one NTP row (``rule='ntp'``, ``verify`` False). Each setting runs through
    ``evaluate``: for every item the SBD decode and HF ``generate`` greedy run back to back,
    so ``speedup_calls`` (NTP calls / SBD calls) and ``speedup_wall`` (NTP seconds / SBD
    seconds) are measured in the same run. Decoding stops at a newline (``evaluation.STOP``),
    for plain prompts too. ``verify=(False, True)`` adds each setting's verified twin
    (``decode(..., verify=True)``: every draft checked against NTP greedy in the same calls), whose
    output is exactly NTP's (``same_as_ntp`` 1, NTP's accuracy): only its speed varies.

    ``block_sizes`` None: the model's own (``SBDModel.block_size``), as ``decode`` takes it.

    Columns (``SWEEP_COLUMNS``): the setting (``SWEEP_SETTING``: rule, γ, block size, gap-free, verified),
    ``accuracy`` (exact match; NaN for plain prompts), ``calls_per_token``, ``tokens_per_call``, the speedups,
    ``gap_fill_rate`` (``evaluate``'s: kept gap fills, ``Trace.kept_gap_fills``, per generated token; commits past the
    stop are not counted: they cannot change the answer), ``n_gap_fills``, ``ntp_agreement`` (fraction of all generated
    tokens equal to NTP greedy given the final prefix, teacher forced), ``same_as_ntp`` (fraction of items whose output
    equals NTP's), ``accuracy_with_gaps`` / ``accuracy_without_gaps`` (accuracy over items whose output holds >= 1 gap
    fill / none), ``n_with_gaps``, ``n_items``, ``calls`` / ``tokens`` (totals over the items), ``wall_time`` /
    ``ntp_wall_time`` (seconds, totals of the paired runs), ``batch_size`` and ``speed_batch_size`` (below),
    ``fingerprint`` and ``measured_at``.

    ``batch_size``: prompts per forward for the decodes behind the quality columns (``decode_batch``,
    SBD and NTP) and for the teacher-forced passes.
    ``speed_batch_size``: where ``speedup_wall`` is measured: 1 (default) item by item against HF
    ``generate``, back to back, as an unbatched sweep does (an extra pass when ``batch_size`` > 1);
    ``batch_size``: the batched SBD run against the batched NTP run; None: not at all (NaN, fastest).
    Under ``accelerate launch`` every process decodes its share of the items (Accelerate's split and
    gather), every process returns the same frame, and only the main process writes the cache.

    Each setting's row is cached as JSON in ``cache_dir`` (``None`` disables the cache), keyed
    by the model's fingerprint and tokenizer, the setting, ``max_new_tokens``, the stop, the
    batch sizes and the items, so a repeated sweep returns the stored rows without calling the model; their
    wall-clock numbers are those measured when first computed (``measured_at``).

    ``reuse_pieces`` (default True): each item is decoded once per γ piece (``Trace.gamma_range``, the pieces of
    ``sv.gamma_map``) among the settings that differ only in γ: a γ whose piece was measured at another γ of the
    sweep takes that measurement (the same decode, so the same output, calls and commits; NTP's decode and the
    seconds of the pair measured beside it), and every row equals the one decoding each γ gives, but for the
    seconds. False decodes and times every setting. ``attrs``: ``calls_run`` (model calls of the decodes this
    sweep ran, the decoder's and NTP's beside it; teacher-forced passes and cached settings aside) and
    ``calls_reused`` (the calls those read off a piece measured before would have run again).

    ``stop``: an event (anything with ``is_set()``) checked before each setting that is not cached; once it is set,
    the sweep raises ``SweepStopped`` (an app that closes stops its background sweep this way).
    """
    import pandas as pd

    model = check_model(model)
    if not isinstance(reuse_pieces, bool):
        raise ValueError(f"reuse_pieces: must be True or False, got {reuse_pieces!r}")
    block_sizes = (check_block_size(None, model),) if block_sizes is None else block_sizes
    items, scored = _as_items(suite_or_prompts)
    check_whole(max_new_tokens, "max_new_tokens", 1)
    settings = _settings(rules, gammas, block_sizes, gap_free, max_new_tokens, verify)
    plain = {**settings[0], "gap_free": False, "verify": False}
    _plan(model, items[:1], plain, max_new_tokens, batch_size, speed_batch_size)  # the batch sizes checked up front
    fingerprint = model.fingerprint()
    model_id = {"fingerprint": fingerprint, "tokenizer": _tokenizer_hash(model)}
    items_hash = _items_hash(items)
    cache = Path(cache_dir) if cache_dir is not None else None

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(settings), desc="sweep", unit="setting")
    rows, ntp = [], None
    lines: dict[tuple, dict[int, PieceStore]] = {}  # the setting but γ -> each item's pieces measured so far
    calls_run = calls_reused = 0
    for setting in settings:
        key = _cache_key(model_id, setting, items_hash, len(items), max_new_tokens)
        key.update(batch_size=batch_size, speed_batch_size=speed_batch_size)
        # under accelerate launch every process must take the same branch: the main process reads the cache
        hit = main_decides(_read_cache(_cache_path(cache, key), key) if cache is not None else None)
        if hit is not None:
            row, ntp_row = hit["row"], hit["ntp"]
        else:
            if stop is not None and stop.is_set():
                if bar is not None:
                    bar.close()
                raise SweepStopped(f"the sweep was stopped before {setting['rule']} γ={setting['gamma']:g}")
            if bar is not None:
                bar.set_postfix_str(
                    f"{setting['rule']} gamma={setting['gamma']:g} k={setting['block_size']}"
                    f"{' gap-free' if setting['gap_free'] else ''}"
                    f"{' verified' if setting['verify'] else ''}"
                )
            pieces = None
            if reuse_pieces:
                pieces = lines.setdefault(line_of(setting), defaultdict(PieceStore))  # by item of this process's share
            row, ntp_row, (run, reused) = _measure(
                model, items, scored, setting, max_new_tokens, progress, batch_size, speed_batch_size, pieces
            )
            calls_run, calls_reused = calls_run + run, calls_reused + reused
            if cache is not None and is_main_process():
                _write_cache(_cache_path(cache, key), key, row, ntp_row)
        rows.append({**row, "fingerprint": fingerprint})
        ntp = ntp or ntp_row
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    assert ntp is not None  # the first setting's paired NTP run (there is at least one setting)
    rows.append(_ntp_row(ntp, len(items), max_new_tokens, fingerprint))
    df = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    for col in SWEEP_COLUMNS:  # nulls from the JSON cache come back as None: make them NaN
        if col not in ("rule", "gap_free", "verify", "fingerprint", "measured_at"):
            df[col] = pd.to_numeric(df[col])
    df["gap_free"] = df["gap_free"].astype(bool)
    df["verify"] = df["verify"].astype(bool)
    df.attrs.update(calls_run=calls_run, calls_reused=calls_reused)
    return df


def gap_free_ablation(df):
    """Each free-rule setting beside its gap-free twin: one row per (rule, gamma, block_size[, verify]).

    ``df`` is a ``sweep`` frame run with ``gap_free=(False, True)``. Columns: the setting, then
    ``accuracy``, ``tokens_per_call``, ``speedup_calls``, ``speedup_wall`` and ``gap_fill_rate``
    with suffix ``_free`` / ``_gap_free``, and ``accuracy_delta`` (free minus gap-free: what
    allowing gap fills gains, negative if it costs accuracy).
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df: expected a pandas DataFrame from sweep(), got {type(df).__name__}")
    missing = [c for c in ("rule", "gamma", "block_size", "gap_free") if c not in df.columns]
    if missing:
        raise ValueError(f"df: missing columns {missing}; pass a sweep() frame")
    sbd = df[df["rule"] != NTP.name]
    if not (sbd["gap_free"].any() and (~sbd["gap_free"]).any()):
        raise ValueError("df: needs both gap_free=False and gap_free=True rows; run sweep(..., gap_free=(False, True))")
    keys = ["rule", "gamma", "block_size"] + (["verify"] if "verify" in df.columns else [])
    measures = [
        c for c in ("accuracy", "tokens_per_call", "speedup_calls", "speedup_wall", "gap_fill_rate") if c in df.columns
    ]
    free = sbd[~sbd["gap_free"]][keys + measures]
    fixed = sbd[sbd["gap_free"]][keys + measures]
    table = free.merge(fixed, on=keys, suffixes=("_free", "_gap_free"))
    table["accuracy_delta"] = table["accuracy_free"] - table["accuracy_gap_free"]
    return table.reset_index(drop=True)
