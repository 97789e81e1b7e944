"""The app on a pretrained LM without SBD training (``sbd_viz.causal_lm.CausalLM``): free-text prompts, the chat
template applied unless switched off, the exact decoders only (Jacobi, prompt lookup; NTP beside them), and examples
of both kinds: where drafting pays (quoting or editing a given text, repeating code) and where it does not (open
questions, whose next tokens no draft can guess)."""

from __future__ import annotations

import html

# (prompt, apply the chat template, label): the labels say what kind of prompt it is, not a measured number (a
# 135M model's decode takes seconds here, too long to measure every example when the page is built)
EXAMPLES = [
    ("Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the quiet river bank.", True,
     "quoting a given sentence: drafting pays"),
    ("def area(width, height):\n    return width * height\n\nThe same function with width renamed to w:\n\n"
     "def area(", False, "editing given code (raw text): drafting pays"),
    ("Rewrite this list in the same order, one item per line:\napples, bread, milk, eggs, butter, cheese", True,
     "copying a given list: drafting pays"),
    ("What is the capital of France? Answer in one sentence.", True, "an open question: little to draft from"),
    ("Write a short poem about the sea.", True, "open writing: little to draft from"),
]
MAX_NEW_TOKENS = 48  # a CPU writes a few tokens a second with this model; NTP runs beside each decode


def chat_prompt(model, text: str) -> str:
    """``text`` as the user's turn of the model's chat template, ready for the assistant's answer (the text itself
    if the tokenizer has no template)."""
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        return text
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)


def header(model) -> str:
    """The page's note on the model: what kind it is, and what it can and cannot do here."""
    from ..causal_lm import KIND, train_hint

    return (f"\n\n**`{html.escape(model.name)}`: {KIND}.** It decodes with the exact decoders, which read its "
            "next-token predictions only: **Jacobi** and **prompt lookup** draft several tokens per call and keep "
            "those greedy NTP agrees with, so the text is NTP's, in fewer calls when the drafts hold (quoting or "
            "editing a given text, repeating code) and no fewer on an open question. SBD, verified SBD and "
            "remasking need a model fine-tuned for SBD (`" + train_hint(model.name) + "`), so they are not offered. "
            "The chat template is applied to the prompt unless switched off.")
