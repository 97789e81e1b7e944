"""Jacobi and prompt lookup on a real pretrained LM (SmolLM2-135M-Instruct, ``sv.load_model("smollm2-135m")``)
against HF ``generate`` (greedy), on real prompts of two kinds: where drafting pays (quoting, editing or copying a
given text, repeating code) and where it does not (open questions). Writes ``bench/REAL_LM.md`` and
``bench/results/real_lm.json``.

Per prompt: HF greedy ``generate`` (the reference ids), ``sv.decode(decoder="jacobi")`` and
``sv.decode(decoder="prompt_lookup")`` (recorded: calls, accepted drafts per call, the same ids or not), then the
three timed in paired rounds (``paired.py``: warmed, interleaved, disturbed runs dropped). Then the cost of one
call that feeds k tokens after a cached prefix, against a one-token call: where drafting stops paying.

    python bench/scripts/bench_real_lm.py                 # the whole run (about half an hour on a busy 2-core CPU)
    python bench/scripts/bench_real_lm.py --limit 4       # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paired  # noqa: E402
import run_info  # noqa: E402

import sbd_viz as sv  # noqa: E402
from sbd_viz.plugin import ModelCall  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS  # noqa: E402

DECODERS = ("jacobi", "prompt_lookup")
CODE = "def area(width, height):\n    return width * height\n"
PAYS = [  # (prompt, chat template): the answer is largely in the prompt
    ("Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank.", True),
    ("Repeat exactly: To be, or not to be, that is the question.", True),
    ("Copy this line: The meeting is moved to Thursday at ten in the small room.", True),
    ("Rewrite this list in the same order, one item per line:\napples, bread, milk, eggs, butter, cheese", True),
    ("Fix the spelling and write the sentence again: I recieved the pakage on Munday morning.", True),
    ("Write this sentence in capital letters: the train leaves at noon.", True),
    ("Repeat the following code exactly:\n\n" + CODE, True),
    ("Rename width to w in this function:\n\n" + CODE, True),
    (CODE + "\nThe same function with width renamed to w:\n\ndef area(", False),
    (CODE + "\nThe same function again:\n\ndef area(", False),
    ("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n", False),
    ("for i in range(10):\n    print(i)\nfor j in range(10):\n", False),
    ("x = [1, 2, 3, 4, 5]\ny = [1, 2, 3, 4, 5]\nz = [", False),
    ("Alice: Hello, how are you?\nBob: Hello, how are you?\nAlice: I am fine, thank you.\nBob:", False),
    ("The cat sat on the mat. The cat sat on the mat. The cat sat", False),
    ("Translate the names to lower case: Paris, London, Berlin, Madrid, Rome.", True),
]
OPEN = [  # (prompt, chat template): nothing to copy
    ("What is the capital of France? Answer in one sentence.", True),
    ("Write a short poem about the sea.", True),
    ("Why is the sky blue?", True),
    ("Give me three tips for sleeping better.", True),
    ("What is photosynthesis?", True),
    ("Tell me a fun fact about octopuses.", True),
    ("How do I boil an egg?", True),
    ("What is the difference between a list and a tuple in Python?", True),
    ("Suggest a name for a pet turtle.", True),
    ("Explain gravity to a child.", True),
    ("What should I pack for a weekend hike?", True),
    ("Write a haiku about autumn.", True),
    ("def fibonacci(n):\n", False),
    ("The history of the printing press begins", False),
    ("Once upon a time, in a small village,", False),
    ("import numpy as np\n\n", False),
]


def generate(model, ids, n):
    t0 = time.perf_counter()
    out = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                               temperature=None, top_p=None, top_k=None, eos_token_id=model.eos_token_id,
                               pad_token_id=model.eos_token_id)
    return out[0, ids.shape[1]:].tolist(), time.perf_counter() - t0


def one_prompt(model, text, chat, kind, n, i, n_rounds, guard):
    """One prompt: each decoder's calls and ids (against ``generate``'s), then ``n_rounds`` paired rounds of the
    three (``paired.rounds``: the order rotating, runs slowed by the machine marked disturbed)."""
    prompt = sv.chat_prompt(model, text) if chat else text
    ids = torch.tensor([model.encode(prompt)])
    ref, _ = generate(model, ids, n)
    row = dict(kind=kind, prompt=text, chat=chat, tokens=len(ref))
    for name in DECODERS:
        trace = sv.decode(model, prompt, decoder=name, max_new_tokens=n)
        accepted = [len(s.accepted) for s in trace.steps]
        row[name] = dict(calls=trace.nfe, tokens_per_call=round(trace.tokens_per_call, 3),
                         accepted_per_call=round(statistics.mean(accepted), 3),
                         same_ids=list(trace.output_ids) == ref)
    methods = [("generate", lambda: generate(model, ids, n))] + [
        (name, lambda name=name: sv.decode(model, prompt, decoder=name, max_new_tokens=n)) for name in DECODERS]
    row["rounds"] = paired.rounds(methods, n_rounds, guard, shift=i)
    row["generate_s"] = round(paired.median_seconds(row["rounds"], "generate"), 4)
    for name in DECODERS:
        row[name]["seconds"] = round(paired.median_seconds(row["rounds"], name), 4)
        row[name]["wall"] = paired.ratio(row["rounds"], "generate", name)
    return row


@torch.inference_mode()
def call_cost(model, sizes=(1, 2, 4, 8, 11, 16), prefix=120, repeats=15):
    """Seconds of one forward feeding k tokens after a cached prefix of ``prefix`` tokens: the fastest of
    ``repeats`` rounds, each round timing every k once (so a change in the machine's load falls on every k alike;
    on a shared CPU the fastest run is the one least disturbed)."""
    ids = model.encode(sv.chat_prompt(model, "Repeat exactly: " + "the quick brown fox " * 30))[:prefix]
    times = {k: [] for k in sizes}
    for _ in range(repeats):
        for k in sizes:
            cache = model.new_cache()
            model.call(cache, ModelCall.fused(ids, [], 1))  # the prefix, cached
            t0 = time.perf_counter()
            model.call(cache, ModelCall.fused(ids[:k], [], k))
            times[k].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}


def _ratio(wall: dict) -> str:
    return "—" if wall["median"] is None else f"{wall['median']:.2f}"


def markdown(data) -> str:
    rows = data["rows"]
    lines = [
        "# Jacobi and prompt lookup on a real LM (SmolLM2-135M-Instruct)", "",
        f"`{data['command']}` · {data['when']} · {data['machine']} · load average {data['load']} · "
        f"{data['max_new_tokens']} new tokens at most per prompt.", "",
        "The model is `sv.load_model(\"smollm2-135m\")`: a pretrained LM, not SBD-trained, so only the exact "
        "decoders run on it. Each prompt is decoded by HF `generate` (greedy: the reference ids), then by "
        "`sv.decode(decoder=\"jacobi\")` (block 8: 7 guesses per call) and `sv.decode(decoder=\"prompt_lookup\")` "
        "(10 drafts per call). *accepted* = drafts NTP accepted per call.", "",
        f"Wall clock is paired: after one warm-up run each, the three run {data['rounds']} rounds per prompt, every "
        "one once a round in an order that rotates from round to round; a run slower than "
        f"{data['guard']:g}× its own fastest on the prompt was slowed by the machine's other work and is dropped, "
        "with its pair. *× wall* = the median over the kept pairs of generate's seconds over the decoder's "
        "(> 1: faster than `generate`); — where no pair was kept. *load* = the 1-minute load average at the "
        "prompt's rounds.", ""]
    for kind, title in (("pays", "Where drafting pays: quoting, editing or copying a given text, repeating code"),
                        ("open", "Where it does not: open questions and free writing")):
        sel = [r for r in rows if r["kind"] == kind]
        lines += [f"## {title} ({len(sel)} prompts)", "",
                  "| prompt | tokens | generate s | Jacobi calls | accepted | × wall | lookup calls | accepted | "
                  "× wall | same ids | load |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sel:
            j, p = r["jacobi"], r["prompt_lookup"]
            short = r["prompt"].replace("\n", "⏎").replace("|", "\\|")
            short = (short[:48] + "…" if len(short) > 49 else short) + (" (chat)" if r["chat"] else " (raw)")
            loads = [x["load"] for x in r["rounds"]]
            lines.append(f"| {short} | {r['tokens']} | {r['generate_s']:.2f} | {j['calls']} | "
                         f"{j['accepted_per_call']:.2f} | {_ratio(j['wall'])} | {p['calls']} | "
                         f"{p['accepted_per_call']:.2f} | {_ratio(p['wall'])} | "
                         f"{'yes' if j['same_ids'] and p['same_ids'] else 'NO'} | "
                         f"{min(loads):.1f}–{max(loads):.1f} |")
        for name in DECODERS:
            calls = sum(r[name]["calls"] for r in sel)
            tokens = sum(r["tokens"] for r in sel)
            wall = sum(r["generate_s"] for r in sel) / sum(r[name]["seconds"] for r in sel)
            kept = [r[name]["wall"]["median"] for r in sel if r[name]["wall"]["median"] is not None]
            per_prompt = (f"the median prompt **{statistics.median(kept):.2f}×** ({len(kept)} of {len(sel)} prompts "
                          "with a kept pair)") if kept else "no prompt kept a pair"
            lines.append(f"\n**{name}**: {tokens} tokens in {calls} calls, {tokens / calls:.2f} "
                         f"{COUNT_LABELS[(True, True)]} against NTP's 1.00; wall clock against `generate`: medians "
                         "summed over the prompts "
                         f"**{wall:.2f}×**, {per_prompt}.")
        lines.append("")
    cost = data["call_cost"]
    one = cost["1"]
    lines += ["## What a checking call costs here", "",
              f"One forward feeding k tokens after a cached {data['prefix']}-token prefix (the fastest of "
              f"{data['repeats']} interleaved rounds{'; ' + data['cost_when'] if data.get('cost_when') else ''}), "
              "against a one-token call:", "",
              "| k (tokens fed) | ms | × a one-token call | break-even: drafts a call must get accepted |",
              "| --- | --- | --- | --- |"]
    for k, seconds in cost.items():
        ratio = seconds / one
        lines.append(f"| {k} | {1000 * seconds:.1f} | {ratio:.2f} | {max(0.0, ratio - 1):.2f} of {int(k) - 1} |")
    jacobi_accepted = statistics.mean(r["jacobi"]["accepted_per_call"] for r in rows)
    k8 = cost["8"] / one - 1
    lines += ["", "A call that feeds k tokens writes 1 + (accepted drafts) tokens, so it beats greedy NTP only when "
              "1 + accepted > its cost in one-token calls: the last column. Below it, drafting loses wall clock even "
              "though it never takes more calls.", "",
              f"Jacobi feeds 7 guesses every call (k = 8) and needs {k8:.2f} of them accepted per call to pay; on "
              f"this model it gets {jacobi_accepted:.2f} on average over the {len(rows)} prompts (a model that was "
              "never trained to guess several tokens ahead rarely does), so it costs wall clock on every kind of "
              "prompt. Prompt lookup drafts only when the text's last n-gram occurs earlier (else its call feeds one "
              "token and costs one), and drafts well where the answer quotes the prompt: that is where it pays.", "",
              f"Same ids as `generate` in every case: **{data['all_same']}** ({len(rows)} prompts, both decoders)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=24, help="new tokens at most per prompt")
    parser.add_argument("--rounds", type=int, default=3, help="paired timing rounds per prompt")
    parser.add_argument("--guard", type=float, default=1.25,
                        help="a run slower than this times its own fastest on the prompt is dropped, with its pair")
    parser.add_argument("--limit", type=int, default=None, help="prompts of each kind (default: all)")
    parser.add_argument("--out", default=str(run_info.BENCH / "REAL_LM.md"), help="the page")
    parser.add_argument("--json", default=str(run_info.RESULTS / "real_lm.json"), help="the run's data")
    parser.add_argument("--from-json", action="store_true", help="write the page from the JSON only")
    parser.add_argument("--cost-only", action="store_true", help="measure the call cost again into the JSON")
    args = parser.parse_args(argv)
    if args.from_json or args.cost_only:
        data = json.loads(Path(args.json).read_text())
    if args.cost_only:
        torch.set_num_threads(2)
        data.update(call_cost={str(k): v for k, v in call_cost(sv.load_model("smollm2-135m")).items()}, repeats=15,
                    cost_when=f"{run_info.utc_now()}, load average {run_info.load()}")
        Path(args.json).write_text(json.dumps(data, indent=1))
    elif args.from_json:
        pass
    else:
        torch.set_num_threads(2)
        load_start = run_info.load()
        model = sv.load_model("smollm2-135m")
        hello = model.encode("Hello")
        paired.warm_up([("generate", lambda: generate(model, torch.tensor([hello]), 2))] + [
            (name, lambda name=name: sv.decode(model, "Hello", decoder=name, max_new_tokens=2)) for name in DECODERS])
        rows = []
        prompts = [(p, c, "pays") for p, c in PAYS[:args.limit]] + [(p, c, "open") for p, c in OPEN[:args.limit]]
        # interleave the kinds, so a change in the machine's load falls on both
        order = [x for pair in zip(prompts[: len(prompts) // 2], prompts[len(prompts) // 2:]) for x in pair]
        for i, (text, chat, kind) in enumerate(order):
            rows.append(one_prompt(model, text, chat, kind, args.max_new_tokens, i, args.rounds, args.guard))
            print(f"{i + 1}/{len(order)} {kind} {rows[-1]['jacobi']['calls']} {rows[-1]['prompt_lookup']['calls']} "
                  f"of {rows[-1]['tokens']}", flush=True)
        cost = call_cost(model)
        data = dict(command="python bench/scripts/bench_real_lm.py" + (f" --limit {args.limit}" if args.limit else "")
                    + (f" --rounds {args.rounds}" if args.rounds != 3 else "")
                    + (f" --max-new-tokens {args.max_new_tokens}" if args.max_new_tokens != 24 else ""),
                    when=run_info.utc_now(), machine=run_info.machine(2), load=f"{load_start} → {run_info.load()}",
                    max_new_tokens=args.max_new_tokens, rows=rows, prefix=120, repeats=15, rounds=args.rounds,
                    guard=args.guard,
                    call_cost={str(k): v for k, v in cost.items()},
                    all_same=all(r[n]["same_ids"] for r in rows for n in ("jacobi", "prompt_lookup")))
        Path(args.json).write_text(json.dumps(data, indent=1))
    Path(args.out).write_text(markdown(data))
    print(f"written {args.out} and {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
