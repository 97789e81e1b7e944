"""A γ map as a strip under the slider: each piece drawn in order along the knob, shaded by tokens per call.

``gamma_strip(gamma_map, current_gamma)`` returns a small HTML string (inline styles only, so it shows the same in the
app, a notebook or a saved page). Its ``data-*`` attributes, for reading it without a browser: docs/figures.md.
"""

from __future__ import annotations

import html
import math

from ..decoders.verified.settings import mode_label
from ..trace.labels import COUNT_LABELS, visible
from .ladder_figure import SAFE_COLOR
from .style import CALL_SCALE, STATE_COLORS, esc

GAP_FILL = "repeating-linear-gradient(45deg, #EEEEEE 0 4px, #D0D0D0 4px 6px)"  # hatched: not decoded
PENDING_FILL = "#F7F7F7"  # not walked yet: the map is still building


def _shade(tpc: float, top: float) -> str:
    """CALL_SCALE's colour for ``tpc`` tokens per call: 1 the lightest, ``top`` (the map's most) the darkest."""
    (_, a), (_, b) = CALL_SCALE
    t = 0.0 if top <= 1 else min(1.0, max(0.0, (tpc - 1) / (top - 1)))
    rgb = [round(int(a[i : i + 2], 16) + t * (int(b[i : i + 2], 16) - int(a[i : i + 2], 16))) for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02X}" for c in rgb)


MIN_PIECE = 4.0  # the narrowest a decoded piece is drawn, in % of the strip (about 35 px of an 880 px strip)
MIN_GAP = 1.0  # the narrowest a stretch not decoded is drawn


def piece_spans(pieces, lo: float, hi: float) -> list[tuple[float, float]]:
    """Where each of ``pieces`` is drawn on a strip over ``[lo, hi]``: ``(left, width)`` in % of the strip, in order,
    side by side, never overlapping. A piece takes its share of the range, but a decoded piece at least ``MIN_PIECE``
    and a stretch not decoded at least ``MIN_GAP`` (scaled down together when the pieces are too many for that): the
    others give up width in proportion to their length. What the pieces leave of 100 % (from the last one's end) is
    the part not walked yet, which gives up width like a piece."""
    if not pieces:
        return []
    last = min(max(p.hi for p in pieces), hi)
    length = [max(0.0, min(p.hi, hi) - max(p.lo, lo)) for p in pieces] + [max(0.0, hi - last)]
    least = [MIN_PIECE if p.decoded else MIN_GAP for p in pieces] + [0.0]
    if sum(length) <= 0:  # a range of one value: the pieces share the strip
        return [(100.0 * i / len(pieces), 100.0 / len(pieces)) for i in range(len(pieces))]
    if sum(least) > 90.0:  # too many pieces for the minimums: all shrink alike
        least = [m * 90.0 / sum(least) for m in least]
    widths = [0.0] * len(length)
    fixed: set[int] = set()
    while True:  # the pieces below their minimum take it; the rest share what is left by length, until none is short
        free = 100.0 - sum(least[i] for i in fixed)
        rest = sum(length[i] for i in range(len(length)) if i not in fixed)
        short = set()
        for i in range(len(length)):
            widths[i] = least[i] if i in fixed else free * length[i] / rest
            if i not in fixed and widths[i] < least[i]:
                short.add(i)
        if not short:
            break
        fixed |= short
    return [(sum(widths[:i]), widths[i]) for i in range(len(pieces))]


def slider_position(piece, step: float | None) -> float | None:
    """The slider position a click on ``piece`` moves to: the multiple of ``step`` inside it nearest its middle
    (the float a slider sends for it, as ``GammaMap``'s step map decodes it); its middle without a step; None if
    no multiple lies inside (a stretch a step map left undecoded holds none)."""
    if step is None:
        mid = (piece.lo + piece.hi) / 2
        return round(mid) if piece.whole and round(mid) in piece else mid
    first, last = math.ceil(piece.lo / step - 1e-9), math.floor(piece.hi / step + 1e-9)
    inside = [
        v
        for v in ((int(k * step) if piece.whole else float(f"{k * step:.12g}")) for k in range(first, last + 1))
        if v in piece
    ]
    if not inside:
        return None
    mid = (piece.lo + piece.hi) / 2
    return min(inside, key=lambda v: abs(v - mid))


def _box(left: float, width: float, style: str, attrs: str, title: str) -> str:
    """A piece's box (a white right edge tells two pieces of one shade apart)."""
    return (
        f"<div class='piece' {attrs} title='{html.escape(title, quote=True)}' "
        f"style='position:absolute;top:0;bottom:8px;left:{left:.4f}%;width:{width:.4f}%;"
        f"box-sizing:border-box;border-right:1px solid #FFFFFF;{style}'></div>"
    )


