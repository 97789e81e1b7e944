"""SBD's distance from NTP inside documents at each inference block size, on several draws of held-out items.

The model card judges entropy-bounded gamma 0.1 at the model's block size on one draw (40 items a family,
560 a prompt-length bucket), where the bar allows five items of 560. This measures the same rows (the card's
documents and buckets, ``tasks.document_buckets``) at other block sizes and on other draws
(``--suite-seeds``), so that a block size is judged on items it was not picked on, and the draws
pooled give 560 x draws items a bucket. NTP is decoded once per draw; SBD once per block size. The page
also nets, per family, the items SBD loses against NTP and those it wins: where the distance comes from.

    python bench/scripts/block_sizes.py --model sbd_viz/weights/sbd-char-5m --suite-seeds 1234 4321 777 \\
        --block-sizes 4 6 8 10 12 16 --out bench/BLOCK_SIZES.md --json bench/results/block_sizes.json

``--from-json`` renders a saved run's page again without decoding. Deterministic (greedy, no wall
clock). ``--batch-size`` decodes several prompts per forward (``sv.decode_batch``; exact up to float
rounding, so the default is one by one, as the card decodes).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.trace.labels import COUNT_LABELS
from sbd_viz.decoders.sbd import MAX_BLOCK_SIZE
from sbd_viz.tasks.asserts import CONTEXT_FAMILIES

import run_info  # beside this file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))  # the card's tooling: tools/model_card.py
from model_card import BAR, BUCKET_GAMMA, MAX_NEW_TOKENS  # noqa: E402  the card's answer room, gamma and bar

BAR_POINTS = BAR["sbd_points_under_ntp"]  # issue 10: SBD within 1 point of NTP in every bucket ...
BAR_TOKENS_PER_CALL = BAR["long_tokens_per_call"]  # ... at least 4.5 tokens per call on long answers


def measure(model, seed: int, block_sizes, gamma: float, per_family: int, batch_size: int) -> list[dict]:
    """One draw: per bucket, NTP's and each block size's items right, and SBD's speed on long answers."""
    suite = tasks.load_suite(split="test", per_family=per_family, seed=seed)
    out = []
    for bucket, items in tasks.document_buckets(suite, model.context_length or 512, MAX_NEW_TOKENS):
        def run(**kw):
            return sv.evaluate(model, items, max_new_tokens=MAX_NEW_TOKENS, measure_speedup=False,
                               batch_size=batch_size, **kw)
        ntp = run(decoder="ntp")
        row = {"seed": seed, "bucket": list(bucket), "n_items": len(items),
               "ntp_right": sum(r["correct"] for r in ntp["rows"]),
               "ctx_items": sum(r["family"] in CONTEXT_FAMILIES for r in ntp["rows"]),
               "ctx_ntp_right": sum(r["correct"] for r in ntp["rows"] if r["family"] in CONTEXT_FAMILIES),
               "sbd": {}}
        for k in block_sizes:
            sbd = run(rule="entropy_bounded", gamma=gamma, block_size=k)
            row["sbd"][str(k)] = {"right": sum(r["correct"] for r in sbd["rows"]),
                                  "long_tokens_per_call": sbd["long"]["tokens_per_call"],
                                  **against_ntp(ntp["rows"], sbd["rows"])}
            print(f"seed {seed} bucket {bucket} block {k}: SBD {row['sbd'][str(k)]['right']} / NTP "
                  f"{row['ntp_right']} of {len(items)}", flush=True)
        out.append(row)
    return out


