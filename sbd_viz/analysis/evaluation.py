"""Score a decoder on the verifiable suite: accuracy, model calls per token, and speed vs NTP.

Wall-clock speedups are measured in the same run: for every item the SBD decode and the
NTP decode (HF ``generate``, greedy, same weights) run back to back, alternating which
goes first, so drift on a noisy machine hits both alike. Scored decodes can run batched
(``batch_size``), and under ``accelerate launch`` the items are split across processes.
"""

from __future__ import annotations

import atexit
import functools
import os
import time
from collections import defaultdict
from collections.abc import Iterable

from ..decoders.batch import MAX_BATCH_SIZE, BatchDecoding
from ..decoders.door import config_for, decode
from ..decoders.ntp import NTP, decode_ntp
from ..decoders.registry import check_serves, default_decoder, get_decoder, split_settings
from ..decoders.rules import DEFAULT_GAMMA, DEFAULT_RULE
from ..models.base import CausalModel
from ..models.checks import check_model
from ..models.sbd_model import SBDModel
from ..tasks.asserts import LONG_FAMILIES, SuiteItem, score
from ..trace.checks import check_whole
from ..training.objective import masked_slot_accuracy  # noqa: F401  (the MATP probe, long read from here)

STOP = ("\n",)  # an assert's answer ends at the end of its line


def _summarise(rows: list[dict], prefix: str = "") -> dict:
    calls = sum(r[prefix + "nfe"] for r in rows)
    tokens = sum(r[prefix + "n_tokens"] for r in rows)
    return {
        "accuracy": sum(r[prefix + "correct"] for r in rows) / len(rows) if rows else float("nan"),
        "calls": calls,
        "tokens": tokens,
        "calls_per_token": calls / tokens if tokens else float("nan"),
        "tokens_per_call": tokens / calls if calls else float("nan"),
        "wall_time": sum(r[prefix + "wall_time"] for r in rows),
    }


def evaluate(
    model: CausalModel,
    suite: Iterable[SuiteItem],
    rule: str = DEFAULT_RULE,
    gamma: float = DEFAULT_GAMMA,
    block_size: int | None = None,
    gap_free: bool = False,
    decoder: str | None = None,
    max_new_tokens: int = 64,
    measure_speedup: bool = True,
    progress: bool = False,
    keep_traces: bool = False,
    stop: tuple[str, ...] = STOP,
    verify: bool = False,
    batch_size: int = 1,
    speed_batch_size: int | None = 1,
    **own,
) -> dict:
    """Decode every suite item with ``decoder`` (any registered one, ``sv.decoders()``; None: SBD) and score it.

    ``rule``, ``gamma``, ``block_size``, ``gap_free`` and ``verify`` go to the decoder if it takes them (set for one
    that does not, they are refused by name); ``own``: the decoder's own settings (e.g. ``remask_threshold``).

    ``block_size`` None takes the model's (``SBDModel.block_size``), as ``decode`` does.

    ``stop``: stop strings (default: the end of the line, where an assert's answer ends).
    ``verify``: decode with verified SBD (``decode(..., verify=True)``): every draft is checked
    against NTP greedy in the same calls, so each output is exactly NTP's.
    ``batch_size``: prompts per forward for the scored decodes (``decode_batch``, and greedy NTP on
    the same engine: ``decode_batch(..., decoder="ntp")``; a decoder with no ``requests()`` takes 1).
    ``speed_batch_size``: where the wall-clock speedup is measured: 1 (the default) times ``decode`` and HF ``generate``
    item by item, back to back, even when ``batch_size`` > 1 (an extra pass); ``batch_size`` times the batched SBD run
    against the batched NTP run (per-item seconds are the run's, shared evenly); None measures no wall clock
    (``wall_time`` and ``speedup_wall`` are NaN).
    Under ``accelerate launch`` with several processes, each decodes its share of the items
    (Accelerate's split and gather) and every process returns the whole result.

    Returns a dict: ``accuracy``, ``by_family`` (accuracy per family), ``calls_per_token``,
    ``tokens_per_call``, ``calls``, ``tokens``, ``long`` / ``short`` (the same measures on the
    long- and short-answer families), ``gap_fill_rate`` (kept gap fills, ``Trace.kept_gap_fills``,
    per output token), ``rows`` (one dict per item, ``gap_fills`` its kept gap fills) and, with
    ``measure_speedup``, ``ntp`` (NTP's measures on the same items), ``speedup_calls`` (NTP
    calls / the decoder's calls) and ``speedup_wall`` (NTP seconds / the decoder's seconds).
    """
    check_model(model)  # block_size None stays unset here: the door resolves it for a decoder that takes it
    plan = Plan(
        model,
        suite,
        rule=rule,
        gamma=gamma,
        block_size=block_size,
        gap_free=gap_free,
        decoder=decoder,
        max_new_tokens=max_new_tokens,
        measure_speedup=measure_speedup,
        stop=stop,
        verify=verify,
        batch_size=batch_size,
        speed_batch_size=speed_batch_size,
        **own,
    )
    with split_items(plan.items) as (share, gather):
        rows = gather(plan.rows(share, keep_traces=keep_traces, progress=progress))
    return plan.summary(rows)


