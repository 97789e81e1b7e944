"""Every drafting mode of verified SBD (``decoders.verified.settings.MODES``) on the shipped character model
``sbd-char-5m``: items whose ids equal greedy NTP's, tokens per call, rows a call feeds, and paired wall clock against
HF's greedy ``generate`` and against verified SBD's single drafting. Writes ``bench/VERIFIED_MODES.md`` and
``bench/results/verified_modes.json``.

The items are the asserts suite's test split (``sv.tasks.load_suite``, every family, long- and short-answer), each
decoded greedily to the end of its answer line (stop ``"\\n"``) at the model's block size, at the app's default γ for
entropy_bounded (``COMMIT_RULES["entropy_bounded"].default``) and at each further ``--gammas``. The reference ids are
HF's own greedy ``generate`` on the model (``bench_adapter.generate``: stopped where ``sv.decode`` stops). Wall clock:
paired, warmed, interleaved rounds (``bench/scripts/paired.py``) of generate and every mode at every γ on a few of the
items, long and short answers alternately. ``bench/VERIFIED.md`` timed single drafting only, on an earlier model; on
smollm2-135m-sbd the modes are compared in ``bench/TREE_BLOCKS.md``. A run takes a few minutes on a 2-core CPU.

    python bench/scripts/bench_verified_modes.py            # 10 items a family (140), 24 timed x 7 rounds, 1 thread
    python bench/scripts/bench_verified_modes.py --per-family 1 --timing-items 2 --timing-rounds 2 \\
        --out /tmp/vm.md --json /tmp/vm.json
    python bench/scripts/bench_verified_modes.py --from-json bench/results/verified_modes.json
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paired  # noqa: E402
import run_info  # noqa: E402
from bench_adapter import generate, numbers  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS  # noqa: E402

COUNTED = COUNT_LABELS[(True, True)]  # every output token over every call: Trace.tokens_per_call
GENERATE = "generate"
SINGLE = "single drafting"  # the MODES label every mode is also timed against
MODEL = "sbd-char-5m"
STOP = ("\n",)  # the end of the answer line
KINDS = ("long", "short")


def method(mode: str, gamma: float) -> str:
    """A mode at a γ, as the data names it: ``"single drafting @ γ0.1"``."""
    return f"{mode} @ γ{gamma:g}"


def interleaved(items: list, key) -> list:
    """``items`` round-robin over ``key`` (a family): the first few span every family."""
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    out, queues = [], list(groups.values())
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def run(args, argv):
    import torch

    import sbd_viz as sv
    from sbd_viz.decoders.rules import COMMIT_RULES
    from sbd_viz.decoders.verified.settings import MODES, fastest_mode
    from sbd_viz.tasks.asserts import LONG_FAMILIES

    torch.set_num_threads(args.threads)
    load_start = run_info.load()
    print(f"load average at start: {load_start}", file=sys.stderr, flush=True)
    model = sv.load_model(MODEL)
    default_gamma = COMMIT_RULES["entropy_bounded"].default
    gammas = [default_gamma] + [g for g in args.gammas if g != default_gamma]
    suite = sv.tasks.load_suite(split="test", per_family=args.per_family)
    items = [{"id": f"{it.family} {i}", "family": it.family, "prompt": it.prompt,
              "kind": "long" if it.family in LONG_FAMILIES else "short"}
             for i, it in enumerate(suite)]
    modes = list(MODES.items())
    names = [method(label, g) for g in gammas for label, _ in modes]
    common = dict(decoder="sbd", verify=True, block_size=model.block_size, max_new_tokens=args.new_tokens, stop=STOP)
    settings = {method(label, g): dict(common, gamma=g, **own) for g in gammas for label, own in modes}
    counts = {k: {n: {"items": 0, "identical": 0, "tokens": 0, "calls": 0, "rows": 0, "later_calls": 0}
                  for n in names} for k in KINDS}
    reference = {k: {"items": 0, "tokens": 0, "ntp_identical": 0} for k in KINDS}
    for i, item in enumerate(items):
        want = generate(model, model.encode(item["prompt"]), args.new_tokens, STOP)
        item["tokens"] = len(want)
        ntp = sv.decode(model, item["prompt"], decoder="ntp", max_new_tokens=args.new_tokens, stop=STOP)
        r = reference[item["kind"]]
        r["items"] += 1
        r["tokens"] += len(want)
        r["ntp_identical"] += list(ntp.output_ids) == want
        for name in names:
            trace = sv.decode(model, item["prompt"], **settings[name])
            c = counts[item["kind"]][name]
            c["items"] += 1
            c["identical"] += list(trace.output_ids) == want
            c["tokens"] += trace.n_tokens
            c["calls"] += trace.nfe
            c["rows"] += sum(step.n_input for step in trace.steps[1:])  # the first call also reads the prompt
            c["later_calls"] += len(trace.steps) - 1
        if i % 10 == 9 or i + 1 == len(items):
            print(f"{i + 1}/{len(items)} items", file=sys.stderr, flush=True)
    long_items = interleaved([x for x in items if x["kind"] == "long"], lambda x: x["family"])
    short_items = interleaved([x for x in items if x["kind"] == "short"], lambda x: x["family"])
    timed = [x for pair in zip(long_items, short_items) for x in pair][:args.timing_items]
    times = timing(model, timed, names, settings, args) if timed else None
    load_end = run_info.load()
    print(f"load average at end: {load_end}", file=sys.stderr, flush=True)
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "command": shlex.join(["python", "bench/scripts/bench_verified_modes.py", *argv]),
              "load_start": load_start, "load_end": load_end, "model": MODEL, "fingerprint": model.fingerprint(),
              "per_family": args.per_family, "items": {k: reference[k]["items"] for k in KINDS},
              "new_tokens": args.new_tokens, "block_size": model.block_size, "gammas": gammas,
              "default_gamma": default_gamma, "modes": [label for label, _ in modes],
              "settings": dict(modes), "app_mode": fastest_mode(model)}
    return header, {"reference": reference, "counts": counts, "timing": times}, {}


def timing(model, items, names, settings, args) -> dict:
    """Paired, warmed, interleaved runs of generate and every mode at every γ on each item (``paired.py``)."""
    import sbd_viz as sv

    def methods(item):
        ids = model.encode(item["prompt"])
        out = [(GENERATE, lambda: generate(model, ids, args.new_tokens, STOP))]
        for name in names:
            out.append((name, lambda name=name: sv.decode(model, item["prompt"], **settings[name])))
        return out

    timed = paired.time_items(items, methods, args.timing_rounds, args.guard)
    rows = [{"id": item["id"], "kind": item["kind"], "tokens": item["tokens"], "rounds": rounds}
            for item, rounds in zip(items, timed)]
    every = [r for row in rows for r in row["rounds"]]
    loads = [r["load"] for r in every]

    def against(rounds: list[dict], base: str) -> dict:
        return {n: paired.ratio(rounds, n, base) for n in names if n != base}

    singles = {n: n.replace(n.split(" @ ")[0], SINGLE, 1) for n in names}  # each method's single drafting, same γ
    by_kind = {k: [r for row in rows if row["kind"] == k for r in row["rounds"]] for k in KINDS}
    return {"rounds": args.timing_rounds, "guard": args.guard, "items": [row["id"] for row in rows],
            "kinds": {k: sum(row["kind"] == k for row in rows) for k in KINDS},
            "tokens": sum(row["tokens"] for row in rows), "load": [min(loads), max(loads)],
            "disturbed": sum(len(r["disturbed"]) for r in every), "runs": len(every) * (len(names) + 1),
            "seconds": {n: sum(paired.median_seconds(row["rounds"], n) for row in rows) for n in [GENERATE] + names},
            "vs_generate": against(every, GENERATE),
            "vs_single": {n: paired.ratio(every, n, singles[n]) for n in names if singles[n] != n},
            "vs_generate_by_kind": {k: against(by_kind[k], GENERATE) for k in KINDS if by_kind[k]},
            "rows": rows}


# -- the page ----------------------------------------------------------------------------------------------
def tokens_per_call(c: dict) -> float:
    return c["tokens"] / c["calls"] if c["calls"] else 0.0


def merged(counts: dict, name: str) -> dict:
    """A method's counts over both kinds of answer."""
    return {key: sum(counts[k][name][key] for k in KINDS) for key in counts[KINDS[0]][name]}