def against_ntp(ntp_rows: list[dict], sbd_rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per family, the items SBD gets wrong where NTP is right ("lost") and right where NTP is wrong ("won")."""
    lost, won = Counter(), Counter()
    for n, s in zip(ntp_rows, sbd_rows, strict=True):
        if n["family"] != s["family"]:  # both runs decode the same items in the same order
            raise ValueError(f"rows out of step: {n['family']!r} against {s['family']!r}")
        if n["correct"] != s["correct"]:
            (lost if n["correct"] else won)[n["family"]] += 1
    return {"lost": dict(lost), "won": dict(won)}


def by_family(rows: list[dict], block_sizes) -> str:
    """Per block size, SBD's items lost minus won against NTP per family, over every draw and bucket: where
    the distance from NTP comes from. Empty for runs saved before the counts were kept."""
    if not all("lost" in r["sbd"][str(k)] for r in rows for k in block_sizes):
        return ""
    net = {k: Counter() for k in block_sizes}
    for r in rows:
        for k in block_sizes:
            net[k].update(r["sbd"][str(k)]["lost"])
            net[k].subtract(r["sbd"][str(k)]["won"])
    families = [f for f in tasks.FAMILIES if any(net[k][f] for k in block_sizes)]
    if not families:
        return "\n\nAt every block size SBD wins as many items against NTP as it loses, in every family."
    head = ["block size"] + [f"`{f}`" for f in families] + ["all"]
    out = ["", "", "Items SBD loses against NTP minus those it wins, by family, over every draw and bucket:", "",
           "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in block_sizes:
        out.append("| " + " | ".join([str(k)] + [str(net[k][f]) for f in families]
                                     + [str(sum(net[k].values()))]) + " |")
    return "\n".join(out)


def points_under(ntp_right: int, sbd_right: int, n: int) -> float:
    return 100 * (ntp_right - sbd_right) / n


def table(rows: list[dict], block_sizes, gamma: float) -> str:
    """Per block size: points under NTP per bucket on each draw and pooled; tokens per call; the bar's verdict."""
    seeds = list(dict.fromkeys(r["seed"] for r in rows))  # in the order they were run
    buckets = sorted({tuple(r["bucket"]) for r in rows})
    names = " / ".join(f"{lo}-{hi}" for lo, hi in buckets)
    head = ["block size"] + [f"draw {s}: points under NTP" for s in seeds]
    head += ["pooled: points under NTP", f"pooled, long answers: {COUNT_LABELS[(True, True)]}",
             "bar met (pooled / draws)"]
    out = [f"Entropy-bounded gamma {gamma:g} against NTP inside documents, per prompt-length bucket ({names} "
           f"characters), items of each bucket's {rows[0]['n_items']} a draw; the bar: at most {BAR_POINTS:g} point "
           f"under NTP in every bucket with at least {BAR_TOKENS_PER_CALL:g} {COUNT_LABELS[(True, True)]} on long "
           "answers.", "",
           "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in block_sizes:
        cells, met_draws = [str(k)], 0
        for s in seeds:
            mine = [r for r in rows if r["seed"] == s]
            pts = [points_under(r["ntp_right"], r["sbd"][str(k)]["right"], r["n_items"]) for r in mine]
            tpc = [r["sbd"][str(k)]["long_tokens_per_call"] for r in mine]
            met_draws += max(pts) <= BAR_POINTS and min(tpc) >= BAR_TOKENS_PER_CALL
            cells.append(" / ".join(f"{p:.1f}" for p in pts))
        pooled, speed = [], []
        for b in buckets:
            mine = [r for r in rows if tuple(r["bucket"]) == b]
            pooled.append(points_under(sum(r["ntp_right"] for r in mine),
                                       sum(r["sbd"][str(k)]["right"] for r in mine), sum(r["n_items"] for r in mine)))
            speed.append(sum(r["sbd"][str(k)]["long_tokens_per_call"] for r in mine) / len(mine))
        met = max(pooled) <= BAR_POINTS and min(speed) >= BAR_TOKENS_PER_CALL
        cells += [" / ".join(f"{p:.2f}" for p in pooled), " / ".join(f"{t:.2f}" for t in speed),
                  f"{'yes' if met else 'no'} / {met_draws} of {len(seeds)}"]
        out.append("| " + " | ".join(cells) + " |")
    ntp = []
    for s in seeds:
        mine = [r for r in rows if r["seed"] == s]
        ntp.append(f"draw {s}: " + " / ".join(f"{r['ntp_right']}" for r in mine) + " of "
                   + str(mine[0]["n_items"]) + ", context families " + " / ".join(
                       f"{r['ctx_ntp_right']}" for r in mine) + f" of {mine[0]['ctx_items']}")
    out += ["", "NTP, items right per bucket: " + "; ".join(ntp) + "."]
    return "\n".join(out)


def render(report: dict) -> str:
    """The markdown page of a run: what was run, where, on which weights, and the table."""
    return (f"# SBD at each block size, on {len({r['seed'] for r in report['rows']})} draws\n\n"
            f"`{report['command']}` ({report['run']}; model {report['model_fingerprint']})\n\n"
            + table(report["rows"], report["block_sizes"], report["gamma"])
            + by_family(report["rows"], report["block_sizes"]) + "\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None)
    p.add_argument("--suite-seeds", type=int, nargs="+", default=[tasks.SUITE_SEED])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[4, 6, 8, 10, 12, 16])
    p.add_argument("--gamma", type=float, default=BUCKET_GAMMA)
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    run_info.add_page_arguments(p, None, None)
    args = p.parse_args(argv)
    bad = [k for k in args.block_sizes if not 1 <= k <= MAX_BLOCK_SIZE]
    if bad:  # refused before the first decode, not after a bucket's NTP run
        p.error(f"--block-sizes: each must be a whole number in [1, {MAX_BLOCK_SIZE}], got {bad}")
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
    else:
        torch.set_num_threads(args.threads)
        model = sv.load_model(args.model)
        rows = [row for seed in args.suite_seeds
                for row in measure(model, seed, args.block_sizes, args.gamma, args.per_family, args.batch_size)]
        command = ("python bench/scripts/block_sizes.py" + (f" --model {args.model}" if args.model else "")
                   + " --suite-seeds " + " ".join(map(str, args.suite_seeds))
                   + " --block-sizes " + " ".join(map(str, args.block_sizes))
                   + f" --gamma {args.gamma:g} --per-family {args.per_family}")
        report = {"command": command, "run": f"{run_info.utc_now()}, {run_info.machine(args.threads)}",
                  "model_fingerprint": model.fingerprint(), "gamma": args.gamma,
                  "block_sizes": args.block_sizes, "rows": rows}
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))
    page = render(report)
    print(page)
    if args.out:
        Path(args.out).write_text(page)


if __name__ == "__main__":
    main()
