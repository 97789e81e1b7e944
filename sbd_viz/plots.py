"""Plotly pictures of traces: pure functions of plain trace data, returning figures or HTML strings.

``block_fill`` is the signature view: one frame per model call, one grid row per block, one column per
slot. A frame shows the blocks *after* its call; masked cells are shaded by that call's entropy.

Reading cells without a browser (the tests do), with ``rows = fig.layout.meta["rows"]``:
``fig.data[r]`` (``r < rows``) is grid row ``r``'s heatmap, ``customdata[0][col] = (state, block, slot)``
(``None`` for padding, ``state`` in ``STATES``); ``fig.data[rows + r]`` outlines that row's gap fills,
``customdata = (block, slot, call)`` per vertex. ``fig.data`` shows the finished decode.
``fig.frames[i].name == str(call)``, one frame per call. Frames are incremental, as plotly.js resolves
them: frame 0 holds every row; frame ``c`` has ``baseframe == str(c - 1)`` and holds only the rows that
changed at call ``c`` (``frame.traces`` = their indices), so a frame's state = frame 0, then each later
frame up to it, replacing traces by index. (Full frames made long traces tens of megabytes.)

A verified trace (``trace.verified``) adds two states (``VERIFIED_STATES``, on a 0..6 colour scale instead of 0..4):
``"corrected"`` where NTP's token replaced a rejected draft, ``"dropped"`` where a rollback discarded a draft that
followed it; hovers give NTP's verdict on each draft (its token and probability), the frame titles count the
checks and name rollbacks and checking-only calls, and the slider marks them (↺ rollback, ✓ checking only).
An unverified trace draws exactly as before verification existed.
"""

from __future__ import annotations

import functools
import html
import math
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .trace import Step, Trace

# -- one colour legend for every figure (Okabe-Ito, colour-blind safe) ------------------
STATES = ("done", "now", "masked", "future")
STATE_COLORS = {
    "done": "#56B4E9",  # sky blue: committed by an earlier call
    "now": "#E69F00",  # orange: committed by this call
    "masked": "#A6A6A6",  # grey (legend swatch); cells are shaded with ENTROPY_SCALE
    "future": "#F2F2F2",  # near white: block not started yet
    "gap": "#000000",  # outline of a gap-fill commit
    "diff": "#D55E00",  # vermillion: where two runs first differ
    "corrected": "#CC79A7",  # reddish purple: verified decoding wrote NTP's token over a rejected draft
    "dropped": "#F3D3E5",  # pale of the same: a draft a rollback discarded (built on the rejected one)
    "rollback": "#D55E00",  # timeline marker of a call that rejected a draft
    "check_only": "#009E73",  # timeline marker of a call spent only on checking drafts
}
VERIFIED_STATES = STATES + ("corrected", "dropped")  # the block-fill states of a verified trace
STATE_LABELS = {"done": "committed before", "now": "committed in this call", "masked": "still masked",
                "future": "not started", "corrected": "NTP's token over a rejected draft",
                "dropped": "draft dropped by a rollback"}
ENTROPY_SCALE = [[0.0, "#E3E3E3"], [1.0, "#4A4A4A"]]  # masked slots: lighter = lower entropy
CALL_SCALE = [[0.0, "#DCEBF7"], [1.0, "#0072B2"]]  # tokens committed by a token's call: 1 = lightest
RULE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#F0E442")
VERIFIED_COLOR = "#000000"  # the verified line: black like NTP (its text is NTP's), dashed, diamond markers
VERIFIED_DASHES = ("dash", "dot", "dashdot", "longdash")  # several verified lines (e.g. one per block size)
VERIFIED_LABEL = "verified (lossless)"
MASK_GLYPH = "▒"
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"

# Block-fill cells encode their state as a band of z (one colour per band, entropy inside the masked band).
_Z = {"future": 0.5, "done": 1.5, "now": 2.5}
_STATE_SCALE = [[0.0, STATE_COLORS["future"]], [0.25, STATE_COLORS["future"]], [0.25, STATE_COLORS["done"]],
                [0.5, STATE_COLORS["done"]], [0.5, STATE_COLORS["now"]], [0.75, STATE_COLORS["now"]],
                [0.75, ENTROPY_SCALE[0][1]], [1.0, ENTROPY_SCALE[1][1]]]


# A verified trace adds two bands above the masked one; an unverified trace keeps the scale above unchanged.
_Z_VERIFIED = {**_Z, "corrected": 4.5, "dropped": 5.5}
_VERIFIED_SCALE = [[round(z / 6, 6), color] for z, color in (
    (0, STATE_COLORS["future"]), (1, STATE_COLORS["future"]), (1, STATE_COLORS["done"]), (2, STATE_COLORS["done"]),
    (2, STATE_COLORS["now"]), (3, STATE_COLORS["now"]), (3, ENTROPY_SCALE[0][1]), (4, ENTROPY_SCALE[1][1]),
    (4, STATE_COLORS["corrected"]), (5, STATE_COLORS["corrected"]), (5, STATE_COLORS["dropped"]),
    (6, STATE_COLORS["dropped"]))]


def _masked_z(entropy: float, emax: float) -> float:
    """z of a masked cell: inside the masked band (3, 4), darker with more entropy."""
    return 3.02 + 0.96 * min(entropy / emax, 1.0)


# -- small helpers ----------------------------------------------------------------------
def _visible(text: str) -> str:
    """Make whitespace visible: a token that is a space or a newline must not look empty."""
    return text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅"


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _label(text: str, n: int) -> str:
    """A cell label: whitespace visible, at most ``n`` characters, HTML escaped."""
    text = _visible(text)
    return _esc(text if len(text) <= n else text[: max(1, n - 1)] + "…")


def _settings(trace: Trace) -> str:
    c = trace.config
    parts = [c.get("decoder", "?")]
    if c.get("decoder") != "ntp":
        parts += [f"rule {c.get('rule', '?')}", f"γ = {c.get('gamma', '?')}"]
    return " · ".join(str(p) for p in parts + [f"k = {c.get('block_size', _block_size(trace))}", trace.model_id])


def _block_size(trace: Trace) -> int:
    return max((s.block_size for s in trace.steps), default=1)


