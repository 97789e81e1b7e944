"""What the app shows, as HTML and Markdown strings: the metric cards, the two texts, the view while decoding,
and one call in words. Pure functions of a session's decode (``app.state.Session``, which ``app.Handlers.decode``
keeps per session); the words and numbers come from ``sbd_viz.trace.words``, and this module adds only markup.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from .. import tasks
from ..analysis import roofline
from ..analysis.gamma_map import format_range
from ..trace.labels import first_difference, visible
from ..trace.words import Measure, measures, step_text

# The roofline projection beside the CPU's measured speedup: which GPU, model shape and batch.
PROJECTION: dict[str, Any] = dict(hardware="h100-fp8", model="paper-8b", batch=1)
PROJECTION_BATCHES = (1, 4, 16, 64)
WALL_CLOCK = ("speedup · wall clock", "wall clock")  # the seconds' card: the projection goes after it


def _esc(text: str) -> str:
    return html.escape(visible(text))


def _text(text: str) -> str:
    """Model or user text for a ``pre-wrap`` cell: a line break is marked ⏎ and kept, so code keeps its lines and
    indentation; ``<bdi>`` isolates it, so a right-to-left override inside it (U+202E) cannot reverse the page."""
    return "<bdi>" + html.escape(text.replace("\n", "⏎\n").replace("\t", "⇥\t")) + "</bdi>"


def _card(label: str, value: str, sub: str = "", cls: str = "") -> str:
    return (
        f"<div class='card'><div class='label'>{label}</div><div class='value {cls}'>{value}</div>"
        f"<div class='sub'>{sub}</div></div>"
    )


def measure_card(measure: Measure) -> str:
    """A ``summary.Measure`` as a card; its verdict colours the value."""
    return _card(html.escape(measure.label), html.escape(measure.value), html.escape(measure.note), measure.verdict)


def projection_card(trace, projection: dict) -> str:
    """This decode's calls costed by the roofline model (sbd_viz.analysis.roofline) for a GPU, model and batch."""
    p = roofline.project(trace, projection["hardware"], projection["model"], projection["batch"])
    return _card(
        f"projected · {html.escape(p['hardware'])}",
        f"{p['speedup']:.2f}×",
        f"{html.escape(p['model'])}, batch {p['batch']}: {p['sbd_calls']} calls vs "
        f"{p['ntp_calls']} one token per call (roofline)",
    )


def range_card(trace) -> str:
    """A greedy decode's γ range (``Trace.gamma_range``): every γ in it gives this exact decode. The card rounds the
    ends (``Interval``'s own text); its hover shows them exactly (``gamma_map.format_range``)."""
    r = trace.gamma_range
    exact = format_range(r.lo, r.hi, r.lo_closed, r.hi_closed)
    return (
        f"<div class='card' title='{html.escape(exact, quote=True)}'><div class='label'>γ range</div>"
        f"<div class='value range'>{html.escape(str(r))}</div>"
        f"<div class='sub'>this exact decode for every γ in {html.escape(str(r))}</div></div>"
    )


def knob_name(trace) -> str | None:
    """The setting its decoder's spec names as its knob (``"gamma"`` for SBD), None if it has none; ``"gamma"`` for a
    trace of a decoder this process does not know (its recorded γ range is all there is to go by)."""
    from ..decoders.registry import get_decoder

    try:
        spec = get_decoder(trace.config.get("decoder"))
    except ValueError:
        return "gamma"
    return None if spec.knob is None else spec.knob.name


def knob_is_gamma(trace) -> bool:
    """Whether the decoder that wrote ``trace`` is moved by the commit rule's γ (its spec's knob): a decoder built on
    SBD's block loop with a knob of its own (a plugin's ``slots``) records a γ range that no slider of it moves."""
    return knob_name(trace) == "gamma"


