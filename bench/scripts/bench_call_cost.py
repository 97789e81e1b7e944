"""What one call costs on this CPU by the rows it feeds: the engine's own forwards on SmolLM2-135M with the shipped
SBD adapter, against a one-token call on the same cache. Writes ``bench/CALL_COST.md`` and
``bench/results/call_cost.json``.

Verified SBD beats ``generate`` in wall clock only where a call writes more tokens than it costs in one-token calls.
A call feeds more rows than a ``generate`` step: single drafting feeds the last accepted token, the drafts it checks
and a block of mask slots; tree drafting a block after every draft. On a GPU at batch 1 those rows are nearly free
(``bench/ROOFLINE.md``); on a CPU they are not, and this page measures by how much. The shapes, at the shipped
block size (4):

- one token: a fused call (``ModelCall.fused``) feeding one token, no block (a ``generate`` step's shape, the same weights);
- single drafting, f fed: a fused call feeding f tokens (the last accepted one and f - 1 drafts to check) and a
  block of 4 mask slots, f = 1..4;
- tree drafting, b branches: the call verified SBD makes (a ``ModelCall`` that picks one block): b tokens fed and a block of 4 slots after
  each, b = 1..4, with the sampler head (it chains the one branch verified SBD keeps, here the last: every draft
  accepted; as many chained passes as its guesses need, counted on the page), with the head choosing each draft
  over the whole vocabulary instead of among the adapter's own best tokens (``AdaptedLM.candidates = None``), and
  with it removed;
- token tree w: the call verified SBD makes with a token tree (``tree_widths=w``: a picked call that drafts a tree): the last
  accepted token and a full tree of candidates fed (w1 at slot 1, w2 after each, w3 after each of those), a block of
  4 slots after each, the head growing the next tree from the picked block.

Each shape runs on two copies of the model: with torch's own kernels (``sv.load_model(..., packed=False)``, MKL's
sgemm) and with weights prepacked for oneDNN (``sv.load_model``'s default, ``sbd_viz.models.packed_linear``). Every call
starts from the same cache (a held-out chat prompt) and is cut back to it after. Paired, warmed,
interleaved rounds (``bench/scripts/paired.py``), the order rotating from round to round; a shape's ratio is its seconds
over the one-token call's in the same round. The page then sets the break-even (a shape's ratio: the tokens a call
of that shape must write to cost no more per token than one-token calls) beside the tokens per call that
``bench/results/adapter.json`` measured on held-out chat and HumanEval.

    python bench/scripts/bench_call_cost.py                      # 1 thread, 12 rounds (a few minutes)
    python bench/scripts/bench_call_cost.py --from-json bench/results/call_cost.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paired  # noqa: E402
import run_info  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS  # noqa: E402

MODEL = "smollm2-135m-sbd"
K = 4  # the shipped block size
FED = (1, 2, 3, 4)
ONE = "one token"
COUNTED = COUNT_LABELS[(True, True)]
TORCH, PACKED = "torch's kernels", "packed"  # sv.load_model(packed=False) and its default
KERNELS = (TORCH, PACKED)
KERNEL_TEXT = {TORCH: "torch's own kernels (`sv.load_model(..., packed=False)`: MKL's sgemm)",
               PACKED: "weights prepacked for oneDNN (`sv.load_model`'s default, `sbd_viz.models.packed_linear`)"}


def named(kernel: str, shape: str) -> str:
    return f"{kernel}: {shape}"


def single(f: int) -> str:
    return f"single drafting, {f} fed"


# How a tree call's sampler head runs: as shipped (each slot's draft among the adapter's own best tokens there,
# ``AdaptedLM.candidates``), over the whole vocabulary (``candidates=None``), or removed.
HEADS = ("with the head", "with the head over the whole vocabulary", "without the head")


def tree(b: int, head: str = HEADS[0]) -> str:
    return f"tree drafting, {b} branch{'' if b == 1 else 'es'}, {head}"


TOKEN_TREES = ((2, 1, 1), (3, 1, 1), (4, 2, 1))


def token_tree(widths: tuple[int, ...]) -> str:
    return f"token tree {','.join(map(str, widths))}, with the head"


def full_tree(widths: tuple[int, ...]) -> list[int]:
    """The parents of a full token tree's fed tokens: x (-1: after the cache), then w1 candidates after it, w2 after
    each of those, and so on."""
    parents, level = [-1], [0]
    for width in widths:
        grown = []
        for parent in level:
            for _ in range(width):
                parents.append(parent)
                grown.append(len(parents) - 1)
        level = grown
    return parents


def shapes(model, prompt: str) -> list[tuple[str, int, object]]:
    """(name, rows fed, the call) for every shape; each call is cut back to the prompt's cache after it."""
    import torch

    from sbd_viz.plugin import ModelCall

    cache = model.new_cache()
    ids = model.encode(prompt)
    model.call(cache, ModelCall.fused(ids[:-1], [], n_causal=1))  # the prompt but its last token: every call feeds from there
    base = cache.get_seq_length()
    token, mask = ids[-1], model.mask_token_id
    head = model.head

    def cut():
        model.rollback(cache, base)

    def one():
        model.call(cache, ModelCall.fused([token], [], n_causal=1))
        cut()

    def drafting(f):
        def call():
            model.call(cache, ModelCall.fused([token] * f, [mask] * K, n_causal=f))
            cut()
        return call

    def branching(b, how):
        def call():
            model.head = None if how == HEADS[2] else head
            model.candidates = None if how == HEADS[1] else candidates
            try:
                with torch.inference_mode():  # verified SBD's call: the branch after every accepted draft is kept
                    fed = list(range(b))  # a chain: the last accepted token and b - 1 drafts, a block after each
                    model.call(cache, ModelCall([token] * b, [mask] * K, logits_at=fed, blocks_after=fed,
                                                pick=lambda roots: b - 1, chained=True))
            finally:
                model.head, model.candidates = head, candidates
            cut()
        return call

    def treeing(widths):
        parents = full_tree(widths)

        def call():
            with torch.inference_mode():  # the branch after the last candidate is kept
                fed = list(range(len(parents)))
                model.call(cache, ModelCall([token] * len(parents), [mask] * K, logits_at=fed, parents=parents,
                                            blocks_after=fed, pick=lambda roots: len(parents) - 1, widths=widths,
                                            chained=True))
            cut()
        return call

    candidates = getattr(model, "candidates", None)
    out = [(ONE, 1, one)] + [(single(f), f + K, drafting(f)) for f in FED]
    for how in (HEADS if head is not None else HEADS[2:]):
        out += [(tree(b, how), b * (1 + K), branching(b, how)) for b in FED]
    out += [(token_tree(w), len(full_tree(w)) * (1 + K), treeing(w)) for w in TOKEN_TREES]
    return out


