"""The speed/quality curve of a sweep, and the one loader of sweep rows and files (``sweep_frame``)."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import plotly.graph_objects as go

from ..decoders.ntp import NTP
from ..decoders.registry import color_of
from ..decoders.rules import RULES
from ..trace.labels import COUNT_LABELS
from .style import RULE_COLORS, VERIFIED_COLOR, VERIFIED_DASHES, VERIFIED_LABEL, common_layout, text_px

# the x axes a sweep can be drawn on; tokens per call named as every view names the count (a sweep's rows count
# every output token and every call)
_X_AXES = {
    "tokens_per_call": COUNT_LABELS[(True, True)],
    "calls_per_token": "calls per token (its inverse)",
    "speedup_calls": "speedup in calls vs NTP",
    "speedup_wall": "wall-clock speedup vs NTP",
}
_HOVER_COLUMNS = ("accuracy", "tokens_per_call", "calls_per_token", "speedup_calls", "speedup_wall", "same_as_ntp")


def _reference() -> str:
    """Greedy NTP's name, its sweep rows' rule."""
    return NTP.name


def _reference_spec():
    """Greedy NTP's spec: its display name (``label``) and colour."""
    return NTP


def _rule_colors(names) -> dict:
    """A colour of the house palette (``RULE_COLORS``) for each rule line (``names``, sorted: each starts with its
    rule, as ``_results_frame`` names lines), every line its own: the first line of a commit rule of
    ``sbd_viz.decoders.rules`` takes that rule's colour, so a rule reads alike in every figure (the default rule in
    SBD's blue); any other line the next colour no line has and no rule drawn owns."""
    own = {r: RULE_COLORS[i % len(RULE_COLORS)] for i, r in enumerate(RULES)}
    rules = [name.split(" · ")[0] for name in names]
    colors, used = {}, set()
    for name, rule in zip(names, rules):
        if rule in own and own[rule] not in used:
            colors[name] = own[rule]
            used.add(own[rule])
    reserved = used | {own[r] for r in rules if r in own}
    for name in names:
        if name not in colors:
            free = (
                [c for c in RULE_COLORS if c not in reserved]
                or [c for c in RULE_COLORS if c not in used]
                or list(RULE_COLORS)
            )
            colors[name] = free[0]
            used.add(free[0])
            reserved.add(free[0])
    return colors


def sweep_frame(results: Any):
    """Sweep results as a DataFrame every reader can rely on: from ``analysis.sweep``'s frame or its rows
    (``df.to_dict("records")``, the "rows" of a saved ``sweep.json``). Without a "verify" column every row is
    unverified, and without "gap_free" none is gap-free; ``tokens_per_call`` and ``calls_per_token`` are each
    derived from the other where only one was given. Returns a new frame."""
    import pandas as pd  # only the sweep's readers need pandas

    if isinstance(results, pd.DataFrame):
        df = results.copy()
    else:
        rows = list(results) if isinstance(results, (list, tuple)) or hasattr(results, "__next__") else None
        if rows is None or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"results: expected a DataFrame or a list of row dicts, got {type(results).__name__}")
        df = pd.DataFrame(rows)
    missing = [c for c in ("rule", "gamma", "accuracy") if c not in df.columns]
    if missing:
        raise ValueError(f"results: missing columns {missing}")
    if "tokens_per_call" not in df.columns and "calls_per_token" in df.columns:
        df["tokens_per_call"] = 1.0 / df["calls_per_token"]
    if "calls_per_token" not in df.columns and "tokens_per_call" in df.columns:
        df["calls_per_token"] = 1.0 / df["tokens_per_call"]
    df["gap_free"] = df["gap_free"].eq(True) if "gap_free" in df.columns else False
    df["verify"] = df["verify"].eq(True) if "verify" in df.columns else False
    return df


