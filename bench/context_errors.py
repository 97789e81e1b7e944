"""What the context families' wrong answers are: a lookup gone astray, or the work after it.

For each model, NTP (greedy, the model card's reference decoder) answers the held-out items of the
context families, standalone and inside documents (the card's prompt-length buckets). Every wrong
answer is put in the first class it fits:

- ``other name``: the answer the assert would have if its names were swapped (the lookup found the
  other assignment: ``a + 5`` answered with ``b``'s value);
- ``list length``: a list with the right first element and the wrong length (``ctx_range`` counts
  its elements from a sum it never writes out);
- ``carry added``: a ``ctx_add`` sum ten too high where the units do not carry (``30 + 45``
  answered ``85``; ``3 + 5`` answered ``18`` is one too);
- ``carry dropped``: a sum ten too low where the units carry (``26 + 24`` answered ``40``);
- ``off by tens``: any other number off by a multiple of ten (a tens digit read wrong);
- ``other``: anything else (a copy that drifts to the other word mid-way, a wrong sort).

A second table counts the right answers of ``ctx_range`` and ``ctx_add`` by where their numbers fall
(``size_class``): a range whose start is as small as its length, a sum with a one-digit operand; and
``ctx_add``'s by whether its units carry (``carry_class``), beside the misses that add a carry or drop one:
which way a model leans.

It also asks ``list(range(a, a + b))`` with literals, beside the same range with its end written
(``range_sum_probe``): whether the sum or the lookups are what ``ctx_range`` lacks.

``--split train`` asks the same of training-split items (the same generators, lines the model may have
seen): right there about as often as on the test split means the families are under-learned, not
over-fitted to the lines trained on.

Deterministic (greedy, no timing).

    python bench/context_errors.py --model sbd_viz/models/sbd-char-5m runs/lookup_lookup/final --per-family 40
"""
from __future__ import annotations

import argparse
import ast
import json
import random
from collections import Counter

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.tasks import CONTEXT_FAMILIES

MAX_NEW_TOKENS = 64  # the model card's room for an answer: the same items in the same buckets
CLASSES = ("right", "other name", "list length", "carry added", "carry dropped", "off by tens", "other")


def _parts(item: tasks.SuiteItem) -> tuple[dict[str, object], str]:
    """A context item's own two assignments ({name: value}) and its assert's expression."""
    *lines, last = item.prompt.split("\n")
    values = dict(map(tasks.assignment, lines[-2:]))  # earlier lines are the item's document
    return values, last.removeprefix("assert ").removesuffix(" == ")


def _operands(values: dict[str, object], expr: str) -> tuple[int, int]:
    """A ``ctx_add`` item's two operands: the looked-up value and the literal of ``name + literal``."""
    name, literal = expr.split(" + ")
    return values[name], int(literal)


def classify(item: tasks.SuiteItem, output: str) -> str:
    """The class of ``output`` (the generated first line) as an answer to a context item."""
    if tasks.score(item, output):
        return "right"
    values, expr = _parts(item)
    swapped = dict(zip(values, reversed(values.values())))
    try:
        builtins = {"sorted": sorted, "list": list, "range": range}
        other = tasks.render(eval(expr, {"__builtins__": builtins}, swapped))  # noqa: S307 -- the suite's own expression
    except Exception:  # the swap may not type-check (sorted of an int): then it is no class of its own
        other = None
    got = output.split("\n", 1)[0].rstrip()
    if got == other:
        return "other name"
    try:
        got_value, want = ast.literal_eval(got), ast.literal_eval(item.answer)
    except (ValueError, SyntaxError):
        return "other"
    if isinstance(want, list) and isinstance(got_value, list) and got_value[:1] == want[:1] \
            and len(got_value) != len(want):
        return "list length"
    if isinstance(want, int) and isinstance(got_value, int) and (got_value - want) % 10 == 0:
        carry = carry_class(item)
        if got_value - want == 10 and carry == "units do not carry":
            return "carry added"
        if got_value - want == -10 and carry == "units carry":
            return "carry dropped"
        return "off by tens"
    return "other"


def size_class(item: tasks.SuiteItem) -> str | None:
    """Where a ``ctx_range`` or ``ctx_add`` item's numbers fall, the places their misses gather.

    ``ctx_range``: "start <= 10" when the start is as small as the length (2..10), so only the names
    tell the two apart, else "start > 10". ``ctx_add``: "a one-digit operand" when the looked-up value
    or the literal is under ten, else "two-digit operands". Other families: None.
    """
    values, expr = _parts(item)
    if item.family == "ctx_range":
        start = values[expr.removeprefix("list(range(").split(",")[0]]
        return "start <= 10" if start <= 10 else "start > 10"
    if item.family == "ctx_add":
        return "a one-digit operand" if min(_operands(values, expr)) < 10 else "two-digit operands"
    return None


def carry_class(item: tasks.SuiteItem) -> str | None:
    """For a ``ctx_add`` item, "units carry" when the units digits of its two operands sum to ten or
    more, else "units do not carry"; other families: None."""
    if item.family != "ctx_add":
        return None
    value, literal = _operands(*_parts(item))
    return "units carry" if tasks.units_carry(value, literal) else "units do not carry"


