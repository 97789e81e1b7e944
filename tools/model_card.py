"""Measure a model on the verifiable suite and write the tables of its model card.

    python tools/model_card.py --model sbd_viz/weights/sbd-char-5m [--per-family 40] [--baseline OLD.json]

Writes ``<model>/card_results.json`` (every measured row; the tests read its headline numbers) and
prints the card's tables (``--tables FILE`` also writes them to a file, e.g. to paste into the card).
Every SBD setting is run with NTP interleaved item by item (see ``sbd_viz.analysis.evaluation``),
so each wall-clock speedup is a ratio measured side by side in one run.

Two parts: the standalone suite (each item alone, every setting), and the same items placed
inside documents (``tasks.in_document``: train-split lines before each item) in prompt-length
buckets up to the model's trained context, with NTP and entropy-bounded gamma 0.1.
``--baseline`` names another model's ``card_results.json``: its numbers are shown beside.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.tasks.asserts import CONTEXT_FAMILIES, FAMILIES, LONG_FAMILIES, SUITE_SEED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "scripts"))  # what every bench page states
import run_info  # noqa: E402  bench/scripts/run_info.py

GAMMAS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.6, 1.0)
OTHERS = (("top_k", 2.0, False), ("top_k", 4.0, False), ("confidence_threshold", 0.9, False),
          ("confidence_threshold", 0.7, False), ("entropy_bounded", 0.1, True), ("entropy_bounded", 0.35, True))
QUICK_GAMMAS = (0.1, 0.35)  # --quick: enough to set a baseline model beside a new one
BUCKET_GAMMA = 0.1
MAX_NEW_TOKENS = 64
# What cards written before a model could record its block size ran at: they say so when rendered again.
UNRECORDED_BLOCK_SIZE = 16
# The bar the shipped model was held to: NTP accuracy standalone and per prompt-length bucket (the context
# families included), SBD gamma 0.1's distance from NTP per bucket, its long-answer speed, and the weights.
BAR = {"ntp_standalone": 0.99, "ntp_bucket": 0.98, "sbd_points_under_ntp": 1.0, "long_tokens_per_call": 4.5,
       "weights_mb": 50.0}


def bucket_rows(model, suite, gamma: float = BUCKET_GAMMA, progress: bool = True) -> list[dict]:
    """NTP and entropy-bounded ``gamma`` on the suite placed inside documents, per prompt-length bucket.

    A bucket's prompts end where the prompt, BOS and ``MAX_NEW_TOKENS`` of answer still fit the
    model's trained context (``SBDModel.check_fits``), so the last bucket fills the context.
    """
    rows = []
    for bucket, items in tasks.document_buckets(suite, model.context_length or 512, MAX_NEW_TOKENS):
        r = sv.evaluate(model, items, rule="entropy_bounded", gamma=gamma, max_new_tokens=MAX_NEW_TOKENS,
                        progress=progress)
        ctx = [row for row in r["rows"] if row["family"] in CONTEXT_FAMILIES]
        rows.append({"bucket": list(bucket), "n_items": len(items), "gamma": gamma, "block_size": model.block_size,
                     "prompt_chars": [min(len(i.prompt) for i in items), max(len(i.prompt) for i in items)],
                     "ntp_accuracy": r["ntp"]["accuracy"], "sbd_accuracy": r["accuracy"],
                     "ntp_by_family": r["ntp"]["by_family"], "sbd_by_family": r["by_family"],
                     "ctx_ntp_accuracy": sum(x["ntp_correct"] for x in ctx) / max(1, len(ctx)),
                     "ctx_sbd_accuracy": sum(x["correct"] for x in ctx) / max(1, len(ctx)),
                     "tokens_per_call": r["tokens_per_call"], "long_tokens_per_call": r["long"]["tokens_per_call"],
                     "speedup_calls": r["speedup_calls"], "speedup_wall": r["speedup_wall"],
                     "long_speedup_wall": r["long"]["speedup_wall"]})
    return rows


def bucket_table(buckets: list[dict], baseline: list[dict] | None = None, names=("this model", "baseline")) -> str:
    """Per prompt-length bucket: NTP and SBD accuracy (context families too) and speed; a baseline beside."""
    base = {tuple(b["bucket"]): b for b in baseline or []}
    out = [f"The held-out suite placed inside documents (train-split lines before each item, "
           f"`tasks.in_document`), per prompt-length bucket (characters, BOS not counted); SBD is entropy-bounded "
           f"gamma {buckets[0]['gamma']:g}, block {buckets[0].get('block_size', UNRECORDED_BLOCK_SIZE)}, with NTP "
           "interleaved item by item."
           + (f" In brackets: {names[1]} on the same items." if base else ""), "",
           "| prompt length | items | NTP accuracy | SBD accuracy | context families: NTP | context families: SBD | "
           "tokens/call (long answers) | speedup (wall) |", "|" + " --- |" * 8]
    for b in buckets:
        old = base.get(tuple(b["bucket"]))

        def cell(key, fmt="{:.3f}"):
            return fmt.format(b[key]) + (f" ({fmt.format(old[key])})" if old else "")
        out.append(f"| {b['bucket'][0]}-{b['bucket'][1]} (measured {b['prompt_chars'][0]}-{b['prompt_chars'][1]}) "
                   f"| {b['n_items']} | {cell('ntp_accuracy')} | {cell('sbd_accuracy')} | {cell('ctx_ntp_accuracy')} | "
                   f"{cell('ctx_sbd_accuracy')} | {cell('long_tokens_per_call', '{:.2f}')} | "
                   f"{b['speedup_wall']:.2f}x |")  # a baseline's seconds come from another run: not beside
    return "\n".join(out)


def bar_table(results: dict, weights_bytes: int | None = None) -> str:
    """The shipped model's bar (``BAR``), row by row: what it asks, what this model measured, met or not.

    ``results`` is a card's results with its prompt-length buckets. The bucket rows are judged on the
    worst bucket: one bad bucket is enough to miss a row."""
    ntp = next(r for r in results["rows"] if r["rule"] == "ntp")
    buckets = results["buckets"]

    def per_bucket(key, fmt="{:.3f}"):
        return " / ".join(fmt.format(b[key]) for b in buckets)
    worst = {key: min(b[key] for b in buckets) for key in ("ntp_accuracy", "ctx_ntp_accuracy", "long_tokens_per_call")}
    points_under = [100 * (b["ntp_accuracy"] - b["sbd_accuracy"]) for b in buckets]
    rows = [("NTP, standalone suite", f"≥ {BAR['ntp_standalone']:.2f}", f"{ntp['accuracy']:.3f}",
             ntp["accuracy"] >= BAR["ntp_standalone"]),
            ("NTP in documents", f"≥ {BAR['ntp_bucket']:.2f}", per_bucket("ntp_accuracy"),
             worst["ntp_accuracy"] >= BAR["ntp_bucket"]),
            ("the same, context families only", f"≥ {BAR['ntp_bucket']:.2f}", per_bucket("ctx_ntp_accuracy"),
             worst["ctx_ntp_accuracy"] >= BAR["ntp_bucket"]),
            (f"SBD gamma {buckets[0]['gamma']:g} in documents, points under NTP", f"≤ {BAR['sbd_points_under_ntp']:g}",
             " / ".join(f"{g:.1f}" for g in points_under), max(points_under) <= BAR["sbd_points_under_ntp"] + 1e-9),
            ("the same, tokens per call on long answers", f"≥ {BAR['long_tokens_per_call']:g}",
             per_bucket("long_tokens_per_call", "{:.2f}"), worst["long_tokens_per_call"] >= BAR["long_tokens_per_call"])]
    if weights_bytes is not None:
        rows.append(("weights (model.safetensors)", f"≤ {BAR['weights_mb']:g} MB", f"{weights_bytes / 1e6:.1f} MB",
                     weights_bytes / 1e6 <= BAR["weights_mb"]))
    lengths = " / ".join(f"{b['bucket'][0]}-{b['bucket'][1]}" for b in buckets)
    out = [f"The shipped model's bar, read off the rows above; in documents, per prompt-length bucket ({lengths} "
           f"characters).", "", "| measure | bar | measured | met |", "| --- | --- | --- | --- |"]
    out += [f"| {name} | {bar} | {got} | {'yes' if met else '**no**'} |" for name, bar, got, met in rows]
    return "\n".join(out)


def _row(result: dict) -> dict:
    s = result["settings"]
    row = {"rule": s["rule"], "gamma": s["gamma"], "gap_free": s["gap_free"], "block_size": s["block_size"],
           "accuracy": result["accuracy"], "calls_per_token": result["calls_per_token"],
           "tokens_per_call": result["tokens_per_call"], "by_family": result["by_family"],
           "by_family_calls_per_token": result["by_family_calls_per_token"],
           "long_accuracy": result["long"]["accuracy"], "long_calls_per_token": result["long"]["calls_per_token"],
           "gap_fill_rate": result["gap_fill_rate"], "wall_time": result["wall_time"], "n_items": s["n_items"]}
    if "ntp" in result:
        row.update(speedup_calls=result["speedup_calls"], speedup_wall=result["speedup_wall"],
                   long_speedup_calls=result["long"]["speedup_calls"],
                   long_speedup_wall=result["long"]["speedup_wall"], ntp_accuracy=result["ntp"]["accuracy"])
    return row


def _name(r: dict) -> str:
    if r["rule"] == "ntp":
        return "NTP (HF generate)"
    knob = f"{r['gamma']:g}"
    return f"{r['rule']}{' gap_free' if r['gap_free'] else ''} {knob}"


def tables(rows: list[dict], header: dict) -> str:
    out = [f"Measured {header['date']} on {header['machine']} ({header['threads']} threads, torch "
           f"{header['torch']}, {header['dtype']}), {header['n_items']} held-out items ({header['per_family']} per "
           f"family), block size {header.get('block_size', UNRECORDED_BLOCK_SIZE)}, max 64 new tokens, stop at "
           f"newline. Command: `{header['command']}` ({header['minutes']:.1f} min).", ""]
    out.append("| decoder | accuracy | calls/token | tokens/call | speedup (calls) | speedup (wall) | "
               "long: accuracy | long: calls/token | long: speedup (calls) | long: speedup (wall) | gap fills/token |")
    out.append("|" + " --- |" * 11)
    for r in rows:
        f = lambda k: f"{r[k]:.2f}x" if k in r else "1 (ref)"  # noqa: E731
        out.append(f"| {_name(r)} | {r['accuracy']:.3f} | {r['calls_per_token']:.3f} | {r['tokens_per_call']:.2f} | "
                   f"{f('speedup_calls')} | {f('speedup_wall')} | {r['long_accuracy']:.3f} | "
                   f"{r['long_calls_per_token']:.3f} | {f('long_speedup_calls')} | {f('long_speedup_wall')} | "
                   f"{r['gap_fill_rate']:.3f} |")
    out += ["", "Per family: exact match (calls per token).", ""]
    fams = list(FAMILIES)
    out.append("| decoder | " + " | ".join(f + (" (long)" if f in LONG_FAMILIES else "") for f in fams) + " |")
    out.append("|" + " --- |" * (len(fams) + 1))
    for r in rows:
        cells = [f"{r['by_family'][f]:.2f} ({r['by_family_calls_per_token'][f]:.2f})" if f in r["by_family"]
                 else "-" for f in fams]  # "-": a family the suite did not have when this row was measured
        out.append(f"| {_name(r)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def settings_of(rows: list[dict], rule: str = "entropy_bounded") -> list[dict]:
    """``rule``'s rows without the gap-free constraint, by gamma: the curve a speed claim is read off."""
    return sorted((r for r in rows if r["rule"] == rule and not r["gap_free"]), key=lambda r: r["gamma"])


