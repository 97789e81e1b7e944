"""One prompt of the static site, precomputed: NTP's text, and its exact γ map for plain and for verified SBD as the
app's scrubber draws it (``app.scrubber.payload``), each decoded piece with its failure table (the app's rows), the
block at each call the table names, and its decode order.

``Prompt`` says what to decode; ``entry(model, prompt)`` decodes it and returns plain data (JSON as it is);
``default_prompts(model)`` are the app's examples for that model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ..analysis.evaluation import STOP
from ..analysis.gamma_map import gamma_map
from ..analysis.incoherence import failure_events
from ..analysis.order import decode_order, kept_commits
from ..app.panels import FAILURE_COLUMNS, failure_label, failure_rows
from ..app.scrubber import payload
from ..decoders.ntp import decode_ntp
from ..decoders.registry import default_decoder
from ..decoders.rules import COMMIT_RULES, DEFAULT_RULE
from ..decoders.verified.settings import MODES, fastest_mode
from ..models.causal_lm import CausalLM, chat_prompt
from ..trace.data import Trace
from ..trace.labels import token_label
from ..trace.words import step_text

TEXT_MAX_NEW_TOKENS = 32  # a 135M model's γ map on a CPU: a few hundred calls at this length (docs/static_site.md)
MAX_NEW_TOKENS = 64  # the character model's answers end at their line's end, well before this (the app's default)


@dataclass(frozen=True)
class Prompt:
    """A prompt of the site: ``text`` as the user wrote it, ``chat`` (apply the model's chat template to it),
    ``label`` (what kind of prompt it is, shown on its card)."""

    text: str
    chat: bool = False
    label: str = ""


def text_model(model) -> bool:
    """A pretrained LM (SmolLM2, with or without an SBD adapter): free text, a chat template, no stop at a newline."""
    return isinstance(model, CausalLM)


def sbd_decoder(model) -> str:
    """The decoder whose γ maps the site draws: the model's first (``default_decoder``), when it is moved by the
    commit rule's γ and can be verified (SBD); a model without one (a pretrained LM without SBD training) is refused
    by name."""
    spec = default_decoder(model)
    if spec.knob is None or spec.knob.name != "gamma" or "verify" not in spec.takes:
        raise ValueError(
            f"model: {model.name} is not decoded by SBD (a pretrained LM without SBD training), so it has no γ "
            "map to show; use an SBD model (sbd-char-5m) or one with an SBD adapter (smollm2-135m-sbd)"
        )
    return spec.name


def default_prompts(model) -> list[Prompt]:
    """The app's examples for ``model``: an SBD adapter's (a chat answer, code, a quote), else the character model's
    suite items, each labelled as the app labels it (decoded at the app's defaults)."""
    if text_model(model):
        from ..app.causal import examples

        return [Prompt(text, chat, label) for text, chat, label in examples(model)]
    from .. import tasks
    from ..app.examples import EXAMPLES, example_label

    suite = {item.prompt: item for item in tasks.load_suite("pyasserts", "test")}
    return [Prompt(text, False, example_label(model, suite, text)) for text in EXAMPLES]


def _number(value: float) -> float | None:
    """A float for JSON: NaN (an undefined measure) as None."""
    return None if isinstance(value, float) and math.isnan(value) else value


def call_view(trace: Trace, call: int) -> dict:
    """The blocks ``call`` worked on, as they stood after it: per block its ``cells``, one ``[label, state]`` per slot
    (``done``: committed by an earlier call, ``now``: by this one, ``gap``: by this one with masked slots to its
    left, ``masked``), and ``words``: the call in words (``trace.words.step_text``)."""
    steps = [s for s in trace.steps if s.call == call]
    if not steps:
        raise ValueError(f"call: {call!r} is not a call of this decode (it made {trace.nfe})")
    blocks = []
    for step in steps:
        now = {c.slot: c for c in step.commits}
        cells = []
        for slot, text in enumerate(trace.block_state(step, after=True)):
            if text is None:
                cells.append(["", "masked"])
            elif slot in now:
                cells.append([token_label(text, trace.special_tokens), "gap" if now[slot].gap else "now"])
            else:
                cells.append([token_label(text, trace.special_tokens), "done"])
        blocks.append(dict(block=step.block, step=step.step, cells=cells))
    return dict(call=call, blocks=blocks, words="\n\n".join(step_text(trace, s) for s in steps))


def failures(model, trace: Trace) -> dict:
    """The app's failure table for ``trace``: its ``label``, ``columns`` and ``rows`` (``app.panels``), and ``calls``:
    the block at each call a row names (``call_view``), so a row opens at its call with no model."""
    events = failure_events(model, trace)
    rows = failure_rows(events)
    calls = sorted({e["call"] for e in events})
    return dict(
        label=failure_label(events, trace),
        columns=FAILURE_COLUMNS,
        rows=[[_number(v) if isinstance(v, float) else v for v in row] for row in rows],
        calls={str(c): call_view(trace, c) for c in calls},
    )


def order(trace: Trace) -> dict:
    """The decode-order picture's data: ``points``, one ``[position, call, gap]`` per kept commit, and its Kendall τ
    and out-of-order rate (``analysis.order``; None where undefined)."""
    measured = decode_order(trace)
    return dict(
        points=[[k.index, k.step.call, k.commit.gap] for k in kept_commits(trace)],
        tau=_number(measured.kendall_tau),
        out_of_order=_number(measured.out_of_order_rate),
        calls=trace.nfe,
    )


def settings(model, prompt: Prompt, max_new_tokens: int | None, block_size: int | None) -> dict:
    """What every decode of ``prompt`` shares: the decoded text (the chat template applied if asked), the rule, block
    size, length and stop; a text model writes ``TEXT_MAX_NEW_TOKENS`` and stops at its end token, the character
    model ``MAX_NEW_TOKENS`` and stops at the end of its line, as the app does."""
    text_lm = text_model(model)
    if max_new_tokens is None:
        max_new_tokens = TEXT_MAX_NEW_TOKENS if text_lm else MAX_NEW_TOKENS
    return dict(
        prompt=chat_prompt(model, prompt.text) if prompt.chat else prompt.text,
        rule=DEFAULT_RULE,
        block_size=model.block_size if block_size is None else block_size,
        max_new_tokens=max_new_tokens,
        stop=None if text_lm else STOP,
    )


def gamma_payload(model, given: dict, ntp: Trace, verify: bool, step: float | None) -> tuple[dict, int]:
    """One γ map (plain or verified SBD) as the scrubber's payload, each decoded piece with its ``failures`` and
    ``order``; and the model calls it ran. Verified SBD drafts in the mode measured fastest on ``model``
    (``fastest_mode``), which the payload names (``mode``), as the app's page starts on it."""
    rule = given["rule"]
    mode = fastest_mode(model) if verify else None
    built = gamma_map(
        model,
        given["prompt"],
        rule=rule,
        step=step,
        block_size=given["block_size"],
        max_new_tokens=given["max_new_tokens"],
        stop=given["stop"],
        decoder=sbd_decoder(model),
        verify=verify,
        **(MODES[mode] if mode else {}),
    )
    data = payload(built, COMMIT_RULES[rule].default, ntp.text)
    data["mode"] = mode
    for row, piece in zip(data["pieces"], built.pieces):
        if piece.trace is not None:
            row.update(failures=failures(model, piece.trace), order=order(piece.trace))
    return data, built.calls


def entry(
    model,
    prompt: Prompt,
    key: str,
    max_new_tokens: int | None = None,
    block_size: int | None = None,
    step: float | None = None,
) -> dict:
    """``prompt`` on ``model``, every view of the site precomputed (see the module), as plain data; ``key`` names it
    in the site. ``step`` None: the exact γ maps (every piece); a number: only the pieces holding its multiples."""
    sbd_decoder(model)  # a model without SBD is refused before any call
    started = time.perf_counter()
    given = settings(model, prompt, max_new_tokens, block_size)
    ntp = decode_ntp(model, given["prompt"], max_new_tokens=given["max_new_tokens"], stop=given["stop"])
    maps, calls = {}, ntp.nfe
    for name, verify in (("plain", False), ("verified", True)):
        maps[name], spent = gamma_payload(model, given, ntp, verify, step)
        calls += spent
    return dict(
        key=key,
        model=model.name,
        text=prompt.text,
        chat=prompt.chat,
        label=prompt.label,
        settings={**given, "stop": list(given["stop"] or ()), "gamma": COMMIT_RULES[given["rule"]].default},
        ntp=dict(text=ntp.text, calls=ntp.nfe, tokens=ntp.n_tokens),
        maps=maps,
        calls=calls,
        seconds=round(time.perf_counter() - started, 1),
    )