def metrics_html(session) -> str:
    """The headline numbers of one decode (a ``Session``'s) beside NTP on the same prompt (NTP may still be
    running): the library's measures, the roofline projection after the speedups, and the suite's verdict."""
    trace, ntp = session.trace, session.ntp
    # a speedup in seconds only from side-by-side runs (the "time it" button: session.timing); else the seconds
    shown = measures(
        trace,
        ntp,
        seconds=session.seconds,
        ntp_seconds=session.ntp_seconds,
        pending=ntp is None and not session.no_ntp,
        label=session.label,
        timing=session.timing,
    )  # no_ntp: a model without NTP
    if ntp is not None and session.ntp_cached and session.timing is None:  # NTP: once per prompt and length
        shown = [
            m._replace(note=m.note.replace("timed apart", "timed apart, on the first decode of this prompt"))
            if m.label == "wall clock"
            else m
            for m in shown
        ]
    from_map = session.from_map and session.timing is None
    if from_map:  # nothing was decoded for this move: its seconds would be another decode's
        shown = [
            m._replace(value="γ map", note="answered from this prompt's γ map: no model call for this move")
            if m.label == "wall clock"
            else m
            for m in shown
        ]
    cards = [measure_card(m) for m in shown]
    weights = weights_card(trace)
    if weights:
        cards.append(weights)
    after_speed = next((i + 1 for i, m in enumerate(shown) if m.label in WALL_CLOCK), len(cards))
    cards.insert(after_speed, projection_card(trace, session.projection))
    if trace.gamma_range is not None and knob_is_gamma(trace):
        cards.insert(after_speed + 1, range_card(trace))
    item = session.item
    if item is None:
        cards.append(_card("answer", "—", "not a suite prompt: unscored"))
    elif tasks.score(item, trace.text):
        cards.append(_card("answer", "✓ correct", f"expected {html.escape(item.answer)}", "good"))
    else:
        cards.append(_card("answer", "✗ wrong", f"expected {html.escape(item.answer)}", "bad"))
    # what was decoded, for a script (and a test) to tell this decode's cards from the last one's
    said = {k: trace.config[k] for k in ("decoder", "gamma") if k in trace.config}
    knob = knob_name(trace)
    if knob in trace.config:  # the value of the setting the main slider moves for this decoder
        said["knob"] = trace.config[knob]
    said["prompt"] = session.prompt
    return (
        f"<div class='cards' data-nfe='{trace.nfe}' data-tokens='{trace.n_tokens}' "
        + "".join(f"data-{k}='{html.escape(str(v), quote=True)}' " for k, v in said.items())
        + f"data-from-map='{int(bool(from_map))}' "
        f"data-ntp='{'none' if session.no_ntp else 'pending' if ntp is None else ntp.nfe}'>"
        f"{''.join(cards)}</div>"
    )


def weights_card(trace) -> str:
    """Which weights wrote the decode, for a model with an SBD adapter on a frozen base (``trace.meta["base_model"]``):
    a decoder that reads causal logits only ran the base (the adapter is off on causal rows); an SBD decoder drafted
    with the adapter on the block's rows (verified SBD: checked by the base, so its text is the base's)."""
    from ..decoders.registry import get_decoder

    base = trace.meta.get("base_model")
    if not base:
        return ""
    try:
        spec = get_decoder(trace.config.get("decoder"))
    except ValueError:
        return ""
    if spec.model == "causal":
        return _card("weights", html.escape(base), "the base alone: the adapter is off on causal rows")
    checked = "; the base checked every draft" if trace.config.get("verify") else ""
    return _card("weights", f"{html.escape(base)} + adapter", f"the adapter on the block's rows only{checked}")


def progress_html(steps) -> str:
    """The cards while decoding: calls and slots committed so far."""
    tokens = sum(len(s.commits) for s in steps)
    return (
        f"<div class='cards' data-progress='{len(steps)}'>{_card('model calls', str(len(steps)), 'decoding…')}"
        f"{_card('slots committed', str(tokens), f'{tokens / len(steps):.2f} per call so far')}</div>"
    )


