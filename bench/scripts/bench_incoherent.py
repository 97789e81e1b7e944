"""How often SBD commits incoherent tokens within one call, at which γ, and how often NTP agrees with them.

Every held-out item is decoded by NTP once and by SBD (entropy-bounded, the model's block size) at each γ (one
decode per γ piece, ``Trace.gamma_range``: the item's other γ in it read that decode);
``sbd_viz.analysis.incoherence.incoherence_report`` finds, in each SBD output, the commits whose left neighbour was committed
in the same call and that repeat it (``repeat``), double a separator or closing bracket (``doubled_delimiter``), or
that NTP would not write there (``ngram``), each with NTP's verdict: teacher-forced NTP given the final text before
the token, the verdict gap fills get. Only commits the output keeps count (past the stop they cannot change the
answer). A repeat NTP agrees with is legitimate (``"tt" * 4``); one NTP would not write is the incoherence; an
``ngram`` is an NTP disagreement by its definition. The page also counts the items whose answer holds at least one
incoherent commit NTP disagrees with, and how many of those SBD got wrong where NTP got them right.

Deterministic (greedy, nothing timed): the same model and draw give the same page. ``--from-json`` renders a run's
``--json`` again without decoding.

    nice python bench/scripts/bench_incoherent.py --per-family 10 --gammas 0.1 0.5 1 2 --threads 1 \
        --out bench/INCOHERENT.md --json bench/results/incoherent.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.analysis.incoherence import KINDS, incoherence_report
from sbd_viz.analysis.pieces import prompts_at_gammas
from sbd_viz.trace.labels import COUNT_LABELS

import run_info  # beside this file

MAX_NEW_TOKENS = 64
EXAMPLE_COLUMNS = ("gamma", "family", "kind", "call", "slot", "gap", "run_text", "ntp_text", "entropy", "suspicion",
                   "correct", "ntp_correct", "state", "answer", "output")


def decode_suite(model, suite, gammas) -> dict[float, list]:
    """Every item by SBD at each γ: γ -> the items' traces in order. Each item decodes one γ per piece and reads the
    others off it (``pieces.prompts_at_gammas``): the same traces as ``sv.decode`` at each γ, fewer calls."""
    return prompts_at_gammas(model, [item.prompt for item in suite], gammas, rule="entropy_bounded",
                             max_new_tokens=MAX_NEW_TOKENS, stop="\n")


def measure(model, suite, gamma: float, traces: list, ntp_texts: list[str]) -> tuple[dict, list[dict]]:
    """One γ (``traces``: the items' SBD decodes at it): the counts of kept incoherent commits by kind and NTP
    verdict, and every event NTP disagrees with."""
    report = incoherence_report(traces, model=model, items=suite)
    kept = report[report["kept"]]
    counts = {"gamma": gamma, "items": len(suite), "tokens": sum(t.n_tokens for t in traces),
              "calls": sum(t.nfe for t in traces),
              "correct": sum(tasks.score(i, t.text) for i, t in zip(suite, traces)),
              "same_as_ntp": sum(t.text == n for t, n in zip(traces, ntp_texts))}
    for kind in KINDS:
        rows = kept[kept["kind"] == kind]
        counts[kind] = {"events": len(rows), "ntp_agrees": int((rows["ntp_agrees"] == True).sum()),  # noqa: E712
                        "ntp_disagrees": int((rows["ntp_agrees"] == False).sum())}  # noqa: E712
    bad = kept[kept["ntp_agrees"] == False]  # noqa: E712 -- a column of True/False/None
    hit = sorted(set(bad["trace"]))
    ntp_right = [tasks.score(suite[i], ntp_texts[i]) for i in range(len(suite))]
    counts["items_with_incoherence"] = len(hit)
    counts["of_them_wrong"] = sum(not tasks.score(suite[i], traces[i].text) for i in hit)
    counts["of_them_lost_to_ntp"] = sum(ntp_right[i] and not tasks.score(suite[i], traces[i].text) for i in hit)
    examples = []
    for r in bad.itertuples():
        item = suite[r.trace]
        examples.append({"gamma": gamma, "family": item.family, "kind": r.kind, "call": int(r.call),
                         "slot": int(r.slot), "gap": int(r.gap), "run_text": r.run_text, "ntp_text": r.ntp_text,
                         "entropy": float(r.entropy), "suspicion": float(r.suspicion), "correct": bool(r.correct),
                         "ntp_correct": bool(ntp_right[r.trace]), "state": r.state, "answer": item.answer,
                         "output": r.output})
    return counts, examples


def _code(text) -> str:
    """``text`` as a code span inside a table cell (a ``|`` would end the cell)."""
    return "`" + str(text).replace("|", "\\|").replace("\n", "⏎") + "`"


def markdown(header: dict, results: list[dict], examples: list[dict], top: int = 15) -> str:
    lines = [f"# Incoherent commits within a call: {header['model']}", "",
             f"Produced by `{header['command']}` on {header['date']} ({header['machine']}; {header['minutes']:.1f} "
             f"min; load average {header['load_start']} at the start, {header['load_end']} at the end). Greedy "
             "decoding; nothing is timed.", "",
             f"Entropy-bounded SBD at block {header['block_size']} on {header['n_items']} held-out items "
             f"({header['per_family']} a family, draw {header['suite_seed']}), against NTP on the same weights. "
             "A commit is counted when its left neighbour slot was committed in the same call and it *repeats* that "
             "token, *doubles* a separator or closing bracket (`, ; ) ] } \" '`, spaces between allowed), or is an "
             "*n-gram* NTP would not write there; NTP's verdict is teacher forced (NTP's greedy token given the final "
             "text before it), as for gap fills. Only commits the output keeps are counted. *Agrees*: NTP would "
             "write the same token (a legitimate repeat, e.g. `\"tt\" * 4`); *disagrees*: the incoherence.", "",
             f"| γ | {COUNT_LABELS[(True, True)]} | right | text = NTP's | repeat (NTP agrees / disagrees) "
             "| doubled delimiter (agrees / disagrees) | n-gram NTP would not write | items with an incoherent "
             "commit | of them wrong "
             "| of them NTP right, SBD wrong |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        rep, dbl, ngram = r["repeat"], r["doubled_delimiter"], r["ngram"]
        lines.append(f"| {r['gamma']:g} | {r['tokens'] / r['calls']:.2f} | {r['correct']}/{r['items']} | "
                     f"{r['same_as_ntp']}/{r['items']} | "
                     f"{rep['events']} ({rep['ntp_agrees']} / {rep['ntp_disagrees']}) "
                     f"| {dbl['events']} ({dbl['ntp_agrees']} / {dbl['ntp_disagrees']}) | {ngram['events']} | "
                     f"{r['items_with_incoherence']} | {r['of_them_wrong']} | {r['of_them_lost_to_ntp']} |")
    lines += ["", f"NTP: {header['ntp_correct']}/{header['n_items']} right.", ""]
    shown = sorted(examples, key=lambda e: -e["suspicion"])[:top]
    lines += [f"## The {len(shown)} most suspicious incoherent commits (of {len(examples)} NTP disagrees with)", "",
              "| γ | family | kind | call | slot | gap | the call's run / NTP's token | entropy (nats) | suspicion "
              "| SBD right | NTP right | block after the call |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in shown:
        lines.append(f"| {e['gamma']:g} | {e['family']} | {e['kind']} | {e['call']} | {e['slot']} | {e['gap']} | "
                     f"{_code(e['run_text'])} / {_code(e['ntp_text'])} | {e['entropy']:.3f} | {e['suspicion']:.2f} | "
                     f"{'yes' if e['correct'] else 'no'} | {'yes' if e['ntp_correct'] else 'no'} | "
                     f"{_code(e['state'])} |")
    return "\n".join(lines) + "\n"


def run(args, argv) -> tuple[dict, list[dict], list[dict]]:
    torch.set_num_threads(args.threads)
    header = {"model": args.model or "sbd_viz/weights/sbd-char-5m (the shipped model)", "gammas": args.gammas,
              "per_family": args.per_family, "suite_seed": args.suite_seed, "date": run_info.utc_now(),
              "command": "python bench/scripts/bench_incoherent.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": run_info.machine(args.threads), "load_start": run_info.load()}
    print(f"load average at start: {header['load_start']}", flush=True)
    t0 = time.perf_counter()
    model = sv.load_model(args.model)
    header["block_size"] = model.block_size
    header["fingerprint"] = model.fingerprint()
    suite = tasks.load_suite(split="test", per_family=args.per_family, seed=args.suite_seed)
    ntp_texts = [sv.decode_ntp(model, item.prompt, max_new_tokens=MAX_NEW_TOKENS, stop="\n").text for item in suite]
    header["n_items"] = len(suite)
    header["ntp_correct"] = sum(tasks.score(i, t) for i, t in zip(suite, ntp_texts))
    sbds = decode_suite(model, suite, args.gammas)
    results, examples = [], []
    for gamma in args.gammas:
        counts, found = measure(model, suite, gamma, sbds[gamma], ntp_texts)
        results.append(counts)
        examples += found
        print(json.dumps(counts), flush=True)
    header["minutes"] = (time.perf_counter() - t0) / 60
    header["load_end"] = run_info.load()
    return header, results, examples


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model folder (default: the shipped model)")
    p.add_argument("--per-family", type=int, default=10)
    p.add_argument("--gammas", nargs="+", type=float, default=[0.1, 0.5, 1.0, 2.0])
    p.add_argument("--suite-seed", type=int, default=tasks.SUITE_SEED, help="which held-out draw (the card's)")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, None, None)
    run_info.write_page(p, p.parse_args(argv), argv, run, markdown)


if __name__ == "__main__":
    main()
