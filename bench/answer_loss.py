"""Answer loss of one or more models on the held-out suite inside documents: a finer ruler than exact match.

Exact match over 20-40 items a family moves in steps of 2.5-5 points, too coarse to tell two close
training runs apart. This reads the same items (``tasks.in_document``, as the model card builds them)
and reports, per prompt-length bucket and for the original and the context families, the mean
cross-entropy (nats per answer token, answer plus its newline) of:

- NTP: each answer token predicted from the prompt and the true answer tokens before it (teacher forcing);
- MATP: every answer token predicted at once from the prompt, the whole answer masked: SBD's first
  call on the block, the hardest case its rule meets.

Deterministic (no sampling, no timing): two runs on one model print the same numbers.

    python bench/answer_loss.py --model sbd_viz/models/sbd-char-5m runs/depth_d1/final --per-family 40
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.tasks import CONTEXT_FAMILIES

MAX_NEW_TOKENS = 64  # the model card's room for an answer: the same items in the same buckets


@torch.inference_mode()
def item_losses(model: sv.SBDModel, item: tasks.SuiteItem) -> tuple[float, float, int]:
    """(summed NTP loss, summed MATP loss, answer tokens) of one item."""
    prompt = model.encode(item.prompt)
    whole = model.encode(item.prompt + item.answer + "\n")
    if whole[:len(prompt)] != prompt:  # a subword tokenizer may merge across the prompt's end
        raise ValueError(f"model: its tokenizer does not split {item.prompt!r} where the answer starts")
    answer = whole[len(prompt):]
    # One pass over the prompt serves both: its last position predicts the answer's first token
    # (NTP) and the masked block beside it predicts them all (MATP); then the answer is fed
    # causally into the same cache for NTP's remaining predictions.
    cache = model.new_cache()
    first, masked = model.fused_call(cache, prompt, [model.mask_token_id] * len(answer), n_causal=1)
    rest = model.fused_call(cache, answer[:-1], [], n_causal=len(answer) - 1)[0] if len(answer) > 1 else first[:0]
    target = torch.tensor(answer)
    ntp = F.cross_entropy(torch.cat([first, rest]), target, reduction="sum").item()
    matp = F.cross_entropy(masked, target, reduction="sum").item()
    return ntp, matp, len(answer)


def losses(model: sv.SBDModel, suite: list[tasks.SuiteItem]) -> list[dict]:
    rows = []
    for bucket, placed in tasks.document_buckets(suite, model.context_length or 512, MAX_NEW_TOKENS):
        for group in ("original", "context"):
            items = [i for i in placed if (i.family in CONTEXT_FAMILIES) == (group == "context")]
            sums = [item_losses(model, i) for i in items]
            n = sum(s[2] for s in sums)
            rows.append({"bucket": list(bucket), "group": group, "items": len(items), "tokens": n,
                         "ntp": sum(s[0] for s in sums) / n, "matp": sum(s[1] for s in sums) / n})
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", nargs="+", required=True, help="model folders, compared on the same items")
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    suite = tasks.load_suite(split="test", per_family=args.per_family)
    results = {path: losses(sv.load_model(path), suite) for path in args.model}
    print("| bucket | families | items | " + " | ".join(f"{m} NTP | {m} MATP" for m in args.model) + " |")
    print("|" + " --- |" * (3 + 2 * len(args.model)))
    for k, row in enumerate(results[args.model[0]]):
        cells = " | ".join(f"{results[m][k]['ntp']:.4f} | {results[m][k]['matp']:.4f}" for m in args.model)
        print(f"| {row['bucket'][0]}-{row['bucket'][1]} | {row['group']} | {row['items']} | {cells} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"per_family": args.per_family, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