def _results_frame(results: Any, x: str):
    """``sweep_frame`` with the x column checked and each row's line named."""
    df = sweep_frame(results)
    if x not in _X_AXES:
        raise ValueError(f"x: must be one of {sorted(_X_AXES)}, got {x!r}")
    if x not in df.columns:
        raise ValueError(f"results: no column {x!r} to put on the x axis")
    df["line"] = df["rule"].astype(str) + df["gap_free"].map({True: " · gap-free", False: ""})
    is_ntp = df["rule"].astype(str).str.lower() == _reference()
    # Verified rows are one line per rule, named for what they promise; the rule is named only when several
    # rules were verified.
    checked = df["verify"] & ~is_ntp
    if checked.any():
        several = df.loc[checked, "line"].nunique() > 1
        df.loc[checked, "line"] = VERIFIED_LABEL + (" · " + df.loc[checked, "line"] if several else "")
    # A sweep over several block sizes: one line per (rule, k), or the line would zigzag between them.
    if "block_size" in df.columns and df.loc[~is_ntp, "block_size"].nunique() > 1:
        df.loc[~is_ntp, "line"] += " · k=" + df.loc[~is_ntp, "block_size"].astype(int).astype(str)
    return df


def _hover_rows(df) -> list[str]:
    cols = [c for c in _HOVER_COLUMNS if c in df.columns]
    return [
        "<br>".join(
            [f"<b>{r['line']}</b> γ = {r['gamma']}"] + [f"{c}: {r[c]:.3g}" for c in cols if r[c] is not None]
        )  # None: not measured
        for _, r in df.iterrows()
    ]


def _current_rows(df, current: Any):
    if not isinstance(current, dict) or "rule" not in current or "gamma" not in current:
        raise ValueError(f"current: must be a dict with 'rule' and 'gamma', got {current!r}")
    gamma = current["gamma"]
    same_gamma = df["gamma"].map(
        lambda g: (
            g == gamma
            or (
                isinstance(g, (int, float)) and isinstance(gamma, (int, float)) and math.isclose(g, gamma, rel_tol=1e-9)
            )
        )
    )
    hit = (df["rule"].astype(str) == str(current["rule"])) & same_gamma
    if "gap_free" in current:
        hit &= df["gap_free"] == bool(current["gap_free"])
    if "verify" in current:
        hit &= df["verify"] == bool(current["verify"])
    if "block_size" in current and "block_size" in df.columns:
        hit &= df["block_size"] == current["block_size"]
    if not hit.any():
        raise ValueError(f"current: no result row with rule={current['rule']!r}, gamma={gamma!r}")
    return df[hit]


def _gamma_labels(rows, x: str, spans: tuple[float, float], min_gap: tuple[float, float] = (0.09, 0.05)) -> list[str]:
    """A line's "γ=..." labels, left to right, with a label left blank where its point sits within ``min_gap``
    (fractions of the plotted x and y spans, about one label's width and height) of the last labelled point:
    bolder settings often bunch at one speed (a block caps a call's commits), and their labels would print over
    each other. Every point keeps its hover."""
    labels, last = [], None
    for g, px, py in zip(rows["gamma"], rows[x], rows["accuracy"]):
        # an axis with no span (every point at one accuracy, say) puts every pair of points level on it
        near = last is not None and all(
            span == 0 or abs(v - w) < gap * span for v, w, span, gap in zip((px, py), last, spans, min_gap)
        )
        labels.append("" if near else f"γ={g:g}")
        last = last if near else (px, py)
    return labels


# The tradeoff figure's pixel plan: a fixed plot area, so a label's box can be known before the browser draws it
WIDTH, HEIGHT = 760, 480
MARGIN = dict(l=70, r=20, t=60, b=140)  # the legend sits below the plot, in a row
LABEL_FONT = 10
_SPOTS = (
    "top center",
    "bottom center",
    "middle right",
    "middle left",
    "top right",
    "top left",
    "bottom right",
    "bottom left",
)


