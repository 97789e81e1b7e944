"""SBD vs HF ``generate`` greedy on the same weights and prompts: model calls and wall-clock time.

    python bench/scripts/bench_speed.py [--model DIR] [--per-family 10]   # bench/RESULTS.md and its JSON
    python bench/scripts/bench_speed.py --from-json bench/results/speed.json   # the page again
    sbd-viz bench [same options]

For the long- and short-answer suite families separately, every gamma of the
entropy-bounded rule (the model's block size) runs through ``sbd_viz.analysis.sweep`` with no cache:
each item is decoded by SBD and by NTP back to back, alternating which goes first, so the
ratios are measured side by side in one run. Ratios > 1 mean SBD is faster.

A single-call latency table (median ms, calls interleaved) explains the wall-clock numbers:
a speedup in calls only becomes a speedup in time if a block call costs about as much as a
1-token call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz.plugin import ModelCall
from sbd_viz.trace.labels import COUNT_LABELS
from sbd_viz.tasks.asserts import LONG_FAMILIES, SHORT_FAMILIES

import run_info  # beside this file

GAMMAS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.6, 1.0)


def shown_path(path) -> str:
    """A model folder as the page names it: relative to the repository when inside it, so the page does not
    carry the checkout's location."""
    full = Path(path).resolve()
    return str(full.relative_to(run_info.ROOT)) if full.is_relative_to(run_info.ROOT) else str(path)


# -- the machine -------------------------------------------------------------------------------
def machine() -> dict:
    import transformers

    return {"nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "cpu": run_info.cpu_name(), "torch": torch.__version__, "transformers": transformers.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "load": run_info.load()}


# -- single-call latency -------------------------------------------------------------------------
def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - t0)


def latency_table(model: sv.SBDModel, prompt: str, k: int = 16, reps: int = 30) -> list[dict]:
    """Median milliseconds of each kind of call on the same cached prefix, interleaved rep by rep."""
    m = model.mask_token_id
    prefix = model.encode(prompt)
    cache = model.new_cache()
    model.call(cache, ModelCall.fused(prefix, [m]))  # prefill: the prefix is now cached
    final = prefix[-k:] if len(prefix) >= k else (prefix * k)[:k]  # k plausible final tokens

    @torch.inference_mode()
    def one_token():  # what each HF generate step runs: one new token against the KV cache
        model.model(input_ids=torch.tensor([[prefix[-1]]]), past_key_values=cache, use_cache=True)
        cache.crop(-1)

    def block():  # a later step of a block: only the k slots
        model.call(cache, ModelCall.fused([], [m] * k))

    def fused():  # a block's first step: the previous block's k final tokens enter the cache + k slots
        model.call(cache, ModelCall.fused(final, [m] * k))
        cache.crop(-k)  # take the k final tokens out again, so every rep sees the same prefix

    def generate_per_token():  # HF generate end to end (prefill included), per generated token
        trace = sv.decode_ntp(model, prompt, max_new_tokens=k)
        return trace.n_tokens

    kinds = [("1-token call (KV cache), what each `generate` step runs", one_token),
             (f"{k}-slot block call (a later step of a block)", block),
             (f"fused {2 * k}-token call ({k} final tokens + {k} slots: a block's first step)", fused)]
    times: dict[str, list[float]] = {name: [] for name, _ in kinds}
    gen_name = f"HF `generate` greedy, per token ({k} tokens, prefill included)"
    times[gen_name] = []
    for _ in range(3):  # warm-up: first calls of a shape are slow
        for _, fn in kinds:
            fn()
    for r in range(reps):
        order = kinds[r % len(kinds):] + kinds[: r % len(kinds)]  # rotate, so drift hits every kind alike
        for name, fn in order:
            times[name].append(_timed(fn))
        if r % 3 == 0:  # generate is slow: a third as many samples
            t0 = time.perf_counter()
            n = generate_per_token()
            times[gen_name].append(1000 * (time.perf_counter() - t0) / max(1, n))
    base = statistics.median(times[kinds[0][0]])
    return [{"call": name, "n_input": n_input, "median_ms": statistics.median(ts),
             "vs_1_token": statistics.median(ts) / base, "samples": len(ts)}
            for (name, ts), n_input in zip(times.items(), (1, k, 2 * k, 1))]


