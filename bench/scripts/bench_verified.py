"""Verified SBD against the lossless speed-ups a user would reach for first, and against plain SBD.

    python bench/scripts/bench_verified.py [--threads 2] [--per-family 10] [--gammas 0.1 0.35 1 2] [--blocks 8 16 32]
    python bench/scripts/bench_verified.py --quick        # seconds: checks the script; writes nothing by default

On every item (test suite, long- and short-answer families, each decoded to the end of its answer
line, fp32), interleaved item by item in a rotating order so drift hits every method alike:

- ``greedy``: HF ``generate``, greedy (the reference text);
- ``lookup``: HF prompt lookup decoding, ``generate(prompt_lookup_num_tokens=10)``, lossless;
- ``sbd``: plain (lossy) SBD, entropy-bounded γ 0.1, block 16;
- ``verified γ k``: ``sv.decode(..., verify=True)`` over the γ grid and block sizes; a γ whose piece
  (``Trace.gamma_range``) was decoded for the item at another γ reads that decode and its seconds.

Reports tokens per call (forwards counted with a hook for the HF methods), rollbacks per block,
items whose text differs from greedy's, and wall-clock speed relative to greedy and to prompt lookup
(total seconds over the items). Writes ``bench/VERIFIED.md`` and ``bench/results/verified.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import run_info  # beside this file
from sbd_viz.trace.labels import COUNT_LABELS

LOOKUP_TOKENS = 10


def hf_generate(model, prompt_ids, max_new_tokens, stop, lookup: int | None):
    """Bare HF generate (greedy, or prompt lookup with ``lookup`` tokens): new ids up to the stop."""
    import torch

    from sbd_viz.decoders.base import find_stop

    ids = torch.tensor([prompt_ids])
    extra = {"prompt_lookup_num_tokens": lookup} if lookup else {}
    out = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                               do_sample=False, temperature=None, top_p=None, top_k=None, stop_strings=list(stop),
                               tokenizer=model.tokenizer, eos_token_id=model.eos_token_id,
                               pad_token_id=model.eos_token_id, **extra)
    new = out[0, len(prompt_ids):].tolist()
    found = find_stop(model, new, 1, tuple(stop))
    return new[: found.index] if found else new


def decode_timed(model, prompt, setting, pieces: dict, max_new_tokens, stop):
    """``sv.decode`` of ``prompt`` at ``setting`` (γ, block size, verify) and its seconds. A γ whose piece
    (``Trace.gamma_range``) was decoded for this prompt already reads that decode and its seconds back (``pieces``:
    a ``PieceStore`` per block size and verify, kept per prompt by the caller): the same trace, no decode run again
    and none replayed inside a timed one."""
    import sbd_viz as sv
    from sbd_viz.analysis.pieces import PieceStore, at_gamma

    g, k, verify = setting
    store = pieces.setdefault((k, verify), PieceStore())
    kept = store.find(g)
    if kept is not None:
        trace, seconds = kept
        return at_gamma(trace, g), seconds
    t0 = time.perf_counter()
    trace = sv.decode(model, prompt, gamma=g, block_size=k, max_new_tokens=max_new_tokens, stop=stop, verify=verify)
    seconds = time.perf_counter() - t0
    store.add(trace, (trace, seconds))
    return trace, seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--per-family", type=int, default=10)
    p.add_argument("--gammas", type=float, nargs="+", default=[0.1, 0.35, 1.0, 2.0])
    p.add_argument("--blocks", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--quick", action="store_true", help="2 items per family, one γ and block; writes nothing")
    p.add_argument("--out", default=None,
                   help="write VERIFIED.md and verified.json here (default: bench/ and bench/results/)")
    args = p.parse_args(argv)
    if args.quick:
        args.per_family, args.gammas, args.blocks = 1, [1.0], [16]

    import torch

    import sbd_viz as sv
    from sbd_viz.tasks.asserts import CONTEXT_FAMILIES, LONG_FAMILIES, SHORT_FAMILIES

    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(f"load average at start: {run_info.load()}", flush=True)
    model = sv.load_model()
    families = tuple(f for f in LONG_FAMILIES + SHORT_FAMILIES if f not in CONTEXT_FAMILIES)
    items = sv.tasks.load_suite(per_family=args.per_family, families=families)
    stop, max_new = ("\n",), 64
    forwards = {"n": 0}
    model.model.register_forward_pre_hook(lambda module, inputs: forwards.__setitem__("n", forwards["n"] + 1))

    methods = [("greedy", None), ("lookup", None), ("sbd", (0.1, 16, False))]
    methods += [(f"verified γ{g:g} k{k}", (g, k, True)) for g in args.gammas for k in args.blocks]
    stats = {name: {"long": {"s": 0.0, "tokens": 0, "calls": 0}, "short": {"s": 0.0, "tokens": 0, "calls": 0},
                    "differ": 0, "rollbacks": 0, "blocks": 0} for name, _ in methods}
    for i, item in enumerate(items):
        kind = "long" if item.family in LONG_FAMILIES else "short"
        prompt_ids = model.encode(item.prompt)
        order = methods[i % len(methods):] + methods[: i % len(methods)]
        texts = {}
        pieces = {}  # this item's decodes, per block size and verify
        for name, setting in order:
            forwards["n"] = 0
            t0 = time.perf_counter()
            if setting is None:
                ids = hf_generate(model, prompt_ids, max_new, stop, LOOKUP_TOKENS if name == "lookup" else None)
                seconds, calls = time.perf_counter() - t0, forwards["n"]
            else:
                trace, seconds = decode_timed(model, item.prompt, setting, pieces, max_new, stop)
                calls, ids = trace.nfe, list(trace.output_ids)
                stats[name]["rollbacks"] += sum(1 for s in trace.steps if s.rollback is not None)
                stats[name]["blocks"] += trace.n_blocks
            texts[name] = ids
            part = stats[name][kind]
            part["s"] += seconds
            part["tokens"] += len(ids)
            part["calls"] += calls
        for name, _ in methods:
            stats[name]["differ"] += texts[name] != texts["greedy"]
        if i % 10 == 9:
            print(f"{i + 1}/{len(items)} items", flush=True)

    rows = []
    for name, setting in methods:
        st = stats[name]
        row = {"method": name, "lossless": name in ("greedy", "lookup") or bool(setting and setting[2]),
               "differ_from_greedy": st["differ"], "n_items": len(items),
               "rollbacks_per_block": st["rollbacks"] / st["blocks"] if st["blocks"] else None}
        for kind in ("long", "short"):
            part = st[kind]
            row[f"{kind}_tokens_per_call"] = part["tokens"] / part["calls"] if part["calls"] else None
            row[f"{kind}_vs_greedy"] = stats["greedy"][kind]["s"] / part["s"]
            row[f"{kind}_vs_lookup"] = stats["lookup"][kind]["s"] / part["s"]
        total = st["long"]["s"] + st["short"]["s"]
        row["all_vs_greedy"] = (stats["greedy"]["long"]["s"] + stats["greedy"]["short"]["s"]) / total
        row["all_vs_lookup"] = (stats["lookup"]["long"]["s"] + stats["lookup"]["short"]["s"]) / total
        rows.append(row)
    verified = [r for r in rows if r["method"].startswith("verified")]
    best = max(verified, key=lambda r: r["long_vs_greedy"])
    result = {"when": run_info.utc_now(), "threads": args.threads,
              "load_start": load, "load_end": os.getloadavg(), "n_items": len(items),
              "n_long": sum(1 for it in items if it.family in LONG_FAMILIES),
              "machine": run_info.machine(),
              "fingerprint": model.fingerprint(), "rows": rows, "best": best["method"],
              "command": shlex.join(["python", "bench/scripts/bench_verified.py",
                                     *(argv if argv is not None else sys.argv[1:])])}
    print(json.dumps(result, indent=1))
    if args.quick and not args.out:
        return 0
    page = run_info.save_run(result, "verified.json", "VERIFIED.md", report(result), args.out)
    print(f"wrote {page}")
    return 0


def _f(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def report(r: dict) -> str:
    best = next(row for row in r["rows"] if row["method"] == r["best"])
    earlier = run_info.earlier_model(r["fingerprint"])
    lines = [
        "# Verified SBD against greedy, prompt lookup and plain SBD", "",
        f"Produced by `{r['command']}` on {r['when']}; {r['machine']}, {r['threads']} torch threads; model "
        f"`sbd-char-5m` (fingerprint {r['fingerprint']}); load average {r['load_start'][0]:.2f} at the start, "
        f"{r['load_end'][0]:.2f} at the end.", "",
        *earlier,
        f"{r['n_items']} test-suite items ({r['n_long']} with long answers; the context families `ctx_*` are left out, "
        + ("as the model measured here was not trained on them" if earlier else
           "so that models trained without them compare on the same items")
        + "), each decoded to the end of its answer line by "
        "every method, interleaved item by item in a rotating order; fp32. Speed columns: total seconds "
        f"of the reference over the method's (higher is faster). *{COUNT_LABELS[(True, True)]}*: output tokens "
        f"over forwards (a hook counts HF's). `lookup` is `generate(prompt_lookup_num_tokens={LOOKUP_TOKENS})`.", "",
        f"Best verified setting on long answers: **{best['method']}**: {_f(best['long_tokens_per_call'])} "
        f"{COUNT_LABELS[(True, True)]}, **{_f(best['long_vs_greedy'])}x** HF greedy and "
        f"**{_f(best['long_vs_lookup'])}x** prompt lookup "
        f"on long answers, text differing from greedy on {best['differ_from_greedy']} of {r['n_items']} items.", "",
        f"| method | lossless | items differing from greedy | long answers: {COUNT_LABELS[(True, True)]} "
        f"| short answers: {COUNT_LABELS[(True, True)]} | "
        "rollbacks/block | × greedy long | × greedy short | × greedy all | × lookup long | × lookup all |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in r["rows"]:
        lines.append(
            f"| {row['method']} | {'yes' if row['lossless'] else 'no'} | {row['differ_from_greedy']} | "
            f"{_f(row['long_tokens_per_call'])} | {_f(row['short_tokens_per_call'])} | "
            f"{_f(row['rollbacks_per_block'])} | {_f(row['long_vs_greedy'])} | {_f(row['short_vs_greedy'])} | "
            f"{_f(row['all_vs_greedy'])} | {_f(row['long_vs_lookup'])} | {_f(row['all_vs_lookup'])} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