def parity_claim(rows: list[dict]) -> str:
    """The parity claim: speed on the long-answer families of the gammas within 2 points of NTP accuracy.

    gamma 0 commits one slot per call (no speedup by construction), so the claim names the lowest
    gamma > 0 within 2 points and the fastest one, with every such gamma listed."""
    ntp = next(r for r in rows if r["rule"] == "ntp")
    eb = settings_of(rows)
    at_parity = [r for r in eb if r["accuracy"] >= ntp["accuracy"] - 0.02 and r["gamma"] > 0]
    if not at_parity:
        best = max(eb, key=lambda r: r["accuracy"])
        return (f"No gamma > 0 reaches within 2 points of NTP accuracy ({ntp['accuracy']:.3f}); the best SBD "
                f"setting is gamma {best['gamma']:g} at {best['accuracy']:.3f}.")

    def say(r):
        return (f"gamma {r['gamma']:g}: accuracy {r['accuracy']:.3f}; long-answer families: "
                f"{r['long_speedup_calls']:.2f}x fewer model calls per generated token than NTP, wall-clock "
                f"{r['long_speedup_wall']:.2f}x faster")
    lowest, fastest = at_parity[0], max(at_parity, key=lambda r: r["long_speedup_calls"])
    out = [f"NTP accuracy {ntp['accuracy']:.3f}. Entropy-bounded gammas > 0 within 2 points of it: "
           + ", ".join(f"{r['gamma']:g}" for r in at_parity) + ".",
           f"- lowest: {say(lowest)}."]
    if fastest is not lowest:
        out.append(f"- fastest: {say(fastest)}.")
    out.append("(Speedups are ratios of totals measured side by side in the same run, NTP / SBD; > 1 = SBD "
               "faster. gamma 0 commits one slot per call: about NTP's call count by construction.)")
    return "\n".join(out)


