"""Does remasking repair the gap fills that lead SBD away from NTP, and what does it cost and break?

Every held-out item is decoded by NTP, by SBD (entropy-bounded at the app's default γ and any other ``--gammas``,
the model's block size) and by ``decoder="remask"`` (the same rule and γ; a pending gap fill fed masked, re-read,
taken back below the threshold) at each threshold, each decoding one γ per piece (``Trace.gamma_range``) and
reading the item's other γ off it. For the items whose SBD text leaves NTP's
(``sv.first_divergence``, as ``sv.divergence_report`` finds them) and whose first diverging commit is a gap fill, it counts how many of those
gap fills remasking took back (a slot remasked at that position in the same block) and how many items it then
wrote NTP's text for; what it costs in calls; what it breaks that SBD got right; and its accuracy against NTP's.

Deterministic (greedy, nothing timed): the same model and draw give the same page.

    nice python bench/scripts/bench_remask.py --per-family 10 --gammas 0.1 1 --thresholds 0.5 0.9 --threads 1 \
        --out bench/REMASK.md --json bench/results/remask.json
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.analysis.pieces import prompts_at_gammas
from sbd_viz.trace.labels import COUNT_LABELS
from sbd_viz.decoders.rules import COMMIT_RULES, DEFAULT_RULE

import run_info  # beside this file

MAX_NEW_TOKENS = 64
STOP = "\n"


def remasked_positions(trace) -> set[int]:
    """Absolute positions of the slots the remask decode took back."""
    return {s.block_start + slot for s in trace.steps for slot in s.renoised}


def changed_after_remask(trace) -> int:
    """Slots taken back that the output holds with another token than the one taken back."""
    final = {len(trace.prompt_ids) + i: t for i, t in enumerate(trace.output_ids)}
    held: dict[int, int] = {}
    changed = 0
    for s in trace.steps:
        for slot in s.renoised:
            position = s.block_start + slot
            changed += position in final and final[position] != held[position]
        for c in s.commits:
            held[s.block_start + c.slot] = c.token_id
    return changed


def run(args, argv) -> tuple[dict, list[dict], list[dict]]:
    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    suite = tasks.load_suite(split="test", per_family=args.per_family, seed=args.suite_seed)
    header = {"command": "python bench/scripts/bench_remask.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "date": run_info.utc_now(), "machine": run_info.machine(args.threads), "load_start": run_info.load(),
              "model": model.name, "block_size": model.block_size, "rule": DEFAULT_RULE,
              "default_gamma": COMMIT_RULES[DEFAULT_RULE].default, "gammas": list(args.gammas),
              "items": len(suite), "families": len({i.family for i in suite})}
    t0 = time.perf_counter()
    ntps = [sv.decode_ntp(model, item.prompt, max_new_tokens=MAX_NEW_TOKENS, stop=STOP) for item in suite]
    sbds, remasks = decode_suite(model, suite, args.gammas, args.thresholds)
    results, examples = [], []
    for gamma in args.gammas:
        base = [(item, ntp, sbd, sv.first_divergence(sbd, ntp)) for item, ntp, sbd in zip(suite, ntps, sbds[gamma])]
        measure(base, gamma, [(t, remasks[gamma, t]) for t in args.thresholds], results, examples)
    header["seconds"] = round(time.perf_counter() - t0, 1)
    header["load_end"] = run_info.load()
    return header, results, examples


def decode_suite(model, suite, gammas, thresholds) -> tuple[dict, dict]:
    """Every item by SBD at each γ and by remasking at each γ and threshold: ``sbd[γ]`` and ``remask[γ, threshold]``,
    the items' traces in order. Each decodes one γ per piece and reads the others off it
    (``pieces.prompts_at_gammas``): the same traces as ``sv.decode`` at each γ, fewer calls."""
    prompts = [item.prompt for item in suite]
    kw = dict(max_new_tokens=MAX_NEW_TOKENS, stop=STOP)
    sbd = prompts_at_gammas(model, prompts, gammas, **kw)
    remask = {t: prompts_at_gammas(model, prompts, gammas, decoder="remask", remask_threshold=t, **kw)
              for t in thresholds}
    return sbd, {(g, t): remask[t][g] for g in gammas for t in thresholds}


def measure(base, gamma: float, remasks: list[tuple], results: list[dict], examples: list[dict]) -> None:
    """Each threshold at one γ (``remasks``: pairs of a threshold and the items' remask traces at γ): a row of counts
    into ``results``, each diverging gap fill into ``examples``."""
    for threshold, remask_traces in remasks:
        row = {"gamma": gamma, "threshold": threshold, "ntp_correct": 0, "sbd_correct": 0, "remask_correct": 0,
               "sbd_same": 0, "remask_same": 0, "ntp_calls": 0, "sbd_calls": 0, "remask_calls": 0, "tokens_sbd": 0,
               "tokens_remask": 0, "diverging": 0, "diverging_gap": 0, "gap_taken_back": 0, "gap_repaired": 0,
               "repaired_any": 0, "broken_right": 0, "broken_same": 0, "renoised": 0, "renoised_changed": 0}
        for (item, ntp, sbd, where), remask in zip(base, remask_traces):
            ok = {name: tasks.score(item, t.text) for name, t in (("ntp", ntp), ("sbd", sbd), ("remask", remask))}
            for name in ok:
                row[f"{name}_correct"] += ok[name]
            row["sbd_same"] += sbd.text == ntp.text
            row["remask_same"] += remask.text == ntp.text
            row["ntp_calls"] += ntp.nfe
            row["sbd_calls"] += sbd.nfe
            row["remask_calls"] += remask.nfe
            row["tokens_sbd"] += sbd.n_tokens
            row["tokens_remask"] += remask.n_tokens
            taken = remasked_positions(remask)
            row["renoised"] += len(taken)
            row["renoised_changed"] += changed_after_remask(remask)
            if where is not None:
                row["diverging"] += 1
                row["repaired_any"] += remask.text == ntp.text
                if where["gap"] > 0:
                    row["diverging_gap"] += 1
                    back = where["position"] in taken
                    row["gap_taken_back"] += back
                    row["gap_repaired"] += remask.text == ntp.text
                    examples.append({"gamma": gamma, "threshold": threshold, "family": item.family,
                                     "prompt": item.prompt,
                                     "ntp": ntp.text, "sbd": sbd.text, "remask": remask.text,
                                     "gap_fill": where["text"], "ntp_token": where["ntp_text"], "gap": where["gap"],
                                     "taken_back": back, "repaired": remask.text == ntp.text})
            else:
                row["broken_same"] += remask.text != ntp.text
            row["broken_right"] += ok["sbd"] and not ok["remask"]
        results.append(row)


def markdown(header: dict, results: list[dict], examples: list[dict]) -> str:
    n = header["items"]
    lines = [
        "# Remasking gap fills: what it takes back, costs and breaks", "",
        f"Command: `{header['command']}`  ",
        f"Run {header['date']} on {header['machine']}; load average {header['load_start']} at the start, "
        f"{header['load_end']} at the end; {header['seconds']} s.  ",
        f"Model `{header['model']}`, block {header['block_size']}, rule {header['rule']} at γ "
        f"{', '.join(map(str, header['gammas']))} ({header['default_gamma']} is the app's default); {n} held-out "
        f"items ({header['families']} families); stop at a newline.", "",
        "`remask` is SBD with low-confidence remasking (`sv.decode(..., decoder=\"remask\")`): a gap fill is held "
        "provisionally, fed masked at the block's later calls, and taken back when the model's probability of the "
        "held token there falls below the threshold. A *diverging gap fill* is the first commit of an SBD decode "
        "that put a token other than NTP's into the output (`sv.first_divergence`), when it was a gap fill.", "",
        "| γ | threshold | accuracy NTP / SBD / remask | text = NTP's, SBD / remask | calls NTP / SBD / remask "
        f"| SBD / remask: {COUNT_LABELS[(True, True)]} | diverging items (first divergence a gap fill) "
        "| those gap fills taken back | those items repaired (text = NTP's) | any diverging item repaired "
        "| SBD-right items broken "
        "| SBD = NTP items broken | slots taken back (output changed there) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['gamma']} | {r['threshold']} "
            f"| {r['ntp_correct']} / {r['sbd_correct']} / {r['remask_correct']} of {n} "
            f"| {r['sbd_same']} / {r['remask_same']} | {r['ntp_calls']} / {r['sbd_calls']} / {r['remask_calls']} "
            f"| {r['tokens_sbd'] / r['sbd_calls']:.2f} / {r['tokens_remask'] / r['remask_calls']:.2f} "
            f"| {r['diverging']} ({r['diverging_gap']}) | {r['gap_taken_back']} of {r['diverging_gap']} "
            f"| {r['gap_repaired']} of {r['diverging_gap']} | {r['repaired_any']} of {r['diverging']} "
            f"| {r['broken_right']} of {r['sbd_correct']} | {r['broken_same']} of {r['sbd_same']} "
            f"| {r['renoised']} ({r['renoised_changed']}) |")
    lines += ["", "## The diverging gap fills", "",
              "| γ | threshold | family | gap fill (NTP's token) | gap | taken back | repaired | SBD | remask | NTP |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for e in examples:
        cells = [repr(e[k])[1:-1].replace("|", "\\|") for k in ("sbd", "remask", "ntp")]
        lines.append(f"| {e['gamma']} | {e['threshold']} | {e['family']} | `{e['gap_fill']!r}` (`{e['ntp_token']!r}`) "
                     f"| {e['gap']} "
                     f"| {'yes' if e['taken_back'] else 'no'} | {'yes' if e['repaired'] else 'no'} | `{cells[0]}` "
                     f"| `{cells[1]}` | `{cells[2]}` |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model folder (default: the shipped model)")
    p.add_argument("--per-family", type=int, default=10)
    p.add_argument("--gammas", nargs="+", type=float, default=[COMMIT_RULES[DEFAULT_RULE].default])
    p.add_argument("--thresholds", nargs="+", type=float, default=[0.5])
    p.add_argument("--suite-seed", type=int, default=tasks.SUITE_SEED, help="which held-out draw (the card's)")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, None, None)
    run_info.write_page(p, p.parse_args(argv), argv, run, markdown)


if __name__ == "__main__":
    main()
