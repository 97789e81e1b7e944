"""The speed/quality curve of a sweep, and the one loader of sweep rows and files (``sweep_frame``)."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from .style import RULE_COLORS, VERIFIED_COLOR, VERIFIED_DASHES, VERIFIED_LABEL, common_layout
from ..labels import COUNT_LABELS


# the x axes a sweep can be drawn on; tokens per call named as every view names the count (a sweep's rows count
# every output token and every call)
_X_AXES = {"tokens_per_call": COUNT_LABELS[(True, True)], "calls_per_token": "calls per token (its inverse)",
           "speedup_calls": "speedup in calls vs NTP", "speedup_wall": "wall-clock speedup vs NTP"}
_HOVER_COLUMNS = ("accuracy", "tokens_per_call", "calls_per_token", "speedup_calls", "speedup_wall", "same_as_ntp")


def _reference() -> str:
    """Greedy NTP's name, its sweep rows' rule. Read from its spec when drawing: at import time the plots sit below
    the decoders (the README's map of the package)."""
    from ..decoders.ntp import NTP

    return NTP.name


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
    return ["<br>".join([f"<b>{r['line']}</b> γ = {r['gamma']}"]
                        + [f"{c}: {r[c]:.3g}" for c in cols if r[c] is not None])  # None: not measured
            for _, r in df.iterrows()]


def _current_rows(df, current: Any):
    if not isinstance(current, dict) or "rule" not in current or "gamma" not in current:
        raise ValueError(f"current: must be a dict with 'rule' and 'gamma', got {current!r}")
    gamma = current["gamma"]
    same_gamma = df["gamma"].map(lambda g: g == gamma or (isinstance(g, (int, float)) and isinstance(
        gamma, (int, float)) and math.isclose(g, gamma, rel_tol=1e-9)))
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


def _gamma_labels(rows, x: str, spans: tuple[float, float],
                  min_gap: tuple[float, float] = (0.09, 0.05)) -> list[str]:
    """A line's "γ=..." labels, left to right, with a label left blank where its point sits within ``min_gap``
    (fractions of the plotted x and y spans, about one label's width and height) of the last labelled point:
    bolder settings often bunch at one speed (a block caps a call's commits), and their labels would print over
    each other. Every point keeps its hover."""
    labels, last = [], None
    for g, px, py in zip(rows["gamma"], rows[x], rows["accuracy"]):
        # an axis with no span (every point at one accuracy, say) puts every pair of points level on it
        near = last is not None and all(span == 0 or abs(v - w) < gap * span
                                        for v, w, span, gap in zip((px, py), last, spans, min_gap))
        labels.append("" if near else f"γ={g:g}")
        last = last if near else (px, py)
    return labels


def tradeoff(results: Any, current: dict | None = None, x: str = "tokens_per_call") -> go.Figure:
    """Speed vs suite accuracy: one line per commit rule (rule, gap-free or not), a point per gamma.

    Rows with rule "ntp" are drawn as the reference star and dotted accuracy line. Rows with
    ``verify`` True (``sweep(..., verify=(False, True))``) are drawn as the "verified (lossless)" line,
    black and dashed (several verified lines get different dashes): their text is NTP's, so they sit at
    NTP's accuracy and only their speed varies.
    When the rows hold several block sizes, each (rule, block size) gets its own line. ``current``
    (``dict(rule=..., gamma=...[, gap_free=...][, verify=...][, block_size=...])``) rings the current setting.
    """
    df = _results_frame(results, x)
    is_ntp = df["rule"].astype(str).str.lower() == _reference()
    fig = go.Figure()
    spans = (float(df[x].max() - df[x].min()), float(df["accuracy"].max() - df["accuracy"].min()))
    for i, (rule, rows) in enumerate(df[~is_ntp & ~df["verify"]].groupby("line", sort=True)):
        rows, color = rows.sort_values(x), RULE_COLORS[i % len(RULE_COLORS)]
        fig.add_trace(go.Scatter(
            x=rows[x], y=rows["accuracy"], name=rule, mode="lines+markers+text", meta=dict(role="rule"),
            text=_gamma_labels(rows, x, spans), textposition=("top center", "bottom center")[i % 2],
            textfont=dict(size=10, color=color), line=dict(color=color, width=2), marker=dict(size=9, color=color),
            hovertext=_hover_rows(rows), hovertemplate="%{hovertext}<extra></extra>"))
    for j, (rule, rows) in enumerate(df[~is_ntp & df["verify"]].groupby("line", sort=True)):
        rows, dash = rows.sort_values(x), VERIFIED_DASHES[j % len(VERIFIED_DASHES)]
        fig.add_trace(go.Scatter(
            x=rows[x], y=rows["accuracy"], name=rule, mode="lines+markers+text", meta=dict(role="verified"),
            text=_gamma_labels(rows, x, spans), textposition="bottom center",
            textfont=dict(size=10, color=VERIFIED_COLOR), line=dict(color=VERIFIED_COLOR, width=2, dash=dash),
            marker=dict(symbol="diamond", size=10, color=VERIFIED_COLOR),
            hovertext=_hover_rows(rows), hovertemplate="%{hovertext}<extra></extra>"))
    if is_ntp.any():
        ntp = df[is_ntp]
        fig.add_trace(go.Scatter(x=ntp[x], y=ntp["accuracy"], name="NTP", mode="markers", meta=dict(role=_reference()),
                                 marker=dict(symbol="star", size=15, color="#000000"), hovertext=_hover_rows(ntp),
                                 hovertemplate="%{hovertext}<extra></extra>"))
        fig.add_hline(y=float(ntp["accuracy"].mean()), line=dict(color="#777777", dash="dot", width=1),
                      annotation_text="NTP accuracy", annotation_position="bottom right")
    if current is not None:
        hit = _current_rows(df, current)
        fig.add_trace(go.Scatter(x=hit[x], y=hit["accuracy"], name="current setting", mode="markers",
                                 meta=dict(role="current"), hoverinfo="skip",
                                 marker=dict(symbol="circle-open", size=24, color="#000000", line=dict(width=3))))
    fig.update_layout(**common_layout(
        title=dict(text="Speed vs quality", font=dict(size=14)), width=760, height=480, legend=dict(title="rule"),
        xaxis=dict(title=_X_AXES[x], gridcolor="#EEEEEE"),
        # an accuracy is never negative (autorange pads a flat line to [-0.5, 1] otherwise)
        yaxis=dict(title="suite accuracy", gridcolor="#EEEEEE", rangemode="nonnegative")))
    return fig


def _decoder_color(decoder: str, index: int) -> str:
    """The decoder's colour (its spec's); a decoder not registered in this process takes the palette's in turn."""
    from ..decoders.registry import PALETTE, color_of  # read when drawing, as _reference

    try:
        return color_of(decoder)
    except ValueError:
        return PALETTE[index % len(PALETTE)]


def decoder_tradeoff(frame, y: str = "accuracy") -> go.Figure:
    """Speed (NTP's calls over the decoder's) against ``y`` (``accuracy`` or ``same_as_ntp``): one line per decoder
    label through its settings, NTP a point, each in its decoder's colour (a variant, e.g. verified SBD, dashed).
    ``fig.layout.meta["lines"]``: label -> [(speedup, y, knob value)]."""
    if y not in ("accuracy", "same_as_ntp"):
        raise ValueError(f"y: must be 'accuracy' or 'same_as_ntp', got {y!r}")
    missing = [c for c in ("label", "speedup_calls", y, "knob_value") if c not in getattr(frame, "columns", ())]
    if missing:
        raise ValueError(f"frame: missing columns {missing}; pass a sweep_decoders() frame")
    fig, lines, first = go.Figure(), {}, {}
    for i, (label, rows) in enumerate(frame.groupby("label", sort=False)):
        rows = rows.sort_values("speedup_calls")
        lines[label] = [(float(r.speedup_calls), float(r[y]),
                         None if math.isnan(r.knob_value) else float(r.knob_value)) for _, r in rows.iterrows()]
        decoder = str(rows["decoder"].iloc[0]) if "decoder" in rows else label
        color = _decoder_color(decoder, i)
        variant = decoder in first  # a second line of one decoder: its variant's
        first.setdefault(decoder, label)
        settings = rows["settings"] if "settings" in rows else [""] * len(rows)
        fig.add_trace(go.Scatter(
            x=rows["speedup_calls"], y=rows[y], mode="lines+markers" if len(rows) > 1 else "markers", name=label,
            line=dict(color=color, dash="dash" if variant else "solid"), marker=dict(color=color),
            text=[f"{label}" + ("" if math.isnan(r.knob_value) else f" · {r.knob} {r.knob_value:g}")
                  + (f" · {extra}" if isinstance(extra, str) and extra else "")
                  for (_, r), extra in zip(rows.iterrows(), settings)],
            hovertemplate="%{text}<br>speedup in calls %{x:.2f}x<br>" + y.replace("_", " ") + " %{y:.3f}"
                          "<extra></extra>"))
    fig.update_layout(**common_layout(
        title=dict(text="decoders: speed in calls against quality", font=dict(size=14)), width=720, height=440,
        xaxis=dict(title="speedup in calls vs NTP", gridcolor="#EEE"),
        yaxis=dict(title=y.replace("_", " "), gridcolor="#EEE"), meta=dict(lines=lines)))
    return fig
