"""Verified SBD with fewer blocks a call (``tree_blocks``) on held-out chat and HumanEval: tokens per call, rows a
call feeds, and wall clock against the base's ``generate``. Writes ``bench/TREE_BLOCKS.md`` and
``bench/results/tree_blocks.json``.

Tree drafting puts a block after every token a call feeds, so that whatever length NTP accepts, the next drafts are
ready; a token tree feeds many candidates, each with a block. On a GPU at batch 1 those rows are nearly free; on this
CPU each costs compute (``bench/CALL_COST.md``), and the token tree that writes the most tokens per call runs slower
than ``generate`` (``bench/ADAPTER.md``). ``tree_blocks`` puts a block only after the fed tokens the accepted path
most likely ends at, by the drafter's own probabilities; a path that ends elsewhere writes NTP's token there and the
next call drafts afresh. This page measures what that trade buys: each setting's tokens per call and rows per call
over the same items, every decode's ids against HF's own greedy ``generate`` (on ``sv.load_model(base,
packed=False)``, torch's kernels, as a transformers user runs it), and paired wall clock
(``bench/scripts/paired.py``) on a few of them against ``generate`` on the kernels the decoders run.

    python bench/scripts/bench_tree_blocks.py                       # 32 chat + 8 HumanEval, 64 new tokens, 1 thread
    python bench/scripts/bench_tree_blocks.py --chat 2 --code 1 --timing-items 1 --out /tmp/t.md --json /tmp/t.json
    python bench/scripts/bench_tree_blocks.py --from-json bench/results/tree_blocks.json
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paired  # noqa: E402
import run_info  # noqa: E402
from bench_adapter import BASE, SETS, generate, held_out_sets, numbers  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS  # noqa: E402

COUNTED = COUNT_LABELS[(True, True)]  # every output token over every call: Trace.tokens_per_call
GENERATE = "generate"
# the settings: (name, sv.decode's drafting settings); "B" counts the blocks a call may feed
DEFAULT_SETTINGS = "single;tree;tree 4,2,1;tree B1;tree 2,1,1 B1;tree 3,1,1 B1;tree 4,1,1 B1;tree 4,2,1 B2"


def parse_setting(text: str) -> tuple[str, dict]:
    """``"tree 3,1,1 B1"`` -> its name and ``sv.decode``'s settings (``drafting``, ``tree_widths``, ``tree_blocks``);
    ``"single"`` is single drafting."""
    parts = text.split()
    if not parts or parts[0] not in ("single", "tree") or (parts[0] == "single" and len(parts) > 1):
        raise ValueError(f"--settings: {text!r} is not 'single' or 'tree [widths] [B<blocks>]'")
    out: dict = {"drafting": parts[0]}
    for part in parts[1:]:
        if part.startswith("B") and part[1:].isdigit():
            out["tree_blocks"] = int(part[1:])
        else:
            out["tree_widths"] = tuple(numbers(part, int))
    return " ".join(parts), out


def setting_text(name: str) -> str:
    """A setting's name as the page says it."""
    if name == "single":
        return "single drafting"
    parts = name.split()[1:]
    widths = next((p for p in parts if not p.startswith("B")), None)
    blocks = next((p[1:] for p in parts if p.startswith("B")), None)
    what = f"token tree {widths}" if widths else "chain"
    return f"tree, {what}, " + (f"{blocks} block{'s' if blocks != '1' else ''} a call" if blocks else "every block")


def tokens_per_call(counts: dict, s: str, name: str) -> float:
    """A setting's output tokens over its model calls on set ``s`` (``COUNTED``)."""
    return counts[s][name]["tokens"] / counts[s][name]["calls"]


def speeds(timing: dict) -> dict[str, float]:
    """Each setting's speed against generate: generate's seconds over its own, the median of the paired rounds (a
    setting without a kept pair is left out)."""
    return {name: 1 / r["median"] for name, r in timing["vs_generate"].items() if r["median"] is not None}