def head_passes(calls) -> dict[str, int]:
    """{shape: the head's chained passes} of one call of each tree shape with the head (the calls are the same work
    every round: the same cache, tokens and branch). A pass multiplies by the output layer: the whole of it, or the
    rows of the slots' candidates (``sampler_head.candidate_logits``)."""
    from sbd_viz.models import sampler_head

    real, seen = {name: getattr(sampler_head, name) for name in ("output_logits", "candidate_logits")}, []
    for name, fn in real.items():
        setattr(sampler_head, name, lambda *args, fn=fn: seen.append(1) or fn(*args))
    try:
        out = {}
        for name, _, fn in calls:
            if name.endswith(HEADS[0]):
                seen.clear()
                fn()
                out[name] = len(seen)
        return out
    finally:
        for name, fn in real.items():
            setattr(sampler_head, name, fn)


def run(args, argv: list[str]) -> tuple[dict, dict, dict]:
    """Time every shape on both kernels (``run_info.write_page``'s ``run``): (header, results, no examples)."""
    import torch

    import sbd_viz as sv
    from sbd_viz.training import distill

    torch.set_num_threads(args.threads)
    models = {kernel: sv.load_model(args.model, packed=kernel == PACKED) for kernel in KERNELS}
    model = models[PACKED]
    prompt = distill.as_chat(model.tokenizer, distill.HELDOUT_CHAT[0])
    calls = {kernel: shapes(m, prompt) for kernel, m in models.items()}
    methods = [(named(kernel, name), fn) for kernel in KERNELS for name, _, fn in calls[kernel]]
    load_start = run_info.load()
    paired.warm_up(methods)
    passes = head_passes(calls[PACKED])
    rounds = paired.rounds(methods, args.rounds, args.guard)
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "model": model.description, "prompt_tokens": len(model.encode(prompt)),
              "load": [load_start, run_info.load()], "guard": args.guard, "head_passes": passes,
              "command": "python bench/scripts/bench_call_cost.py " + shlex.join(argv)}
    results = {"rounds": rounds, "kernels": {
        kernel: {name: {"rows": n, "ms": 1000 * paired.median_seconds(rounds, named(kernel, name)),
                        "vs_one": paired.ratio(rounds, named(kernel, name), named(kernel, ONE)),
                        "vs_torch": paired.ratio(rounds, named(kernel, name), named(TORCH, name))}
                 for name, n, _ in calls[kernel]}
        for kernel in KERNELS}}
    return header, results, {}


