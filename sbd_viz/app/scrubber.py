"""The live γ scrubber: a prompt's γ map sent to the page once, so a slider move switches the picture in the browser.

``payload`` turns a γ map into the scrubber's plain data, ``Feed`` sends it to each session's page, ``component``
draws it. How it works, and its ``data-*`` attributes for reading it without a browser: docs/app_internals.md.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from pathlib import Path

from ..plots.ladder_figure import SAFE_COLOR
from ..plots.style import CALL_SCALE, MASK_GLYPH, STATE_COLORS
from ..trace.data import Trace
from ..trace.labels import COUNT_LABELS, output_labels, token_label

# a cell's flags (bits): a gap fill (masked slots to its left when committed), not in the output (after the stop, or
# a verified draft replaced later), NTP's exact token (verified decoding)
GAP, DROPPED, NTP_TOKEN = 1, 2, 4


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def step_shades(n: int) -> list[list[str]]:
    """``n`` (fill, ink) colour pairs for a block's steps 0..n-1: CALL_SCALE from its lightest (the block's first
    call) to its darkest, with dark or white ink to read on each."""
    shades = []
    for i in range(n):
        fill = _mix(0.0 if n <= 1 else i / (n - 1))
        r, g, b = _rgb(fill)
        shades.append([fill, "#222222" if (0.299 * r + 0.587 * g + 0.114 * b) / 255 > 0.55 else "#FFFFFF"])
    return shades


def _end(value: float):
    """A range end for JSON: an unbounded end as None (JSON has no infinity)."""
    return None if isinstance(value, float) and math.isinf(value) else value


def _mix(t: float) -> str:
    """CALL_SCALE at ``t`` in [0, 1]: its lightest at 0, its darkest at 1."""
    a, b = (_rgb(c) for _, c in CALL_SCALE)
    return "#" + "".join(f"{round(x + t * (y - x)):02X}" for x, y in zip(a, b))


def block_cells(trace: Trace) -> list[dict]:
    """The block fill's final state: per block, ``first`` (its first call) and ``cells``, one per slot: ``[label,
    call, flags]`` for the last commit at that slot (``flags``: ``GAP``, ``DROPPED``, ``NTP_TOKEN``), None for a slot
    left masked (a rollback dropped it and nothing wrote it again)."""
    labels = output_labels(trace)
    n0, special = len(trace.prompt_ids), trace.special_tokens
    rows: dict[int, dict] = {}
    for s in trace.steps:
        row = rows.setdefault(s.block, dict(block=s.block, first=s.call, cells=[None] * s.block_size))
        for c in s.commits:
            kept = trace.kept(s, c.slot)
            out = s.block_start + c.slot - n0
            label = labels[out][0] if kept else token_label(c.text, special)
            flags = (GAP if c.gap else 0) | (0 if kept else DROPPED) | (NTP_TOKEN if c.ntp else 0)
            row["cells"][c.slot] = [label, s.call, flags]
        for slot in s.rollback.dropped if s.rollback is not None else ():
            row["cells"][slot] = None
    return [rows[b] for b in sorted(rows)]


def payload(gamma_map, current_gamma: float | None = None, ntp_text: str | None = None) -> dict:
    """``gamma_map`` (a ``GammaMap``, complete or still building) as the scrubber's plain data.

    ``lo``, ``hi``, ``step``: the map's range and slider step; ``gamma``: the γ the page shows now (None: none);
    ``complete``: every piece up to the map's top walked; ``shades``: the step colours (``step_shades``), as many
    as the most steps any block took; ``pieces``: ascending, contiguous over ``[lo, hi]`` once complete, each with
    ``lo``, ``hi``, ``lo_closed``, ``hi_closed``, ``range`` (its text, rounded), ``exact`` (its exact ends) and
    ``decoded``; a decoded piece adds ``calls``, ``tokens``, ``tpc`` (tokens per call), ``gap_fills`` (kept ones,
    as the cards count them), ``ntp`` (its text is NTP's: true, false, or None when ``ntp_text`` is None),
    ``text``, ``blocks`` (``block_cells``) and ``shade`` (its colour on the strip: darker = more tokens per call);
    ``count_label``: what ``tpc`` counts, named as every view names it (``COUNT_LABELS``)."""
    pieces = list(gamma_map.pieces)  # a snapshot: a background walk may append while this reads
    decoded = [p for p in pieces if p.decoded]
    top = max((p.trace.tokens_per_call for p in decoded), default=1.0)
    out, steps = [], 1
    for p in pieces:
        row = dict(
            lo=_end(p.lo),
            hi=_end(p.hi),
            lo_closed=p.lo_closed,
            hi_closed=p.hi_closed,
            range=str(p.interval),
            exact=str(p),
            decoded=p.decoded,
        )
        if p.decoded:
            t = p.trace
            blocks = block_cells(t)
            steps = max([steps] + [len(t.block_steps(b["block"])) for b in blocks])
            row.update(
                calls=t.nfe,
                tokens=t.n_tokens,
                tpc=round(t.tokens_per_call, 4),
                gap_fills=len(t.kept_gap_fills()),
                ntp=None if ntp_text is None else t.text == ntp_text,
                text=t.text,
                blocks=blocks,
                shade=_mix(0.0 if top <= 1 else min(1.0, max(0.0, (t.tokens_per_call - 1) / (top - 1)))),
            )
        out.append(row)
    complete = bool(pieces) and pieces[-1].hi == gamma_map.hi and pieces[-1].hi_closed
    return dict(
        lo=_end(gamma_map.lo),
        hi=_end(gamma_map.hi),
        step=gamma_map.step,
        gamma=current_gamma,
        complete=complete,
        shades=step_shades(steps),
        pieces=out,
        colors=dict(future=STATE_COLORS["future"], safe=SAFE_COLOR, mask=MASK_GLYPH),
        count_label=COUNT_LABELS[(True, True)],
    )


class Feed:
    """The scrubber's value per session (``page.Handlers``' session dict), from the γ maps (``map_builder.GammaMaps``):
    its map's ``payload`` as JSON, or "" when the session has no map (nothing decoded yet, a decoder without the
    commit rule's γ, sampling) or its map failed. Each state of a map (its pieces so far, NTP's text known or not,
    building or done) goes to a session's page once: a later decode answered from the same map sends nothing
    (``gr.skip()``), as the page moves through the pieces it holds by itself. ``keep``: the sessions remembered, the
    least recently served dropped first."""

    def __init__(self, maps, keep: int = 64):
        self.maps, self.keep = maps, keep
        self._sent: OrderedDict = OrderedDict()  # session's map id -> (the map, its state) its page holds
        self._lock = threading.Lock()  # Gradio runs handlers on several threads

    def scrubber(self, session):
        """The value for ``session`` (see the class): JSON, "", or ``gr.skip()`` when its page holds it already."""
        import gradio as gr

        map_id = session.map_id if session is not None and session.trace is not None else None
        found = self.maps.current(map_id) if map_id is not None else None
        if found is None or found[1] == "failed":
            with self._lock:
                self._sent.pop(map_id, None)
            return ""
        gamma_map, state = found
        ntp_text = None if session.ntp is None else session.ntp.text
        known = (len(gamma_map.pieces), ntp_text, state in ("queued", "building"))
        with self._lock:
            sent = self._sent.get(map_id)
        if sent is not None and sent[0] is gamma_map and sent[1] == known:
            return gr.skip()
        data = payload(gamma_map, session.trace.config.get("gamma"), ntp_text)
        data["building"] = known[2]
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        with self._lock:
            self._sent[map_id] = (gamma_map, known)
            self._sent.move_to_end(map_id)
            while len(self._sent) > self.keep:
                self._sent.popitem(last=False)
        return text


TEMPLATE = """<div class='sbd-scrub' data-piece='-1' data-pieces='0' data-drawn='0'>
<div class='empty'>Decode a prompt: once its γ map is built, drag γ here (or the γ slider) to scrub through its
decodes.</div>
<div class='live' hidden>
<div class='head'><b>γ <span class='g'></span></b> <span class='nums'></span></div>
<div class='rail'><div class='track'></div><input type='range' aria-label='scrub γ'></div>
<div class='ends'><span class='lo'></span><span class='hint'></span><span class='hi'></span></div>
<div class='fill'></div>
<div class='text'></div>
<div class='legend'></div>
</div></div>"""

# The browser part lives in two files beside this module, which the static site (sbd_viz.site) ships as they are:
# ``scrubber.js`` (``sbdScrubber``: parse the value once per update, the pieces sent once per map, then redraw from it
# on every move; a piece's block-fill markup is built on first show and kept, so a move is a lookup and one
# innerHTML) and ``scrubber.css``.
SCRIPT_FILE = Path(__file__).resolve().parent / "scrubber.js"
STYLE_FILE = Path(__file__).resolve().parent / "scrubber.css"
CSS_TEMPLATE = STYLE_FILE.read_text(encoding="utf-8")
# the app's glue: Gradio's gr.HTML runs it with ``element``, ``props``, ``trigger`` and ``watch`` in scope
JS = (
    SCRIPT_FILE.read_text(encoding="utf-8")
    + """