def run(args, argv):
    import torch

    import sbd_viz as sv

    torch.set_num_threads(args.threads)
    load_start = run_info.load()
    base = sv.load_model(BASE)  # the kernels every decoder runs: weights prepacked for oneDNN
    reference = sv.load_model(BASE, packed=False)  # torch's own kernels, as a transformers user runs generate
    model = sv.load_model(args.adapter)
    sets = held_out_sets(model.tokenizer, args.chat, args.code)
    settings = [parse_setting(s) for s in args.settings.split(";") if s.strip()]
    verified = dict(decoder="sbd", verify=True, block_size=args.block_size, gamma=args.gamma,
                    max_new_tokens=args.new_tokens)
    counts: dict = {s: {name: {"items": 0, "identical": 0, "tokens": 0, "calls": 0, "rows": 0, "later_calls": 0}
                        for name, _ in settings} for s in SETS}
    for s in SETS:
        for i, item in enumerate(sets[s]):
            ids = model.encode(item["prompt"])
            want = generate(reference, ids, args.new_tokens, item["stop"])
            item["tokens"] = len(want)
            for name, own in settings:
                trace = sv.decode(model, item["prompt"], stop=item["stop"], **verified, **own)
                c = counts[s][name]
                c["items"] += 1
                c["identical"] += list(trace.output_ids) == want
                c["tokens"] += len(trace.output_ids)
                c["calls"] += trace.nfe
                c["rows"] += sum(step.n_input for step in trace.steps[1:])  # the first call also reads the prompt
                c["later_calls"] += len(trace.steps) - 1
            print(f"{s} {i + 1}/{len(sets[s])}: {len(want)} tokens", file=sys.stderr, flush=True)
    timed = [x for pair in zip(sets["chat"], sets["code"]) for x in pair][:args.timing_items]
    times = timing(base, model, timed, settings, verified, args) if timed else None
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "command": "python bench/scripts/bench_tree_blocks.py " + shlex.join(argv), "load_start": load_start,
              "load_end": run_info.load(), "adapter": model.description, "base": BASE,
              "items": {s: len(sets[s]) for s in SETS}, "new_tokens": args.new_tokens,
              "block_size": args.block_size, "gamma": args.gamma, "settings": [name for name, _ in settings]}
    return header, {"counts": counts, "timing": times}, {}


def timing(base, model, items, settings, verified, args) -> dict:
    """Paired, warmed, interleaved runs of generate and every setting on each item (``bench/scripts/paired.py``)."""
    import sbd_viz as sv

    def methods(item):
        ids, stop = model.encode(item["prompt"]), item["stop"]
        out = [(GENERATE, lambda: generate(base, ids, args.new_tokens, stop))]
        for name, own in settings:
            out.append((name, lambda own=own: sv.decode(model, item["prompt"], stop=stop, **verified, **own)))
        return out

    timed = paired.time_items(items, methods, args.timing_rounds, args.guard)
    rows = [{"id": item["id"], "tokens": item["tokens"], "rounds": rounds} for item, rounds in zip(items, timed)]
    names = [GENERATE] + [name for name, _ in settings]
    every = [r for row in rows for r in row["rounds"]]
    loads = [r["load"] for r in every]
    return {"rounds": args.timing_rounds, "guard": args.guard, "items": [row["id"] for row in rows],
            "tokens": sum(row["tokens"] for row in rows), "load": [min(loads), max(loads)],
            "disturbed": sum(len(r["disturbed"]) for r in every), "runs": len(every) * len(names),
            "seconds": {n: sum(paired.median_seconds(row["rounds"], n) for row in rows) for n in names},
            "vs_generate": {n: paired.ratio(every, n, GENERATE) for n in names[1:]}}