def baseline_table(rows: list[dict], baseline: list[dict], names: tuple[str, str]) -> str:
    """The settings both models were measured at, side by side: accuracy overall, on the families the
    baseline was trained on and on the context families, and tokens per call on the long answers."""
    def key(r):
        return r["rule"], r["gamma"], r["gap_free"]

    def mean(r, fams):
        fams = [f for f in fams if f in r["by_family"]]
        return sum(r["by_family"][f] for f in fams) / len(fams) if fams else float("nan")

    base = {key(r): r for r in baseline}
    plain = [f for f in FAMILIES if f not in CONTEXT_FAMILIES]
    out = [f"Standalone suite, {names[0]} beside {names[1]} (same items and settings, separate runs).", "",
           "| decoder | accuracy | other families | context families | tokens/call (long answers) |",
           "| --- | --- | --- | --- | --- |"]
    for r in rows:
        old = base.get(key(r))
        if old is None:
            continue
        cells = [f"{r['accuracy']:.3f} ({old['accuracy']:.3f})",
                 f"{mean(r, plain):.3f} ({mean(old, plain):.3f})",
                 f"{mean(r, CONTEXT_FAMILIES):.3f} ({mean(old, CONTEXT_FAMILIES):.3f})",
                 f"{1 / r['long_calls_per_token']:.2f} ({1 / old['long_calls_per_token']:.2f})"]
        out.append(f"| {_name(r)} | " + " | ".join(cells) + " |")
    out += ["", f"In brackets: {names[1]}."]
    return "\n".join(out)