class split_items:
    """``with split_items(items) as (share, gather)``: this process's share of ``items`` and a function that
    gathers every process's list of results, in item order. One process (no ``accelerate launch``): all
    the items, and gather returns its argument."""

    def __init__(self, items: list):
        self.items = items

    def __enter__(self):
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:  # not launched on several processes
            return self.items, lambda results: results
        from accelerate.utils import gather_object

        state = _process_state()
        self._split = state.split_between_processes(self.items)  # contiguous shares, in rank order
        share = self._split.__enter__()
        return list(share), lambda results: gather_object(list(results))

    def __exit__(self, *exc):
        split = getattr(self, "_split", None)
        return split.__exit__(*exc) if split is not None else False


@functools.cache  # once per process: accelerate's state is shared, and the exit hook must be registered once
def _process_state():
    """Accelerate's view of the launch. Without a GPU it must be told so (``cpu=True``): otherwise it
    takes torchrun's ranks for a single process and every process would run every item."""
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    # A gloo process group still alive when the interpreter shuts down can abort a rank at exit ("terminate
    # called without an active exception", SIGABRT: its worker threads outlive Python), which fails a launch
    # whose work was done. PyTorch asks for destroy_process_group before exit; atexit runs it while the
    # interpreter is still whole, after every collective of the script.
    atexit.register(state.destroy_process_group)
    return state


def is_main_process() -> bool:
    """Whether this is the process that writes files and prints (always, without ``accelerate launch``)."""
    return int(os.environ.get("RANK", "0")) == 0