def answers(model: sv.SBDModel, suite: list[tasks.SuiteItem],
            standalone: bool = False) -> list[tuple[str, tasks.SuiteItem, str]]:
    """(where, item, class) for every item in every place; ``where`` is "standalone" or a bucket like "128-256".
    ``standalone``: the items alone only, not inside documents."""
    out = []
    places = [("standalone", suite)] if standalone else tasks.places(suite, model.context_length or 512, MAX_NEW_TOKENS)
    for where, items in places:
        for item in items:
            trace = sv.decode_ntp(model, item.prompt, max_new_tokens=MAX_NEW_TOKENS, stop="\n")
            out.append((where, item, classify(item, trace.text)))
    return out


def error_table(answered: list[tuple[str, tasks.SuiteItem, str]]) -> dict[str, dict[str, Counter]]:
    """{where: {family: Counter(class)}}, families in the order they are first answered."""
    families = list(dict.fromkeys(item.family for _, item, _ in answered))
    table: dict[str, dict[str, Counter]] = {}
    for where, item, cls in answered:
        table.setdefault(where, {f: Counter() for f in families})[item.family][cls] += 1
    return table


def size_table(answered: list[tuple[str, tasks.SuiteItem, str]]) -> dict[tuple[str, str], dict[str, list[int]]]:
    """{(family, class): {where: [right, answered]}} for the items ``size_class`` and ``carry_class`` place
    (each ``ctx_add`` item in one row of each)."""
    table: dict[tuple[str, str], dict[str, list[int]]] = {}
    for where, item, cls in answered:
        for numbers in (size_class(item), carry_class(item)):
            if numbers is not None:
                cell = table.setdefault((item.family, numbers), {}).setdefault(where, [0, 0])
                cell[0] += cls == "right"
                cell[1] += 1
    return dict(sorted(table.items()))


def range_sum_probe(model: sv.SBDModel, n: int = 30, seed: int = 0) -> dict[str, float]:
    """NTP exact match on ``list(range(a, a + b))`` with literals, against the same range with its end written.

    ``ctx_range``'s end is a sum the answer never writes out; this tells that part apart from the lookups.
    """
    if n < 1:
        raise ValueError(f"n: need at least one probe item, got {n}")
    rng = random.Random(seed)
    right = {"end as a sum": 0, "end written": 0}
    for _ in range(n):
        item = tasks.make_item("range_sum", rng)  # the training-only family: the sum alone
        values = ast.literal_eval(item.answer)
        written = f"assert list(range({values[0]}, {values[-1] + 1})) == "
        for kind, prompt in (("end as a sum", item.prompt), ("end written", written)):
            trace = sv.decode_ntp(model, prompt, max_new_tokens=MAX_NEW_TOKENS, stop="\n")
            right[kind] += tasks.score(item, trace.text)
    return {kind: count / n for kind, count in right.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", nargs="+", default=["sbd_viz/models/sbd-char-5m"])
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--split", choices=("test", "train"), default="test",
                   help="whose items: the held-out test split (the card's) or the training split")
    p.add_argument("--suite-seed", type=int, default=tasks.SUITE_SEED,
                   help="which draw of the split's items (default: the model card's)")
    p.add_argument("--probe-items", type=int, default=30, help="items for the range-sum probe")
    p.add_argument("--families", nargs="+", default=list(CONTEXT_FAMILIES), choices=CONTEXT_FAMILIES,
                   help="only these context families (default: all four)")
    p.add_argument("--no-probe", action="store_true", help="skip the range-sum probe")
    p.add_argument("--standalone", action="store_true",
                   help="the items alone only, not inside documents (a quarter of the decodes, for many items)")
    p.add_argument("--json", help="also write the counts here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    suite = tasks.load_suite(split=args.split, per_family=args.per_family, families=tuple(args.families),
                             seed=args.suite_seed)
    out = {}
    for path in args.model:
        model = sv.load_model(path)
        answered = answers(model, suite, standalone=args.standalone)
        table, sizes = error_table(answered), size_table(answered)
        out[path] = {where: {f: dict(c) for f, c in fams.items()} for where, fams in table.items()}
        out[path]["by_size"] = {f"{family}, {size}": cells for (family, size), cells in sizes.items()}
        print(f"\n{path}: NTP answers of the context families, {args.per_family} {args.split}-split items "
              f"a family per place (draw {args.suite_seed})\n")
        print("| place | family | " + " | ".join(CLASSES) + " |")
        print("| --- | --- |" + " --- |" * len(CLASSES))
        for where, fams in table.items():
            for family, counts in fams.items():
                print(f"| {where} | {family} | " + " | ".join(str(counts[c]) for c in CLASSES) + " |")
        if sizes:
            print("\nRight of answered, by where the numbers fall (`size_class`, `carry_class`)\n")
            print("| family | numbers | " + " | ".join(table) + " |")
            print("| --- | --- |" + " --- |" * len(table))
            for (family, size), cells in sizes.items():
                print(f"| {family} | {size} | "
                      + " | ".join("{}/{}".format(*cells.get(where, (0, 0))) for where in table) + " |")
        if not args.no_probe:
            probe = range_sum_probe(model, n=args.probe_items)
            print(f"\nlist(range(a, a + b)) with literals, NTP, {args.probe_items} items: {probe}")
            out[path]["range_sum_probe"] = probe
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
