"""Tokens and texts as the views show them: whitespace made visible (``visible``), special tokens marked
(``token_label``, ``mark_special``), a byte-level tokenizer's pieces of one character read in context
(``output_labels``), a block's state as text (``render_state``: ``PREFIX <m> <m> TOKEN``), and where two texts first
differ (``first_difference``), a hand-given label's control pictures named (``drawable``: ``␂`` -> ``⟨start⟩``),
and the names of the tokens-per-call counts (``COUNT_LABELS``). Plain strings in, plain strings out: the trace, the
summary and the pictures share them, so a token reads the same everywhere.
"""

from __future__ import annotations

MASK_TEXT = "<m>"  # a masked slot, in a block's state as text

# Tokens per call as peers count them (``sbd_viz.analysis.counts``): (end token counted, prefill counted) -> the label
# every view, figure and page uses for that ratio
COUNT_LABELS = {
    (True, True): "tokens per call (end token and prefill counted)",
    (False, True): "tokens per call without the end token (d3LLM's TPF)",
    (True, False): "tokens per call after the prefill",
    (False, False): "tokens per call after the prefill, without the end token",
}


def render_state(slots: list[str | None], prefix: str = "", tail: int = 24) -> str:
    """Render a block as text: the last ``tail`` characters of ``prefix``, then each slot's text
    or ``<m>`` where masked, e.g. ``'max([3, 9]) == <m><m>9'``. Whitespace as ``visible`` shows it."""
    return visible(prefix[-tail:] + "".join(MASK_TEXT if s is None else s for s in slots))


def visible(text: str, spaces: bool = False) -> str:
    """``text`` with its whitespace made visible: a newline shows as ⏎ and a tab as ⇥, so a token that is a
    line break is seen, not obeyed. ``spaces=True`` (a token alone in a cell, a prompt whose trailing space
    matters) also shows a space as ␣ and an empty text as ∅: it never looks blank."""
    text = text.replace("\n", "⏎").replace("\t", "⇥")
    return (text.replace(" ", "␣") or "∅") if spaces else text


# The Unicode control pictures (␀ .. ␡) are missing from the fonts the pictures use (DejaVu Sans Mono and the
# browsers' defaults draw a box): a label holding one is drawn with the control's name, marked as a special token is
_CONTROLS = (
    "NUL SOH start end EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB "
    "ESC FS GS RS US SP DEL"
).split()
CONTROL_PICTURES = {chr(0x2400 + i): f"⟨{name}⟩" for i, name in enumerate(_CONTROLS)}  # ␂ -> ⟨start⟩


def drawable(text: str) -> str:
    """``text`` with each control picture (``␂``, the start-of-text mark) written as its name (``⟨start⟩``), so a
    label given by hand shows in every font instead of a box."""
    return "".join(CONTROL_PICTURES.get(c, c) for c in text)


# -- tokens as the pictures show them ---------------------------------------------------
REPLACEMENT = "\ufffd"  # what a tokenizer decodes bytes that are not (yet) a whole character to
BYTE_PIECE = "◌"  # a token that holds only the first bytes of a character; the character shows where it completes


def special_label(text: str) -> str:
    """A special token (``<|im_end|>``, ``<file_sep>``) as the pictures mark it: ``⟨im_end⟩``."""
    return f"⟨{text.strip('<>|') or text}⟩"


def token_label(text: str, special=frozenset()) -> str:
    """One token's text alone, as a cell or a hover shows it: a special token (one of ``special``, the texts of a
    trace's ``special_tokens``) marked, whitespace visible (a leading space is ␣)."""
    return special_label(text) if text in special else visible(text, spaces=True)


def mark_special(text: str, special=frozenset()) -> str:
    """``text`` with every special token in it marked as ``token_label`` marks it (a chat template's prompt)."""
    for token in sorted(special, key=len, reverse=True):
        text = text.replace(token, special_label(token))
    return text


def output_labels(trace) -> list[tuple[str, str]]:
    """Each output token of ``trace`` (an ``sbd_viz.Trace``) as the pictures and the summary show it:
    ``(label, note)``, the label for a cell (special tokens marked, whitespace visible), the note for a hover ("" when
    there is nothing to add).

    A byte-level tokenizer splits a rare character's bytes over tokens, each of which decodes alone to U+FFFD;
    ``output_texts`` reads them in context (``CausalLM.output_texts``). The token that completes the character
    shows it whole; a token before it shows what it completes (a space, or nothing) and ``BYTE_PIECE``."""
    n0, alone = len(trace.prompt_ids), {}
    for s in trace.steps:
        for c in s.commits:
            alone[s.block_start + c.slot - n0] = c.text  # the last commit at a position: the token the output holds
    texts, special, out = trace.output_texts, trace.special_tokens, []
    for i, piece in enumerate(texts):
        own = alone.get(i, piece)
        if piece in special:
            out.append((special_label(piece), f"special token {piece}"))
        elif REPLACEMENT in own and REPLACEMENT not in piece and piece != own:  # a byte piece read in context
            if piece.strip():
                out.append(
                    (
                        visible(piece, spaces=True),
                        f"completes {piece.strip()!r}, a character whose bytes "
                        f"span tokens (alone this token decodes to {own!r})",
                    )
                )
            else:
                j = next((j for j in range(i + 1, len(texts)) if texts[j].strip()), None)
                where = "" if j is None else f" {texts[j].strip()[:1]!r}, which shows whole at output token {j}"
                out.append(
                    (
                        (visible(piece, spaces=True) if piece else "") + BYTE_PIECE,
                        f"the first bytes of a character{where} (alone this token decodes to {own!r})",
                    )
                )
        else:
            out.append((visible(piece, spaces=True), ""))
    return out


def first_difference(a, b) -> int | None:
    """Index of the first place where two sequences (texts, or token id lists) differ: the shorter one's length
    if one continues the other; ``None`` if they are equal."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, (str, list, tuple)):
            raise ValueError(f"{name}: must be a string or a list of token ids, got {type(value).__name__}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