def equal_speed_table(rows: list[dict], baseline: list[dict], names: tuple[str, str],
                      rule: str = "entropy_bounded") -> str:
    """Each model at the other's speed: ``rule``'s settings of this model beside the baseline's accuracy at
    the same tokens per call on the long answers, read off the line between the baseline's two nearest settings.

    Why: the same gamma is not the same speed on two models (a surer model commits more per call at a given
    gamma), so the gamma-by-gamma table alone can favour the bolder model or the slower one."""
    def curve(rs):
        return sorted((1 / r["long_calls_per_token"], r["accuracy"], r["gamma"])
                      for r in settings_of(rs, rule) if r["gamma"] > 0)
    ours, theirs = curve(rows), curve(baseline)
    out = [f"{rule}, standalone suite: {names[0]} beside {names[1]} at the same speed (tokens per call on the "
           f"long answers); {names[1]}'s accuracy there is read off the straight line between its two settings "
           "on either side.", "",
           f"| gamma | tokens/call (long answers) | accuracy | {names[1]}, same tokens/call | difference |",
           "| --- | --- | --- | --- | --- |"]
    for tpc, acc, gamma in ours:
        pair = next(((a, b) for a, b in zip(theirs, theirs[1:]) if a[0] <= tpc <= b[0]), None)
        if pair is None:
            cells = [f"outside {names[1]}'s range", ""]
        else:
            (t0, a0, g0), (t1, a1, g1) = pair
            other = a0 if t1 == t0 else a0 + (a1 - a0) * (tpc - t0) / (t1 - t0)
            cells = [f"{other:.3f} (between gamma {g0:g} and {g1:g})", f"{100 * (acc - other):+.1f} points"]
        out.append(f"| {gamma:g} | {tpc:.2f} | {acc:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def family_table(rows: list[dict], gamma: float = BUCKET_GAMMA) -> str:
    """Accuracy per family, NTP beside entropy-bounded ``gamma`` (the default setting), on the standalone suite."""
    ntp = next(r for r in rows if r["rule"] == "ntp")
    sbd = next(r for r in rows if r["rule"] == "entropy_bounded" and r["gamma"] == gamma and not r["gap_free"])
    out = [f"| family | NTP | SBD γ {gamma:g} |", "| --- | --- | --- |"]
    out += [f"| `{family}` | {ntp['by_family'][family]:.3f} | {sbd['by_family'][family]:.3f} |"
            for family in ntp["by_family"]]
    return "\n".join(out)


def matp_table(matp: dict) -> str:
    """Did MATP learn: masked-slot accuracy on held-out lines vs the unigram guess."""
    out = ["Masked-slot (MATP) accuracy on held-out test-split lines, masked as in training (one rate ~ U(0,1) "
           "per 128-token window), against always guessing the most frequent training token; NTP accuracy "
           "on the same tokens for scale.", "",
           "| block size | masked slots | MATP accuracy | unigram baseline | NTP accuracy, same tokens |",
           "| --- | --- | --- | --- | --- |"]
    for k, r in matp.items():
        out.append(f"| {k} | {r['n_slots']} | {r['matp_accuracy']:.3f} | {r['unigram_accuracy']:.3f} "
                   f"({r['unigram_token']!r}) | {r['ntp_accuracy']:.3f} |")
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None)
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true",
                   help=f"only NTP and entropy-bounded gamma {', '.join(map(str, QUICK_GAMMAS))} (e.g. for a baseline)")
    p.add_argument("--out", default=None, help="write the results here (default: the model's folder)")
    p.add_argument("--baseline", default=None, help="another model's card_results.json, shown beside")
    p.add_argument("--baseline-name", default=None, help="what to call the baseline (default: its command)")
    p.add_argument("--suite-seed", type=int, default=SUITE_SEED,
                   help=f"which held-out items are drawn (default {SUITE_SEED}, the card's own); another seed is a fresh "
                        "draw, for choosing between candidates on items other than the ones the card reports")
    p.add_argument("--from-results", action="store_true",
                   help="only re-render the tables from the model's card_results.json (no decoding)")
    p.add_argument("--tables", default=None, help="also write the tables to this Markdown file")
    args = p.parse_args(argv)
    if args.from_results:
        folder = Path(args.out or args.model or sv.default_model_path())
        saved = json.loads((folder / "card_results.json").read_text())
        write_tables(folder, saved, _baseline(args.baseline), args.baseline_name, args.tables)
        return
    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    folder = Path(args.out or args.model or sv.default_model_path())
    folder.mkdir(parents=True, exist_ok=True)
    suite = sv.tasks.load_suite(split="test", per_family=args.per_family, seed=args.suite_seed)
    t0 = time.time()
    rows = [_row(sv.evaluate(model, suite, decoder="ntp", progress=True))]
    settings = [("entropy_bounded", g, False) for g in (QUICK_GAMMAS if args.quick else GAMMAS)]
    settings += [] if args.quick else list(OTHERS)
    for rule, gamma, gap_free in settings:
        if rule == "top_k":
            gamma = int(gamma)
        rows.append(_row(sv.evaluate(model, suite, rule=rule, gamma=gamma, gap_free=gap_free, progress=True)))
    buckets = bucket_rows(model, suite)
    machine = f"{os.cpu_count()} cores, {run_info.cpu_name()}, {platform.system()}"
    header = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
              "threads": torch.get_num_threads(), "torch": torch.__version__, "dtype": str(model.model.dtype),
              "n_items": len(suite), "per_family": args.per_family, "minutes": (time.time() - t0) / 60,
              "command": "python tools/model_card.py" + (f" --model {args.model}" if args.model else "")
              + f" --per-family {args.per_family}" + (" --quick" if args.quick else "")
              + (f" --suite-seed {args.suite_seed}" if args.suite_seed != SUITE_SEED else ""),
              "model_fingerprint": model.fingerprint(), "context_length": model.context_length,
              "block_size": model.block_size}  # every decode below uses the model's own
    matp = {k: sv.analysis.evaluation.masked_slot_accuracy(model, block_size=k) for k in (4, 16)}
    results = {"header": header, "rows": rows, "buckets": buckets, "matp": matp}
    (folder / "card_results.json").write_text(json.dumps(results, indent=1))
    write_tables(folder, results, _baseline(args.baseline), args.baseline_name, args.tables)


def _baseline(path) -> dict | None:
    return json.loads(Path(path).read_text()) if path else None


def write_tables(folder: Path, results: dict, baseline: dict | None = None, baseline_name: str | None = None,
                 out: str | None = None) -> None:
    """Print the card's tables (``folder`` is the model's, for its weights' size); also write them to ``out``."""
    rows, header = results["rows"], results["header"]
    names = ("this model", baseline_name or (baseline["header"]["command"] if baseline else ""))
    text = (tables(rows, header) + "\n\n" + parity_claim(rows) + "\n\n" + family_table(rows) + "\n\n"
            + matp_table(results["matp"]) + "\n")
    if baseline:
        text += "\n" + baseline_table(rows, baseline["rows"], names) + "\n"
        text += "\n" + equal_speed_table(rows, baseline["rows"], names) + "\n"
    if results.get("buckets"):
        text += "\n" + bucket_table(results["buckets"], (baseline or {}).get("buckets"), names) + "\n"
        weights = folder / "model.safetensors"
        text += "\n" + bar_table(results, weights.stat().st_size if weights.exists() else None) + "\n"
    if out:
        Path(out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