# -- the page ----------------------------------------------------------------------------------------------
def markdown(header, results, examples) -> str:
    settings, counts, t = header["settings"], results["counts"], results["timing"]
    n = header["items"]
    lines = ["# Verified SBD with fewer blocks a call: tokens per call, rows and wall clock", "",
             f"`{header['command']}`", "",
             f"- Run: {header['date']}, {header['machine']}, {header['cpu']}; load average {header['load_start']} "
             f"at the start, {header['load_end']} at the end.",
             f"- Model: {header['adapter']}.",
             f"- Held out: chat questions (`distill.HELDOUT_CHAT`, chat template): {n['chat']}; HumanEval "
             f"problems (raw prompts): {n['code']}; at most {header['new_tokens']} new tokens an item; verified SBD at "
             f"block {header['block_size']}, γ {header['gamma']:g}.",
             f"- *Identical*: items whose ids equal HF's own greedy `generate` on the base (`sv.load_model(\""
             f"{header['base']}\", packed=False)`). *{COUNTED}*: output tokens / model calls. *Rows a call*: the "
             "tokens a call feeds (fed tokens and block slots), averaged over every call but each item's first "
             "(which reads the prompt).",
             "- Settings: *single drafting* feeds the drafts and one block after the last; *tree* feeds a block after "
             "every fed token (the chain of drafts, or a token tree of candidates `w1,w2,w3` a slot); *N block(s) a "
             "call* (`tree_blocks=N`) keeps the N blocks after the fed tokens the accepted path most likely ends at, "
             "by the drafter's probabilities.", ""]
    for s in SETS:
        if not n[s]:
            continue
        lines += [f"## {'Held-out chat' if s == 'chat' else 'HumanEval'}: {n[s]} item{'s' * (n[s] != 1)}", "",
                  f"| setting | identical | {COUNTED} | rows a call |", "|---|---:|---:|---:|"]
        for name in settings:
            c = counts[s][name]
            lines.append(f"| {setting_text(name)} | {c['identical']}/{c['items']} | "
                         f"{tokens_per_call(counts, s, name):.2f} | {c['rows'] / max(1, c['later_calls']):.1f} |")
        lines.append("")
    if t:
        lines += ["## Wall clock on this CPU", "",
                  f"Items timed: {len(t['items'])} (chat and HumanEval alternately), {t['rounds']} rounds each: every "
                  "method once a round, in an order that rotates from round to round and item to item, after a "
                  f"warm-up run of each; a run over {t['guard']}× the method's fastest on the item is marked "
                  f"disturbed (**{t['disturbed']} of {t['runs']} runs**; 1-minute load average {t['load'][0]:.2f}-"
                  f"{t['load'][1]:.2f} at the rounds' starts). `generate` is HF's greedy `generate` on the kernels "
                  "the decoders run (`sv.load_model`'s weights prepacked for oneDNN).", "",
                  "| method | seconds (sum of each item's median) | ms per token | speed against generate (median of "
                  "paired rounds) | range | kept pairs |", "|---|---:|---:|---:|---:|---:|"]
        sec, fast = t["seconds"], speeds(t)
        lines.append(f"| generate | {sec[GENERATE]:.2f} | {1000 * sec[GENERATE] / t['tokens']:.1f} | 1.00× | – | – |")
        for name in settings:
            r = t["vs_generate"][name]
            speed = f"{fast[name]:.2f}×" if name in fast else "–"
            span = "–" if r["median"] is None else f"{1 / r['hi']:.2f}-{1 / r['lo']:.2f}×"
            lines.append(f"| {setting_text(name)} | {sec[name]:.2f} | {1000 * sec[name] / t['tokens']:.1f} | "
                         f"{speed} | {span} | {r['pairs']}/{r['of']} |")
        lines += ["", "Speed against generate: generate's seconds over the method's in the same round (> 1: the "
                  "method is faster).", ""]
        lines += reading(header, counts, t)
    return "\n".join(lines) + "\n"


def reading(header, counts, t) -> list[str]:
    """The page's reading: the fastest setting, with its tokens per call on each set."""
    speed = speeds(t)
    if not speed:
        return []
    best = max(speed, key=speed.get)
    per_set = ", ".join(f"{s}: {tokens_per_call(counts, s, best):.2f}" for s in SETS if header["items"][s])
    out = ["## Reading it", "",
           f"- The fastest setting here is {setting_text(best)}: {speed[best]:.2f}× generate's speed (median of "
           f"paired rounds), writing {per_set} {COUNTED}.",
           ]
    for name in ("single", "tree", "tree 4,2,1"):
        if name in speed:
            out.append(f"- {setting_text(name)}: {speed[name]:.2f}× generate's speed.")
    same = all(c["identical"] == c["items"] for s in SETS for c in counts[s].values())
    out.append("- Every decode's ids equal generate's." if same else "- **Some decodes differ from generate's ids.**")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--adapter", default="smollm2-135m-sbd", help="an adapter folder or a shipped adapter's name")
    p.add_argument("--chat", type=int, default=32, help="held-out chat items")
    p.add_argument("--code", type=int, default=8, help="HumanEval problems")
    p.add_argument("--new-tokens", type=int, default=64, help="new tokens an item at most")
    p.add_argument("--block-size", type=int, default=4, help="verified SBD's block size")
    p.add_argument("--gamma", type=float, default=8.0, help="verified SBD's γ (entropy budget, nats)")
    p.add_argument("--settings", default=DEFAULT_SETTINGS, help="';'-separated: 'single', or 'tree' with optional "
                   "widths ('3,1,1': a token tree) and 'B<n>' (at most n blocks a call)")
    paired.add_timing_arguments(p, items=4, rounds=3, alternating="chat and code alternately")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, run_info.BENCH / "TREE_BLOCKS.md", run_info.RESULTS / "tree_blocks.json")
    args = p.parse_args(argv)
    try:
        [parse_setting(s) for s in args.settings.split(";") if s.strip()]
    except ValueError as e:
        p.error(str(e))
    if args.chat < 0 or args.code < 0 or args.new_tokens < 1 or args.timing_rounds < 1 or args.timing_items < 0:
        p.error("--chat, --code and --timing-items need at least 0, --new-tokens and --timing-rounds at least 1")
    run_info.write_page(p, args, argv, run, markdown)


if __name__ == "__main__":
    main()