# -- tables ------------------------------------------------------------------------------------
def md_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A Markdown table; ``columns`` are (key, header, format)."""
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(format(r[key], fmt) if fmt else str(r[key]) for key, _, fmt in columns) + " |"
            for r in rows]
    return "\n".join([head, rule] + body)


SPEED_COLUMNS = [("gamma", "gamma", "g"), ("accuracy", "SBD acc", ".3f"), ("ntp_accuracy", "NTP acc", ".3f"),
                 ("tokens_per_call", f"SBD: {COUNT_LABELS[(True, True)]}", ".2f"),
                 ("speedup_calls", "calls ratio NTP/SBD", ".2f"),
                 ("speedup_wall", "wall ratio NTP/SBD", ".2f"), ("sbd_ms_per_token", "SBD ms/token", ".1f"),
                 ("ntp_ms_per_token", "NTP ms/token", ".1f"), ("gap_fill_rate", "gap fills/token", ".3f"),
                 ("same_as_ntp", "same output as NTP", ".2f")]


def speed_rows(df) -> list[dict]:
    """The SBD rows of a sweep frame, with NTP's accuracy and both decoders' milliseconds per token."""
    ntp = df[df["rule"] == "ntp"].iloc[0]
    return [{**r.to_dict(), "ntp_accuracy": ntp["accuracy"],
             "sbd_ms_per_token": 1000 * r["wall_time"] / max(1, r["tokens"]),
             "ntp_ms_per_token": 1000 * r["ntp_wall_time"] / max(1, ntp["tokens"])}
            for _, r in df[df["rule"] != "ntp"].iterrows()]


def run(model: sv.SBDModel, per_family: int, gammas, block_size: int, max_new_tokens: int) -> dict:
    """Each answer length's families swept (SBD at every γ beside NTP): the page's rows, NTP's and the families."""
    groups = {}
    for name, families in (("long", LONG_FAMILIES), ("short", SHORT_FAMILIES)):
        items = sv.tasks.load_suite(split="test", per_family=per_family, families=families)
        print(f"{name}-answer families {', '.join(families)}: {len(items)} items", file=sys.stderr)
        df = sv.sweep(model, items, gammas=gammas, block_sizes=(block_size,), max_new_tokens=max_new_tokens,
                      cache_dir=None, progress=True)
        ntp = df[df["rule"] == "ntp"].iloc[0]
        groups[name] = {"families": list(families),
                        "ntp": {k: ntp[k].item() for k in ("n_items", "accuracy", "tokens", "calls")},
                        "rows": [{k: v.item() if hasattr(v, "item") else v for k, v in r.items()}
                                 for r in speed_rows(df)]}
    return groups


