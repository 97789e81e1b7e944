"""Measure SBD: gap-fill events and their outcomes, agreement with NTP, sweeps over the settings.

A *gap fill* is a commit made while slots to its left in its block were still masked
(``PREFIX <m> <m> TOKEN``). The question this module answers is what gap fills cost:

- ``teacher_forced_ntp`` asks the same weights, decoding causally, what they would have
  put at every output position given the final prefix (one forward, no decoding);
- ``gap_fill_events`` / ``gap_fill_report`` list every gap fill with its outcome and a
  ``suspicion`` score that ranks the likely failures first (a verified trace brings its own
  outcomes: the checks its decode made, so no model and no extra forward);
- ``sweep`` scores settings (rule, gamma, block size, gap-free or not, verified or not) on the suite beside
  NTP, with an on-disk JSON cache so that a repeated sweep is instant;
- ``gap_free_ablation`` puts each setting beside its gap-free twin.

pandas is imported inside the functions that return frames, so ``import sbd_viz`` stays light.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Iterable, Sequence

import torch

from .._version import __version__
from ..checks import check_block_size, check_model, check_trace, check_traces, check_whole
from ..decoders.config import DecodeConfig
from ..decoders.ntp import NTP
from ..decoders.sbd import SBD
from .evaluation import STOP, Plan, is_main_process, main_decides, split_items
from ..model import SBDModel
from ..tasks import SuiteItem, score
from ..trace import Trace, first_difference

CACHE_VERSION = 1  # bump when the cached row's meaning changes: old files then simply miss

EVENT_COLUMNS = ("block", "step", "call", "slot", "gap", "position", "token_id", "text", "entropy", "prob", "state",
                 "kept", "ntp_text", "ntp_agrees", "ntp_logprob", "correct", "suspicion")
REPORT_COLUMNS = ("trace", "prompt", "output") + EVENT_COLUMNS
SWEEP_COLUMNS = ("rule", "gamma", "block_size", "gap_free", "verify", "accuracy", "calls_per_token", "tokens_per_call",
                 "speedup_calls", "speedup_wall", "gap_fill_rate", "n_gap_fills", "ntp_agreement", "same_as_ntp",
                 "accuracy_with_gaps", "accuracy_without_gaps", "n_with_gaps", "n_items", "calls", "tokens",
                 "wall_time", "ntp_wall_time", "batch_size", "speed_batch_size", "max_new_tokens", "fingerprint",
                 "measured_at")


# -- teacher-forced NTP ----------------------------------------------------------------
@torch.inference_mode()
def teacher_forced_ntp(model: SBDModel, trace: Trace, ntp_trace: Trace | None = None) -> dict:
    """What NTP greedy decoding would choose at each output position of ``trace``, given its final prefix.

    One plain causal forward over ``prompt + output``: the logits at position ``i - 1`` are
    the model's next-token distribution for output token ``i`` given everything the trace
    finally holds before it (teacher forcing). Returns a dict:

    - ``ntp_ids`` / ``ntp_texts``: the NTP greedy (argmax) token at each output position;
    - ``agrees``: whether the trace's token equals it; ``agreement``: their fraction (NaN
      for an empty output);
    - ``logprobs``: NTP log-probability of the trace's own token at each position;
    - ``first_divergence``: index of the first output token where the trace departs from
      NTP greedy decoding of the same prompt, ``None`` if it never does;
      ``divergence_source`` says how it was found. With ``ntp_trace`` (a ``decode_ntp`` run
      on the same prompt) it is the first index where the two outputs differ, or the
      shorter length when one output is a prefix of the other (``'ntp_trace'``). Without it,
      it is the first teacher-forced disagreement (``'teacher_forced'``): up to that index
      the prefixes are identical, so greedy decoding would have produced the same tokens
      there; it can only differ from a real run by ties/rounding, or where NTP would have
      stopped earlier (EOS, stop string) than the trace.
    """
    model, trace = check_model(model), check_trace(trace)
    prompt_ids, out_ids = list(trace.prompt_ids), list(trace.output_ids)
    if model.encode(trace.prompt) != prompt_ids:
        raise ValueError("trace: its prompt_ids differ from model.encode(trace.prompt); it was decoded with "
                         "another tokenizer, so this model cannot score it")
    vocab = model.model.get_input_embeddings().weight.shape[0]
    if any(not 0 <= t < vocab for t in out_ids):
        raise ValueError(f"trace: output token ids outside this model's vocabulary (size {vocab})")
    result = {"ntp_ids": [], "ntp_texts": [], "agrees": [], "logprobs": [], "agreement": float("nan")}
    if out_ids:
        ids = torch.tensor([prompt_ids + out_ids[:-1]], device=model.device)  # (1, n_prompt + n_out - 1)
        logits = model.model(input_ids=ids).logits[0, len(prompt_ids) - 1:].float()  # (n_out, V)
        logp = torch.log_softmax(logits, -1)
        greedy = logp.argmax(-1).tolist()
        own = logp.gather(-1, torch.tensor(out_ids, device=logp.device)[:, None]).squeeze(-1).tolist()
        agrees = [g == t for g, t in zip(greedy, out_ids)]
        result.update(ntp_ids=greedy, ntp_texts=[model.token_text(g) for g in greedy], agrees=agrees,
                      logprobs=own, agreement=sum(agrees) / len(agrees))
    if ntp_trace is not None:
        ntp_trace = check_trace(ntp_trace, "ntp_trace")
        if ntp_trace.prompt != trace.prompt:
            raise ValueError("ntp_trace: must decode the same prompt as trace")
        result["first_divergence"] = first_difference(out_ids, list(ntp_trace.output_ids))
        result["divergence_source"] = "ntp_trace"
    else:
        result["first_divergence"] = next((i for i, a in enumerate(result["agrees"]) if not a), None)
        result["divergence_source"] = "teacher_forced"
    return result


@torch.inference_mode()
def _agreement_counts(model: SBDModel, traces: list[Trace], batch_size: int = 1) -> list[tuple[int, int]]:
    """Per trace: (output tokens equal to NTP greedy given the final prefix, output tokens), as
    ``teacher_forced_ntp`` counts them; ``batch_size`` traces per forward, right-padded (a causal
    token never sees the padding after it)."""
    counts = [(0, 0)] * len(traces)
    todo = [i for i, t in enumerate(traces) if t.output_ids]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start: start + batch_size]
        seqs = [list(traces[i].prompt_ids) + list(traces[i].output_ids[:-1]) for i in chunk]
        width = max(map(len, seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        attention = torch.zeros(len(seqs), width, dtype=torch.long)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = torch.tensor(seq)
            attention[row, : len(seq)] = 1
        greedy = model.model(input_ids=ids.to(model.device), attention_mask=attention.to(model.device)
                             ).logits.argmax(-1).cpu()  # (rows, width)
        for row, i in enumerate(chunk):
            out, n_prompt = traces[i].output_ids, len(traces[i].prompt_ids)
            predicted = greedy[row, n_prompt - 1: n_prompt - 1 + len(out)].tolist()
            counts[i] = (sum(p == t for p, t in zip(predicted, out)), len(out))
    return counts


# -- gap-fill events ---------------------------------------------------------------------
def suspicion(gap: int, block_size: int, entropy: float, ntp_agrees: bool | None = None,
              ntp_logprob: float | None = None, correct: bool | None = None, kept: bool = True) -> float:
    """How likely a gap fill is a failure; higher = look here first. Range 0..6.

    ``gap / block_size`` (guessing further ahead of the known text)
    ``+ (1 - exp(-entropy))`` (the model was unsure when it committed)
    ``+ 2 * [NTP greedy disagrees]`` (the strongest single sign: causal decoding of the same
    weights, given the same final prefix, would have written something else)
    ``+ (1 - p_NTP(token))`` (how surprising the token is to causal decoding)
    ``+ [the item's answer is wrong]``.
    Unknown terms (no model, no item) count 0. A gap fill that the stop discarded (after the
    end of the output) cannot have hurt the answer: its suspicion is 0.
    """
    if not kept:
        return 0.0
    s = gap / max(1, block_size) + (1.0 - math.exp(-max(0.0, entropy)))
    if ntp_agrees is False:
        s += 2.0
    if ntp_logprob is not None and math.isfinite(ntp_logprob):
        s += 1.0 - math.exp(ntp_logprob)
    if correct is False:
        s += 1.0
    return s


def gap_fill_outcomes(trace: Trace, tf: dict | None, correct: bool | None) -> list[dict]:
    """The gap-fill events of ``trace``, with NTP outcomes from a ``teacher_forced_ntp`` result, or, for a verified
    trace, from its own checks (``tf`` is then unused)."""
    events = []
    n_prompt = len(trace.prompt_ids)
    verdicts = trace.verdicts() if trace.verified else None
    for g in trace.gap_fills():
        step = trace.steps[g.call]
        position = step.block_start + g.slot - n_prompt  # index into the output tokens
        agrees = logprob = ntp_text = None
        checked = False
        if verdicts is not None:
            # The verifier's verdict is teacher-forced NTP given the final prefix: the text before a checked draft
            # is accepted text, which is the output's. A rejected draft is not in the output, yet it is exactly
            # the gap fill that cost a rollback, so it keeps its verdict and its suspicion.
            hit = verdicts.get((g.call, step.block_start + g.slot))
            if hit is not None:
                check, checked = hit[1], True
                agrees, ntp_text = check.accepted, check.ntp_text
                logprob = math.log(check.draft_prob) if check.draft_prob > 0 else -math.inf
        elif tf is not None and g.kept:
            agrees, logprob, ntp_text = tf["agrees"][position], tf["logprobs"][position], tf["ntp_texts"][position]
        events.append({
            "block": g.block, "step": g.step, "call": g.call, "slot": g.slot, "gap": g.gap, "position": position,
            "token_id": g.token_id, "text": g.text, "entropy": g.entropy, "prob": g.prob, "state": g.state,
            "kept": g.kept, "ntp_text": ntp_text, "ntp_agrees": agrees, "ntp_logprob": logprob,
            "correct": correct if g.kept else None,
            "suspicion": suspicion(g.gap, step.block_size, g.entropy, agrees, logprob, correct if g.kept else None,
                                   g.kept or checked)})
    return events


def item_correct(trace: Trace, item) -> bool | None:
    if item is None:
        return None
    if not isinstance(item, SuiteItem):
        raise TypeError(f"item: expected a tasks.SuiteItem or None, got {type(item).__name__}")
    # the item may end a document, after earlier lines (as tasks.item_in_prompt finds it): its answer is the same
    if item.prompt != trace.prompt and not trace.prompt.endswith("\n" + item.prompt):
        raise ValueError(f"item: its prompt {item.prompt!r} neither is nor ends the trace's prompt "
                         f"{trace.prompt!r}")
    return score(item, trace.text)


def gap_fill_events(model: SBDModel | None, trace: Trace, item: SuiteItem | None = None) -> list[dict]:
    """Every gap-fill commit of ``trace`` (``trace.gap_fills()``, in call order), with its outcome.

    Each event is a dict: ``block``, ``step``, ``call``, ``slot``, ``gap``, ``position`` (index
    into the output tokens), ``token_id``, ``text``, ``entropy`` and ``prob`` at commit, the
    block ``state`` after the step (``'... == 8<m>'``), ``kept`` (``GapFill.kept``: False if a stop
    later cut the output before this slot, so the commit was discarded), and once the block is final:
    ``ntp_text`` / ``ntp_agrees`` / ``ntp_logprob`` (NTP greedy at that position given the
    final prefix, teacher forced; ``None`` without a model), ``correct`` (whether the item's
    answer was right; ``None`` without an item) and ``suspicion`` (see ``suspicion``).

    A verified trace (``trace.verified``) needs no model: the NTP outcomes are its own checks (``Check``:
    NTP's token, and the draft's probability under NTP as ``ntp_logprob``), the same teacher-forced
    verdicts the decode computed for free; ``model`` is then not used. Every checked draft gets its verdict,
    a rejected one too (``kept`` False: NTP's token replaced it), and is scored as if kept, so the
    drafts that cost a rollback rank first; a draft a rollback dropped before it was checked has none.
    """
    trace = check_trace(trace)
    correct = item_correct(trace, item)
    has_gaps = any(c.gap for s in trace.steps for c in s.commits)
    # a verified trace carries NTP's verdicts already (free from its fused calls): no second forward
    tf = teacher_forced_ntp(model, trace) if model is not None and has_gaps and not trace.verified else None
    return gap_fill_outcomes(trace, tf, correct)


def gap_fill_report(traces: Trace | Iterable[Trace], model: SBDModel | None = None,
                    items: Sequence[SuiteItem | None] | None = None):
    """A tidy ``pandas.DataFrame``: one row per gap-fill event of ``traces``, most suspicious first.

    Columns: ``trace`` (index into ``traces``), ``prompt``, ``output`` and the event fields of
    ``gap_fill_events``. ``items`` (suite items, same order and length as ``traces``; ``None``
    entries allowed) adds whether each answer was right.
    """
    return events_report(gap_fill_events, traces, model, items, REPORT_COLUMNS)


def events_report(events, traces, model, items, columns):
    """The reports' one table: ``events(model, trace, item)``'s events of every trace, with the trace's index,
    prompt and output, in ``columns``, most suspicious first (a stable sort: ties keep trace and call order)."""
    import pandas as pd

    traces, items = check_traces(traces, items)
    rows = []
    for i, trace in enumerate(traces):
        for event in events(model, trace, items[i] if items is not None else None):
            rows.append({"trace": i, "prompt": trace.prompt, "output": trace.text, **event})
    df = pd.DataFrame(rows, columns=list(columns))
    return df.sort_values("suspicion", ascending=False, kind="stable").reset_index(drop=True)


# -- sweeps ------------------------------------------------------------------------------
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
    raise ValueError("suite_or_prompts: must be suite items (tasks.load_suite) or non-empty prompt strings, "
                     "not a mix")


def _settings(rules, gammas, block_sizes, gap_free, max_new_tokens, verify=(False,)) -> list[dict]:
    """Every combination, each validated by ``DecodeConfig`` before anything runs (errors name the argument)."""
    lists = {}
    for name, values in (("rules", rules), ("gammas", gammas), ("block_sizes", block_sizes),
                         ("gap_free", gap_free), ("verify", verify)):
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
                        DecodeConfig(rule=rule, gamma=gamma, block_size=block_size,
                                     max_new_tokens=max_new_tokens, gap_free=free, verify=checked)
                        out.append({"rule": rule, "gamma": float(gamma), "block_size": block_size,
                                    "gap_free": bool(free), "verify": bool(checked)})
    return out


def _tokenizer_hash(model: SBDModel) -> str:
    vocab = sorted(model.tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(vocab).encode()).hexdigest()[:16]


def _items_hash(items: list[SuiteItem]) -> str:
    payload = json.dumps([[i.prompt, i.answer, i.family] for i in items])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _cache_key(model_id: dict, setting: dict, items_hash: str, n_items: int, max_new_tokens: int) -> dict:
    return {"cache_version": CACHE_VERSION, "sbd_viz": __version__, **model_id, **setting,
            "max_new_tokens": max_new_tokens, "stop": list(STOP), "items": items_hash, "n_items": n_items}


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
    data = {"key": key, "row": {k: _json_safe(v) for k, v in row.items()},
            "ntp": {k: _json_safe(v) for k, v in ntp.items()}}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False))
    tmp.replace(path)  # atomic: a crash never leaves half a file behind


def _mean(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def _measure(model: SBDModel, items: list[SuiteItem], scored: bool, setting: dict, max_new_tokens: int,
             progress: bool, batch_size: int = 1, speed_batch_size: int | None = 1) -> tuple[dict, dict]:
    """Run one setting (paired with NTP on every item, as ``evaluate`` does) and summarise it.

    Under ``accelerate launch`` every process decodes and teacher-forces its share of the items;
    only plain numbers are gathered."""
    plan = Plan(model, items, rule=setting["rule"], gamma=setting["gamma"], block_size=setting["block_size"],
                 gap_free=setting["gap_free"], decoder=SBD.name, max_new_tokens=max_new_tokens, measure_speedup=True,
                 stop=STOP, verify=setting["verify"], batch_size=batch_size, speed_batch_size=speed_batch_size)
    with split_items(items) as (share, gather):
        rows = plan.rows(share, keep_traces=True, progress=progress)
        traces, ntp_traces = [r.pop("trace") for r in rows], [r.pop("ntp_trace") for r in rows]
        mine = _agreement_counts(model, traces, batch_size)
        ntps = _agreement_counts(model, ntp_traces, batch_size)
        for r, trace, ntp_trace, (agree, n), (ntp_agree, ntp_n) in zip(rows, traces, ntp_traces, mine, ntps):
            r.update(tf_agree=agree, tf_tokens=n, ntp_tf_agree=ntp_agree, ntp_tf_tokens=ntp_n,
                     same=trace.output_ids == ntp_trace.output_ids)
        rows = gather(rows)
    result = plan.summary(rows)
    agree, total = sum(r["tf_agree"] for r in rows), sum(r["tf_tokens"] for r in rows)
    ntp_agree, ntp_total = sum(r["ntp_tf_agree"] for r in rows), sum(r["ntp_tf_tokens"] for r in rows)
    # r["gap_fills"] counts the kept ones (Trace.kept_gap_fills): only they can change the answer
    with_gaps = [r["correct"] for r in rows if r["gap_fills"]]
    without_gaps = [r["correct"] for r in rows if not r["gap_fills"]]
    nan = float("nan")
    ntp = result["ntp"]
    row = {**setting, "accuracy": result["accuracy"] if scored else nan,
           "calls_per_token": result["calls_per_token"], "tokens_per_call": result["tokens_per_call"],
           "speedup_calls": result["speedup_calls"], "speedup_wall": result["speedup_wall"],
           "gap_fill_rate": result["gap_fill_rate"], "n_gap_fills": sum(r["gap_fills"] for r in rows),
           "ntp_agreement": agree / total if total else nan, "same_as_ntp": sum(r["same"] for r in rows) / len(items),
           "accuracy_with_gaps": _mean(with_gaps) if scored else nan,
           "accuracy_without_gaps": _mean(without_gaps) if scored else nan, "n_with_gaps": len(with_gaps),
           "n_items": len(items), "calls": result["calls"], "tokens": result["tokens"],
           "wall_time": result["wall_time"], "ntp_wall_time": ntp["wall_time"], "batch_size": batch_size,
           "speed_batch_size": speed_batch_size if speed_batch_size is not None else nan,
           "max_new_tokens": max_new_tokens, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    ntp_row = {"accuracy": ntp["accuracy"] if scored else nan, "calls": ntp["calls"], "tokens": ntp["tokens"],
               "wall_time": ntp["wall_time"], "ntp_agreement": ntp_agree / ntp_total if ntp_total else nan,
               "batch_size": batch_size, "speed_batch_size": row["speed_batch_size"],
               "measured_at": row["measured_at"]}
    return row, ntp_row


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _ntp_row(ntp: dict, n_items: int, max_new_tokens: int, fingerprint: str) -> dict:
    """The NTP reference row. NTP is decoded beside every setting; its calls and outputs are the
    same each time, so the first setting's paired run stands for it. Speedups are 1 by definition."""
    nan = float("nan")
    tokens, calls = ntp["tokens"], ntp["calls"]
    return {"rule": NTP.name, "gamma": nan, "block_size": 1, "gap_free": False, "verify": False,
            "accuracy": ntp["accuracy"],
            "calls_per_token": calls / tokens if tokens else nan, "tokens_per_call": tokens / calls if calls else nan,
            "speedup_calls": 1.0, "speedup_wall": 1.0 if _finite(ntp["wall_time"]) else nan, "gap_fill_rate": 0.0,
            "n_gap_fills": 0, "ntp_agreement": ntp["ntp_agreement"], "same_as_ntp": 1.0, "accuracy_with_gaps": nan,
            "accuracy_without_gaps": ntp["accuracy"], "n_with_gaps": 0, "n_items": n_items, "calls": calls,
            "tokens": tokens, "wall_time": ntp["wall_time"], "ntp_wall_time": ntp["wall_time"],
            "batch_size": ntp.get("batch_size", 1), "speed_batch_size": ntp.get("speed_batch_size", 1),
            "max_new_tokens": max_new_tokens, "fingerprint": fingerprint, "measured_at": ntp["measured_at"]}


def sweep(model: SBDModel, suite_or_prompts, rules: Sequence[str] = ("entropy_bounded",),
          gammas: Sequence[float] = (0.0, 0.1, 0.35, 1.0), block_sizes: Sequence[int] | None = None,
          gap_free: Sequence[bool] = (False,), max_new_tokens: int = 64,
          cache_dir: str | os.PathLike | None = ".sbd_cache", progress: bool = True,
          verify: Sequence[bool] = (False,), batch_size: int = 1, speed_batch_size: int | None = 1):
    """Score every (rule, gamma, block_size, gap_free, verify) on the same items, beside NTP; a tidy DataFrame.

    One row per setting plus one NTP row (``rule='ntp'``, ``verify`` False). Each setting runs through
    ``evaluate``: for every item the SBD decode and HF ``generate`` greedy run back to back,
    so ``speedup_calls`` (NTP calls / SBD calls) and ``speedup_wall`` (NTP seconds / SBD
    seconds) are measured in the same run. Decoding stops at a newline (``evaluation.STOP``),
    for plain prompts too. ``verify=(False, True)`` adds each setting's verified twin
    (``decode(..., verify=True)``: every draft checked against NTP greedy in the same calls), whose
    output is exactly NTP's (``same_as_ntp`` 1, NTP's accuracy): only its speed varies.

    ``block_sizes`` None: the model's own (``SBDModel.block_size``), as ``decode`` takes it.

    Columns (``SWEEP_COLUMNS``): the setting (``rule``, ``gamma``, ``block_size``, ``gap_free``,
    ``verify``), ``accuracy`` (exact match; NaN for plain prompts), ``calls_per_token``, ``tokens_per_call``, the speedups, ``gap_fill_rate``
    (``evaluate``'s: kept gap fills, ``Trace.kept_gap_fills``, per generated token; commits past the
    stop are not counted: they cannot change the answer), ``n_gap_fills``, ``ntp_agreement`` (fraction of
    all generated tokens equal to NTP greedy given the final prefix, teacher forced),
    ``same_as_ntp`` (fraction of items whose output equals NTP's), ``accuracy_with_gaps`` /
    ``accuracy_without_gaps`` (accuracy over items whose output holds >= 1 gap fill / none),
    ``n_with_gaps``, ``n_items``, ``calls`` / ``tokens`` (totals over the items),
    ``wall_time`` / ``ntp_wall_time`` (seconds, totals of the paired runs), ``batch_size`` and
    ``speed_batch_size`` (below), ``fingerprint`` and ``measured_at``.

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
    """
    import pandas as pd

    model = check_model(model)
    block_sizes = (check_block_size(None, model),) if block_sizes is None else block_sizes
    items, scored = _as_items(suite_or_prompts)
    check_whole(max_new_tokens, "max_new_tokens", 1)
    settings = _settings(rules, gammas, block_sizes, gap_free, max_new_tokens, verify)
    Plan(model, items[:1], rule=settings[0]["rule"], gamma=settings[0]["gamma"], block_size=settings[0]["block_size"],
          gap_free=False, decoder=SBD.name, max_new_tokens=max_new_tokens, measure_speedup=True, stop=STOP, verify=False,
          batch_size=batch_size, speed_batch_size=speed_batch_size)  # batch_size / speed_batch_size checked up front
    fingerprint = model.fingerprint()
    model_id = {"fingerprint": fingerprint, "tokenizer": _tokenizer_hash(model)}
    items_hash = _items_hash(items)
    cache = Path(cache_dir) if cache_dir is not None else None

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(settings), desc="sweep", unit="setting")
    rows, ntp = [], None
    for setting in settings:
        key = _cache_key(model_id, setting, items_hash, len(items), max_new_tokens)
        key.update(batch_size=batch_size, speed_batch_size=speed_batch_size)
        # under accelerate launch every process must take the same branch: the main process reads the cache
        hit = main_decides(_read_cache(_cache_path(cache, key), key) if cache is not None else None)
        if hit is not None:
            row, ntp_row = hit["row"], hit["ntp"]
        else:
            if bar is not None:
                bar.set_postfix_str(f"{setting['rule']} gamma={setting['gamma']:g} k={setting['block_size']}"
                                    f"{' gap-free' if setting['gap_free'] else ''}"
                                    f"{' verified' if setting['verify'] else ''}")
            row, ntp_row = _measure(model, items, scored, setting, max_new_tokens, progress, batch_size,
                                    speed_batch_size)
            if cache is not None and is_main_process():
                _write_cache(_cache_path(cache, key), key, row, ntp_row)
        rows.append({**row, "fingerprint": fingerprint})
        ntp = ntp or ntp_row
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    rows.append(_ntp_row(ntp, len(items), max_new_tokens, fingerprint))
    df = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    for col in SWEEP_COLUMNS:  # nulls from the JSON cache come back as None: make them NaN
        if col not in ("rule", "gap_free", "verify", "fingerprint", "measured_at"):
            df[col] = pd.to_numeric(df[col])
    df["gap_free"] = df["gap_free"].astype(bool)
    df["verify"] = df["verify"].astype(bool)
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
        raise ValueError("df: needs both gap_free=False and gap_free=True rows; "
                         "run sweep(..., gap_free=(False, True))")
    keys = ["rule", "gamma", "block_size"] + (["verify"] if "verify" in df.columns else [])
    measures = [c for c in ("accuracy", "tokens_per_call", "speedup_calls", "speedup_wall", "gap_fill_rate")
                if c in df.columns]
    free = sbd[~sbd["gap_free"]][keys + measures]
    fixed = sbd[sbd["gap_free"]][keys + measures]
    table = free.merge(fixed, on=keys, suffixes=("_free", "_gap_free"))
    table["accuracy_delta"] = table["accuracy_free"] - table["accuracy_gap_free"]
    return table.reset_index(drop=True)