# The marks a strip can draw, each with its legend swatch (inline CSS) and what it says
CHANGE_MARK = f"border-left:3px solid {STATE_COLORS['diff']};"
NTP_MARK = f"box-shadow:inset 0 -5px 0 {SAFE_COLOR};"
CURRENT_MARK = "outline:2px solid #000000;outline-offset:-2px;"


def _legend(marks: list[str], top: float) -> str:
    """One line explaining each mark the strip draws (``marks``, in order), each beside a swatch drawn as the
    strip draws it."""
    light = CALL_SCALE[0][1]  # the shade of 1 token per call
    swatch = "display:inline-block;width:18px;height:11px;vertical-align:-1px;margin-right:3px;box-sizing:border-box;"
    says = {
        "shade": (
            f"background:linear-gradient(90deg,{light},{_shade(top, top)});",
            f"{COUNT_LABELS[(True, True)]}: lighter = fewer (1.00 to {top:.2f})",
        ),
        "current": (f"background:#FFFFFF;{CURRENT_MARK}", "the piece shown"),
        "now": ("background:linear-gradient(90deg,transparent 8px,#000000 8px 10px,transparent 10px);", "γ now"),
        "change": (f"background:#FFFFFF;{CHANGE_MARK}", "the text changes here (from the piece to its left)"),
        "greedy": (f"background:#FFFFFF;{NTP_MARK}", "NTP’s text"),
        "gap": (f"background:{GAP_FILL};", "not decoded (no slider position in it)"),
        "pending": (f"background:{PENDING_FILL};border:1px dashed #BBBBBB;", "not decoded yet (the map is building)"),
    }
    items = [
        f"<span class='mark' data-mark='{m}' style='white-space:nowrap;margin-right:10px'>"
        f"<span style='{swatch}{says[m][0]}'></span>{esc(says[m][1])}</span>"
        for m in marks
    ]
    return f"<div class='legend'>{''.join(items)}</div>"