def _padded(values, share: float, floor: float | None = None) -> list[float]:
    lo, hi = float(min(values)), float(max(values))
    pad = (hi - lo) * share or max(abs(hi), 1.0) * share
    return [lo - pad if floor is None else max(floor, lo - pad), hi + pad]


def _label_box(px: float, py: float, text: str, spot: str) -> tuple[float, float, float, float]:
    """The pixel box (left, top, right, bottom; y down) a point's label takes at ``spot`` (a plotly textposition)."""
    w, h = text_px(text, LABEL_FONT) + 2, LABEL_FONT + 4
    vert, horiz = spot.split()
    cx = px + {"center": 0.0, "right": w / 2 + 9, "left": -w / 2 - 9}[horiz]  # clear of the point's marker
    cy = py + {"top": -h / 2 - 9, "bottom": h / 2 + 9, "middle": 0.0}[vert]
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _hits(box, others, circles=(), pad: float = 1.0) -> bool:
    """Whether ``box`` comes within ``pad`` pixels of one of ``others`` (boxes) or ``circles`` (x, y, radius)."""
    x0, y0, x1, y1 = box
    return any(x0 - pad < b[2] and b[0] < x1 + pad and y0 - pad < b[3] and b[1] < y1 + pad for b in others) or any(
        math.hypot(cx - min(max(cx, x0), x1), cy - min(max(cy, y0), y1)) < r + pad for cx, cy, r in circles
    )


