"""This CPU against its roofline, and the paper's roofline tables against their corrected shapes.

    python bench/scripts/bench_roofline.py [--threads N] [--per-family 4] [--gammas 0.1 0.35]
    python bench/scripts/bench_roofline.py --quick          # seconds: checks the script; writes nothing by default
    python bench/scripts/bench_roofline.py --tables-only    # only the paper-vs-corrected tables (pure computation)
    python bench/scripts/bench_roofline.py --from-data bench/results/roofline.json   # the page again, measuring nothing

One run (a few minutes; run it on a quiet machine, every number is a median of timed repeats):

1. measures this CPU's memory bandwidth (reading a large fp32 tensor, and one as big as the
   shipped model's weights) and fp32 matmul throughput (the GEMM shapes of the shipped model and
   big square ones) at 1 and 2 threads, and writes the ``"this-cpu"`` entry of
   ``sbd_viz.analysis.roofline`` (``sbd_viz/analysis/roofline_cpu.json``) at the decoder's thread count;
2. times block calls of k = 1 ... 64 slots on the shipped model beside the roofline's prediction;
3. decodes a slice of the test suite with SBD and NTP back to back (``sbd_viz.evaluate``) and puts
   the measured SBD / NTP wall-clock ratio beside ``roofline.project``'s prediction for the same
   traces, and those traces projected onto deployment hardware;
4. writes ``bench/ROOFLINE.md`` with all of it and the paper's Tables 3 and 4, printed vs corrected, and the run's
   measurements to ``bench/results/roofline.json`` (``--data``), which the page is rendered from again.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

from sbd_viz.analysis import roofline as rf

BENCH = Path(__file__).resolve().parents[1]  # the pages; their data in bench/results

PAPER_T3 = {  # Table 3 as printed: (batch, KV) -> blocks 1, 2, 4, ..., 64
    (1, 16): (1.000, 1.000, 1.001, 1.002, 1.004, 1.008, 1.015),
    (1, 2**22): (1.000, 1.000, 1.001, 1.002, 1.004, 1.007, 1.029),
    (4, 16): (1.000, 1.001, 1.003, 1.007, 1.015, 1.030, 1.061),
    (4, 2**22): (1.000, 1.001, 1.003, 1.006, 1.014, 1.028, 1.111),
    (8, 16): (1.000, 1.002, 1.006, 1.014, 1.029, 1.060, 1.903),
    (8, 2**22): (1.000, 1.002, 1.005, 1.012, 1.026, 1.054, 1.904),
    (16, 16): (1.000, 1.004, 1.012, 1.027, 1.058, 1.899, 3.799),
    (16, 2**22): (1.000, 1.003, 1.009, 1.022, 1.047, 1.720, 3.422),
}
PAPER_T4 = {  # Table 4 as printed: (NFE speedup, batch, KV) -> blocks 8, 16, 32, 64
    (2, 1, 16): (1.996, 1.992, 1.984, 1.969), (2, 1, 2**22): (1.996, 1.992, 1.983, 1.941),
    (2, 4, 16): (1.983, 1.967, 1.938, 1.839), (2, 4, 2**22): (1.984, 1.969, 1.935, 1.755),
    (2, 8, 16): (1.966, 1.936, 1.797, 1.019), (2, 8, 2**22): (1.969, 1.943, 1.807, 1.019),
    (4, 1, 16): (3.989, 3.982, 3.966, 3.936), (4, 1, 2**22): (3.989, 3.982, 3.960, 3.876),
    (4, 4, 16): (3.958, 3.927, 3.868, 3.590), (4, 4, 2**22): (3.960, 3.931, 3.851, 3.425),
    (4, 8, 16): (3.916, 3.857, 3.431, 1.978), (4, 8, 2**22): (3.925, 3.872, 3.448, 1.978),
    (8, 1, 16): (7.971, 7.955, 7.925, 7.864), (8, 1, 2**22): (7.971, 7.956, 7.898, 7.732),
    (8, 4, 16): (7.885, 7.824, 7.707, 6.856), (8, 4, 2**22): (7.891, 7.834, 7.625, 6.534),
    (8, 8, 16): (7.773, 7.657, 6.294, 3.736), (8, 8, 2**22): (7.797, 7.693, 6.318, 3.736),
}
T3_BLOCKS, T4_BLOCKS = (1, 2, 4, 8, 16, 32, 64), (8, 16, 32, 64)
BLOCK_KS = (1, 2, 4, 8, 16, 32, 64)
DEPLOY = (("h100-fp8", "llama-3.1-8b"), ("h100-bf16", "llama-3.1-8b"), ("h200-bf16", "qwen-3-8b"),
          ("a100-bf16", "llama-3.1-8b"))


# -- part 1: the paper's tables (pure computation) --------------------------------------------------
def _kv(kv: int) -> str:
    return "2^22" if kv == 2**22 else str(kv)


def _pair(printed: float, corrected: float) -> str:
    cell = f"{printed:.3f} → {corrected:.3f}"
    return f"**{cell}**" if abs(corrected / printed - 1) > 0.01 else cell


def paper_section() -> str:
    """Tables 3 and 4: printed, the paper's code rebuilt (paper mode), and the corrected shapes."""
    t3_paper = {key: [rf.slowdown(k, key[1], key[0], mode="paper") for k in T3_BLOCKS] for key in PAPER_T3}
    t4_paper = {key: [rf.wallclock_speedup(key[0], k, key[2], key[1], mode="paper") for k in T4_BLOCKS]
                for key in PAPER_T4}
    t3_fixed = {key: [rf.slowdown(k, key[1], key[0]) for k in T3_BLOCKS] for key in PAPER_T3}
    t4_fixed = {key: [rf.wallclock_speedup(key[0], k, key[2], key[1]) for k in T4_BLOCKS] for key in PAPER_T4}
    miss3 = [(key, k) for key, vals in t3_paper.items() for k, v, p in zip(T3_BLOCKS, vals, PAPER_T3[key])
             if round(v, 3) != p]
    miss4 = [(key, k) for key, vals in t4_paper.items() for k, v, p in zip(T4_BLOCKS, vals, PAPER_T4[key])
             if round(v, 3) != p]
    close3 = sum(abs(c / p - 1) <= 0.01 for key in PAPER_T3 for c, p in zip(t3_fixed[key], PAPER_T3[key]))
    small3 = [(key, k) for key in PAPER_T3 for k in T3_BLOCKS if key[0] * k <= 32]
    small4 = [(key, k) for key in PAPER_T4 for k in T4_BLOCKS if key[1] * k <= 32]
    far4 = [(key, k) for key, k in small4
            if abs(t4_fixed[key][T4_BLOCKS.index(k)] / PAPER_T4[key][T4_BLOCKS.index(k)] - 1) > 0.01]
    far4_text = "; ".join(f"NFE {key[0]}, batch {key[1]}, KV {_kv(key[2])}, block {k}" for key, k in far4)
    small3_close = sum(abs(t3_fixed[key][T3_BLOCKS.index(k)] / PAPER_T3[key][T3_BLOCKS.index(k)] - 1) <= 0.01
                       for key, k in small3)
    hw, shape = rf.HARDWARE["h100-fp8"], rf.MODELS["paper-8b"]
    d, kv_width = shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim
    ffn_paper = 2 * shape.hidden * shape.hidden * shape.ffn * hw.weight_bytes
    ffn_real = 2 * shape.hidden * shape.ffn * hw.weight_bytes
    layer_real = ffn_real + 2 * shape.hidden * (d + kv_width) * hw.weight_bytes
    kv_big = 2 * 2**22 * kv_width * hw.kv_bytes
    attn_knee = hw.attn_flops / hw.bandwidth / (2 * shape.n_heads / shape.n_kv_heads)
    long3 = [(key, i) for key in PAPER_T3 if key[1] == 2**22 for i, k in enumerate(T3_BLOCKS) if k <= 32]
    long3_fixed = [t3_fixed[key][i] for key, i in long3]
    long3_printed = max(PAPER_T3[key][i] for key, i in long3)
    b32 = [t4_fixed[key][2] / PAPER_T4[key][2] - 1 for key in PAPER_T4 if key[1] == 1 and key[2] == 2**22]
    b4k8 = [t4_fixed[key][0] / PAPER_T4[key][0] - 1 for key in PAPER_T4 if key[1] == 4 and key[2] == 2**22]
    lines = [
        "## The paper's Tables 3 and 4: printed, reproduced, corrected", "",
        "Computed by `sbd_viz.analysis.roofline` (H100 FP8 constants of Appendix A.2, the paper's 8B shape); "
        "`sbd-viz roofline --mode paper` prints them in the paper's layout.", "",
        "**Paper mode** rebuilds the printed Appendix A.2 code, shape errors included. The code itself is not "
        "stored in this project: it was rebuilt from the digest (constants, eq. 15-17, the two shape errors), and "
        "the details the digest leaves open (two FFN GEMMs; GEMM bytes = weights + inputs + outputs; attention "
        "over the cached keys, Q and O counted) were fixed by requiring every printed entry to match. Result: "
        f"{56 - len(miss3)} of 56 Table 3 entries and {72 - len(miss4)} of 72 Table 4 entries match at three "
        "decimals. Other variants of the open details match them all as well; the one kept also gives the "
        "digest's own corrected numbers. One entry is on a rounding edge: Table 4, NFE 8, batch 8, block 64, KV 16 "
        f"is {rf.wallclock_speedup(8, 64, 16, 8, mode='paper'):.6f} here (printed 3.736).", "",
        "**Corrected** fixes the two shape errors: the FFN's inner size is `ffn` = 16,384, not "
        f"`hidden * ffn` = {shape.hidden * shape.ffn:,} (FFN weights {ffn_real / 1e6:.0f} MB per layer instead of "
        f"{ffn_paper / 1e9:.0f} GB), and K and V are `n_kv_heads * head_dim` = 1,024 wide, not "
        "`n_heads * n_kv_heads` = 256. It also attends the new tokens' own keys (the digest's corrected re-run did "
        f"not: it gives 1.006 at batch 1, block 16, KV 16, where this gives {rf.slowdown(16, 16, 1):.4f}).", "",
        "Cells: printed → corrected; **bold** where they differ by more than 1%.", "",
        "### Table 3: one block forward / one NTP forward", "",
        "| batch | KV | " + " | ".join(f"block {k}" for k in T3_BLOCKS) + " |", "|" + " --- |" * 9]
    for key in PAPER_T3:
        lines.append(f"| {key[0]} | {_kv(key[1])} | "
                     + " | ".join(_pair(p, c) for p, c in zip(PAPER_T3[key], t3_fixed[key])) + " |")
    lines += ["", "### Table 4: theoretical wall-clock speedup", "",
              "| NFE speedup | batch | KV | " + " | ".join(f"block {k}" for k in T4_BLOCKS) + " |", "|" + " --- |" * 7]
    for key in PAPER_T4:
        lines.append(f"| {key[0]} | {key[1]} | {_kv(key[2])} | "
                     + " | ".join(_pair(p, c) for p, c in zip(PAPER_T4[key], t4_fixed[key])) + " |")
    lines += [
        "", "### Why they differ", "",
        f"- **Where batch x block <= 32 they agree** ({small3_close} of {len(small3)} such Table 3 entries within 1%; "
        f"{close3} of 56 overall). Every GEMM is memory-bound there, and a forward costs about its weight bytes "
        "plus a little per token, in either shape. In Table 4 a block's first call carries 2k tokens, so the same "
        "rule holds for the calls' tokens (batch x 2 x block <= 32: every such entry within 1%); of the "
        f"{len(small4)} entries with batch x block <= 32, {len(far4)} differ by more than 1% ({far4_text}), "
        "for the reasons below.",
        f"- **The paper's FFN hides everything else.** With the 67M-wide FFN, {ffn_paper / 1e9:.0f} GB of FFN "
        f"weights per layer dwarf the attention even at KV 2^22 ({kv_big / 1e9:.1f} GB of keys and values per "
        f"layer and sequence), so its long-KV rows barely differ from its short-KV rows. With the real shapes the "
        f"weights are {layer_real / 1e6:.0f} MB per layer, and at KV 2^22 the attention is nearly the whole cost.",
        f"- **Long-KV attention turns compute-bound at ~{attn_knee:.0f} query tokens per sequence** (each query token "
        f"does {2 * shape.n_heads // shape.n_kv_heads} FLOPs per KV byte, {shape.n_heads // shape.n_kv_heads} query "
        f"heads sharing each KV head; BF16 attention's ridge is {hw.attn_flops / hw.bandwidth:.0f} FLOP/byte). So at "
        f"KV 2^22 blocks up to 32 cost {min(long3_fixed):.3f}-{max(long3_fixed):.3f}x one token at every batch (the "
        f"paper prints up to {long3_printed:.3f}), and block 64 costs ~1.9x at any batch. In Table 4 a block's first "
        f"call carries 2k tokens, so at KV 2^22, block 32 (64-token first calls) is {-max(b32):.0%}-{-min(b32):.0%} "
        f"below the printed speedups even at batch 1, and batch 4, block 8 is {min(b4k8):+.1%} to {max(b4k8):+.1%} "
        "above them (its 16-token calls cost the same as one token, while the paper's FFN outputs add 1/4096 of "
        "its weight bytes per token).",
        "- **Short KV, large batch x block**: the GEMMs turn compute-bound at about the same number of rows in "
        "both (the 8B's FP8 ridge is 537 FLOP/byte, 2 FLOPs per weight byte per row: ~270-300 rows), so the big "
        "jumps (batch 8 block 64, batch 16 block 32) agree to a few percent; below them, the real 4096-wide "
        "projections gain relatively more activation bytes per row than the paper's giant FFN, so corrected "
        f"slowdowns are a little larger (batch 16, block 16: {t3_fixed[16, 16][4]:.3f} vs {PAPER_T3[16, 16][4]:.3f}).",
        "- So the published tables are close where it matters most (batch 1-4, blocks up to 16, short context). "
        "At long context they understate large blocks at small batch (KV 2^22, batch 1, block 64: printed "
        f"{PAPER_T3[1, 2**22][6]:.3f}, corrected {t3_fixed[1, 2**22][6]:.3f}) and overstate them at large batch, "
        "where it is the inflated FFN that turns compute-bound (batch 16, block 32: printed "
        f"{PAPER_T3[16, 2**22][5]:.3f}, corrected {t3_fixed[16, 2**22][5]:.3f}).", ""]
    if miss3 or miss4:
        lines += [f"Paper-mode entries that do not match: {miss3 + miss4}", ""]
    return "\n".join(lines)


