"""The character model's examples in the app: suite items whose labels are measured when the page is built.

``EXAMPLES`` are test-split suite items, alone or after a document's lines (so the app scores them), picked with
``python tools/pick_examples.py`` (candidates per behaviour at the app's default settings); ``example_label`` decodes
each one at ``DEFAULTS``, so a label never goes stale. The text models' examples are in ``causal``."""

from __future__ import annotations

from typing import Any

from .. import tasks
from ..analysis.evaluation import STOP  # an assert's answer ends at the end of its line
from ..decoders.door import decode  # sv.decode's door: the package's face is not imported from here
from ..decoders.rules import COMMIT_RULES, DEFAULT_RULE
from ..models.diffusion import DiffusionModel

EXAMPLES = [
    "assert list(range(69, 78)) == ",
    "assert sorted([77, 28, 34, 18, 19]) == ",
    "assert list(range(5, 13)) == ",
    'assert "/".join(["mv", "vi", "zx", "nh"]) == ',
    "assert 79 + 48 == ",
    'assert len("pipkvrslxt") == ',
    # needs an earlier line (a context family), and a suite item after eight lines of a document
    "z = 60\nfirst = [63, 25, 15, 80]\nassert sorted(first) == ",
    'assert len("ttom") == 4\nassert [x * 2 for x in [24, 29, 37]] == [48, 58, 74]\n'
    "assert [x * 2 for x in [11, 5]] == [22, 10]\nassert 97 + 55 == 152\n"
    'assert list(range(44, 50)) == [44, 45, 46, 47, 48, 49]\ntotal = "crown"\nitems = "session"\n'
    'assert items.upper() == "SESSION"\nassert sorted([70, 11, 34, 25, 46, 77]) == ',
]

# The block size is not here: it is the model's (``SBDModel.block_size``, recorded in its folder, else 16).
DEFAULTS: dict[str, Any] = dict(
    rule=DEFAULT_RULE, gap_free=False, max_new_tokens=64, temperature=0.0, seed=0, stop_at_newline=True, verify=False
)


def example_label(model, suite: dict, prompt: str) -> str:
    """What the app's default settings do with an example, measured by decoding it (labels never go stale)."""
    trace = decode(
        model,
        prompt,
        rule=DEFAULTS["rule"],
        gamma=COMMIT_RULES[DEFAULTS["rule"]].default,
        gap_free=DEFAULTS["gap_free"],
        block_size=model.block_size,
        max_new_tokens=DEFAULTS["max_new_tokens"],
        stop=STOP if DEFAULTS["stop_at_newline"] and not isinstance(model, DiffusionModel) else (),
    )
    item = tasks.item_in_prompt(prompt, suite)
    fills = len(trace.kept_gap_fills())
    before = prompt[: len(prompt) - len(item.prompt)].count("\n") if item else 0  # a document's earlier lines
    label = f"{item.family if item else 'prompt'}" + (f" after {before} lines" if before else "")
    label += f": {trace.n_tokens} tokens in {trace.nfe} calls"
    label += f", {fills} gap fill{'s' if fills != 1 else ''}" if fills else ""
    if item is not None and not tasks.score(item, trace.text):
        label += ", wrong at the default γ"
    return label