def speed(r: dict | None) -> float | None:
    """A ratio's median as a speed (the other method's seconds over this one's); None without a kept pair."""
    return None if not r or r["median"] is None else 1 / r["median"]


def span(r: dict | None) -> str:
    return "–" if not r or r["median"] is None else f"{1 / r['hi']:.2f}-{1 / r['lo']:.2f}×"


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def markdown(header, results, examples) -> str:
    counts, ref, t = results["counts"], results["reference"], results["timing"]
    n, gammas, modes = header["items"], header["gammas"], header["modes"]
    total = sum(n.values())
    g_text = " and ".join(f"{g:g}" for g in gammas)
    lines = ["# Verified SBD's drafting modes on the character model: tokens per call, rows and wall clock", "",
             f"`{header['command']}`", "",
             f"- Run: {header['date']}, {header['machine']}, {header['cpu']}; load average {header['load_start']} "
             f"at the start, {header['load_end']} at the end.",
             f"- Model: `{header['model']}` (fingerprint {header['fingerprint']}), fp32, block size "
             f"{header['block_size']} (the model's own).",
             f"- Items: the asserts suite's test split, {header['per_family']} a family: {total} items ({n['long']} "
             f"with long answers, {n['short']} with short), each decoded greedily to the end of its answer line "
             f"(stop `\"\\n\"`, at most {header['new_tokens']} new tokens); verified SBD with entropy_bounded at γ "
             f"{g_text} (γ {header['default_gamma']:g} is the app's default).",
             f"- *Identical*: items whose ids equal HF's own greedy `generate` on the model (greedy NTP; sv's own "
             f"`ntp` decoder wrote the same ids on {sum(ref[k]['ntp_identical'] for k in KINDS)} of {total}). "
             f"*{COUNTED}*: `Trace.tokens_per_call`, output tokens over model calls, summed over the items. *Rows a "
             "call*: the tokens a call feeds (fed tokens and block slots), averaged over every call but each item's "
             "first (which reads the prompt).",
             "- Modes (`decoders.verified.settings.MODES`): *single drafting* feeds the drafts and one block after "
             "the last; *tree* feeds a block after every fed token (the chain of drafts, or a token tree of "
             "candidates `w1,w2,w3` a slot); *1 block a call* (`tree_blocks=1`) keeps only the block after the fed "
             "token the accepted path most likely ends at, by the drafter's probabilities.", ""]
    for g in gammas:
        lines += [f"## γ {g:g}: every item", "",
                  f"| mode | identical | long answers: {COUNTED} | short answers: {COUNTED} | all: {COUNTED} | rows a call |",
                  "|---|---:|---:|---:|---:|---:|"]
        for mode in modes:
            name, c = method(mode, g), merged(counts, method(mode, g))
            per_kind = " | ".join(f"{tokens_per_call(counts[k][name]):.2f}" for k in KINDS)
            lines.append(f"| {mode} | {c['identical']}/{c['items']} | {per_kind} | {tokens_per_call(c):.2f} | "
                         f"{c['rows'] / max(1, c['later_calls']):.1f} |")
        lines.append("")
    if t:
        lines += ["## Wall clock on this CPU", "",
                  f"Items timed: {len(t['items'])} ({t['kinds']['long']} with long answers, {t['kinds']['short']} "
                  f"with short, alternately), {t['rounds']} rounds each: every method once a round, in an order that "
                  "rotates from round to round and item to item, after a warm-up run of each; a run over "
                  f"{t['guard']}× the method's fastest on the item is marked disturbed (**{t['disturbed']} of "
                  f"{t['runs']} runs**; 1-minute load average {t['load'][0]:.2f}-{t['load'][1]:.2f} at the rounds' "
                  "starts), and a ratio counts only the rounds where neither of its two runs was. `generate` is HF's "
                  "greedy `generate` on the model. Against single drafting: each mode against single drafting at "
                  "the same γ.", "",
                  "| method | seconds (sum of each item's median) | ms per token | against generate (median of paired "
                  "rounds) | range | kept pairs | against single drafting | range | kept pairs |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        sec = t["seconds"]
        lines.append(f"| generate | {sec[GENERATE]:.2f} | {1000 * sec[GENERATE] / t['tokens']:.1f} | 1.00× | – | – "
                     "| – | – | – |")
        for g in gammas:
            for mode in modes:
                name = method(mode, g)
                r, s = t["vs_generate"][name], t["vs_single"].get(name)
                single = ("1.00× | – | –" if s is None else f"{fmt(speed(s))} | {span(s)} | {s['pairs']}/{s['of']}")
                lines.append(f"| {mode}, γ {g:g} | {sec[name]:.2f} | {1000 * sec[name] / t['tokens']:.1f} | "
                             f"{fmt(speed(r))} | {span(r)} | {r['pairs']}/{r['of']} | {single} |")
        lines += ["", "A speed is the other method's seconds over this one's in the same round (> 1: this one is "
                  "faster); range: the lowest and highest of the kept rounds.", ""]
        kinds = [k for k in KINDS if k in t["vs_generate_by_kind"]]
        lines += ["Against generate by the kind of answer (median of the paired rounds on those items):", "",
                  "| method | " + " | ".join(f"{k} answers" for k in kinds) + " |",
                  "|---|" + "---:|" * len(kinds)]
        for g in gammas:
            for mode in modes:
                name = method(mode, g)
                lines.append(f"| {mode}, γ {g:g} | "
                             + " | ".join(fmt(speed(t["vs_generate_by_kind"][k][name])) for k in kinds) + " |")
        lines.append("")
    lines += reading(header, results)
    return "\n".join(lines) + "\n"


def reading(header, results) -> list[str]:
    """The page's reading: the fastest mode measured (by its median speed against generate), at each γ and overall."""
    counts, t = results["counts"], results["timing"]
    names = [method(m, g) for g in header["gammas"] for m in header["modes"]]
    same = all(merged(counts, n)["identical"] == merged(counts, n)["items"] for n in names)
    out = ["## Reading it", ""]
    out.append("- Every decode's ids equal greedy NTP's (HF's `generate`), in every mode at every γ." if same else
               "- **Some decodes differ from greedy NTP's ids**: verified SBD should never; see the identical "
               "columns.")
    fast = {n: speed(t["vs_generate"][n]) for n in names} if t else {}
    fast = {n: v for n, v in fast.items() if v is not None}
    if not fast:
        return out + ["- Nothing was timed (or no pair was kept), so no mode is named the fastest."]
    best = max(fast, key=fast.get)
    mode, g = best.split(" @ γ")
    c = merged(counts, best)
    vs_single = t["vs_single"].get(best)
    against_single = "" if vs_single is None else (f", {fmt(speed(vs_single))} single drafting's speed at the same "
                                                   f"γ (range {span(vs_single)})")
    out.append(f"- The fastest mode measured on `{header['model']}` is **{mode}**, at γ {g}: {fast[best]:.2f}× "
               f"generate's speed (median of paired rounds, range {span(t['vs_generate'][best])}){against_single}; "
               f"it writes {tokens_per_call(counts['long'][best]):.2f} {COUNTED} on long answers and "
               f"{tokens_per_call(c):.2f} over every item.")
    trees = {n: speed(t["vs_single"][n]) for n in names if n in t["vs_single"] and speed(t["vs_single"][n])}
    if mode == SINGLE and trees:
        b = max(trees, key=trees.get)
        out.append(f"- The fastest tree mode against single drafting is {b.split(' @ ')[0]} at γ "
                   f"{b.split(' @ γ')[1]}: {trees[b]:.2f}× single drafting's speed (range "
                   f"{span(t['vs_single'][b])}).")
    if vs_single is not None and vs_single["median"] is not None and vs_single["lo"] <= 1 <= vs_single["hi"]:
        out.append("- Its paired rounds against single drafting fall on both sides of 1×: on this machine the "
                   "difference is within the rounds' spread.")
    long_fast = {n: speed(r) for n, r in t["vs_generate_by_kind"].get("long", {}).items() if speed(r)}
    if long_fast:
        b = max(long_fast, key=long_fast.get)
        out.append(f"- On the long answers alone the fastest is {b.split(' @ ')[0]} at γ {b.split(' @ γ')[1]} "
                   f"({long_fast[b]:.2f}× generate's speed there).")
    if len(header["gammas"]) > 1:
        for g in header["gammas"]:
            at = {n: v for n, v in fast.items() if n.endswith(f" @ γ{g:g}")}
            if at:
                b = max(at, key=at.get)
                out.append(f"- At γ {g:g} the fastest is {b.split(' @ ')[0]} ({at[b]:.2f}× generate); the slowest "
                           f"{min(at, key=at.get).split(' @ ')[0]} ({min(at.values()):.2f}×).")
    app = header["app_mode"]
    out.append(f"- The app opened this model on {app} when this ran (`fastest_mode`)"
               + ("; that is the mode measured fastest here." if app == mode else
                  f"; the mode measured fastest here is {mode}."))
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--per-family", type=int, default=10, help="test-split items of each suite family")
    p.add_argument("--gammas", default="2", help="γs beside the app's default (','-separated; '' for none)")
    p.add_argument("--new-tokens", type=int, default=64, help="new tokens an item at most")
    paired.add_timing_arguments(p, items=24, rounds=7, alternating="long and short alternately")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, run_info.BENCH / "VERIFIED_MODES.md", run_info.RESULTS / "verified_modes.json")
    args = p.parse_args(argv)
    try:
        args.gammas = numbers(args.gammas) if args.gammas.strip() else []
    except ValueError:
        p.error(f"--gammas: {args.gammas!r} is not ','-separated numbers")
    if args.new_tokens < 1 or args.timing_rounds < 1 or args.timing_items < 0 or any(g < 0 for g in args.gammas):
        p.error("--new-tokens and --timing-rounds need at least 1, --timing-items and every γ at least 0")
    run_info.write_page(p, args, argv, run, markdown)


if __name__ == "__main__":
    main()
