"""The app on a pretrained LM (``sbd_viz.models.causal_lm.CausalLM``): free-text prompts, the chat template applied
unless switched off, and examples. Without SBD training it decodes with the exact decoders only (Jacobi, prompt lookup;
NTP beside them), and its examples show where drafting pays (quoting or editing a given text, repeating code) and where
it does not (open questions). With an SBD adapter (``sbd_viz.models.adapted_lm.AdaptedLM``) every SBD view works on it,
and its examples are the kinds of text the adapter was trained to draft (chat answers, code from a docstring)."""

from __future__ import annotations

import html
import json
from pathlib import Path

# each text model's examples decoded with every decoder the app offers, by bench/scripts/app_examples.py
MEASURED = Path(__file__).resolve().parent / "example_defaults.json"
# (prompt, apply the chat template, label): the labels say what kind of prompt it is; the page adds what
# bench/scripts/app_examples.py measured (``example_choices``: a 135M model's decode takes seconds here, too long to
# measure every example when the page is built)
EXAMPLES = [
    (
        "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank.",
        True,
        "quoting a given sentence: drafting pays",
    ),
    (
        "def area(width, height):\n    return width * height\n\nThe same function with width renamed to w:\n\n"
        "def area(",
        False,
        "editing given code (raw text): drafting pays",
    ),
    (
        "Rewrite this list in the same order, one item per line:\napples, bread, milk, eggs, butter, cheese",
        True,
        "copying a given list: drafting pays",
    ),
    ("What is the capital of France? Answer in one sentence.", True, "an open question: little to draft from"),
    ("Write a short poem about the sea.", True, "open writing: little to draft from"),
]
# An SBD adapter's examples: a chat answer and code, the two kinds of text it learned to draft, and a quote
ADAPTER_EXAMPLES = [
    ("Explain how rainbows form in simple terms.", True, "a chat answer"),
    (
        'def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same forwards and backwards, '
        'ignoring case."""\n',
        False,
        "code from a docstring (raw text)",
    ),
    ("Give me three tips for learning to cook.", True, "a list in a chat answer"),
    (
        "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank.",
        True,
        "quoting a given sentence",
    ),
]
MAX_NEW_TOKENS = 48  # a CPU writes a few tokens a second with this model; NTP runs beside each decode


def examples(model) -> list[tuple[str, bool, str]]:
    """The page's examples for ``model``: (prompt, apply the chat template, label)."""
    return ADAPTER_EXAMPLES if getattr(model, "adapter", None) is not None else EXAMPLES


def measured(model) -> dict[str, dict]:
    """This model's examples as ``bench/scripts/app_examples.py`` measured them (``MEASURED``): prompt -> its row (the
    chosen decoder, each decoder's calls and tokens). Empty for a model it did not measure; a row whose prompt is no
    longer an example is not read."""
    rows = json.loads(MEASURED.read_text(encoding="utf-8"))
    return {row["prompt"]: row for row in rows.get(model.name, ())}


VERIFIED = "verified SBD"  # the measured run of verified SBD at the page's drafting (bench/scripts/app_examples.py)


def example_choices(model, offered: list[str]) -> list[tuple[str, bool, str, str, bool]]:
    """The page's examples for ``model`` with the decoder each opens with: (prompt, apply the chat template, label,
    decoder label, verified). An SBD adapter's examples open on verified SBD (SBD with the verified switch on, at
    the page's drafting), labelled with its numbers and plain SBD's as ``measured`` has them; a text LM without SBD
    training opens each on the decoder that wrote the most tokens per call when it was measured. An example not
    measured opens with the first of ``offered`` (the decoder menu; verified on an SBD model) and its label alone."""
    rows = measured(model)
    sbd = getattr(model, "adapter", None) is not None
    out = []
    for prompt, chat, label in examples(model):
        row = rows.get(prompt)
        if sbd:
            runs = (row or {}).get("runs", {})
            if row is not None and VERIFIED in runs and "SBD" in runs:
                v, plain = runs[VERIFIED], runs["SBD"]
                label += (
                    f" (verified SBD: {v['tokens']} tokens in {v['calls']} calls; plain SBD {plain['calls']}, "
                    f"NTP {row['ntp_calls']})"
                )
            out.append((prompt, chat, label, offered[0], True))
            continue
        if row is None or row["decoder"] not in offered:
            out.append((prompt, chat, label, offered[0], False))
            continue
        run = row["runs"][row["decoder"]]
        label += f" ({row['decoder']}: {run['tokens']} tokens in {run['calls']} calls, NTP {row['ntp_calls']})"
        out.append((prompt, chat, label, row["decoder"], False))
    return out


def header(model) -> str:
    """The page's note on the model: what kind it is, and what it can and cannot do here."""
    from ..models.causal_lm import KIND, train_hint

    if getattr(model, "adapter", None) is not None:  # an SBD adapter on a frozen base (sbd_viz.models.adapted_lm)
        return (
            f"\n\n**`{html.escape(model.name)}`: an SBD adapter on `{html.escape(model.base_name)}`, base "
            "frozen.** The adapter is on only for the rows of the block being filled, so SBD, verified SBD and "
            "remasking fill blocks with it while NTP, Jacobi and prompt lookup run the base's own weights; "
            "verified SBD's text is exactly the base's greedy text. The page opens on **verified SBD** at the "
            "drafting measured fastest on a 2-core CPU; switch *verified* off for plain SBD, whose text can leave the "
            "base's within a few tokens. The chat template is applied to the prompt unless switched off."
            + (f" Base weights: {html.escape(model.weights)}." if getattr(model, "weights", None) else "")
        )

    return (
        f"\n\n**`{html.escape(model.name)}`: {KIND}.** It decodes with the exact decoders, which read its "
        "next-token predictions only: **Jacobi** and **prompt lookup** draft several tokens per call and keep "
        "those greedy NTP agrees with, so the text is NTP's, in fewer calls when the drafts hold (quoting or "
        "editing a given text, repeating code) and no fewer on an open question. SBD, verified SBD and "
        "remasking need a model fine-tuned for SBD (`" + train_hint(model.name) + "`), so they are not offered. "
        "The chat template is applied to the prompt unless switched off."
    )