def measured_tokens_per_call(path: Path) -> dict | None:
    """{(set, drafting): tokens per call} at block 4, γ 8 from ``bench/results/adapter.json``, and {set: items} under
    ``"items"``; None if it is missing."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    sets = data["results"]["sets"]
    out = {(s, d): sets[s][d][f"block {K}, γ 8"]["tokens_per_call"]
           for s in ("chat", "code") for d in ("verified", "tree") if f"block {K}, γ 8" in (sets[s].get(d) or {})}
    return {**out, "items": data["header"]["items"]}


def medians(shapes_: dict, names) -> list[float]:
    """The paired medians (against a one-token call) of ``names`` that kept a pair."""
    return [shapes_[n]["vs_one"]["median"] for n in names if n in shapes_ and shapes_[n]["vs_one"]["median"]]


def shown(r: dict) -> tuple[str, str]:
    """(median with the pairs kept, range) of a paired ratio."""
    if r["median"] is None:  # every round had one of the pair disturbed
        return "no undisturbed pair", "–"
    return f"{r['median']:.2f}x ({r['pairs']}/{r['of']} pairs)", f"{r['lo']:.2f}-{r['hi']:.2f}x"


def shape_table(shapes_: dict) -> list[str]:
    lines = ["| shape | rows fed | ms per call (median) | x a one-token call (paired median, pairs kept) | range |",
             "|---|---:|---:|---:|---:|"]
    for name, s in shapes_.items():
        ratio, spread = ("1 (the reference)", "–") if name == ONE else shown(s["vs_one"])
        lines.append(f"| {name} | {s['rows']} | {s['ms']:.1f} | {ratio} | {spread} |")
    return lines


def break_even(shapes_: dict) -> dict:
    """{drafting: (lowest, highest) paired median over its shapes}: single drafting's fed counts, tree drafting's
    branch counts with the sampler head where the model has one."""
    singles = medians(shapes_, [single(f) for f in FED])
    trees = medians(shapes_, [tree(b) for b in FED]) or medians(shapes_, [tree(b, HEADS[2]) for b in FED])
    return {"verified": (min(singles), max(singles)), "tree": (min(trees), max(trees))}


def page(h: dict, result: dict, adapter: dict | None) -> str:
    kernels = result["kernels"]
    lines = ["# What a call costs on this CPU, by the rows it feeds and the kernels it runs", "",
             f"Produced by `{h['command']}` on {h['date']}; machine: {h['machine']} ({h['cpu']}); load average "
             f"{h['load'][0]} at the start, {h['load'][1]} at the end.", "",
             f"- Model: {h['model']}.",
             f"- Every call starts from the same cache: the first held-out chat question through the chat template "
             f"({h['prompt_tokens']} tokens), cut back after the call. Block size {K}.",
             "- Two copies of the model, one per kernel: " + "; ".join(f"*{k}*: {KERNEL_TEXT[k]}" for k in KERNELS)
             + ". Both run every shape in every round.",
             f"- {len(result['rounds'])} rounds, every shape on both kernels once a round, the order rotating; a run "
             f"slower than {h['guard']:g}x its fastest is disturbed, and a ratio counts only rounds where neither run "
             f"was. Disturbed runs: {sum(len(r['disturbed']) for r in result['rounds'])} of "
             f"{len(result['rounds']) * sum(len(v) for v in kernels.values())}.", ""]
    if h.get("head_passes"):  # a bullet of the list above, before its closing blank line
        lines.insert(-1, "- The sampler head chains the branch verified SBD keeps (the call's `pick`), here the last: "
                     "every draft accepted, each slot's draft taken among the adapter's own best tokens there "
                     "(`sampler_head.CANDIDATES`). Its chained passes in one such call: " + "; ".join(
                         f"{name.split(', with')[0].removeprefix('tree drafting, ')}: {n}"
                         for name, n in h["head_passes"].items()) + ".")
    for kernel in KERNELS:
        lines += [f"## {kernel[0].upper() + kernel[1:]}", ""] + shape_table(kernels[kernel]) + [""]
    lines += ["## Packed against torch's kernels, shape by shape", "",
              "The packed call's seconds over the same call's with torch's kernels, in the same round (< 1: packed "
              "is faster).", "", "| shape | packed / torch's (paired median, pairs kept) | range |", "|---|---:|---:|"]
    for name, s in kernels[PACKED].items():
        ratio, spread = shown(s["vs_torch"])
        lines.append(f"| {name} | {ratio} | {spread} |")
    even = {kernel: break_even(kernels[kernel]) for kernel in KERNELS}
    lines += ["", "## Reading it", ""]
    for kernel in KERNELS:
        (lo, hi), (tlo, thi) = even[kernel]["verified"], even[kernel]["tree"]
        lines.append(f"- {kernel[0].upper() + kernel[1:]}: a single-drafting call (1 to {FED[-1]} fed tokens and a "
                     f"block of {K} mask slots) costs {lo:.2f}-{hi:.2f}x a one-token call on the same kernels, a "
                     f"tree-drafting call {tlo:.2f}-{thi:.2f}x (1 to {FED[-1]} branches). That many tokens per call "
                     "is the break-even: a decode that writes more per call costs less per token than `generate` "
                     "(a one-token call's shape, on the same weights and kernels).")
    costs = medians(kernels[PACKED], [token_tree(w) for w in TOKEN_TREES])
    if len(costs) == len(TOKEN_TREES):
        lines.append("- A token-tree call (packed) costs " + ", ".join(
            f"{c:.2f}x for widths {','.join(map(str, w))} ({kernels[PACKED][token_tree(w)]['rows']} rows)"
            for w, c in zip(TOKEN_TREES, costs)) + ": the tokens per call its decode must write to break even.")
    one = kernels[PACKED][ONE]["vs_torch"]
    if one["median"] is not None:
        lines.append(f"- A one-token call, `generate`'s step, takes {one['median']:.2f}x its time with torch's "
                     "kernels when packed.")
    if adapter:
        items = adapter.pop("items", None) or {}
        lines += ["", f"The tokens per call `bench/results/adapter.json` measured at block {K}, γ 8 ("
                  + (f"{items['chat']} held-out chat items, {items['code']} HumanEval problems" if items else
                     "held-out items") + "), "
                  "against the break-even of the shapes its calls take:", "",
                  f"| set | drafting | {COUNTED} | break-even, {TORCH} | break-even, {PACKED} |",
                  "|---|---|---:|---:|---:|"]
        for (s, d), t in adapter.items():
            cells = " | ".join("{:.2f}-{:.2f}".format(*even[kernel][d]) for kernel in KERNELS)
            lines.append(f"| {'chat' if s == 'chat' else 'HumanEval'} | {'single' if d == 'verified' else 'tree'} "
                         f"| {t:.2f} | {cells} |")
        lines += ["", "Where the tokens per call are above the break-even, verified SBD costs less per token than "
                  "`generate` on this CPU at these call costs; `bench/ADAPTER.md` measures the decodes' wall clock "
                  "directly."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=MODEL, help="an SBD adapter's name or folder (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=12, help="rounds of every shape (default: %(default)s)")
    parser.add_argument("--guard", type=float, default=1.25,
                        help="a run slower than this x its shape's fastest is disturbed (default: %(default)s)")
    parser.add_argument("--adapter-json", type=Path, default=run_info.RESULTS / "adapter.json",
                        help="the tokens per call to set beside the break-even (default: bench/results/adapter.json)")
    run_info.add_page_arguments(parser, run_info.BENCH / "CALL_COST.md", run_info.RESULTS / "call_cost.json")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    run_info.write_page(parser, args, argv, run,
                        lambda header, results, _: page(header, results, measured_tokens_per_call(args.adapter_json)))
    return 0

if __name__ == "__main__":
    sys.exit(main())