def _candidates(step: Step | None, slot: int, n: int = 5) -> str:
    view = step.slot_view(slot) if step else None
    if view is None:
        return ""
    return "<br>top candidates:" + "".join(f"<br>  {_esc(_visible(c.text))}  {c.prob:.3f}" for c in view.top[:n])


def _outline(cells: list[tuple[float, float, Any]], inset: float = 0.1) -> dict[str, list]:
    """Rectangle paths around heatmap cells (x, y, tag), in data units so they scale with the figure."""
    xs, ys, tags = [None], [None], [None]
    for x, y, tag in cells:
        x0, x1, y0, y1 = x - 0.5 + inset, x + 0.5 - inset, y - 0.5 + inset, y + 0.5 - inset
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
        tags += [tag] * 5 + [None]
    return dict(x=xs, y=ys, customdata=tags)


def _outline_trace(cells: list, color: str, **kw: Any) -> go.Scatter:
    return go.Scatter(_outline_spec(cells, color, **kw))


def _outline_spec(cells: list, color: str, **kw: Any) -> dict:
    """The outline trace as plain data (``block_fill_spec`` builds no graph objects)."""
    return dict(type="scatter", **_outline(cells, kw.pop("inset", 0.1)), mode="lines", hoverinfo="skip",
                line=dict(color=color, width=3), **{"showlegend": False, **kw})


def _legend(states: tuple[str, ...] = STATES) -> str:
    """The state legend as two lines of coloured squares. Drawn as text, not a plotly legend: heatmap
    cells have no legend entries, and a wrapping legend pushes the margins and squashes small grids."""
    def item(state: str) -> str:
        glyph = "□" if state == "future" else "■"
        color = "#999999" if state == "future" else STATE_COLORS[state]
        extra = " (darker = higher entropy)" if state == "masked" else ""
        return f"<span style='color:{color};font-size:17px'>{glyph}</span> {STATE_LABELS[state]}{extra}"

    gap = "<span style='font-size:17px'><b>□</b></span> gap fill (outlined)"
    first = [item(s) for s in ("done", "now") if s in states] + [gap]
    second = [item(s) for s in ("masked", "future", "corrected", "dropped") if s in states]
    return "   ".join(first) + "<br>" + "   ".join(second)


def _entropy_bar(emax: float, length: int) -> dict:
    """The entropy colour scale as a colorbar (the cells' own heatmap encodes states, not entropy)."""
    return dict(type="scatter", x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip", marker=dict(
        color=[0.0], colorscale=ENTROPY_SCALE, cmin=0.0, cmax=emax, showscale=True, colorbar=dict(
            title=dict(text="entropy<br>(nats)"), thickness=12, lenmode="pixels", len=length, y=1, yanchor="top")))


def _max_entropy(trace: Trace) -> float:
    return max([v.entropy for s in trace.steps for v in s.slots] + [1e-6])


def _common_layout(**kw: Any) -> dict:
    return dict(plot_bgcolor="white", font=dict(family=FONT, size=12),
                hoverlabel=dict(font=dict(family=FONT, size=12), align="left"), **kw)