# -- part 2: measuring this CPU ---------------------------------------------------------------------
def _median_seconds(fn, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bandwidth(n_bytes: int, reps: int) -> dict:
    """Bytes/s reading an fp32 tensor of ``n_bytes`` (a sum) and copying it (read + write, counted 2x)."""
    import torch

    a = torch.rand(n_bytes // 4)
    b = torch.empty_like(a)
    read = _median_seconds(lambda: a.sum(), reps)
    copy = _median_seconds(lambda: b.copy_(a), reps)
    return {"bytes": a.numel() * 4, "read": a.numel() * 4 / read, "copy": 2 * a.numel() * 4 / copy}


def gemm_flops(m: int, k: int, n: int, reps: int) -> float:
    """FLOP/s of an fp32 (m, k) @ (k, n) product."""
    import torch

    a, b, out = torch.rand(m, k), torch.rand(k, n), torch.empty(m, n)
    return 2 * m * k * n / _median_seconds(lambda: torch.mm(a, b, out=out), reps)


def gemm_shapes(shape: rf.ModelShape, quick: bool) -> list[tuple[str, int, int, int]]:
    rows = (1, 16, 64) if quick else (1, 16, 32, 64)
    model = [(f"{name}, {m} rows", m, k, n) for m in rows for name, k, n in (
        ("q/k/v/o", shape.hidden, shape.hidden), ("ffn in", shape.hidden, shape.ffn),
        ("ffn out", shape.ffn, shape.hidden), ("lm head", shape.hidden, shape.vocab or shape.hidden))]
    big = [("square 512", 512, 512, 512)] if quick else [("square 1024", 1024, 1024, 1024),
                                                         ("square 2048", 2048, 2048, 2048)]
    return model + big


def measure_cpu(shape: rf.ModelShape, weight_bytes: int, thread_counts: list[int], quick: bool) -> dict:
    """Bandwidth and GEMM throughput at each thread count."""
    import torch

    out = {}
    reps = 3 if quick else 15
    big_bytes = (16 if quick else 512) * 2**20
    for t in thread_counts:
        torch.set_num_threads(t)
        print(f"  {t} thread(s): bandwidth ...", file=sys.stderr)
        dram, model_sized = bandwidth(big_bytes, reps), bandwidth(weight_bytes, reps)
        print(f"  {t} thread(s): GEMMs ...", file=sys.stderr)
        gemms = [{"gemm": name, "m": m, "k": k, "n": n, "flops": gemm_flops(m, k, n, reps if m * k * n < 2**28 else 5)}
                 for name, m, k, n in gemm_shapes(shape, quick)]
        peak = max(g["flops"] for g in gemms if g["gemm"].startswith("square"))
        out[t] = {"dram": dram, "model_sized": model_sized, "gemms": gemms, "peak_flops": peak}
    return out


def cpu_entry(measured: dict, threads: int, cpu: str) -> rf.Hardware:
    m = measured[threads]
    return rf.Hardware(rf.THIS_CPU, m["peak_flops"], m["peak_flops"], m["dram"]["read"], 4, 4, 4,
                       f"bench/scripts/bench_roofline.py on {cpu}, fp32, {threads} thread(s): best square GEMM, "
                       f"reading a {m['dram']['bytes'] / 2**20:.0f} MB tensor")


def block_calls(model, prompt: str, ks, reps: int) -> tuple[int, list[dict]]:
    """Median seconds of a 1-token NTP call and of a k-slot block call on the same cached prompt, interleaved."""
    import torch

    from sbd_viz.plugin import ModelCall

    mask, prefix = model.mask_token_id, model.encode(prompt)
    cache = model.new_cache()
    model.call(cache, ModelCall.fused(prefix, [mask]))  # the prompt is now cached

    @torch.inference_mode()
    def ntp():  # what each HF generate step runs: one new token against the cache
        model.model(input_ids=torch.tensor([[prefix[-1]]]), past_key_values=cache, use_cache=True)
        cache.crop(-1)

    kinds = [("ntp", ntp)] + [(k, (lambda k=k: model.call(cache, ModelCall.fused([], [mask] * k)))) for k in ks]
    times: dict = {name: [] for name, _ in kinds}
    for _ in range(3):  # warm-up: a new shape's first call is slow
        for _, fn in kinds:
            fn()
    for r in range(reps):
        for name, fn in kinds[r % len(kinds):] + kinds[: r % len(kinds)]:  # rotate: drift hits every kind alike
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    medians = [{"k": name, "seconds": statistics.median(ts), "samples": len(ts)} for name, ts in times.items()]
    return len(prefix), medians


def block_rows(model, shape, cpu: rf.Hardware, cache_bw: float, prompt: str, ks, reps: int) -> list[dict]:
    past, timed = block_calls(model, prompt, ks, reps)
    cache_cpu = rf.Hardware("this-cpu (cache)", cpu.peak_flops, cpu.attn_flops, cache_bw, 4, 4, 4)
    base = timed[0]["seconds"]
    rows = []
    for t in timed:
        q = 1 if t["k"] == "ntp" else t["k"]
        pred = rf.forward_time(q, past, 1, cpu, shape, logits=q)
        pred1 = rf.forward_time(1, past, 1, cpu, shape, logits=1)
        rows.append({"call": "1-token NTP call" if t["k"] == "ntp" else f"{q}-slot block call", "tokens": q,
                     "ms": 1e3 * t["seconds"], "x": t["seconds"] / base, "roof_ms": 1e3 * pred, "roof_x": pred / pred1,
                     "cache_ms": 1e3 * rf.forward_time(q, past, 1, cache_cpu, shape, logits=q),
                     "gap_ms": 1e3 * (t["seconds"] - pred), "ratio": t["seconds"] / pred, "samples": t["samples"]})
    return rows


def suite_rows(model, shape, cpu: rf.Hardware, per_family: int, families, gammas, block_size: int,
               overhead_s: float) -> tuple[list, list]:
    """Measured vs predicted SBD / NTP ratios per gamma; ``overhead_s`` is a constant cost added to every call
    for the ``roofline + per-call cost`` column (the 1-token call's measured - roofline gap)."""
    import sbd_viz as sv

    items = sv.tasks.load_suite(split="test", per_family=per_family, families=families)
    rows, deploy = [], []
    for gamma in gammas:
        print(f"  suite: {len(items)} items, gamma {gamma:g} ...", file=sys.stderr)
        res = sv.evaluate(model, items, gamma=gamma, block_size=block_size, measure_speedup=True, keep_traces=True)
        sbd = [r["trace"] for r in res["rows"]]
        ntp = [r["ntp_trace"] for r in res["rows"]]
        own_sbd, own_ntp = rf.project(sbd, cpu, shape), rf.project(ntp, cpu, shape)
        rows.append({"gamma": gamma, "items": len(items), "sbd_calls": res["calls"], "ntp_calls": res["ntp"]["calls"],
                     "calls_ratio": res["speedup_calls"], "wall_ratio": res["speedup_wall"],
                     "pred_own": own_ntp["sbd_s"] / own_sbd["sbd_s"], "pred_same": own_sbd["speedup"],
                     "pred_overhead": (own_ntp["sbd_s"] + overhead_s * own_ntp["sbd_calls"])
                     / (own_sbd["sbd_s"] + overhead_s * own_sbd["sbd_calls"]),
                     "sbd_ms_call": 1e3 * res["wall_time"] / res["calls"],
                     "ntp_ms_call": 1e3 * res["ntp"]["wall_time"] / res["ntp"]["calls"],
                     "roof_sbd_ms_call": 1e3 * own_sbd["sbd_s"] / own_sbd["sbd_calls"],
                     "roof_ntp_ms_call": 1e3 * own_ntp["sbd_s"] / own_ntp["sbd_calls"]})
        for hw, name in DEPLOY:
            deploy.append({"gamma": gamma, "hardware": hw, "model": name, "calls_ratio": res["speedup_calls"],
                           **{f"b{b}": rf.project(sbd, hw, name, batch=b)["speedup"] for b in (1, 16, 64)}})
    return rows, deploy


def md_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    from bench_speed import md_table as table  # one table writer for the bench reports

    return table(rows, columns)


def machine_section(info: dict, measured: dict, threads: int, cpu: rf.Hardware, shape, weight_bytes: int,
                    blocks: list[dict], suite: list[dict], deploy: list[dict], quick: bool,
                    fingerprint: str | None = None) -> str:
    import run_info

    m = measured[threads]
    lines = ["## This machine", "",
             f"{info['nproc']} CPU cores ({info['cpu']}), torch {info['torch']}, fp32; decoder threads: {threads}; "
             f"load average at start {info['load']}, at end {info['load_end']}."
             + (" **Quick mode: tiny sizes and few repeats, numbers are not meaningful.**" if quick else ""), "",
             *(run_info.earlier_model(fingerprint) if fingerprint and shape.name == "sbd-char-5m" else []),
             "### Roofs", "",
             "| threads | read, large tensor (GB/s) | copy, large tensor (GB/s) | read, model-sized tensor (GB/s) | "
             "best square GEMM (GFLOP/s) | ridge (FLOP/byte) |", "| --- | --- | --- | --- | --- | --- |"]
    for t, r in measured.items():
        lines.append(f"| {t} | {r['dram']['read'] / 1e9:.1f} | {r['dram']['copy'] / 1e9:.1f} | "
                     f"{r['model_sized']['read'] / 1e9:.1f} | {r['peak_flops'] / 1e9:.1f} | "
                     f"{r['peak_flops'] / r['dram']['read']:.1f} |")
    gemm_rows = [{"gemm": g["gemm"], "shape": f"({g['m']}, {g['k']}) @ ({g['k']}, {g['n']})",
                  **{f"t{t}": next(x["flops"] for x in measured[t]["gemms"] if x["gemm"] == g["gemm"]) / 1e9
                     for t in measured}} for g in m["gemms"]]
    lines += ["", f"Large tensor: {m['dram']['bytes'] / 2**20:.0f} MB; model-sized: {weight_bytes / 2**20:.1f} MB, "
              f"the shipped model's fp32 weights. The `this-cpu` entry uses the large-tensor read bandwidth and the "
              f"best square GEMM at {threads} thread(s).", "",
              md_table(gemm_rows, [("gemm", "GEMM", ""), ("shape", "shape", "")]
                       + [(f"t{t}", f"GFLOP/s, {t} thread(s)", ".1f") for t in measured]), "",
              f"### Block calls on `{shape.name}`: measured vs roofline", "",
              "Median of interleaved repeats on a cached suite prompt. `roofline` uses the `this-cpu` entry; "
              "`roofline, cache bandwidth` uses the model-sized read bandwidth instead (the weights may stay in "
              "the CPU's caches between calls).", "",
              md_table(blocks, [("call", "call", ""), ("tokens", "tokens", "d"), ("ms", "measured ms", ".2f"),
                                ("x", "x 1-token call", ".2f"), ("roof_ms", "roofline ms", ".3f"),
                                ("roof_x", "roofline x", ".3f"), ("cache_ms", "roofline, cache bandwidth ms", ".3f"),
                                ("gap_ms", "measured - roofline ms", ".2f"), ("ratio", "measured / roofline", ".1f"),
                                ("samples", "samples", "d")]), "",
              "### SBD / NTP on the suite: measured vs roofline", "",
              "Each item decoded by SBD (entropy-bounded, block 16) and by NTP (HF `generate`) back to back "
              "(`sbd_viz.evaluate`). Ratios are NTP / SBD (> 1: SBD is faster). `predicted` costs each decoder's own "
              "calls on the `this-cpu` roofline; `predicted, same text` costs SBD's calls against its own text "
              "decoded one token per call (`roofline.project`); `roofline + per-call cost` adds to every call of "
              "both decoders the 1-token call's measured - roofline gap from the table above.", "",
              md_table(suite, [("gamma", "gamma", "g"), ("items", "items", "d"), ("sbd_calls", "SBD calls", "d"),
                               ("ntp_calls", "NTP calls", "d"), ("calls_ratio", "calls ratio", ".2f"),
                               ("wall_ratio", "measured wall ratio", ".2f"), ("pred_own", "predicted", ".2f"),
                               ("pred_same", "predicted, same text", ".2f"),
                               ("pred_overhead", "roofline + per-call cost", ".2f"),
                               ("sbd_ms_call", "SBD ms/call", ".2f"), ("ntp_ms_call", "NTP ms/call", ".2f"),
                               ("roof_sbd_ms_call", "roofline SBD ms/call", ".3f"),
                               ("roof_ntp_ms_call", "roofline NTP ms/call", ".3f")]), ""]
    lines += why(blocks, suite, cpu, shape, weight_bytes, m)
    lines += ["### The same SBD traces on deployment hardware", "",
              "`roofline.project(traces, hardware, model, batch)`: the suite traces' calls (prompt included) against "
              "the same text decoded one token per call, corrected shapes.", "",
              md_table(deploy, [("gamma", "gamma", "g"), ("hardware", "hardware", ""), ("model", "model", ""),
                                ("calls_ratio", "calls ratio", ".2f"), ("b1", "batch 1", ".2f"),
                                ("b16", "batch 16", ".2f"), ("b64", "batch 64", ".2f")]), ""]
    return "\n".join(lines)


def why(blocks: list[dict], suite: list[dict], cpu: rf.Hardware, shape, weight_bytes: int, m: dict) -> list[str]:
    """The explanation, with this run's numbers in it (the wording follows the numbers)."""
    one, last = blocks[0], blocks[-1]
    gaps = [b["gap_ms"] for b in blocks]
    knee = rf.knee_tokens(1, cpu, shape, kv_len=16)
    h100_knee = rf.knee_tokens(1, "h100-fp8", "llama-3.1-8b", kv_len=16)
    k16 = next((b for b in blocks if b["tokens"] == 16 and b["call"] != "1-token NTP call"), last)
    small = [g for g in m["gemms"] if g["m"] == 16]
    small_flops = statistics.median(g["flops"] for g in small) if small else float("nan")
    cache_gain = m["model_sized"]["read"] / m["dram"]["read"]
    lines = [
        "### How far this CPU runs from its roofline, and why", "",
        f"- **A 1-token call takes {one['ms']:.2f} ms against a roofline of {one['roof_ms']:.3f} ms "
        f"({one['ratio']:.1f}x).** The roofline counts moving {weight_bytes / 1e6:.1f} MB of fp32 weights (4 bytes "
        f"each; FP8 would move a quarter) at {cpu.bandwidth / 1e9:.1f} GB/s, and FLOPs at "
        f"{cpu.peak_flops / 1e9:.0f} GFLOP/s. What it leaves out is a cost paid per call whatever its size: Python, "
        f"the HF modules, PyTorch's dispatch of a few hundred small kernels for {shape.n_layers} layers, the cache "
        f"append and crop. Measured - roofline is {gaps[0]:.2f} ms at 1 token and {gaps[-1]:.2f} ms at "
        f"{last['tokens']} tokens"
        + (": nearly constant, so per-call overhead is most of every call." if max(gaps) < 1.3 * max(min(gaps), 1e-9)
           else f": the fixed part is per-call overhead, the growth is small GEMMs running below the square-GEMM "
                f"peak (16-row GEMMs of this model: {small_flops / 1e9:.0f} GFLOP/s, against "
                f"{cpu.peak_flops / 1e9:.0f})."),
        (f"- **The weights come from the caches, not DRAM**: a model-sized tensor ({weight_bytes / 2**20:.1f} MB) "
         f"reads at {m['model_sized']['read'] / 1e9:.1f} GB/s against {m['dram']['read'] / 1e9:.1f} GB/s for a large "
         f"one, so the true memory roof for this model is {cache_gain:.1f}x higher than the entry's."
         if cache_gain > 1.2 else
         f"- **The weights stream from memory**: a model-sized tensor ({weight_bytes / 2**20:.1f} MB) reads at "
         f"{m['model_sized']['read'] / 1e9:.1f} GB/s, about as fast as a large one ({m['dram']['read'] / 1e9:.1f} "
         "GB/s): at this size the caches do not keep them between calls."),
        f"- **This CPU's knee is at ~{knee} tokens per call** (ridge {cpu.ridge:.1f} FLOP/byte; an fp32 GEMM over "
        f"M rows does M/2 FLOPs per weight byte), against ~{h100_knee} for an 8B model in FP8 on an H100 at batch 1. "
        f"A 16-slot call is {'past' if knee is not None and knee <= 16 else 'below'} this CPU's knee: the roofline "
        f"puts it at {k16['roof_x']:.2f}x a 1-token call and it measures {k16['x']:.2f}x, while on the H100 it "
        f"would cost {rf.slowdown(16, 16, 1, 'h100-fp8', 'llama-3.1-8b'):.3f}x. SBD's calls are nearly free "
        "there and are not here; the per-call overhead hides part of the difference.",
    ]
    if suite:
        r = suite[0]
        lines.append(
            f"- **The suite ratio** (gamma {r['gamma']:g}): measured {r['wall_ratio']:.2f}, roofline "
            f"{r['pred_own']:.2f}, roofline + per-call cost {r['pred_overhead']:.2f}. "
            + ("The measured ratio is higher than the roofline's: every call saved also saves the fixed per-call "
               "cost the roofline leaves out. " if r["wall_ratio"] > r["pred_own"] else
               "The measured ratio is lower than the roofline's. ")
            + "What remains is `generate`'s own per-token work on the NTP side and the SBD decoder's per-step "
              "Python (entropy, commit rule, trace recording), which neither prediction counts.")
    return lines + [""]


# -- the report ---------------------------------------------------------------------------------------
FIGURE_BEFORE = "### SBD / NTP on the suite"  # the roofline figure sits above this section, beside the block calls


def render(d: dict) -> str:
    """The page from a run's data (``--data``): the paper's tables are computed again, this machine's section is
    the run's measurements (none with ``--tables-only``)."""
    head = ["# Roofline: the paper's tables, and this machine against its roofline", "",
            f"Produced by `{d['command']}` on {d['date']}.", ""]
    m = d.get("machine")
    if m is None:
        tail = ("## This machine\n\nNot measured yet: run `python bench/scripts/bench_roofline.py` on a quiet machine "
                "(a few minutes). It fills this section and writes `sbd_viz/analysis/roofline_cpu.json`, the "
                "`this-cpu` entry of `sbd_viz.analysis.roofline`.\n")
    else:
        measured = {int(t): r for t, r in m["measured"].items()}
        cpu = cpu_entry(measured, m["threads"], m["info"]["cpu"])
        tail = machine_section(m["info"], measured, m["threads"], cpu, rf.ModelShape(**m["shape"]), m["weight_bytes"],
                               m["blocks"], m["suite"], m["deploy"], m["quick"], m.get("fingerprint"))
        if m.get("figure"):
            tail = tail.replace(FIGURE_BEFORE, "![This CPU's roofline (fp32, batch 1) with the measured block calls]"
                                               f"({m['figure']})\n\n{FIGURE_BEFORE}", 1)
    return "\n".join(head) + "\n" + paper_section() + "\n" + tail


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_roofline.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    parser.add_argument("--threads", type=int, default=None, help="the decoder's torch threads (default: torch's)")
    parser.add_argument("--per-family", type=int, default=4, help="test items per suite family")
    parser.add_argument("--gammas", nargs="+", type=float, default=[0.1, 0.35])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--reps", type=int, default=30, help="repeats of each block-call timing")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, a few seconds: checks the script; writes only what --out / --json name")
    parser.add_argument("--tables-only", action="store_true", help="write only the paper-vs-corrected tables")
    parser.add_argument("--html", default=None, help="also write the roofline figure with the measured block calls")
    parser.add_argument("--png", default=None, help="also write that figure as a PNG (headless Chromium) and show "
                                                     "it in the report, e.g. bench/roofline.png")
    parser.add_argument("--out", default=None, help="report path (default bench/ROOFLINE.md; none with --quick)")
    parser.add_argument("--json", default=None, help="this-cpu entry path (default sbd_viz/analysis/roofline_cpu.json; none "
                                                     "with --quick)")
    parser.add_argument("--data", default=None, help="the page's data (default bench/results/roofline.json; none "
                                                     "with --quick)")
    parser.add_argument("--from-data", default=None, help="render the page from a run's --data, measuring nothing")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "bench/scripts/bench_roofline.py"] + argv)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    out = args.out or (None if args.quick else str(BENCH / "ROOFLINE.md"))
    data_path = args.data or (None if args.quick else str(BENCH / "results" / "roofline.json"))
    if args.from_data or args.tables_only:
        data = (json.loads(Path(args.from_data).read_text()) if args.from_data
                else {"command": command, "date": f"{started} UTC", "machine": None})
        text = render(data)
        Path(out or BENCH / "ROOFLINE.md").write_text(text)
        if args.tables_only and data_path:
            Path(data_path).write_text(json.dumps(data, indent=1))
        print(text)
        return 0

    import torch

    import sbd_viz as sv
    import run_info
    from bench_speed import machine

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    info = machine()
    print(f"load average at start: {info['load']}; decoder threads {threads}", file=sys.stderr)
    model = sv.load_model(args.model)
    shape = rf.shape_from_config(model)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.model.parameters())
    counts = sorted({1, min(2, info["nproc"]), threads})
    print("measuring the CPU ...", file=sys.stderr)
    measured = measure_cpu(shape, weight_bytes, counts, args.quick)
    torch.set_num_threads(threads)
    cpu = cpu_entry(measured, threads, info["cpu"])
    print("block calls ...", file=sys.stderr)
    prompt = sv.tasks.load_suite(per_family=1, families=("sorted",))[0].prompt
    ks = (1, 16, 64) if args.quick else BLOCK_KS
    blocks = block_rows(model, shape, cpu, measured[threads]["model_sized"]["read"], prompt, ks,
                        3 if args.quick else args.reps)
    families = ("add", "sorted") if args.quick else None
    suite, deploy = suite_rows(model, shape, cpu, 1 if args.quick else args.per_family, families,
                               args.gammas[:1] if args.quick else args.gammas, args.block_size,
                               max(0.0, blocks[0]["gap_ms"] / 1e3))
    info["load_end"] = run_info.load()
    print(f"load average at end: {info['load_end']}", file=sys.stderr)
    data = {"command": command, "date": f"{started} UTC",
            "machine": {"info": info, "threads": threads, "quick": args.quick, "fingerprint": model.fingerprint(),
                        "shape": dataclasses.asdict(shape), "weight_bytes": weight_bytes,
                        "measured": {str(t): r for t, r in measured.items()}, "blocks": blocks, "suite": suite,
                        "deploy": deploy, "figure": None}}
    json_path = args.json or (None if args.quick else str(rf.cpu_json_path()))
    if json_path:
        entry = {f: getattr(cpu, f) for f in ("peak_flops", "attn_flops", "bandwidth", "weight_bytes", "act_bytes",
                                              "kv_bytes", "source")}
        entry.update(name=rf.THIS_CPU, threads=threads, cpu=info["cpu"], measured_at=started + " UTC",
                     load=[info["load"], info["load_end"]], quick=args.quick,
                     details={str(t): {"dram": r["dram"], "model_sized": r["model_sized"], "gemms": r["gemms"]}
                              for t, r in measured.items()})
        Path(json_path).write_text(json.dumps(entry, indent=1) + "\n")
        print(f"this-cpu entry written to {json_path}", file=sys.stderr)
    if args.html or args.png:
        from sbd_viz import plots

        calls = [(b["tokens"], b["ms"] / 1e3) for b in blocks if b["call"] != "1-token NTP call"]
        fig = plots.roofline(hardware=(cpu,), model=shape, batches=(1,), kv_len=len(model.encode(prompt)),
                             max_tokens=256, measured=calls, measured_label="block calls, measured")
        if args.html:
            plots.save_html(fig, args.html)
            print(f"figure written to {args.html}", file=sys.stderr)
        if args.png:
            sys.path.insert(0, str(BENCH.parent / "docs"))
            from make_figures import screenshot  # the README's pictures are made the same way

            screenshot(fig, Path(args.png))
            print(f"figure written to {args.png}", file=sys.stderr)
            if out:  # the picture sits beside the measured block calls it shows
                data["machine"]["figure"] = os.path.relpath(Path(args.png).resolve(), Path(out).resolve().parent)
    text = render(data)
    print(text)
    if data_path:
        Path(data_path).write_text(json.dumps(data, indent=1))
        print(f"the page's data written to {data_path}", file=sys.stderr)
    if out:
        Path(out).write_text(text)
        print(f"report written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