const SLIDER = '__SLIDER__';
const scrub = sbdScrubber(element, {slider: SLIDER, release: (gamma) => trigger('release', {gamma})});
scrub.load(props.value);
watch('value', () => scrub.load(props.value));
"""
)


def follow_js(slider_id: str = "sbd-gamma") -> str:
    """The page's γ slider's ``change`` event, in the browser only (``slider.change(None, inputs=[slider],
    js=follow_js())``): it passes every new value, the server's moves included, to the scrubber that follows it."""
    _check_id(slider_id)
    return f"(g) => {{ document.dispatchEvent(new CustomEvent('sbd-scrub-{slider_id}', {{detail: g}})); return g; }}"


def _check_id(slider_id: str) -> None:
    if not isinstance(slider_id, str) or not slider_id.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"slider_id: must be an elem_id of letters, digits, - and _, got {slider_id!r}")


def component(slider_id: str = "sbd-gamma", elem_id: str = "sbd-scrubber", visible: bool = True):
    """The scrubber as a ``gr.HTML``: its value is ``Feed.scrubber``'s JSON ("" shows how to start). ``slider_id``:
    the elem_id of the page's γ slider, whose moves it follows too (wire ``follow_js`` to that slider's ``change``
    for the moves the server makes). Its ``release`` event carries the released γ as the event data's ``gamma``
    (wire it to move that slider, as a click on the γ strip does)."""
    import gradio as gr

    _check_id(slider_id)
    return gr.HTML(
        "",
        html_template=TEMPLATE,
        css_template=CSS_TEMPLATE,
        js_on_load=JS.replace("__SLIDER__", slider_id),
        elem_id=elem_id,
        visible=visible,
    )
