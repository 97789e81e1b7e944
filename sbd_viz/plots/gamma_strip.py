"""A γ map as a strip under the slider: each piece drawn where it lies on the knob, shaded by tokens per call.

``gamma_strip(gamma_map, current_gamma)`` returns a small HTML string (inline styles only, so it shows the same in the
app, a notebook or a saved page). Reading it without a browser (the tests do): the outer ``div`` carries
``data-pieces``, ``data-decoded``, ``data-complete`` (every piece up to the map's top walked) and ``data-seconds``
(the build's wall time); each piece is a ``div`` of class ``piece`` with ``data-lo`` / ``data-hi`` (exact ends),
``data-kind`` (``decoded``, ``gap``: a stretch the step map did not decode, or ``pending``: not walked yet),
and, for a decoded piece, ``data-tpc`` (tokens per call), ``data-calls``, ``data-ntp`` (``same`` / ``differs`` /
``unknown``), ``data-text-change`` (``1`` where its text differs from the decoded piece just below it) and
``data-gamma``: the slider position inside it that a click moves the slider to. The piece holding
``current_gamma`` has ``data-current='1'``, and a ``div`` of class ``now`` marks that γ.
"""

from __future__ import annotations

import html
import math

from .style import CALL_SCALE, STATE_COLORS, esc
from .ladder_figure import SAFE_COLOR
from ..labels import visible

GAP_FILL = "repeating-linear-gradient(45deg, #EEEEEE 0 4px, #D0D0D0 4px 6px)"  # hatched: not decoded
PENDING_FILL = "#F7F7F7"  # not walked yet: the map is still building


def _shade(tpc: float, top: float) -> str:
    """CALL_SCALE's colour for ``tpc`` tokens per call: 1 the lightest, ``top`` (the map's most) the darkest."""
    (_, a), (_, b) = CALL_SCALE
    t = 0.0 if top <= 1 else min(1.0, max(0.0, (tpc - 1) / (top - 1)))
    rgb = [round(int(a[i:i + 2], 16) + t * (int(b[i:i + 2], 16) - int(a[i:i + 2], 16))) for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02X}" for c in rgb)


def slider_position(piece, step: float | None) -> float | None:
    """The slider position a click on ``piece`` moves to: the multiple of ``step`` inside it nearest its middle
    (the float a slider sends for it, as ``GammaMap``'s step map decodes it); its middle without a step; None if
    no multiple lies inside (a stretch a step map left undecoded holds none)."""
    if step is None:
        mid = (piece.lo + piece.hi) / 2
        return int(round(mid)) if piece.whole and round(mid) in piece else mid
    first, last = math.ceil(piece.lo / step - 1e-9), math.floor(piece.hi / step + 1e-9)
    inside = [v for v in ((int(k * step) if piece.whole else float(f"{k * step:.12g}")) for k in range(first, last + 1))
              if v in piece]
    if not inside:
        return None
    mid = (piece.lo + piece.hi) / 2
    return min(inside, key=lambda v: abs(v - mid))


def _box(left: float, width: float, style: str, attrs: str, title: str) -> str:
    return (f"<div class='piece' {attrs} title='{html.escape(title, quote=True)}' style='position:absolute;top:0;bottom:8px;"
            f"left:{left:.4f}%;width:{width:.4f}%;min-width:2px;box-sizing:border-box;{style}'></div>")