def main_decides(value):
    """The main process's ``value`` on every process (so all of them take the same branch)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return value
    from accelerate.utils import broadcast_object_list

    _process_state()  # the process group must exist before a collective
    return broadcast_object_list([value], from_process=0)[0]


class Plan:
    """One validated evaluation: the settings, how to decode a share of the items, how to summarise rows."""

    def __init__(
        self,
        model,
        suite,
        *,
        rule,
        gamma,
        block_size,
        gap_free,
        decoder,
        max_new_tokens,
        measure_speedup,
        stop,
        verify,
        batch_size,
        speed_batch_size,
        **own,
    ):
        self.spec = spec = default_decoder(model) if decoder is None else get_decoder(decoder)
        check_serves(spec, model)
        if not isinstance(verify, bool):
            raise ValueError(f"verify: must be True or False, got {verify!r}")
        check_whole(batch_size, "batch_size", 1, MAX_BATCH_SIZE)
        if batch_size > 1 and not spec.batchable:
            raise ValueError(f"batch_size: decoder {spec.name!r} cannot be batched (no requests()); use 1")
        if speed_batch_size not in (None, 1, batch_size) or isinstance(speed_batch_size, bool):
            raise ValueError(
                f"speed_batch_size: must be 1, None or batch_size ({batch_size}), got {speed_batch_size!r}"
            )
        self.stop, self.max_new_tokens = tuple(stop), max_new_tokens
        shared, self.own = split_settings(
            spec, dict(rule=rule, gamma=gamma, block_size=block_size, gap_free=gap_free, verify=verify, **own)
        )
        self.config = config_for(spec, model, max_new_tokens, self.stop, **shared)  # checks the settings
        self.kwargs = dict(max_new_tokens=max_new_tokens, stop=self.stop, **shared, **self.own)  # sv.decode's
        self.items = list(suite)
        if not self.items:
            raise ValueError("suite: no items to evaluate")
        for i, item in enumerate(self.items):  # every item checked against the trained context before any decode
            try:
                model.check_fits(len(model.encode(item.prompt)), max_new_tokens)
            except ValueError as exc:
                raise ValueError(f"{exc} (suite item {i}, family {item.family!r})") from None
        self.model, self.batch_size = model, batch_size
        self.ntp_batched = config_for(NTP, model, max_new_tokens, self.stop)  # for NTPDecoding
        self.paired = measure_speedup and spec is not NTP
        self.speed_batch_size = speed_batch_size  # the main decode is timed even with no NTP beside it
        self.settings = {
            "decoder": spec.name,
            "rule": rule if "rule" in spec.takes else spec.name,
            "gamma": gamma,
            "block_size": self.config.block_size,
            "gap_free": gap_free and "gap_free" in spec.takes,
            "verify": verify and "verify" in spec.takes,
            **self.own,
            "max_new_tokens": max_new_tokens,
            "n_items": len(self.items),
            "batch_size": batch_size,
            "speed_batch_size": self.speed_batch_size,
        }

    def _desc(self) -> str:
        cfg = self.config
        if "gamma" not in self.spec.takes:
            return self.spec.name
        return f"{self.spec.name} {cfg.rule} gamma={cfg.gamma:g}{' verified' if cfg.verify else ''}"

    def rows(self, items: list[SuiteItem], keep_traces: bool = False, progress: bool = False) -> list[dict]:
        """One dict per item of this share: outputs, scores, calls and (per the plan) wall times."""
        rows = [{"prompt": item.prompt, "answer": item.answer, "family": item.family} for item in items]
        if not items:
            return rows
        if self.batch_size == 1:
            self._paired_one_by_one(items, rows, keep_traces, progress, timing_only=False)
            return rows
        runs = [("", self.config, self.spec, self.own)]
        if self.paired:
            runs.append(("ntp_", self.ntp_batched, NTP, {}))
        for prefix, config, spec, own in runs:
            batch = BatchDecoding(self.model, [item.prompt for item in items], config, self.batch_size, spec, own=own)
            traces = batch.run(progress=progress)
            seconds = batch.stats.seconds / len(items)  # the run's wall time, shared evenly
            for item, row, trace in zip(items, rows, traces):
                _record(
                    row,
                    prefix,
                    item,
                    trace,
                    seconds if self.speed_batch_size == self.batch_size else float("nan"),
                    keep_traces,
                )
        if self.speed_batch_size == 1:  # the wall clock, item by item at batch 1, as an unbatched run measures it
            self._paired_one_by_one(items, rows, keep_traces=False, progress=progress, timing_only=True)
        return rows

    def _paired_one_by_one(self, items, rows, keep_traces, progress, timing_only):
        """``decode`` and HF ``generate`` back to back on every item, alternating which goes first."""
        model = self.model

        def run_main(item):  # the one door, with the settings the decoder takes
            return decode(model, item.prompt, self.spec.name, **self.kwargs)

        def run_ntp(item):  # HF generate, the reference the speedups are measured against
            return decode_ntp(model, item.prompt, max_new_tokens=self.max_new_tokens, stop=self.stop)

        main_run = run_ntp if self.spec is NTP else run_main
        iterator = zip(items, rows)
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(
                iterator, total=len(items), desc=self._desc() + (" (timing at batch 1)" if timing_only else "")
            )
        for i, (item, row) in enumerate(iterator):
            order = [("", main_run), ("ntp_", run_ntp)] if self.paired else [("", main_run)]
            if i % 2:
                order.reverse()
            for prefix, run in order:
                t0 = time.perf_counter()
                trace = run(item)
                seconds = time.perf_counter() - t0 if self.speed_batch_size == 1 else float("nan")
                if timing_only:
                    row[prefix + "wall_time"] = seconds
                else:
                    _record(row, prefix, item, trace, seconds, keep_traces)

    def summary(self, rows: list[dict]) -> dict:
        result = _summarise(rows)
        families = defaultdict(list)
        for r in rows:
            families[r["family"]].append(r)
        result["by_family"] = {f: _summarise(rs)["accuracy"] for f, rs in families.items()}
        result["by_family_calls_per_token"] = {f: _summarise(rs)["calls_per_token"] for f, rs in families.items()}
        result["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES])
        result["short"] = _summarise([r for r in rows if r["family"] not in LONG_FAMILIES])
        result["gap_fill_rate"] = (
            sum(r["gap_fills"] for r in rows) / result["tokens"] if result["tokens"] else float("nan")
        )
        if self.paired:
            ntp = _summarise(rows, "ntp_")
            ntp["by_family"] = {f: _summarise(rs, "ntp_")["accuracy"] for f, rs in families.items()}
            ntp["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES], "ntp_")
            long = result["long"]
            long["speedup_calls"] = ntp["long"]["calls"] / max(1, long["calls"])
            long["speedup_wall"] = ntp["long"]["wall_time"] / max(1e-9, long["wall_time"])
            result["ntp"] = ntp
            result["speedup_calls"] = ntp["calls"] / result["calls"]
            result["speedup_wall"] = ntp["wall_time"] / result["wall_time"]
        result["rows"] = rows
        result["settings"] = dict(self.settings)
        return result


def _record(row: dict, prefix: str, item: SuiteItem, trace, seconds: float, keep_trace: bool) -> None:
    row[prefix + "wall_time"] = seconds
    row[prefix + "output"] = trace.text
    row[prefix + "correct"] = score(item, trace.text)
    row[prefix + "nfe"] = trace.nfe
    row[prefix + "n_tokens"] = trace.n_tokens
    row[prefix + "gap_fills"] = len(trace.kept_gap_fills())
    if keep_trace:
        row[prefix + "trace"] = trace


def training_probe(model, tok, per_family: int) -> dict:
    """Exact-match accuracy of NTP and SBD (gamma 0.1) on a few held-out suite items: what ``sbd-viz train``
    measures at each checkpoint (``model``, ``tok``: the transformers model and tokenizer being trained)."""
    from .. import tasks
    from ..decoders.ntp import NTP

    sbd = SBDModel(model, tok)
    suite = tasks.load_suite(split="test", per_family=per_family)
    # A short-context run (say 128 from scratch) cannot take 64 new tokens after the longest prompts:
    # the probe asks for what fits (every answer in the suite is shorter than 64 characters).
    longest = max(len(sbd.encode(item.prompt)) for item in suite)
    room = min(64, (sbd.context_length or 10**9) - longest)
    ntp = evaluate(sbd, suite, decoder=NTP.name, measure_speedup=False, max_new_tokens=room)
    eb = evaluate(sbd, suite, gamma=0.1, measure_speedup=False, max_new_tokens=room)
    return {
        "ntp_acc": ntp["accuracy"],
        "sbd_acc": eb["accuracy"],
        "sbd_calls_per_token": eb["calls_per_token"],
        "ntp_by_family": ntp["by_family"],
    }
