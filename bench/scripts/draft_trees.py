"""How many tokens a verified call would keep if its drafts were a tree of candidates, not one chain. Writes
``bench/DRAFT_TREES.md`` and ``bench/results/draft_trees.json``.

Verified SBD's tree drafting today drafts one chain: the argmax of each slot, the sampler head chaining each slot on
the draft before it. A call keeps the drafts up to the first wrong one. Speculative decoders with a draft head
(Medusa, EAGLE) check a tree instead: the best ``w1`` tokens at slot 1, the best ``w2`` at slot 2 after each of
them, and so on. The call keeps the longest path whose every token is NTP's, so a slot counts as right when its
true token is among its ``w`` best, not only its first.

This page reads the adapter's own probe blocks (``head_train.collect``: fully masked blocks of the block size
tiling the base's greedy continuation, slot 0 NTP's exact token), scores each slot by the rank of the base's
greedy token among its logits, with the adapter alone and with the sampler head chained on the true token before it
(the path a tree keeps, which is why that chaining is exact for it), and counts *tokens per call (single block)*
as ``bench/PROBE_SETS.md`` does (``head_train.chain_tpc``): 1 + the leading run of right slots. Widths (1, 1, 1)
are today's chain. It predicts from the probe; it decodes nothing.

What a tree costs: a call feeds the last accepted token and the tree's ``n`` nodes, each seeing its ancestors,
plus a block of mask slots after each of them (whichever path is kept, the next drafts are ready): ``(n + 1) *
(1 + k)`` rows against the chain's ``k * (1 + k)``.

    python bench/scripts/draft_trees.py                                   # the shipped adapter, 32 prompts a set
    python bench/scripts/draft_trees.py --from-json bench/results/draft_trees.json  # the page again from its JSON
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_sets  # noqa: E402
import run_info  # noqa: E402

PAGE, JSON = run_info.BENCH / "DRAFT_TREES.md", run_info.RESULTS / "draft_trees.json"
SETS = ("held-out chat", "HumanEval")  # the sets the adapter is judged on (bench/ADAPTER.md)
WIDTHS = ((1, 1, 1), (2, 1, 1), (3, 1, 1), (2, 2, 1), (2, 2, 2), (3, 2, 1), (4, 2, 1), (3, 3, 2), (4, 3, 2),
          (8, 4, 2))


def nodes(widths) -> int:
    """The tree's drafted tokens: w1 + w1 w2 + w1 w2 w3 + ..."""
    return sum(math.prod(widths[:d]) for d in range(1, len(widths) + 1))


def rows_per_call(widths) -> int:
    """Rows a tree call feeds: the last accepted token and every node, each with a block of ``len(widths) + 1``
    mask slots after it."""
    return (nodes(widths) + 1) * (len(widths) + 2)


def ranks(logits, targets):
    """The rank of each target among its row's logits (0: the argmax)."""
    return (logits > logits.gather(1, targets[:, None])).sum(1)


def score(rank, slots: dict, k: int) -> dict:
    """Tokens per call (single block) and each slot's share right, for every width in ``WIDTHS``."""
    import torch

    from sbd_viz.training import head_train

    out = {}
    for widths in WIDTHS:
        right = rank < torch.tensor(widths)[slots["slot"] - 1]
        out[",".join(map(str, widths))] = {
            "single_tpc": round(head_train.chain_tpc(right, slots["slot"], slots["block"], k), 4),
            "slot_right": [round(float(right[slots["slot"] == s].float().mean()), 4) for s in range(1, k)]}
    return out


def measure(args) -> dict:
    import torch

    from sbd_viz.models import gated_adapter, sampler_head
    from sbd_viz.training import head_train

    torch.set_num_threads(args.threads)
    model, rows = probe_sets.base_rows(args.n, args.new_tokens, SETS)
    config, gate = gated_adapter.load(model, args.adapter)
    k = config.extra.get("block_size", 4)
    if k != len(WIDTHS[0]) + 1:
        raise SystemExit(f"--adapter: this page's widths are for block size {len(WIDTHS[0]) + 1}, the adapter's is {k}")
    head = sampler_head.load(args.adapter, model.config.hidden_size, config.extra.get("sampler_head"))
    if head is None:
        raise SystemExit(f"--adapter: {args.adapter} carries no sampler head")
    embed, out_head = model.get_input_embeddings(), model.get_output_embeddings()
    results = {}
    for name, set_rows in rows.items():
        slots = head_train.collect(model, gate, set_rows, k, model.config.mask_token_id, log=lambda s: None)
        with torch.no_grad():
            hidden = slots["hidden"].float()
            alone = ranks(out_head(hidden), slots["targets"])
            chained = ranks(out_head(head(hidden, embed(slots["previous"]))), slots["targets"])
        results[name] = {"prompts": len(set_rows), "blocks": int((slots["slot"] == 1).sum()),
                         "adapter": score(alone, slots, k), "head": score(chained, slots, k)}
    return {"adapter": str(args.adapter), "steps": config.extra.get("steps"), "block_size": k, "n": args.n,
            "new_tokens": args.new_tokens, "sets": results}


