"""Find suite prompts worth showing in the app: decode test items with the app's default settings
and list, per behaviour, the items that show it best.

    python tools/pick_examples.py [--model DIR] [--per-family 20] [--gamma 0.5]

Behaviours: *parallel* (many slots committed in one call, answer right), *right-to-left*
(an addition whose last digit is committed before its first), *gap fill* (a commit kept in the
output while slots to its left were still masked), *earlier lines* (a context family: the answer
needs an assignment made lines before), *in a document* (the item after train-split lines, in the
longest prompt-length bucket the app takes). Paste the chosen prompts into ``EXAMPLES`` in sbd_viz/app/examples.py.
"""

from __future__ import annotations

import argparse

import torch

import sbd_viz as sv
from sbd_viz.analysis.evaluation import STOP


def describe(item, trace) -> dict:
    calls = trace.token_calls()
    answer = [i for i, t in enumerate(trace.output_texts) if t != "\n"]
    digits = [i for i in answer if trace.output_texts[i].isdigit()]
    n_out = trace.n_tokens
    start = len(trace.prompt_ids)  # gap fills past the stop were discarded: only those in the output count
    kept_fills = [g for g in trace.gap_fills() if trace.steps[g.call].block_start + g.slot - start < n_out]
    per_call = [calls.count(c) for c in set(calls)] or [0]  # output tokens per call (commits past the stop not counted)
    return dict(
        family=item.family, prompt=item.prompt, answer=item.answer, text=trace.text.rstrip("\n"),
        correct=sv.tasks.score(item, trace.text), nfe=trace.nfe, tokens=n_out, most_per_call=max(per_call),
        right_to_left=len(digits) >= 2 and calls[digits[-1]] < calls[digits[0]],
        gap_fills=len(kept_fills), calls=[calls[i] for i in answer])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None)
    p.add_argument("--per-family", type=int, default=20)
    p.add_argument("--gamma", type=float, default=0.5)
    p.add_argument("--show", type=int, default=4, help="items listed per behaviour")
    p.add_argument("--max-prompt-chars", type=int, default=None,
                   help="the longest prompt in a document, in characters (default: the app's limit for the "
                        "model, sbd_viz.app.inputs.prompt_limit, less the room of 64 new tokens)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model = sv.load_model(args.model)
    if args.max_prompt_chars is None:  # the prompt and its 64 new tokens in the model's context
        from sbd_viz.app.inputs import prompt_limit

        args.max_prompt_chars = min(prompt_limit(model), (model.context_length or 512) - 64 - 1)
    def decoded(items):
        return [describe(item, sv.decode(model, item.prompt, gamma=args.gamma, max_new_tokens=64,
                                         stop=STOP)) for item in items]

    suite = sv.tasks.load_suite("pyasserts", "test", per_family=args.per_family)
    longest = sv.tasks.LENGTH_BUCKETS[-1]
    rows = decoded(suite)
    in_documents = decoded(sv.tasks.in_document(suite[::7], longest, max_chars=args.max_prompt_chars))
    right = [r for r in rows if r["correct"]]
    print(f"{len(right)}/{len(rows)} right at gamma={args.gamma}; in documents "
          f"{sum(r['correct'] for r in in_documents)}/{len(in_documents)}")
    shows = {
        "parallel (right, most slots in one call)": sorted(right, key=lambda r: (-r["most_per_call"], r["nfe"])),
        "right-to-left addition (right)": [r for r in right if r["family"] == "add" and r["right_to_left"]],
        "gap fill kept in a right answer": sorted([r for r in right if r["gap_fills"]], key=lambda r: -r["gap_fills"]),
        "earlier lines (context family, right)": sorted(
            [r for r in right if r["family"] in sv.tasks.CONTEXT_FAMILIES],
            key=lambda r: (-r["most_per_call"], r["nfe"])),
        f"in a document of {longest[0]}+ characters (right)": sorted(
            [r for r in in_documents if r["correct"]], key=lambda r: (-r["most_per_call"], r["nfe"])),
        "gap fill kept in a wrong answer": sorted([r for r in rows if r["gap_fills"] and not r["correct"]],
                                                  key=lambda r: -r["gap_fills"]),
    }
    for title, items in shows.items():
        print(f"\n{title}: {len(items)} items")
        for r in items[: args.show]:
            print(f"  [{r['family']}] {r['prompt']!r} -> {r['text']!r} (expected {r['answer']!r}) · {r['nfe']} calls "
                  f"for {r['tokens']} tokens · up to {r['most_per_call']} per call · gap fills {r['gap_fills']} · "
                  f"call of each answer token {r['calls']}")


if __name__ == "__main__":
    main()
