"""What recording costs: ``decode_ntp`` vs a plain HF ``generate``, and SBD with full tracing vs none.

    python bench/scripts/bench_overhead.py [--model DIR] [--per-family 4] [--reps 3]   # bench/OVERHEAD.md + its JSON
    python bench/scripts/bench_overhead.py --from-json bench/results/overhead.json        # the page again

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
import shlex
import time

import torch

import sbd_viz as sv
from sbd_viz.analysis.evaluation import STOP

import run_info  # beside this file

decode_module = importlib.import_module("sbd_viz.decoders.sbd")  # the plain decoding loop, whose slot_views is swapped out

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


def run(args, argv) -> dict:
    """Both pairs, timed side by side on the suite's prompts: the page's data."""
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
    return {"command": shlex.join(["python", "bench/scripts/bench_overhead.py", *argv]), "date": run_info.utc_now(),
            "minutes": (time.time() - start) / 60,
            "machine": f"{run_info.machine(torch.get_num_threads())} ({run_info.cpu_name()})",
            "model": model.name, "fingerprint": model.fingerprint(), "items": len(items), "reps": args.reps,
            "gamma": args.gamma, "block_size": model.block_size,
            "seconds": {"ntp": ntp_t, "generate": gen_t, "sbd": full_t, "sbd_bare": bare_t},
            "ratios": {"ntp": ntp_t / gen_t, "sbd": full_t / bare_t}}


def render(d: dict) -> str:
    """The page from a run's data."""
    n, s, g, k = d["items"] * d["reps"], d["seconds"], f"{d['gamma']:g}", d["block_size"]
    lines = [
        "# What recording costs",
        "",
        f"Produced by `{d['command']}` on {d['date']} ({d['minutes']:.1f} min); machine: {d['machine']}; "
        f"model `{d['model']}` (fingerprint {d['fingerprint']}).",
        "",
        *run_info.earlier_model(d["fingerprint"]),
        f"{d['items']} held-out suite prompts x {d['reps']} reps = {n} decodes per variant, each to the end of its "
        "answer line; the two variants of each pair alternate item by item. Ratios are of total seconds.",
        "",
        "| pair | variant | total s | ms per decode | ratio |",
        "| --- | --- | --- | --- | --- |",
        f"| NTP | `sv.decode_ntp` (trace: per-step logits, entropy, top 5) | {s['ntp']:.2f} | "
        f"{1000 * s['ntp'] / n:.1f} | **{d['ratios']['ntp']:.3f}** (target <= 1.10) |",
        f"| NTP | bare `model.generate`, greedy, same stop strings | {s['generate']:.2f} | "
        f"{1000 * s['generate'] / n:.1f} | 1 |",
        f"| SBD γ={g}, k={k} | `sv.decode`, full tracing | {s['sbd']:.2f} | {1000 * s['sbd'] / n:.1f} | "
        f"**{d['ratios']['sbd']:.3f}** (target <= 1.05) |",
        f"| SBD γ={g}, k={k} | the same with no per-slot records | {s['sbd_bare']:.2f} | "
        f"{1000 * s['sbd_bare'] / n:.1f} | 1 |",
        "",
        "Full SBD tracing keeps, for every masked slot of every call, its entropy and its top 5 candidates "
        "(token id, text, probability); with no per-slot records the decode still computes entropies and "
        "confidences (the commit rule needs them) and still records the commits.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--per-family", type=int, default=4, help="test items per suite family")
    p.add_argument("--reps", type=int, default=3, help="times each prompt is decoded by each variant")
    p.add_argument("--gamma", type=float, default=0.35, help="SBD's γ (entropy-bounded rule)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    run_info.add_page_arguments(p, run_info.BENCH / "OVERHEAD.md", run_info.RESULTS / "overhead.json")
    print(run_info.page_from_data(p.parse_args(argv), argv, run, render))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