def run(args, argv):
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "command": shlex.join(["python", "bench/scripts/draft_trees.py", *argv])}
    return header, measure(args), None


def markdown(h: dict, r: dict, examples=None) -> str:
    s, k = r["sets"], r["block_size"]
    lines = ["# Draft trees: tokens per call if a call checked a tree of candidates", "",
             f"Command: `{h['command']}`. Run: {h['date']} on {h['machine']} ({h['cpu']}). Adapter: `{r['adapter']}` "
             f"(step {r['steps']}) with its sampler head, block size {k}; the first {r['n']} prompts of each set, each "
             f"with the base's greedy continuation of {r['new_tokens']} tokens. How it counts: this script's "
             "docstring. A prediction from the probe's slots, not a decode: [ADAPTER.md](ADAPTER.md) decodes.", "",
             "Widths `w1,w2,w3`: the best w1 tokens at slot 1, the best w2 at slot 2 after each, and so on; `1,1,1` is "
             "today's chain. *Rows* is what one call would feed.", "",
             "| widths | drafted nodes | rows per call | " + " | ".join(
                 f"{name}: adapter | {name}: with the head" for name in SETS) + " |",
             "|---|---:|---:|" + "---:|---:|" * len(SETS)]
    for widths in WIDTHS:
        key = ",".join(map(str, widths))
        cells = " | ".join(f"{s[name]['adapter'][key]['single_tpc']:.2f} | {s[name]['head'][key]['single_tpc']:.2f}"
                           for name in SETS)
        lines.append(f"| {key} | {nodes(widths)} | {rows_per_call(widths)} | {cells} |")
    lines += ["", "The share of slots whose true token is among the tree's candidates there (slots 1..3), with the "
              "head:", "", "| widths | " + " | ".join(SETS) + " |", "|---|" + "---:|" * len(SETS)]
    for widths in WIDTHS:
        key = ",".join(map(str, widths))
        lines.append(f"| {key} | " + " | ".join(" / ".join(f"{a:.2f}" for a in s[name]["head"][key]["slot_right"])
                                                for name in SETS) + " |")
    chat = s["held-out chat"]["head"]
    reach = [w for w in WIDTHS if chat[",".join(map(str, w))]["single_tpc"] >= 2.0]
    first = min(reach, key=rows_per_call) if reach else None
    if first:
        name = ",".join(map(str, first))
        verdict = (f"The smallest tree here that the probe puts at 2.0 or more is `{name}`: "
                   f"{chat[name]['single_tpc']:.2f}, with {nodes(first)} nodes and {rows_per_call(first)} rows a call "
                   f"against the chain's {rows_per_call(WIDTHS[0])}.")
    else:
        verdict = "No tree here reaches 2.0 tokens per call on it."
    lines += ["", f"Held-out chat with today's chain: {chat['1,1,1']['single_tpc']:.2f} tokens per call (single "
              f"block). {verdict}",
              "", "What this does not say: the decode's own count. The probe's blocks tile the continuation from "
              "its first token and count no prefill or end, and [ADAPTER.md](ADAPTER.md)'s decodes read lower than "
              "the probe for the same chain. Nor what a call of these rows costs: on this CPU today's chain (20 rows, "
              "with the head) already costs 1.9 times a one-token call ([CALL_COST.md](CALL_COST.md)), and wider "
              "calls cost more, so a wider tree buys tokens per call and not, here, wall clock; on a GPU, where "
              "rows are nearly free, it would buy both. Verified SBD drafts such a tree with `drafting=\"tree\", "
              "tree_widths=(w1, w2, w3)`: [ADAPTER.md](ADAPTER.md) decodes it, and [CALL_COST.md](CALL_COST.md) "
              "times its calls."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    probe_sets.probe_arguments(p, PAGE, JSON, 32, "adapter folder with a sampler head")
    args = p.parse_args(argv)
    run_info.write_page(p, args, sys.argv[1:] if argv is None else argv, run, markdown)


if __name__ == "__main__":
    main()