def report(d: dict) -> str:
    """The page from a run's data."""
    info, block_size, model = d["machine"], d["block_size"], d["model"]
    lines = ["# SBD vs NTP speed benchmark", "",
             f"Produced by `{d['command']}` on {d['date']} ({d['minutes']:.1f} min).", "",
             f"Machine: {info['nproc']} CPU cores ({info['cpu']}), torch {info['torch']} "
             f"(torch threads: {info['threads']}), transformers {info['transformers']}, Python {info['python']}; "
             f"load average at start {info['load']}, at end {info['load_end']}.", "",
             f"Model: `{model['path']}` ({model['class']}, {model['parameters'] / 1e6:.1f}M parameters, fingerprint "
             f"{model['fingerprint']}).", ""]
    if d.get("note"):
        lines += [d["note"], ""]
    lines += [f"SBD = entropy-bounded rule (paper eq. 8), block {block_size}, argmax; NTP = HF `generate` greedy on "
              "the same weights. Every item is decoded by both, back to back, alternating which goes first; decoding "
              "stops at the end of the answer line. Ratios are NTP / SBD, so > 1 means SBD is faster. `calls ratio` "
              "counts model calls (NFE); `wall ratio` is measured wall-clock time; both are totals over the items. "
              "The two decoders' outputs can differ in length, so the calls ratio need not equal SBD's "
              f"{COUNT_LABELS[(True, True)]}; below 1, that count means calls were spent on slots after the end of the "
              "answer: committed (often first, being easy to guess), then discarded at the stop.",
              ""]
    for name, group in d["groups"].items():
        ntp = group["ntp"]
        lines += [f"## {name.capitalize()}-answer families ({', '.join(group['families'])}; {int(ntp['n_items'])} "
                  "items)", "",
                  f"NTP: accuracy {ntp['accuracy']:.3f}, {int(ntp['tokens'])} tokens in {int(ntp['calls'])} calls.", "",
                  md_table(group["rows"], SPEED_COLUMNS), ""]
    lines += ["## Single-call latency", "",
              "Median milliseconds per call on the same cached prefix (a suite prompt), the call kinds "
              "interleaved rep by rep. A block's first call is the fused one; its later calls are block calls.", "",
              md_table(d["latency"], [("call", "call", ""), ("n_input", "tokens in", "d"),
                                      ("median_ms", "median ms", ".2f"), ("vs_1_token", "x 1-token call", ".2f"),
                                      ("samples", "samples", "d")]), "",
              f"How to read it: SBD saves calls, but each of its calls carries {block_size} or {2 * block_size} "
              "tokens. The wall-clock "
              "ratio is roughly the calls ratio divided by (block-call time / 1-token-call time), plus "
              "`generate`'s own per-token overhead on the NTP side and the decoder's Python work per step on "
              "the SBD side.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_speed.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    parser.add_argument("--per-family", type=int, default=10, help="test items per suite family")
    parser.add_argument("--gammas", nargs="+", type=float, default=list(GAMMAS),
                        help="the entropy-bounded rule's γ values (default: %(default)s)")
    parser.add_argument("--block-size", type=int, default=None, help="default: the model's (else 16)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="new tokens at most per item")
    parser.add_argument("--reps", type=int, default=30, help="repetitions of each single-call timing")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--note", default=None, help="a line added to the report, e.g. which checkpoint")
    run_info.add_page_arguments(parser, run_info.BENCH / "RESULTS.md", run_info.RESULTS / "speed.json")
    args = parser.parse_args(argv)
    if args.from_json:
        text = report(json.loads(Path(args.from_json).read_text()))
        Path(args.out).write_text(text)
        print(text)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "bench/scripts/bench_speed.py"] + argv)
    info = machine()
    started = run_info.utc_now()
    t0 = time.perf_counter()

    model = sv.load_model(args.model)
    model_info = {"path": shown_path(args.model or sv.default_model_path()), "class": type(model.model).__name__,
                  "parameters": sum(p.numel() for p in model.model.parameters()), "fingerprint": model.fingerprint()}
    block_size = model.block_size if args.block_size is None else args.block_size
    groups = run(model, args.per_family, args.gammas, block_size, args.max_new_tokens)
    prompt = sv.tasks.load_suite(per_family=1, families=("sorted",))[0].prompt
    print("single-call latency ...", file=sys.stderr)
    latency = latency_table(model, prompt, k=block_size, reps=args.reps)
    info["load_end"] = run_info.load()
    data = {"command": command, "date": started, "minutes": (time.perf_counter() - t0) / 60, "machine": info,
            "model": model_info, "note": args.note, "block_size": block_size, "groups": groups, "latency": latency}
    Path(args.json).write_text(json.dumps(data, indent=1))
    text = report(data)
    Path(args.out).write_text(text)
    print(text)
    print(f"\nwritten to {args.out} and {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