def filling_html(prompt: str, steps, label: str = "SBD") -> str:
    """The text so far while decoding: committed slots, and ▒ for slots of the open block still masked."""
    from ..plots import MASK_GLYPH

    text, first = {}, steps[0].block_start
    for s in steps:
        for c in s.commits:
            text[s.block_start + c.slot] = c.text
    end = steps[-1].block_start + steps[-1].block_size
    body = _esc("".join(text.get(p, MASK_GLYPH) for p in range(first, end)))
    return (
        f"<table><tr><td class='who'>{html.escape(label)} (decoding)</td><td>{body}</td></tr></table>"
        f"<div class='note'>prompt: <code><bdi>{_esc(prompt[-80:])}</bdi></code></div>"
    )


def texts_html(session) -> str:
    """The decoder's and NTP's outputs (a ``Session``'s) one above the other, from the first difference on
    highlighted."""
    a, ntp, who = session.trace.text, session.ntp, session.label
    diff = first_difference(a, ntp.text) if ntp is not None else None

    def row(who, text, mark_from):
        if not text:
            body = "∅"
        elif mark_from is None:
            body = _text(text)
        elif mark_from >= len(text):  # the other text is longer: mark where this one ends
            body = _text(text) + "<mark>&nbsp;</mark>"
        else:
            body = _text(text[:mark_from]) + "<mark>" + _text(text[mark_from:]) + "</mark>"
        return f"<tr><td class='who'>{who}</td><td class='text'>{body}</td></tr>"

    rows = [row(html.escape(who), a, diff), row("NTP (greedy)", "running…" if ntp is None else ntp.text, diff)]
    if session.no_ntp:  # a block-diffusion model: its text alone
        rows = [row(html.escape(who), a, None)]
    if session.item is not None:
        rows.append(row("expected", session.item.answer, None))
    note = (
        "no NTP decode for this model"
        if session.no_ntp
        else "NTP is running"
        if ntp is None
        else f"{html.escape(who)} and NTP wrote the same text"
        if diff is None
        else f"{html.escape(who)} and NTP first differ at character {diff} (highlighted)"
    )
    return (
        f"<table>{''.join(rows)}</table><div class='note'>prompt: "
        f"<code><bdi>{_esc(session.trace.prompt[-80:])}</bdi></code> · {note}</div>"
    )


def step_markdown(trace, step) -> str:
    """One call in words (``summary.step_text``): its head line in bold, the rest in a code block, which keeps
    the before/after lines aligned and shows tokens as they are (no Markdown inside)."""
    head, rest = step_text(trace, step).split("\n", 1)
    return f"**{head}**\n\n```\n{rest}\n```"


def fit(fig):
    """Let a figure take its container's width: the library lays figures out at fixed pixel sizes."""
    return None if fig is None else fig.update_layout(width=None, autosize=True)


GLOSSARY = Path(__file__).resolve().parents[1] / "GLOSSARY.md"  # package data: a wheel carries it


def heading_id(text: str) -> str:
    """A heading's anchor as GitHub makes it (the glossary's links are written for it): lower case, punctuation
    dropped, spaces to hyphens ("call / NFE" -> "call--nfe", "γ (gamma)" -> "γ-gamma")."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def glossary_markdown(path: Path = GLOSSARY) -> str:
    """The glossary (``sbd_viz/GLOSSARY.md``, package data) for the app's Glossary tab, each heading given the id
    its links name (``heading_id``), so a click on a link scrolls to it; if the file is missing, says where the
    glossary is."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "The glossary is `sbd_viz/GLOSSARY.md` in the sbd_viz repository."
    seen: dict[str, int] = {}
    lines = []
    for line in text.splitlines():
        match = re.fullmatch(r"(#{1,6}) (.+?)\s*#*\s*", line)
        if match:
            level, title = len(match[1]), match[2]
            anchor = heading_id(title)
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            anchor = anchor if n == 0 else f"{anchor}-{n}"  # GitHub numbers a repeated heading
            line = f"<h{level} id='{html.escape(anchor, quote=True)}'>{html.escape(title)}</h{level}>\n"
        lines.append(line)
    return "\n".join(lines) + "\n"
