"""What recording costs: ``decode_ntp`` vs a plain HF ``generate``, and SBD with full tracing vs none.

    python bench/bench_overhead.py [--model DIR] [--per-family 4] [--reps 3] [--out bench/OVERHEAD.md]

Two ratios, each measured side by side in one run (the two variants of a pair alternate, item by
item and rep by rep, so drift on a noisy machine hits both alike):

- ``decode_ntp`` (HF ``generate`` + per-step logits, a clock, and the trace built from them) against
  a bare ``model.generate(...)`` greedy call with the same stop strings: the cost of the NTP trace.
- ``decode`` with full tracing (per masked slot: entropy and the top 5 candidates with their text,
  every call) against the same decode with the per-slot records switched off (the commit rule still
  runs; only ``Step.slots`` stays empty): the cost of the SBD trace.

Both decode the same held-out suite prompts to the end of their answer line.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz.analysis.evaluation import STOP

import run_info  # beside this file

decode_module = importlib.import_module("sbd_viz.decoders.sbd")  # the plain decoding loop, whose slot_views is swapped out

HERE = Path(__file__).resolve().parent


def plain_generate(model, prompt: str, max_new_tokens: int) -> int:
    """The bare HF baseline: greedy ``generate`` with the same stop strings, nothing recorded."""
    ids = torch.tensor([model.encode(prompt)])
    with torch.inference_mode():
        out = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                   do_sample=False, temperature=None, top_p=None, top_k=None,
                                   stop_strings=list(STOP), tokenizer=model.tokenizer,
                                   eos_token_id=model.eos_token_id, pad_token_id=model.eos_token_id)
    return out.shape[1] - ids.shape[1]


class NoSlotRecords:
    """Within this block, ``decode`` records no per-slot views (entropies and candidates)."""

    def __enter__(self):
        self.saved = decode_module.slot_views
        decode_module.slot_views = lambda *args: ()

    def __exit__(self, *exc):
        decode_module.slot_views = self.saved


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pair(items, reps: int, a, b) -> tuple[float, float]:
    """Total seconds of ``a(item)`` and ``b(item)`` over all items and reps, alternating which goes first."""
    ta = tb = 0.0
    for r in range(reps):
        for i, item in enumerate(items):
            if (i + r) % 2:
                tb += timed(lambda: b(item))
                ta += timed(lambda: a(item))
            else:
                ta += timed(lambda: a(item))
                tb += timed(lambda: b(item))
    return ta, tb


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--per-family", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--gamma", type=float, default=0.35)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(HERE / "OVERHEAD.md"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    items = sv.tasks.load_suite(split="test", per_family=args.per_family)
    max_new = 64
    start = time.time()

    # warm up both paths (first-call allocations are not overhead)
    for item in items[:3]:
        plain_generate(model, item.prompt, max_new)
        sv.decode_ntp(model, item.prompt, max_new_tokens=max_new, stop=STOP)
        sv.decode(model, item.prompt, gamma=args.gamma, stop=STOP)

    ntp_t, gen_t = pair(items, args.reps,
                        lambda it: sv.decode_ntp(model, it.prompt, max_new_tokens=max_new, stop=STOP),
                        lambda it: plain_generate(model, it.prompt, max_new))

    def sbd_bare(it):
        with NoSlotRecords():
            return sv.decode(model, it.prompt, gamma=args.gamma, stop=STOP)

    full_t, bare_t = pair(items, args.reps, lambda it: sv.decode(model, it.prompt, gamma=args.gamma, stop=STOP),
                          sbd_bare)
    # what is being compared: the decodes agree, only the records differ
    probe = items[0].prompt
    with NoSlotRecords():
        bare = sv.decode(model, probe, gamma=args.gamma, stop=STOP)
    full = sv.decode(model, probe, gamma=args.gamma, stop=STOP)
    assert bare.text == full.text and bare.nfe == full.nfe and not bare.steps[0].slots and full.steps[0].slots

    n = len(items) * args.reps
    lines = [
        "# What recording costs",
        "",
        f"Produced by `python bench/bench_overhead.py{' --model ' + args.model if args.model else ''} "
        f"--per-family {args.per_family} --reps {args.reps} --gamma {args.gamma:g} --threads {args.threads}` on "
        f"{run_info.utc_now()} ({(time.time() - start) / 60:.1f} min); machine: "
        f"{run_info.machine(torch.get_num_threads())} ({run_info.cpu_name()}); "
        f"model `{model.name}` (fingerprint {model.fingerprint()}).",
        "",
        f"{len(items)} held-out suite prompts x {args.reps} reps = {n} decodes per variant, each to the end of its "
        "answer line; the two variants of each pair alternate item by item. Ratios are of total seconds.",
        "",
        "| pair | variant | total s | ms per decode | ratio |",
        "| --- | --- | --- | --- | --- |",
        f"| NTP | `sv.decode_ntp` (trace: per-step logits, entropy, top 5) | {ntp_t:.2f} | {1000 * ntp_t / n:.1f} | "
        f"**{ntp_t / gen_t:.3f}** (target <= 1.10) |",
        f"| NTP | bare `model.generate`, greedy, same stop strings | {gen_t:.2f} | {1000 * gen_t / n:.1f} | 1 |",
        f"| SBD γ={args.gamma:g}, k=16 | `sv.decode`, full tracing | {full_t:.2f} | {1000 * full_t / n:.1f} | "
        f"**{full_t / bare_t:.3f}** (target <= 1.05) |",
        f"| SBD γ={args.gamma:g}, k=16 | the same with no per-slot records | {bare_t:.2f} | {1000 * bare_t / n:.1f} | 1 |",
        "",
        "Full SBD tracing keeps, for every masked slot of every call, its entropy and its top 5 candidates "
        "(token id, text, probability); with no per-slot records the decode still computes entropies and "
        "confidences (the commit rule needs them) and still records the commits.",
    ]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
