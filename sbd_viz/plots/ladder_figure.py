"""One prompt across γ as a figure: model calls against the knob, the safe region shaded, each divergence marked.
The knob is the frame's ``attrs["knob"]`` (γ unless the ladder climbed a decoder's own setting, e.g. Jacobi's
``block_size`` or a plugin's ``slots``), and the figure names it.

Reading it without a browser (the tests do): ``fig.data`` holds the traces named ``"calls"`` (every γ),
``"differs from NTP"`` (the γ whose text is not NTP's, ``customdata = (call, block, slot, token, NTP's token)`` of
the first divergence) and, when the frame knows NTP's call count, ``"NTP"``; ``fig.layout.meta`` holds
``largest_safe_gamma``, ``rule`` and ``safe_ranges``; the safe region is the shapes named ``"safe"``: for an exact
ladder (``attrs["safe_ranges"]``, from the γ map) one per γ range whose text equals NTP's, exact ends; otherwise one
from the first γ that keeps NTP's text to the largest safe γ; absent when no γ tried keeps it.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ..analysis.gamma_ladder import largest_safe_gamma
from ..trace.labels import COUNT_LABELS, visible
from .style import RULE_COLORS, STATE_COLORS, common_layout, esc

SAFE_COLOR = "#009E73"  # bluish green (Okabe-Ito): the γ range that keeps NTP's text
NEEDED = ("calls", "same_as_ntp")  # and the knob's column


def _knob(frame) -> str:
    """The column the ladder climbed: ``attrs["knob"]``, or γ (rows streamed in carry no attrs)."""
    return (getattr(frame, "attrs", None) or {}).get("knob", "gamma")


def _frame(frame, knob: str):
    import pandas as pd

    if isinstance(frame, list):
        frame = pd.DataFrame(frame)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame: expected the DataFrame of sv.gamma_ladder, got {type(frame).__name__}")
    missing = [c for c in (knob, *NEEDED) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame: missing columns {missing}; pass the frame of sv.gamma_ladder")
    if frame.empty:
        raise ValueError("frame: has no rows (no γ decoded yet)")
    return frame.sort_values(knob, kind="stable")


def _name(knob: str) -> str:
    return "γ" if knob == "gamma" else knob


def _hover(row, knob: str = "gamma") -> str:
    text = (
        f"{_name(knob)} = {row[knob]:g}<br>{row['calls']} calls"
        + (f" · {row['tokens_per_call']:.2f} {COUNT_LABELS[(True, True)]}" if "tokens_per_call" in row else "")
        + ("<br>text = NTP's" if row["same_as_ntp"] else "<br><b>text differs from NTP's</b>")
    )
    call = row.get("divergence_call")
    if call is not None and not (isinstance(call, float) and math.isnan(call)) and str(call) != "<NA>":
        text += (
            f"<br>first divergence: call {call}, block {row['divergence_block']}, slot {row['divergence_slot']}"
            f"<br>wrote {esc(visible(str(row['divergence_token'])))}, NTP "
            f"{esc(visible(str(row['divergence_ntp_token'])))}"
        )
    if "gap_fills" in row:
        text += f"<br>{row['gap_fills']} gap fill(s) kept"
    return text


def _plain(value):
    """A frame cell as a JSON-friendly value: None for NaN / <NA>."""
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value.item() if hasattr(value, "item") else value


def gamma_ladder_figure(frame) -> go.Figure:
    """Calls against the ladder's knob for one prompt (``sv.gamma_ladder``'s frame, or its rows; γ unless
    ``attrs["knob"]`` names another): NTP's calls as a dotted line, the values whose text differs from NTP's marked
    with a cross, and the safe region (smallest value to the largest safe one) shaded."""
    knob = _knob(frame)
    df = _frame(frame, knob)
    df.attrs = {**df.attrs, "knob": knob}  # a list of rows has no attrs: the safe climb reads its knob here
    safe = largest_safe_gamma(df)
    name = _name(knob)
    rule = frame.attrs.get("rule") if hasattr(frame, "attrs") else None
    rows = df.to_dict("records")
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=df[knob],
            y=df["calls"],
            name="calls",
            mode="lines+markers",
            line=dict(color=RULE_COLORS[0], width=2),
            marker=dict(size=9, color=RULE_COLORS[0]),
            hovertext=[_hover(r, knob) for r in rows],
            hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    differs = [r for r in rows if not r["same_as_ntp"]]
    fig.add_trace(
        go.Scatter(
            x=[r[knob] for r in differs],
            y=[r["calls"] for r in differs],
            name="differs from NTP",
            mode="markers",
            marker=dict(symbol="x", size=14, color=STATE_COLORS["diff"], line=dict(width=1)),
            customdata=[
                [_plain(r.get(f"divergence_{k}")) for k in ("call", "block", "slot", "token", "ntp_token")]
                for r in differs
            ],
            hovertext=[_hover(r, knob) for r in differs],
            hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    lo, hi = float(df[knob].min()), float(df[knob].max())
    ntp_calls = frame.attrs.get("ntp_calls") if hasattr(frame, "attrs") else None
    if ntp_calls is not None:
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[ntp_calls, ntp_calls],
                name="NTP",
                mode="lines",
                line=dict(color="#000000", dash="dot", width=1.5),
                hoverinfo="name",
            )
        )
    shapes = []
    attrs = frame.attrs if hasattr(frame, "attrs") else {}
    ranges = attrs.get("safe_ranges") if attrs.get("exact") else None
    pad = (hi - lo) * 0.01 or 0.01  # a single safe γ still shows as a thin band
    band = dict(
        type="rect",
        name="safe",
        xref="x",
        yref="paper",
        y0=0,
        y1=1,
        fillcolor=SAFE_COLOR,
        opacity=0.15,
        line=dict(width=0),
        layer="below",
    )
    if ranges is not None:  # exact: every γ range whose text is NTP's, drawn within the γ shown
        shapes += [
            dict(band, x0=max(r["lo"], lo), x1=min(r["hi"], hi)) for r in ranges if r["hi"] >= lo and r["lo"] <= hi
        ]
    elif safe is not None:
        first = min(r[knob] for r in rows if r["same_as_ntp"])
        shapes.append(dict(band, x0=first - pad, x1=safe + pad))
    if ranges:
        spans = ", ".join(
            f"{'[' if r['lo_closed'] else '('}{r['lo']:.4g}, {r['hi']:.4g}{']' if r['hi_closed'] else ')'}"
            for r in ranges
        )
        said = f" · NTP's text at {name} in {spans}"
    else:
        said = f" · largest safe {name} = {safe:g}" if safe is not None else f" · no {name} tried keeps NTP's text"
    title = f"This prompt across {name}" + (f" · {rule}" if rule else "") + said
    decoder = attrs.get("decoder")
    axis = "γ (the rule's knob)" if knob == "gamma" else f"{knob} ({decoder}'s knob)" if decoder else knob
    fig.update_layout(
        **common_layout(
            title=dict(text=title, font=dict(size=14)),
            width=760,
            height=420,
            shapes=shapes,
            meta=dict(largest_safe_gamma=safe, rule=rule, safe_ranges=ranges),
            legend=dict(orientation="h", y=-0.2),
            xaxis=dict(title=axis, gridcolor="#EEEEEE"),
            yaxis=dict(title="model calls", gridcolor="#EEEEEE", rangemode="tozero"),
        )
    )
    return fig