def gamma_strip(
    gamma_map, current_gamma: float | None = None, ntp_text: str | None = None, step: float | None = None
) -> str:
    """``gamma_map`` (a ``GammaMap``, complete or still building) as an HTML strip over its knob range ``[lo, hi]``.

    Decoded pieces are shaded by tokens per call (lighter: fewer); a vermillion tick marks where the text changes
    from the piece below; a green bar under a piece says its text is NTP's (``ntp_text``; None: not marked); hatched
    stretches were not decoded (they hold no slider position); a pale stretch is not walked yet. ``current_gamma``
    (None: none) is marked with a black line, its piece outlined. Every piece is drawn wide enough to see and click
    (``piece_spans``): where a narrow piece is widened the strip is not to scale, and it says so. A legend below
    explains each mark the strip draws. ``step``: the slider's step, for the position a click moves to (None: the
    map's own)."""
    lo, hi = gamma_map.lo, gamma_map.hi
    step = gamma_map.step if step is None else step
    pieces = list(gamma_map.pieces)  # a snapshot: a background walk may append while this draws
    spans = piece_spans(pieces, lo, hi)
    span = hi - lo

    def x(value: float) -> float:
        """Where γ = ``value`` is drawn: inside the piece holding it, at its place between the piece's ends."""
        for p, (left, width) in zip(pieces, spans):
            if value in p or p.lo <= value <= p.hi:
                return left + (0.0 if p.hi <= p.lo else width * (value - p.lo) / (p.hi - p.lo))
        done = sum(spans[-1]) if spans else 0.0  # not walked yet: the pending part is to scale
        last = pieces[-1].hi if pieces else lo
        return done + (0.0 if hi <= last else (100.0 - done) * (min(max(value, last), hi) - last) / (hi - last))

    decoded = [p for p in pieces if p.decoded]
    top = max((p.trace.tokens_per_call for p in decoded), default=1.0)
    boxes, below, marks, widened = [], None, set(), 0
    for p, (left, width) in zip(pieces, spans):
        here = current_gamma is not None and current_gamma in p
        wide = span > 0 and width > 100.0 * (min(p.hi, hi) - max(p.lo, lo)) / span + 1e-6
        widened += wide
        attrs = f"data-lo='{p.lo!r}' data-hi='{p.hi!r}' data-current='{int(here)}' data-widened='{int(wide)}'"
        outline = CURRENT_MARK if here else ""
        marks |= {"current"} if here else set()
        if not p.decoded:  # under the decoded pieces: the clickable ones stay on top
            boxes.append(
                _box(
                    left,
                    width,
                    f"background:{GAP_FILL};z-index:0;{outline}",
                    attrs + " data-kind='gap'",
                    f"γ in {p}: not decoded (no slider position lies in it)",
                )
            )
            marks.add("gap")
            below = None  # what lies in a stretch not decoded is unknown: no text change is claimed across it
            continue
        t = p.trace
        same = None if ntp_text is None else t.text == ntp_text
        change = below is not None and below.trace.text != t.text
        position = slider_position(p, step)
        attrs += (
            f" data-kind='decoded' data-tpc='{t.tokens_per_call:.4f}' data-calls='{t.nfe}'"
            f" data-ntp='{'unknown' if same is None else 'same' if same else 'differs'}'"
            f" data-text-change='{int(change)}'" + ("" if position is None else f" data-gamma='{position!r}'")
        )
        style = (
            f"background:{_shade(t.tokens_per_call, top)};cursor:pointer;z-index:{2 if here else 1};{outline}"
            + (CHANGE_MARK if change else "")
            + (NTP_MARK if same else "")
        )
        marks |= {"shade"} | ({"change"} if change else set()) | ({"greedy"} if same else set())
        text = visible(t.text)
        title = (
            f"γ in {p}: {t.nfe} calls, {t.tokens_per_call:.2f} {COUNT_LABELS[(True, True)]}"
            + ("" if same is None else ", NTP's text" if same else ", not NTP's text")
            + (", the text changes here" if change else "")
            + f" · {text[:60]}{'…' if len(text) > 60 else ''}"
        )
        boxes.append(_box(left, width, style, attrs, title))
        below = p
    last = pieces[-1] if pieces else None
    complete = last is not None and last.hi == hi and last.hi_closed
    if not complete:  # the rest of the range is not walked yet
        start = lo if last is None else last.hi
        done = sum(spans[-1]) if spans else 0.0
        attrs = f"data-lo='{start!r}' data-hi='{hi!r}' data-kind='pending' data-current='0' data-widened='0'"
        boxes.append(
            _box(
                done,
                100.0 - done,
                f"background:{PENDING_FILL};border:1px dashed #BBBBBB;z-index:0;",
                attrs,
                "not decoded yet: the map is building",
            )
        )
        marks.add("pending")
    if current_gamma is not None and lo <= current_gamma <= hi:
        boxes.append(
            f"<div class='now' data-gamma='{current_gamma!r}' style='position:absolute;top:-3px;bottom:5px;"
            f"left:calc({x(current_gamma):.4f}% - 1px);width:2px;background:#000000;z-index:3;"
            "pointer-events:none'></div>"
        )
        marks.add("now")
    texts = len({p.trace.text for p in decoded})
    # what the map swept, where γ is not all it names: verified SBD and its drafting
    mode = mode_label(decoded[0].trace.config) if decoded else ""
    swept = f" of verified SBD ({mode})" if mode else ""
    gaps = sum(not p.decoded for p in pieces)
    said = (
        _count(len(decoded), "piece")
        + " decoded"
        + (f" ({_count(texts, 'text')})" if decoded else "")
        + (f", {_count(gaps, 'stretch', 'stretches')} not decoded" if gaps else "")
        + (f" · built in {gamma_map.seconds:.1f} s, {gamma_map.calls} calls" if complete else " · building…")
    )
    scale = (
        f" · not to scale: {_count(widened, 'narrow piece')} drawn wider, so each can be seen and clicked"
        if widened
        else ""
    )
    order = ("shade", "current", "now", "change", "greedy", "gap", "pending")
    return (
        f"<div class='sbd-strip' data-pieces='{len(pieces)}' data-decoded='{len(decoded)}' "
        f"data-complete='{str(complete).lower()}' data-seconds='{gamma_map.seconds:.3f}' "
        f"data-widened='{widened}' data-mode='{esc(mode)}' style='font-size:12px;color:#555555'>"
        f"<div class='track' style='position:relative;height:30px;margin:4px 0'>{''.join(boxes)}</div>"
        f"<div style='display:flex;justify-content:space-between'><span>{lo:g}</span><span>{hi:g}</span></div>"
        f"<div>γ map{esc(swept)}: {esc(said)}{esc(scale)} · click a piece to show it</div>"
        f"{_legend([m for m in order if m in marks], top)}</div>"
    )


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 piece``, ``2 pieces``."""
    return f"{n} {one if n == 1 else many or one + 's'}"