def gamma_strip(gamma_map, current_gamma: float | None = None, ntp_text: str | None = None,
                step: float | None = None) -> str:
    """``gamma_map`` (a ``GammaMap``, complete or still building) as an HTML strip over its knob range ``[lo, hi]``.

    Decoded pieces are shaded by tokens per call (lighter: fewer); a vermillion tick marks where the text changes
    from the piece below; a green bar under a piece says its text is NTP's (``ntp_text``; None: not marked); hatched
    stretches were not decoded (they hold no slider position); a pale stretch is not walked yet. ``current_gamma``
    (None: none) is marked with a black line. ``step``: the slider's step, for the position a click moves to (None:
    the map's own)."""
    lo, hi = gamma_map.lo, gamma_map.hi
    span = hi - lo
    step = gamma_map.step if step is None else step
    pieces = list(gamma_map.pieces)  # a snapshot: a background walk may append while this draws

    def x(value: float) -> float:
        return 0.0 if span <= 0 else 100.0 * (min(max(value, lo), hi) - lo) / span

    decoded = [p for p in pieces if p.decoded]
    top = max((p.trace.tokens_per_call for p in decoded), default=1.0)
    boxes, below = [], None
    for p in pieces:
        left, width = x(p.lo), (100.0 if span <= 0 else x(p.hi) - x(p.lo))
        here = current_gamma is not None and current_gamma in p
        attrs = f"data-lo='{p.lo!r}' data-hi='{p.hi!r}' data-current='{int(here)}'"
        outline = "outline:2px solid #000000;outline-offset:-2px;z-index:1;" if here else ""
        if not p.decoded:
            boxes.append(_box(left, width, f"background:{GAP_FILL};{outline}", attrs + " data-kind='gap'",
                              f"γ in {p}: not decoded (no slider position lies in it)"))
            below = None  # what lies in a stretch not decoded is unknown: no text change is claimed across it
            continue
        t = p.trace
        same = None if ntp_text is None else t.text == ntp_text
        change = below is not None and below.trace.text != t.text
        position = slider_position(p, step)
        attrs += (f" data-kind='decoded' data-tpc='{t.tokens_per_call:.4f}' data-calls='{t.nfe}'"
                  f" data-ntp='{'unknown' if same is None else 'same' if same else 'differs'}'"
                  f" data-text-change='{int(change)}'" + ("" if position is None else f" data-gamma='{position!r}'"))
        style = f"background:{_shade(t.tokens_per_call, top)};cursor:pointer;{outline}"
        if change:
            style += f"border-left:3px solid {STATE_COLORS['diff']};"
        if same:
            style += f"box-shadow:inset 0 -5px 0 {SAFE_COLOR};"
        text = visible(t.text)
        title = (f"γ in {p}: {t.nfe} calls, {t.tokens_per_call:.2f} tokens per call"
                 + ("" if same is None else ", NTP's text" if same else ", not NTP's text")
                 + (", the text changes here" if change else "") + f" · {text[:60]}{'…' if len(text) > 60 else ''}")
        boxes.append(_box(left, width, style, attrs, title))
        below = p
    last = pieces[-1] if pieces else None
    complete = last is not None and last.hi == hi and last.hi_closed
    if not complete:  # the rest of the range is not walked yet
        start = lo if last is None else last.hi
        attrs = f"data-lo='{start!r}' data-hi='{hi!r}' data-kind='pending' data-current='0'"
        boxes.append(_box(x(start), 100.0 - x(start), f"background:{PENDING_FILL};border:1px dashed #BBBBBB;",
                          attrs, "not decoded yet: the map is building"))
    if current_gamma is not None and lo <= current_gamma <= hi:
        boxes.append(f"<div class='now' data-gamma='{current_gamma!r}' style='position:absolute;top:-3px;bottom:5px;"
                     f"left:calc({x(current_gamma):.4f}% - 1px);width:2px;background:#000000;z-index:2;"
                     "pointer-events:none'></div>")
    texts = len({p.trace.text for p in decoded})
    gaps = sum(not p.decoded for p in pieces)
    said = (_count(len(decoded), "piece") + " decoded" + (f" ({_count(texts, 'text')})" if decoded else "")
            + (f", {_count(gaps, 'stretch', 'stretches')} not decoded" if gaps else "")
            + (f" · built in {gamma_map.seconds:.1f} s, {gamma_map.calls} calls" if complete else " · building…"))
    scale = f"lighter = fewer tokens per call (1.00 to {top:.2f})" if decoded else ""
    return (f"<div class='sbd-strip' data-pieces='{len(pieces)}' data-decoded='{len(decoded)}' "
            f"data-complete='{str(complete).lower()}' data-seconds='{gamma_map.seconds:.3f}' "
            "style='font-size:12px;color:#555555'>"
            f"<div class='track' style='position:relative;height:30px;margin:4px 0'>{''.join(boxes)}</div>"
            f"<div style='display:flex;justify-content:space-between'><span>{lo:g}</span><span>{hi:g}</span></div>"
            f"<div>γ map: {esc(said)}</div>"
            f"<div>{esc(scale)}{' · green bar: NTP’s text' if ntp_text is not None and decoded else ''}"
            f"{' · hatched: not decoded' if gaps else ''} · click a piece to show it</div></div>")


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 piece``, ``2 pieces``."""
    return f"{n} {one if n == 1 else many or one + 's'}"