# -- block fill: the signature animation ------------------------------------------------
class _Grid:
    """Where each (block, slot) sits: one row per block; tiny blocks (NTP, k = 1) share a row."""

    def __init__(self, trace: Trace, blocks: list[int]):
        self.blocks, self.k = blocks, _block_size(trace)
        self.per_row = 1 if self.k >= 4 else max(1, 16 // self.k)
        self.rows = math.ceil(len(blocks) / self.per_row)
        self.cols = self.k * min(self.per_row, len(blocks))
        self.steps = {b: trace.block_steps(b) for b in blocks}
        self.row_of = {b: i // self.per_row for i, b in enumerate(blocks)}

    def row_blocks(self, row: int) -> list[int]:
        return self.blocks[row * self.per_row:(row + 1) * self.per_row]

    def row_label(self, row: int) -> str:
        blocks = self.row_blocks(row)
        if len(blocks) > 1:
            return f"blocks {blocks[0]}–{blocks[-1]}"
        return f"block {blocks[0]} · pos {self.steps[blocks[0]][0].block_start}"


def _shown_blocks(trace: Trace, max_blocks: int | None, last: bool) -> list[int]:
    blocks = sorted({s.block for s in trace.steps})
    if max_blocks is None:
        return blocks
    if isinstance(max_blocks, bool) or not isinstance(max_blocks, int) or max_blocks < 1:
        raise ValueError(f"max_blocks: must be a positive integer or None, got {max_blocks!r}")
    return blocks[-max_blocks:] if last else blocks[:max_blocks]


def _history(trace: Trace) -> dict:
    """(block, slot) -> the cell's events in call order: ``(call, step, commit)`` for a commit, ``(call, step,
    None)`` where a rollback dropped the draft. An unverified trace has one commit per cell and no drops."""
    events: dict = {}
    for s in trace.steps:
        for c in s.commits:
            events.setdefault((s.block, c.slot), []).append((s.call, s, c))
        for slot in s.rollback.dropped if s.rollback is not None else ():
            events.setdefault((s.block, slot), []).append((s.call, s, None))
    return events


def _verified_note(trace: Trace, verdicts: dict, step: Step, commit, slot: int) -> str:
    """Hover lines of a verified cell: how the token was written and what NTP said of it (``verdicts`` is
    ``trace.verdicts()``)."""
    rollback = step.rollback
    if commit.ntp and rollback is not None and rollback.slot == slot:
        check = step.rejected[0] if step.rejected else None
        note = "<br><b>NTP's correction</b> of a rejected draft"
        if check is not None:
            note += (f": the draft <b>{_esc(_visible(check.text))}</b> (NTP p = {check.draft_prob:.3f}) was rejected,"
                     f"<br>NTP wanted <b>{_esc(_visible(check.ntp_text))}</b> (p = {check.ntp_prob:.3f})")
        return note + f"<br>rollback: the cache cut back to position {rollback.position}"
    if commit.ntp:
        return "<br>NTP's exact token (the causal prediction, not drafted)"
    hit = verdicts.get((step.call, step.block_start + slot))
    if hit is None:
        return "<br>draft: never checked (a rollback dropped it)" if not trace.kept(step, slot) else "<br>draft"
    call, check = hit
    if check.accepted:
        return f"<br>draft accepted by NTP in call {call} (p = {check.ntp_prob:.3f})"
    return (f"<br>draft <b>rejected</b> in call {call}: NTP wanted <b>{_esc(_visible(check.ntp_text))}</b> "
            f"(p = {check.ntp_prob:.3f}; the draft's p = {check.draft_prob:.3f})")


def _cell(trace: Trace, steps: tuple[Step, ...], history: dict, block: int, slot: int, call: int,
          emax: float, verdicts: dict | None = None) -> tuple[str, str, float, str]:
    """(state, label text, z, hover) of one cell after ``call``; ``steps`` are the block's steps.
    ``verdicts`` (``trace.verdicts()``) only for a verified trace: then its states and notes show the checks."""
    start = steps[0].block_start
    head = f"<b>block {block} · slot {slot}</b> · position {start + slot}"
    if steps[0].call > call:
        return "future", "", _Z["future"], head + "<br>not started"
    events = [e for e in history.get((block, slot), ()) if e[0] <= call]
    _, step, commit = events[-1] if events else (None, None, None)
    if commit is not None:
        state = "now" if step.call == call else "done"
        hover = (f"{head}<br>committed in {'this call' if state == 'now' else f'call {step.call}'}: "
                 f"<b>{_esc(_visible(commit.text))}</b><br>p = {commit.prob:.3f} · entropy {commit.entropy:.3f} nats")
        if commit.gap:
            hover += f"<br>gap fill: {commit.gap} masked slot(s) to its left"
        if verdicts is not None:
            hover += _verified_note(trace, verdicts, step, commit, slot)
            if commit.ntp and step.rollback is not None and step.rollback.slot == slot:
                state = "corrected"
            if not trace.kept(step, slot) and start + slot >= len(trace.prompt_ids) + trace.n_tokens:
                hover += "<br>(after the stop: not in the output)"
            z = _Z_VERIFIED[state]
        else:
            if not trace.kept(step, slot):
                hover += "<br>(after the stop: not in the output)"
            z = _Z[state]
        return state, commit.text, z, hover + _candidates(step, slot)
    latest = [s for s in steps if s.call <= call][-1]  # the block's last call so far predicted this slot
    view = latest.slot_view(slot)
    entropy = view.entropy if view else 0.0
    if step is not None:  # verified: a rollback dropped this slot's draft (a later call may draft it again)
        return "dropped", "", _Z_VERIFIED["dropped"], (
            f"{head}<br>draft dropped by the rollback in call {step.call}: it followed the rejected draft, "
            f"so its position is decoded again after the correction"
            + (f"<br>still masked · entropy {entropy:.3f} nats" + _candidates(latest, slot) if view else ""))
    hover = f"{head}<br>still masked · entropy {entropy:.3f} nats" + _candidates(latest, slot)
    return "masked", MASK_GLYPH, _masked_z(entropy, emax), hover


def _row_cells(trace: Trace, grid: _Grid, history: dict, row: int, call: int, emax: float,
               max_chars: int, verdicts: dict | None = None) -> dict:
    """One grid row after ``call``, as heatmap data (1 x cols)."""
    z, text, hover, custom = [None] * grid.cols, [""] * grid.cols, [""] * grid.cols, [None] * grid.cols
    for i, block in enumerate(grid.row_blocks(row)):
        for slot in range(grid.k):
            col = i * grid.k + slot
            state, label, z[col], hover[col] = _cell(trace, grid.steps[block], history, block, slot, call, emax,
                                                     verdicts)
            text[col] = label if state == "masked" else _label(label, max_chars) if label else ""
            custom[col] = (state, block, slot)
    scale, zmax = (_VERIFIED_SCALE, 6) if verdicts is not None else (_STATE_SCALE, 4)
    return dict(z=[z], text=[text], hovertext=[hover], customdata=[custom], x=list(range(grid.cols)), y=[row],
                colorscale=scale, zmin=0, zmax=zmax, showscale=False, xgap=2, ygap=6, hoverongaps=False,
                texttemplate="%{text}", hovertemplate="%{hovertext}<extra></extra>",
                textfont=dict(family=FONT, size=12 if max_chars >= 5 else 10))


def _row_outlines(grid: _Grid, fills: list, row: int, call: int) -> list:
    """Outlined cells of one grid row after ``call``: every gap fill made so far in its blocks."""
    blocks = grid.row_blocks(row)
    return [(blocks.index(g.block) * grid.k + g.slot, row, (g.block, g.slot, g.call))
            for g in fills if g.call <= call and g.block in blocks]


def _counters(trace: Trace) -> list[str]:
    """Per call: the running counters shown as the frame title."""
    tokens, titles = 0, []
    for s in trace.steps:
        tokens += sum(1 for c in s.commits if trace.kept(s, c.slot))
        titles.append(f"<b>call {s.call}</b> · block {s.block} step {s.step} · {s.call + 1}/{trace.nfe} calls · "
                      f"{tokens} tokens · {tokens / (s.call + 1):.2f} tokens/call" + _verified_counter(trace, s))
    return titles


def _verified_counter(trace: Trace, step: Step) -> str:
    """The frame title's verification part: what this call checked, and the running totals."""
    if not trace.verified:
        return ""
    done = [c for s in trace.steps[: step.call + 1] for c in s.checks]
    rollbacks = sum(1 for s in trace.steps[: step.call + 1] if s.rollback is not None)
    now = (" · <b>checking only</b>" if step.check_only else "") + (
        f" · <b>rollback</b> at slot {step.rollback.slot}" if step.rollback is not None else "")
    return (f"{now}<br>verified: {len(step.checks)} draft(s) checked in this call · {sum(c.accepted for c in done)}"
            f"/{len(done)} accepted so far · {rollbacks} rollback(s)")


def block_fill(trace: Trace, max_blocks: int | None = None, last: bool = False) -> go.Figure:
    """Animate the decode: one frame per model call, one row per block, one column per slot.

    ``max_blocks`` shows only the first N blocks (the last N with ``last=True``); the counters still
    count the whole trace. The figure of ``block_fill_spec`` (the same picture as plain data).
    """
    return go.Figure(block_fill_spec(trace, max_blocks, last))


def block_fill_spec(trace: Trace, max_blocks: int | None = None, last: bool = False) -> dict:
    """``block_fill`` as a plain dict (``data``, ``layout``, ``frames``), ready for ``json.dumps``.

    Building Plotly graph objects validates every property of every frame, which costs as much as
    the decode itself in the app; the browser needs only the JSON, so the app sends this.
    """
    if not isinstance(trace, Trace) or not trace.steps:
        raise ValueError("trace: must be a Trace with at least one step")
    grid = _Grid(trace, _shown_blocks(trace, max_blocks, last))
    history, verdicts = _history(trace), trace.verdicts() if trace.verified else None
    states = VERIFIED_STATES if verdicts is not None else STATES
    fills, emax, titles = trace.gap_fills(), _max_entropy(trace), _counters(trace)
    # Pixel plan, top to bottom: counters (title), settings, prompt, legend, slot axis, grid, buttons, slider.
    cell_w = int(min(64, max(30, 960 / grid.cols)))
    plot_w, row_h, top, bottom, left = grid.cols * cell_w, 32, 180, 140, 140
    width = left + plot_w + max(130, 860 - left - plot_w)  # room on the right for the entropy scale
    height = top + bottom + grid.rows * row_h
    max_chars = max(2, cell_w // 8)

    def rows_at(call: int, rows) -> list:
        """Heatmap and outline traces of these grid rows after ``call``."""
        return ([dict(type="heatmap", **_row_cells(trace, grid, history, r, call, emax, max_chars, verdicts))
                 for r in rows]
                + [_outline_spec(_row_outlines(grid, fills, r, call), STATE_COLORS["gap"]) for r in rows])

    frames = []
    for step in trace.steps:
        # Only the rows of this call's block and the previous call's block change (now -> done).
        rows = range(grid.rows) if step.call == 0 else sorted(
            {grid.row_of[s.block] for s in trace.steps[step.call - 1: step.call + 1] if s.block in grid.row_of})
        frame = dict(name=str(step.call), data=rows_at(step.call, rows), traces=list(rows) + [grid.rows + r for r in rows],
                     layout=dict(title=dict(text=titles[step.call])))
        if step.call:
            frame["baseframe"] = str(step.call - 1)
        frames.append(frame)

    # The first view is the finished decode; "play" replays from call 0.
    data = rows_at(trace.nfe - 1, range(grid.rows)) + [_entropy_bar(emax, max(130, min(180, grid.rows * row_h)))]
    # boundaries between blocks sharing a row
    shapes = [dict(type="line", x0=j * grid.k - 0.5, x1=j * grid.k - 0.5, xref="x", y0=0, y1=1, yref="y domain",
                   line=dict(color="white", width=5)) for j in range(1, grid.per_row if grid.k > 1 else 1)]

    shown = "" if len(grid.blocks) == trace.n_blocks else \
        f" · showing blocks {grid.blocks[0]}–{grid.blocks[-1]} of {trace.n_blocks}"
    prompt = _visible(trace.prompt)
    prompt = prompt if len(prompt) * 8 < width - 100 else "…" + prompt[-((width - 100) // 8):]
    layout = _common_layout(
        width=width, height=height, margin=dict(l=left, r=width - left - plot_w, t=top, b=bottom), showlegend=False,
        modebar=dict(orientation="v"),
        title=dict(text=titles[-1], x=10 / width, xanchor="left", y=1 - 10 / height, yanchor="top",
                   font=dict(size=14)),
        xaxis=dict(side="top", tickvals=list(range(grid.cols)), range=[-0.5, grid.cols - 0.5], fixedrange=True,
                   showgrid=False, zeroline=False, title=dict(standoff=2, text="slot" if grid.per_row == 1 else
                                                              "position in row (blocks share a row)")),
        yaxis=dict(tickvals=list(range(grid.rows)), ticktext=[grid.row_label(r) for r in range(grid.rows)],
                   range=[grid.rows - 0.5, -0.5], fixedrange=True, showgrid=False, zeroline=False),
        annotations=[_top_note(_esc(_settings(trace) + shown), top - 58, left),
                     _top_note("prompt: " + _esc(prompt), top - 80, left), _top_note(_legend(states), top - 124, left)],
        updatemenus=[_play_buttons()], sliders=[_slider(trace, max(1.0, 360 / plot_w))],
        meta=dict(rows=grid.rows, states=list(states), cells="fig.data[row].customdata[0][col] = (state, block, "
                  "slot); fig.data[rows + row] = gap outlines; frames incremental via baseframe (sbd_viz.plots)"))
    if shapes:
        layout["shapes"] = shapes
    layout["template"] = _default_template()  # what go.Figure would add: the same picture either way
    return dict(data=data, layout=layout, frames=frames)


@functools.lru_cache(maxsize=1)
def _default_template() -> dict:
    """Plotly's default template as plain data (read once; callers must not mutate it)."""
    import plotly.io as pio

    return go.Figure().to_plotly_json()["layout"]["template"] if pio.templates.default else {}


def _top_note(text: str, pixels_above_plot: int, left: int) -> dict:
    """A line of text a fixed number of pixels above the grid, starting near the figure's left edge."""
    return dict(text=text, xref="paper", yref="paper", x=0, y=1, xanchor="left", yanchor="bottom",
                xshift=10 - left, yshift=pixels_above_plot, showarrow=False, align="left",
                font=dict(size=12, color="#444"))


def _play_buttons() -> dict:
    def play(from_current: bool) -> dict:
        return dict(frame=dict(duration=700, redraw=True), transition=dict(duration=0), mode="immediate",
                    fromcurrent=from_current)

    pause = dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0), mode="immediate")
    return dict(type="buttons", direction="left", x=0, xanchor="left", y=0, yanchor="top", pad=dict(t=12),
                showactive=False, buttons=[dict(label="▶ play", method="animate", args=[None, play(False)]),
                                           dict(label="■ pause", method="animate", args=[[None], pause]),
                                           dict(label="▷ resume", method="animate", args=[None, play(True)])])


def _slider(trace: Trace, length: float) -> dict:
    jump = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    # a verified trace marks its rollbacks (↺) and checking-only calls (✓) on the scrubber
    steps = [dict(method="animate", label=f"call {s.call}" + (" ↺" if s.rollback is not None else "")
                  + (" ✓" if s.check_only else ""), args=[[str(s.call)], jump]) for s in trace.steps]
    return dict(active=len(steps) - 1, steps=steps, x=0, len=length, y=0, yanchor="top", pad=dict(t=58),
                currentvalue=dict(prefix="", font=dict(size=13)))


# -- entropy heatmap --------------------------------------------------------------------
def entropy_heatmap(trace: Trace, block: int = 0) -> go.Figure:
    """Slot x step entropies of one block, one row per step, in the block-fill colours.

    ``fig.data[0].customdata[step][slot]`` is the entropy the step's call predicted for the slot
    (``None`` where it was not masked); gap-fill outlines are ``fig.data[1]`` as in ``block_fill``.
    """
    blocks = sorted({s.block for s in trace.steps})
    steps = trace.block_steps(block) if isinstance(block, int) and not isinstance(block, bool) else ()
    if not steps:
        raise ValueError(f"block: {block!r} is not a block of this trace (it has blocks 0..{len(blocks) - 1})")
    k, n, emax = steps[0].block_size, len(steps), _max_entropy(trace)
    z, entropy, text, hover = ([[fill] * k for _ in range(n)] for fill in (None, None, "", ""))
    gaps = []
    for r, step in enumerate(steps):
        committed = {c.slot: c for c in step.commits}
        for slot in range(k):
            head, view = f"<b>step {step.step} (call {step.call}) · slot {slot}</b>", step.slot_view(slot)
            if slot not in step.masked:
                z[r][slot], hover[r][slot] = _Z["done"], f"{head}<br>committed before"
                continue
            if view is not None:
                z[r][slot], entropy[r][slot], text[r][slot] = _masked_z(view.entropy, emax), view.entropy, \
                    f"{view.entropy:.2f}"
                hover[r][slot] = f"{head}<br>entropy {view.entropy:.3f} nats" + _candidates(step, slot)
            if slot in committed:
                c = committed[slot]
                z[r][slot], text[r][slot] = _Z["now"], _label(c.text, 6)
                hover[r][slot] += f"<br>committed <b>{_esc(_visible(c.text))}</b> p = {c.prob:.3f}"
                if c.gap:
                    hover[r][slot] += f"<br>gap fill: {c.gap} masked slot(s) to its left"
                    gaps.append((slot, r, (block, slot, step.call)))
    fig = go.Figure([
        go.Heatmap(z=z, customdata=entropy, text=text, hovertext=hover, colorscale=_STATE_SCALE, zmin=0, zmax=4,
                   showscale=False, xgap=2, ygap=2, texttemplate="%{text}", hovertemplate="%{hovertext}<extra></extra>",
                   textfont=dict(family=FONT, size=11)),
        _outline_trace(gaps, STATE_COLORS["gap"])])
    fig.add_trace(_entropy_bar(emax, 120))
    fig.update_layout(**_common_layout(
        title=dict(text=f"Entropy per slot and step · block {block}<br><sup>{_esc(_settings(trace))}</sup>",
                   font=dict(size=13)),
        width=max(560, 140 + k * int(min(52, max(34, 960 / k))) + 120), height=170 + max(n * 36, 120),
        margin=dict(l=140, r=120, t=130, b=40), showlegend=False,
        annotations=[_top_note(_legend(("done", "now", "masked")), 8, 140)],
        xaxis=dict(title="slot", tickvals=list(range(k)), range=[-0.5, k - 0.5], fixedrange=True),
        yaxis=dict(tickvals=list(range(n)), ticktext=[f"step {s.step} (call {s.call})" for s in steps],
                   range=[n - 0.5, -0.5], fixedrange=True)))
    return fig


# -- calls timeline ---------------------------------------------------------------------
def _per_call(trace: Trace) -> tuple[list[int], list[int]]:
    """Output tokens committed per call, split into in-order commits and gap fills."""
    in_order, gap = [], []
    for s in trace.steps:
        kept = [c for c in s.commits if trace.kept(s, c.slot)]
        gap.append(sum(1 for c in kept if c.gap))
        in_order.append(len(kept) - gap[-1])
    return in_order, gap


def _so_far(trace: Trace) -> list[int]:
    """Tokens so far after 0, 1, ..., nfe calls."""
    totals = [0]
    for a, b in zip(*_per_call(trace)):
        totals.append(totals[-1] + a + b)
    return totals


def _rollback_hover(step: Step) -> str:
    check = step.rejected[0] if step.rejected else None
    said = "" if check is None else (f": draft {_esc(_visible(check.text))} rejected, NTP wanted "
                                      f"{_esc(_visible(check.ntp_text))} (p = {check.ntp_prob:.3f})")
    return f"call {step.call}: rollback at block {step.block} slot {step.rollback.slot}{said}"


def calls_timeline(trace: Trace, ntp_trace: Trace | None = None) -> go.Figure:
    """Tokens so far vs calls (line) against next-token prediction, and tokens committed per call (bars).

    A verified trace adds markers above the bars (``trace.meta["role"]``): ``"rollback"`` at each call that
    rejected a draft, ``"check_only"`` at each call spent only on checking drafts."""
    in_order, gap = _per_call(trace)
    calls, grey = list(range(trace.nfe)), dict(color="#777777", width=2, dash="dash")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
    fig.add_trace(go.Scatter(x=list(range(trace.nfe + 1)), y=_so_far(trace), name="tokens so far",
                             mode="lines+markers", line=dict(color=RULE_COLORS[0], width=3), marker=dict(size=5),
                             hovertemplate="%{x} calls: %{y} tokens<extra></extra>"), row=1, col=1)
    if ntp_trace is not None:
        fig.add_trace(go.Scatter(x=list(range(ntp_trace.nfe + 1)), y=_so_far(ntp_trace), name="NTP run",
                                 mode="lines", line=grey, hovertemplate="NTP, %{x} calls: %{y} tokens<extra></extra>"),
                      row=1, col=1)
    else:
        fig.add_trace(go.Scatter(x=[0, trace.nfe], y=[0, trace.nfe], name="NTP: 1 token per call", mode="lines",
                                 line=grey, hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Bar(x=calls, y=in_order, name="committed in order", marker=dict(color=STATE_COLORS["now"]),
                         hovertemplate="call %{x}: %{y} in order<extra></extra>"), row=2, col=1)
    # None, not 0: a zero-height bar would still draw its outline.
    fig.add_trace(go.Bar(x=calls, y=[g or None for g in gap], name="gap fills", marker=dict(
        color=STATE_COLORS["now"], line=dict(color=STATE_COLORS["gap"], width=2), pattern=dict(shape="/")),
        hovertemplate="call %{x}: %{y} gap fills<extra></extra>"), row=2, col=1)
    # Verified decoding: mark, above each call's bar, the calls that rejected a draft and those spent only on checking.
    for role, name, calls_of, symbol in (
            ("rollback", "rollback (a draft rejected)", [s.call for s in trace.rollbacks()], "x"),
            ("check_only", "checking only (no block)", [s.call for s in trace.steps if s.check_only], "diamond-open")):
        if calls_of:
            hover = [_rollback_hover(trace.steps[c]) if role == "rollback" else
                     f"call {c}: checking only, {len(trace.steps[c].checks)} draft(s) checked" for c in calls_of]
            fig.add_trace(go.Scatter(x=calls_of, y=[in_order[c] + gap[c] + 0.35 for c in calls_of], name=name,
                                     mode="markers", meta=dict(role=role), hovertext=hover,
                                     hovertemplate="%{hovertext}<extra></extra>",
                                     marker=dict(symbol=symbol, size=10, color=STATE_COLORS[role],
                                                 line=dict(width=2, color=STATE_COLORS[role]))), row=2, col=1)
    k = _block_size(trace)
    for s in trace.steps if k > 1 else ():  # where a block starts, the per-call counts restart
        if s.step == 0 and s.call:
            fig.add_vline(x=s.call - 0.5, line=dict(color="#CCCCCC", width=1, dash="dot"), row=2, col=1)
    fig.update_layout(**_common_layout(
        barmode="stack", width=820, height=520, margin=dict(l=70, r=30, t=60, b=90),
        title=dict(text=f"{trace.n_tokens} tokens in {trace.nfe} calls · {trace.tokens_per_call:.2f} tokens per "
                        f"call · {_esc(_settings(trace))}", font=dict(size=13)),
        legend=dict(orientation="h", x=0, y=-0.12, yanchor="top", traceorder="normal")))
    fig.update_yaxes(title_text="tokens so far", gridcolor="#EEEEEE", row=1, col=1)
    fig.update_yaxes(title_text="tokens per call", gridcolor="#EEEEEE", range=[0, k + 0.5], row=2, col=1)
    fig.update_xaxes(title_text="model calls", row=2, col=1)
    return fig


# -- speed / quality trade-off ----------------------------------------------------------
_X_AXES = {"tokens_per_call": "tokens per call", "calls_per_token": "calls per token",
           "speedup_calls": "speedup in calls vs NTP", "speedup_wall": "wall-clock speedup vs NTP"}
_HOVER_COLUMNS = ("accuracy", "tokens_per_call", "calls_per_token", "speedup_calls", "speedup_wall", "same_as_ntp")


def _results_frame(results: Any, x: str):
    import pandas as pd  # only this figure needs pandas

    df = results.copy() if isinstance(results, pd.DataFrame) else pd.DataFrame(list(results))
    if "solver" in df.columns and "rule" not in df.columns:  # saved before the commit rule was called "rule"
        df = df.rename(columns={"solver": "rule"})
    missing = [c for c in ("rule", "gamma", "accuracy") if c not in df.columns]
    if missing:
        raise ValueError(f"results: missing columns {missing}")
    if "tokens_per_call" not in df.columns and "calls_per_token" in df.columns:
        df["tokens_per_call"] = 1.0 / df["calls_per_token"]
    if "calls_per_token" not in df.columns and "tokens_per_call" in df.columns:
        df["calls_per_token"] = 1.0 / df["tokens_per_call"]
    if x not in _X_AXES:
        raise ValueError(f"x: must be one of {sorted(_X_AXES)}, got {x!r}")
    if x not in df.columns:
        raise ValueError(f"results: no column {x!r} to put on the x axis")
    df["gap_free"] = df["gap_free"].eq(True) if "gap_free" in df.columns else False
    # a frame from before verified decoding has no verify column: all its rows are unverified
    df["verify"] = df["verify"].eq(True) if "verify" in df.columns else False
    df["line"] = df["rule"].astype(str) + df["gap_free"].map({True: " · gap-free", False: ""})
    is_ntp = df["rule"].astype(str).str.lower() == "ntp"
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
    is_ntp = df["rule"].astype(str).str.lower() == "ntp"
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
        fig.add_trace(go.Scatter(x=ntp[x], y=ntp["accuracy"], name="NTP", mode="markers", meta=dict(role="ntp"),
                                 marker=dict(symbol="star", size=15, color="#000000"), hovertext=_hover_rows(ntp),
                                 hovertemplate="%{hovertext}<extra></extra>"))
        fig.add_hline(y=float(ntp["accuracy"].mean()), line=dict(color="#777777", dash="dot", width=1),
                      annotation_text="NTP accuracy", annotation_position="bottom right")
    if current is not None:
        hit = _current_rows(df, current)
        fig.add_trace(go.Scatter(x=hit[x], y=hit["accuracy"], name="current setting", mode="markers",
                                 meta=dict(role="current"), hoverinfo="skip",
                                 marker=dict(symbol="circle-open", size=24, color="#000000", line=dict(width=3))))
    fig.update_layout(**_common_layout(
        title=dict(text="Speed vs quality", font=dict(size=14)), width=760, height=480, legend=dict(title="rule"),
        xaxis=dict(title=_X_AXES[x], gridcolor="#EEEEEE"),
        # an accuracy is never negative (autorange pads a flat line to [-0.5, 1] otherwise)
        yaxis=dict(title="suite accuracy", gridcolor="#EEEEEE", rangemode="nonnegative")))
    return fig


# -- two runs side by side --------------------------------------------------------------
def first_difference(text_a: str, text_b: str) -> int | None:
    """Index of the first character where the texts differ; ``None`` if they are equal."""
    for name, value in (("text_a", text_a), ("text_b", text_b)):
        if not isinstance(value, str):
            raise ValueError(f"{name}: must be a string, got {type(value).__name__}")
    for i, (a, b) in enumerate(zip(text_a, text_b)):
        if a != b:
            return i
    return None if len(text_a) == len(text_b) else min(len(text_a), len(text_b))


def _token_at(texts: tuple[str, ...], char: int) -> int | None:
    """Index of the token holding character ``char`` of the joined texts (the last token if past the end)."""
    ends = list(accumulate(len(t) for t in texts))
    return min(bisect_right(ends, char), len(texts) - 1) if texts else None


def _token_row(label: str, trace: Trace, width: int, n_lines: int) -> go.Heatmap:
    """A run's output as wrapped cells, each shaded by how many tokens its call committed."""
    calls = trace.token_calls()
    size = {c: calls.count(c) for c in set(calls)}
    z, text, hover = ([[fill] * width for _ in range(n_lines)] for fill in (None, "", ""))
    for i, (tok, call) in enumerate(zip(trace.output_texts, calls)):
        row, col = divmod(i, width)
        z[row][col], text[row][col] = size[call], _label(tok, 5)
        hover[row][col] = (f"<b>{_esc(label)}</b> token {i}: <b>{_esc(_visible(tok))}</b><br>committed in call "
                           f"{call} with {size[call] - 1} other token(s)")
    return go.Heatmap(z=z, text=text, hovertext=hover, texttemplate="%{text}", coloraxis="coloraxis", xgap=2, ygap=4,
                      hovertemplate="%{hovertext}<extra></extra>", hoverongaps=False, name=label,
                      textfont=dict(family=FONT, size=11))


def compare(trace_a: Trace, trace_b: Trace, labels: tuple[str, str] = ("A", "B"), width: int = 16) -> go.Figure:
    """Two runs stacked: tokens shaded by how many tokens their call committed; the first difference outlined.

    ``fig.layout.meta["first_difference"]`` is the character index where the outputs first differ (or None).
    """
    if len(labels) != 2:
        raise ValueError(f"labels: need two labels, got {labels!r}")
    runs = list(zip(labels, (trace_a, trace_b)))
    diff = first_difference("".join(trace_a.output_texts), "".join(trace_b.output_texts))
    lines = [max(1, math.ceil(t.n_tokens / width)) for _, t in runs]
    fig = make_subplots(rows=2, cols=1, row_heights=lines, vertical_spacing=0.1 + 0.2 / sum(lines),
                        subplot_titles=[f"{_esc(label)}: {_esc(_settings(t))} · {t.nfe} calls · {t.n_tokens} tokens"
                                        f" · {t.tokens_per_call:.2f} tokens per call" for label, t in runs])
    for r, (label, t) in enumerate(runs, start=1):
        fig.add_trace(_token_row(label, t, width, lines[r - 1]), row=r, col=1)
        at = _token_at(t.output_texts, diff) if diff is not None else None
        marks = [] if at is None else [(at % width, at // width, (label, at))]
        fig.add_trace(_outline_trace(marks, STATE_COLORS["diff"], inset=0.04, showlegend=r == 1 and bool(marks),
                                     name=f"texts first differ (char {diff})"), row=r, col=1)
        fig.update_yaxes(range=[lines[r - 1] - 0.5, -0.5], tickvals=list(range(lines[r - 1])), fixedrange=True,
                         ticktext=[f"tok {i * width}" for i in range(lines[r - 1])], row=r, col=1)
        fig.update_xaxes(range=[-0.5, width - 0.5], showticklabels=False, fixedrange=True, row=r, col=1)
    note = "the texts are identical" if diff is None else f"texts first differ at character {diff}"
    fig.update_layout(**_common_layout(
        title=dict(text=f"{_esc(labels[0])} vs {_esc(labels[1])}: {note}", font=dict(size=14)),
        width=120 + width * 58, height=200 + 30 * sum(lines), margin=dict(l=80, r=40, t=90, b=50),
        coloraxis=dict(colorscale=CALL_SCALE, cmin=1, cmax=max(_block_size(trace_a), _block_size(trace_b), 2),
                       colorbar=dict(title=dict(text="tokens<br>in its call"), thickness=12, len=0.8)),
        legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"), meta=dict(first_difference=diff)))
    for note in fig.layout.annotations:  # subplot titles: left aligned, small
        note.update(x=0, xanchor="left", font=dict(size=12))
    return fig


# -- HTML export ------------------------------------------------------------------------
_CSS = ("<style>.sbd-trace{font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;font-size:13px;color:#222}"
        ".sbd-trace pre{white-space:pre-wrap;background:#F6F6F6;padding:6px;margin:4px 0;max-height:9em;"
        "overflow:auto}.sbd-trace td{padding:1px 10px 1px 0;vertical-align:top}</style>")


def _header_html(trace: Trace) -> str:
    fills = trace.gap_fills()
    listed = "".join(f"<br>call {g.call}, block {g.block}, slot {g.slot} (gap {g.gap}): {_esc(g.state)}"
                     + ("" if g.kept else " (after the stop: discarded)") for g in fills[:8])
    listed += "<br>…" if len(fills) > 8 else ""
    kept = sum(g.kept for g in fills)
    rows = [("settings", _esc(_settings(trace))),
            ("calls", f"{trace.nfe} model calls for {trace.n_tokens} tokens · {trace.tokens_per_call:.2f} tokens "
                      f"per call · {trace.wall_time:.2f} s · stop: {_esc(trace.stop_reason)}"),
            ("gap fills", f"{kept} kept in the output"
                          + (f" ({len(fills) - kept} more discarded by the stop)" if len(fills) > kept else "")
                          + listed)]
    if trace.verified:
        checks = trace.checks()
        rows.append(("verified", f"{sum(c.accepted for c in checks)}/{len(checks)} drafts accepted by NTP · "
                                 f"{len(trace.rollbacks())} rollback(s) · {trace.n_check_only} checking-only "
                                 "call(s) · the text is greedy NTP's"))
    table = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    prompt = trace.prompt if len(trace.prompt) <= 2000 else trace.prompt[:2000] + "…"
    return (f"{_CSS}<div class='sbd-trace'><b>prompt</b><pre>{_esc(prompt)}</pre>"
            f"<b>output</b><pre>{_esc(trace.text)}</pre><table>{table}</table></div>")


def _figure_html(fig: go.Figure) -> str:
    # plotly.js inline, never from a CDN: the page must work offline.
    return fig.to_html(full_html=False, include_plotlyjs=True, auto_play=False, include_mathjax=False)


def save_html(trace_or_fig: Trace | go.Figure, path: str | Path | None = None) -> str:
    """A self-contained offline page (plotly.js inline); written to ``path`` if given; returns the HTML."""
    if isinstance(trace_or_fig, Trace):
        header, fig, title = _header_html(trace_or_fig), block_fill(trace_or_fig), "SBD trace"
    elif isinstance(trace_or_fig, go.Figure):
        header, fig, title = "", trace_or_fig, "sbd_viz figure"
    else:
        raise ValueError(f"trace_or_fig: must be a Trace or a plotly Figure, got {type(trace_or_fig).__name__}")
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
            f"<body>{header}{_figure_html(fig)}</body></html>\n")
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page


def trace_html(trace: Trace) -> str:
    """HTML fragment for Jupyter: header plus the block-fill animation, with one inline plotly.js copy."""
    figure = _figure_html(block_fill(trace)) if trace.steps else ""  # a repr must not raise
    return f"<div>{_header_html(trace)}{figure}</div>"


# -- roofline: what a call would cost on other hardware ---------------------------------
def roofline(hardware: Any = ("h100-fp8", "h100-bf16", "a100-bf16"), model: Any = "paper-8b",
             batches: Any = (1, 16), kv_len: int = 16, max_tokens: int = 1024, mode: str = "corrected",
             measured: Any = None, measured_label: str = "measured") -> go.Figure:
    """Seconds per model call against tokens in the call (log-log): one line per (hardware, batch).

    ``hardware`` and ``model`` are names or records of ``sbd_viz.roofline`` (``model`` may also be
    an ``SBDModel`` or a config); every call has ``kv_len`` cached tokens and ``batch`` sequences of
    that many tokens each. A diamond marks each line's knee: the fewest tokens at which compute
    takes over from memory (``roofline.knee_tokens``; absent beyond ``max_tokens``). ``measured``:
    optional ``(tokens, seconds)`` pairs, e.g. block calls timed on this machine, drawn as black
    points. Reading it without a browser: ``trace.meta["role"]`` is ``"line"``, ``"knee"`` or
    ``"measured"``; lines and knees also carry ``hardware``, ``batch`` (and ``tokens`` for a knee).
    """
    from . import roofline as rf

    hws = [hardware] if isinstance(hardware, (str, rf.Hardware)) else list(hardware)
    if not hws:
        raise ValueError(f"hardware: give at least one of {list(rf.hardware_names())}")
    hws, shape = [rf.get_hardware(h) for h in hws], rf.get_model(model)
    batches = [batches] if isinstance(batches, int) else list(batches)
    if not batches:
        raise ValueError("batches: give at least one batch size")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ValueError(f"max_tokens: must be a whole number >= 2, got {max_tokens!r}")
    tokens = sorted({max(1, round(max_tokens ** (i / 60))) for i in range(61)})  # even steps on a log axis
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    fig = go.Figure()
    for i, hw in enumerate(hws):
        color = RULE_COLORS[i % len(RULE_COLORS)]
        for j, b in enumerate(batches):
            name = f"{hw.name} · batch {b}"
            seconds = [rf.forward_time(q, kv_len, b, hw, shape, mode) for q in tokens]
            fig.add_trace(go.Scatter(
                x=tokens, y=seconds, name=name, mode="lines", line=dict(color=color, width=2, dash=dashes[j % 5]),
                meta=dict(role="line", hardware=hw.name, batch=b),
                hovertemplate=f"{_esc(name)}<br>%{{x}} tokens: %{{y:.3s}}s per call<extra></extra>"))
            knee = rf.knee_tokens(b, hw, shape, kv_len, mode, max_tokens)
            if knee is not None:
                fig.add_trace(go.Scatter(
                    x=[knee], y=[rf.forward_time(knee, kv_len, b, hw, shape, mode)], name=f"knee · {name}",
                    mode="markers", showlegend=False, meta=dict(role="knee", hardware=hw.name, batch=b, tokens=knee),
                    marker=dict(symbol="diamond", size=11, color=color, line=dict(color="#000000", width=1)),
                    hovertemplate=f"{_esc(name)}: compute-bound from {knee} tokens<extra></extra>"))
    if measured is not None:
        points = list(measured)
        if not points or not all(isinstance(p, (tuple, list)) and len(p) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in p) for p in points):
            raise ValueError(f"measured: expected (tokens, seconds) pairs of positive numbers, got {points!r:.200}")
        fig.add_trace(go.Scatter(
            x=[p[0] for p in points], y=[p[1] for p in points], name=measured_label, mode="markers",
            meta=dict(role="measured"), marker=dict(symbol="circle", size=9, color="#000000"),
            hovertemplate=f"{_esc(measured_label)}<br>%{{x}} tokens: %{{y:.3s}}s<extra></extra>"))
    fig.update_layout(**_common_layout(
        title=dict(text=f"Time per call: {_esc(shape.name)}, {kv_len} cached tokens, {mode} shapes · "
                        "◆ compute takes over", font=dict(size=13)),
        width=820, height=520, legend=dict(title="hardware · batch"),
        xaxis=dict(title="tokens in the call (per sequence)", type="log", gridcolor="#EEEEEE"),
        yaxis=dict(title="seconds per call", type="log", gridcolor="#EEEEEE")))
    return fig