def _place_labels(lines: list[dict], marks: list[tuple[float, float, float]], xr, yr) -> None:
    """Give each labelled point of ``lines`` (dicts with ``x``, ``y``, ``text``, ``side``: its line's first choice)
    a ``textposition`` where its label covers no other label, no point (``marks``: x, y and radius in pixels) and no
    line, inside the plot; a label with no such place is left blank (its point keeps its hover). Sets each line's
    ``spots`` and blanks ``text`` in place."""
    w = WIDTH - MARGIN["l"] - MARGIN["r"]
    h = HEIGHT - MARGIN["t"] - MARGIN["b"]

    def px(x, y):
        return w * (x - xr[0]) / (xr[1] - xr[0]), h * (yr[1] - y) / (yr[1] - yr[0])

    circles, taken = [px(x, y) + (r,) for x, y, r in marks], []
    for line in lines:  # the lines as chains of small boxes, every 3 px along each segment
        points = [px(x, y) for x, y in zip(line["x"], line["y"])]
        for (ax, ay), (bx, by) in pairwise(points):
            n = max(1, int(math.hypot(bx - ax, by - ay) // 3))
            taken += [
                (
                    ax + (bx - ax) * i / n - 1,
                    ay + (by - ay) * i / n - 1,
                    ax + (bx - ax) * i / n + 1,
                    ay + (by - ay) * i / n + 1,
                )
                for i in range(n + 1)
            ]
    for line in lines:
        line["spots"] = []
        for i, (x, y) in enumerate(zip(line["x"], line["y"])):
            text, spot = line["text"][i], line["side"]
            if text:
                cx, cy = px(x, y)
                for candidate in (line["side"],) + tuple(s for s in _SPOTS if s != line["side"]):
                    box = _label_box(cx, cy, text, candidate)
                    if box[0] >= 0 and box[2] <= w and box[1] >= 0 and box[3] <= h and not _hits(box, taken, circles):
                        spot = candidate
                        taken.append(box)
                        break
                else:
                    line["text"][i] = ""
            line["spots"].append(spot)


def tradeoff(results: Any, current: dict | None = None, x: str = "tokens_per_call") -> go.Figure:
    """Speed vs suite accuracy: one line per commit rule (rule, gap-free or not), a point per gamma.

    Rows with rule "ntp" are drawn as the reference star (named by NTP's spec) and a dotted accuracy line. Rows with
    ``verify`` True (``sweep(..., verify=(False, True))``) are drawn as the "verified (lossless)" line,
    black and dashed (several verified lines get different dashes): their text is NTP's, so they sit at
    NTP's accuracy and only their speed varies. Each rule line takes its rule's colour of the house palette
    (``RULE_COLORS``). Each point is labelled with its γ where the label covers no other label, point or line (a
    point among a bunch at one spot, or with no free place, is left to its hover).
    When the rows hold several block sizes, each (rule, block size) gets its own line. ``current``
    (``dict(rule=..., gamma=...[, gap_free=...][, verify=...][, block_size=...])``) rings the current setting.
    """
    df = _results_frame(results, x)
    is_ntp = df["rule"].astype(str).str.lower() == _reference()
    fig = go.Figure()
    spans = (float(df[x].max() - df[x].min()), float(df["accuracy"].max() - df["accuracy"].min()))
    xr, yr = _padded(df[x], 0.06), _padded(df["accuracy"], 0.14, floor=0.0)
    lossy = dict(list(df[~is_ntp & ~df["verify"]].groupby("line", sort=True)))
    colors = _rule_colors(list(lossy))
    lines = []
    for i, (rule, rows) in enumerate(lossy.items()):
        rows = rows.sort_values(x)
        lines.append(
            dict(name=rule, rows=rows, role="rule", color=colors[rule], side=("top center", "bottom center")[i % 2])
        )
    for j, (rule, rows) in enumerate(df[~is_ntp & df["verify"]].groupby("line", sort=True)):
        lines.append(
            dict(
                name=rule,
                rows=rows.sort_values(x),
                role="verified",
                color=VERIFIED_COLOR,
                dash=VERIFIED_DASHES[j % len(VERIFIED_DASHES)],
                side="bottom center",
            )
        )
    for line in lines:
        line.update(
            x=list(line["rows"][x]), y=list(line["rows"]["accuracy"]), text=_gamma_labels(line["rows"], x, spans)
        )
    marks = [(px, py, 4.5) for line in lines for px, py in zip(line["x"], line["y"])]
    ntp = df[is_ntp]
    marks += [(px, py, 7.5) for px, py in zip(ntp[x], ntp["accuracy"])]
    hit = _current_rows(df, current) if current is not None else None
    marks += [] if hit is None else [(px, py, 13.5) for px, py in zip(hit[x], hit["accuracy"])]
    _place_labels(lines, marks, xr, yr)

    def add(role: str, **scatter) -> None:  # every trace names what it is in its meta: trace.meta["role"]
        fig.add_trace(go.Scatter(meta=dict(role=role), **scatter))

    for line in lines:
        verified = line["role"] == "verified"
        add(
            line["role"],
            x=line["x"],
            y=line["y"],
            name=line["name"],
            mode="lines+markers+text",
            text=line["text"],
            textposition=line["spots"],
            textfont=dict(size=LABEL_FONT, color=line["color"]),
            line=dict(color=line["color"], width=2, **({"dash": line["dash"]} if verified else {})),
            marker=dict(symbol="diamond", size=10, color=line["color"])
            if verified
            else dict(size=9, color=line["color"]),
            hovertext=_hover_rows(line["rows"]),
            hovertemplate="%{hovertext}<extra></extra>",
        )
    if is_ntp.any():
        spec = _reference_spec()
        add(
            _reference(),
            x=ntp[x],
            y=ntp["accuracy"],
            name=spec.label,
            mode="markers",
            marker=dict(symbol="star", size=15, color=spec.color or "#000000"),
            hovertext=_hover_rows(ntp),
            hovertemplate="%{hovertext}<extra></extra>",
        )
        accuracy = float(ntp["accuracy"].mean())
        # the accuracy line is named in the legend, not by a note on the plot (a note covered points and labels)
        dotted = dict(color="#777777", dash="dot", width=1)
        fig.add_hline(y=accuracy, line=dotted)
        add("ntp_accuracy", x=[None], y=[None], mode="lines", name=f"{spec.label} accuracy", line=dotted)
    if hit is not None:
        add(
            "current",
            x=hit[x],
            y=hit["accuracy"],
            name="current setting",
            mode="markers",
            hoverinfo="skip",
            marker=dict(symbol="circle-open", size=24, color="#000000", line=dict(width=3)),
        )
    fig.update_layout(
        **common_layout(
            title=dict(text="Speed vs quality", font=dict(size=14)),
            width=WIDTH,
            height=HEIGHT,
            margin=MARGIN,
            legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"),
            xaxis=dict(title=_X_AXES[x], gridcolor="#EEEEEE", range=xr),
            # an accuracy is never negative
            yaxis=dict(title="suite accuracy", gridcolor="#EEEEEE", range=yr),
        )
    )
    return fig


def _decoder_color(decoder: str, index: int) -> str:
    """The decoder's colour (its spec's, or the registry's for a registered decoder that names none); a decoder not
    registered in this process takes the house palette's (``RULE_COLORS``) in turn."""
    try:
        return color_of(decoder)
    except ValueError:
        return RULE_COLORS[index % len(RULE_COLORS)]


def decoder_tradeoff(frame, y: str = "accuracy") -> go.Figure:
    """Speed (NTP's calls over the decoder's) against ``y`` (``accuracy`` or ``same_as_ntp``): one line per decoder
    label through its settings, NTP a point, each in its decoder's colour (a variant, e.g. verified SBD, dashed).
    ``fig.layout.meta["lines"]``: label -> [(speedup, y, knob value)]."""
    if y not in ("accuracy", "same_as_ntp"):
        raise ValueError(f"y: must be 'accuracy' or 'same_as_ntp', got {y!r}")
    missing = [c for c in ("label", "speedup_calls", y, "knob_value") if c not in getattr(frame, "columns", ())]
    if missing:
        raise ValueError(f"frame: missing columns {missing}; pass a sweep_decoders() frame")
    fig, lines = go.Figure(), {}
    first: dict[str, str] = {}  # a decoder -> the label of its first line
    for i, (label, rows) in enumerate(frame.groupby("label", sort=False)):
        rows = rows.sort_values("speedup_calls")
        lines[label] = [
            (float(r.speedup_calls), float(r[y]), None if math.isnan(r.knob_value) else float(r.knob_value))
            for _, r in rows.iterrows()
        ]
        decoder = str(rows["decoder"].iloc[0]) if "decoder" in rows else label
        color = _decoder_color(decoder, i)
        variant = decoder in first  # a second line of one decoder: its variant's
        first.setdefault(decoder, label)
        settings = rows["settings"] if "settings" in rows else [""] * len(rows)
        fig.add_trace(
            go.Scatter(
                x=rows["speedup_calls"],
                y=rows[y],
                mode="lines+markers" if len(rows) > 1 else "markers",
                name=label,
                line=dict(color=color, dash="dash" if variant else "solid"),
                marker=dict(color=color),
                text=[
                    f"{label}"
                    + ("" if math.isnan(r.knob_value) else f" · {r.knob} {r.knob_value:g}")
                    + (f" · {extra}" if isinstance(extra, str) and extra else "")
                    for (_, r), extra in zip(rows.iterrows(), settings)
                ],
                hovertemplate="%{text}<br>speedup in calls %{x:.2f}x<br>" + y.replace("_", " ") + " %{y:.3f}"
                "<extra></extra>",
            )
        )
    fig.update_layout(
        **common_layout(
            title=dict(text="decoders: speed in calls against quality", font=dict(size=14)),
            width=720,
            height=440,
            xaxis=dict(title="speedup in calls vs NTP", gridcolor="#EEE"),
            yaxis=dict(title=y.replace("_", " "), gridcolor="#EEE"),
            meta=dict(lines=lines),
        )
    )
    return fig
