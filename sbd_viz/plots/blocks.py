"""The block-fill animation (the signature view) and the entropy heatmap of one block.

``block_fill`` (one frame per model call, one grid row per block, one column per slot), ``block_fill_spec`` (the
same as plain data) and ``entropy_heatmap``. How to read its cells without a browser, and what a verified or a
canvas trace adds: docs/figures.md.
"""

from __future__ import annotations

import functools
import math
from itertools import accumulate

import plotly.graph_objects as go

from ..trace.checks import check_whole
from ..trace.data import Step, Trace
from ..trace.labels import COUNT_LABELS, mark_special, output_labels, token_label, visible
from .style import (
    CANVAS_STATES,
    CHECK_ONLY_MARK,
    FIT_WIDTH,
    FONT,
    MASK_GLYPH,
    MIN_CELL,
    ROLLBACK_MARK,
    STATE_COLORS,
    STATE_SCALE,
    STATES,
    VERIFIED_SCALE,
    VERIFIED_STATES,
    Z_VERIFIED,
    Z,
    block_size_of,
    candidates_hover,
    cell_grid,
    cell_label,
    common_layout,
    entropy_bar,
    esc,
    legend_html,
    masked_z,
    max_entropy,
    open_slot_label,
    outline_spec,
    outline_trace,
    settings_line,
    text_px,
    token_html,
    top_note,
)


class _Grid:
    """Where each (block, slot) sits: one row per block; tiny blocks (NTP, k = 1) share a row; a block wider than
    ``max_cols`` slots wraps over several rows of equal width (each row labelled with its first position)."""

    def __init__(self, trace: Trace, blocks: list[int], max_cols: int):
        self.blocks, self.k = blocks, block_size_of(trace)
        self.per_row = 1 if self.k >= 4 else max(1, 16 // self.k)
        self.lines = math.ceil(self.k / max_cols)  # rows per block
        self.span = math.ceil(self.k / self.lines)  # slots per row of a wrapped block
        self.rows = math.ceil(len(blocks) / self.per_row) * self.lines
        self.cols = self.k * min(self.per_row, len(blocks)) if self.lines == 1 else self.span
        self.steps = {b: trace.block_steps(b) for b in blocks}
        self.index = {b: i for i, b in enumerate(blocks)}
        self.labels = output_labels(trace)  # each output token's cell label and hover note, read in context

    def where(self, block: int, slot: int) -> tuple[int, int]:
        """(row, col) of a block's slot."""
        i = self.index[block]
        return (i // self.per_row) * self.lines + slot // self.span, (i % self.per_row) * self.k + slot % self.span

    def rows_of(self, block: int) -> range:
        first = (self.index[block] // self.per_row) * self.lines
        return range(first, first + self.lines)

    def row_slots(self, row: int) -> list[tuple[int, int, int]]:
        """(col, block, slot) of every cell of a grid row."""
        group, line = divmod(row, self.lines)
        out = []
        for block in self.blocks[group * self.per_row : (group + 1) * self.per_row]:
            for slot in range(line * self.span, min(self.k, (line + 1) * self.span)):
                out.append((self.where(block, slot)[1], block, slot))
        return out

    def row_label(self, row: int) -> str:
        group, line = divmod(row, self.lines)
        blocks = self.blocks[group * self.per_row : (group + 1) * self.per_row]
        if len(blocks) > 1:
            return f"blocks {blocks[0]}–{blocks[-1]}"
        if self.lines > 1:
            return f"block {blocks[0]} · slots {line * self.span}–{min(self.k, (line + 1) * self.span) - 1}"
        return f"block {blocks[0]} · pos {self.steps[blocks[0]][0].block_start}"

    def axis_title(self) -> str:
        if self.lines > 1:
            return "slot in the row"  # the row labels name the slots each row holds
        return "slot" if self.per_row == 1 else "position in row (blocks share a row)"


def _shown_blocks(trace: Trace, max_blocks: int | None, last: bool) -> list[int]:
    blocks = sorted({s.block for s in trace.steps})
    if max_blocks is None:
        return blocks
    check_whole(max_blocks, "max_blocks", 1)
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


def _correction_note(trace: Trace, step: Step) -> str:
    """Hover lines of NTP's correction: the rejected draft, NTP's token, the rollback."""
    check = step.rejected[0] if step.rejected else None
    note = "<br><b>NTP's correction</b> of a rejected draft"
    if check is not None:
        note += (
            f": the draft <b>{token_html(check.text, trace.special_tokens)}</b> (NTP p = "
            f"{check.draft_prob:.3f}) was rejected,<br>NTP wanted <b>"
            f"{token_html(check.ntp_text, trace.special_tokens)}</b> (p = {check.ntp_prob:.3f})"
        )
    assert step.rollback is not None, "NTP's correction ends in a rollback"
    return note + f"<br>rollback: the cache cut back to position {step.rollback.position}"


def _verified_note(trace: Trace, verdicts: dict, step: Step, commit, slot: int) -> str:
    """Hover lines of a verified cell: how the token was written and what NTP said of it (``verdicts`` is
    ``trace.verdicts()``)."""
    rollback = step.rollback
    took = step.alternatives_taken  # at slots 0..took-1, before the step's exact token
    if commit.ntp and rollback is not None and rollback.slot == slot:
        return _correction_note(trace, step) + (
            "<br>NTP's token was the token tree's alternative here: the call went on along it" if took > 0 else ""
        )
    if commit.ntp and slot < took:
        return "<br>an alternative the token tree drafted, taken: NTP's token here, checked in this call"
    if commit.ntp:
        return "<br>NTP's exact token (the causal prediction, not drafted)"
    others = [a for a in step.alternatives if a.slot == slot]
    also = (
        (
            "<br>the token tree's alternatives here: "
            + ", ".join(f"{token_html(a.text, trace.special_tokens)} (p = {a.prob:.3f})" for a in others)
        )
        if others
        else ""
    )
    hit = verdicts.get((step.call, step.block_start + slot))
    if hit is None:
        never = "<br>draft: never checked (a rollback dropped it)"
        return (never if not trace.kept(step, slot) else "<br>draft") + also
    call, check = hit
    if check.accepted:
        return f"<br>draft accepted by NTP in call {call} (p = {check.ntp_prob:.3f})" + also
    return (
        f"<br>draft <b>rejected</b> in call {call}: NTP wanted <b>"
        f"{token_html(check.ntp_text, trace.special_tokens)}</b> "
        f"(p = {check.ntp_prob:.3f}; the draft's p = {check.draft_prob:.3f})"
    ) + also


def _cell(
    trace: Trace,
    steps: tuple[Step, ...],
    history: dict,
    block: int,
    slot: int,
    call: int,
    emax: float,
    verdicts: dict | None = None,
    labels: list | None = None,
) -> tuple[str, str, float, str]:
    """(state, label text, z, hover) of one cell after ``call``; ``steps`` are the block's steps.
    ``verdicts`` (``trace.verdicts()``) only for a verified trace: then its states and notes show the checks.
    ``labels``: ``output_labels(trace)``; a token the output holds shows as it reads there (a character whose
    bytes span tokens whole where it completes), any other as its token alone."""
    special = trace.special_tokens
    start = steps[0].block_start
    head = f"<b>block {block} · slot {slot}</b> · position {start + slot}"
    if steps[0].call > call:
        return "future", "", Z["future"], head + "<br>not started"
    events = [e for e in history.get((block, slot), ()) if e[0] <= call]
    _, step, commit = events[-1] if events else (None, None, None)
    if commit is not None:
        assert step is not None  # a commit's event holds its step
        state = "now" if step.call == call else "done"
        out = start + slot - len(trace.prompt_ids)
        label, note = (
            labels[out] if labels is not None and trace.kept(step, slot) else (token_label(commit.text, special), "")
        )
        hover = (
            f"{head}<br>committed in {'this call' if state == 'now' else f'call {step.call}'}: "
            f"<b>{esc(label)}</b>"
            + (f" · {esc(note)}" if note else "")
            + f"<br>p = {commit.prob:.3f} · entropy {commit.entropy:.3f} nats"
        )
        if commit.gap:
            hover += f"<br>gap fill: {commit.gap} masked slot(s) to its left"
        if verdicts is not None:
            hover += _verified_note(trace, verdicts, step, commit, slot)
            if commit.ntp and step.rollback is not None and step.rollback.slot == slot:
                state = "corrected"
            if not trace.kept(step, slot) and start + slot >= len(trace.prompt_ids) + trace.n_tokens:
                hover += "<br>(after the stop: not in the output)"
            z = Z_VERIFIED[state]
        else:
            if not trace.kept(step, slot):
                hover += "<br>(after the stop: not in the output)"
            z = Z[state]
        return state, label, z, hover + candidates_hover(step, slot, special=special)
    latest = [s for s in steps if s.call <= call][-1]  # the block's last call so far predicted this slot
    view = latest.slot_view(slot)
    entropy = view.entropy if view else 0.0
    if step is not None:  # verified: a rollback dropped this slot's draft (a later call may draft it again)
        return (
            "dropped",
            "",
            Z_VERIFIED["dropped"],
            (
                f"{head}<br>draft dropped by the rollback in call {step.call}: it followed the rejected draft, "
                f"so its position is decoded again after the correction"
                + (
                    f"<br>still masked · entropy {entropy:.3f} nats" + candidates_hover(latest, slot, special=special)
                    if view
                    else ""
                )
            ),
        )
    hover = f"{head}<br>{open_slot_label(trace)} · entropy {entropy:.3f} nats" + candidates_hover(
        latest, slot, special=special
    )
    return "masked", MASK_GLYPH, masked_z(entropy, emax), hover


def _canvas_cell(steps: tuple[Step, ...], block: int, slot: int, call: int, emax: float) -> tuple[str, str, float, str]:
    """(state, label text, z, hover) of one cell of a canvas trace after ``call``."""
    head = f"<b>block {block} · slot {slot}</b> · position {steps[0].block_start + slot}"
    if steps[0].call > call:
        return "future", "", Z["future"], head + "<br>not started"
    latest = [s for s in steps if s.call <= call][-1]
    if slot >= len(latest.canvas):  # a last block cut short by max_new_tokens has fewer slots than the block size
        return "future", "", Z["future"], head + "<br>past the length limit: not decoded"
    d, now = latest.canvas[slot], latest.call == call
    tops = "".join(f"<br>  {token_html(c.text)}  {c.prob:.3f}" for c in d.top)
    draft = (
        f"<br>draft <b>{token_html(d.text)}</b> p = {d.prob:.3f} · entropy {d.entropy:.3f} nats"
        f"<br>top candidates:{tops}"
    )
    ended = latest is steps[-1]
    if d.accepted:
        state = "now" if now and slot in latest.committed_slots else "done"
        when = "newly accepted in this call" if state == "now" else "accepted since an earlier call"
        assert d.held_text is not None  # an accepted slot holds its token
        held = f"<br>holds the accepted <b>{token_html(d.held_text)}</b> ({when})"
        return (
            state,
            d.text if ended else d.held_text,
            Z[state],
            head
            + (f"<br>output: <b>{token_html(d.text)}</b> (the block's last draft)" if ended else "")
            + held
            + draft,
        )
    state = "renoised" if now and slot in latest.renoised else "masked"
    note = "<b>renoised</b> in this call: its accepted token was taken back" if state == "renoised" else "open (noise)"
    if ended:
        note += f"<br>output: <b>{token_html(d.text)}</b> (the block's last draft, never accepted)"
    return state, d.text if ended else MASK_GLYPH, masked_z(d.entropy, emax), f"{head}<br>{note}" + draft


def _renoise_outlines(grid: _Grid, row: int, call: int) -> list:
    """Cells of one grid row that ``call`` renoised (outlined in that frame only: the flicker)."""
    return [
        (col, row, (b, slot, call))
        for col, b, slot in grid.row_slots(row)
        for s in grid.steps[b]
        if s.call == call and slot in s.renoised
    ]


def _row_cells(
    trace: Trace,
    grid: _Grid,
    history: dict,
    row: int,
    call: int,
    emax: float,
    max_chars: int,
    font: int,
    verdicts: dict | None = None,
) -> dict:
    """One grid row after ``call``, as heatmap data (1 x cols)."""
    z: list[float | None] = [None] * grid.cols
    text, hover = [""] * grid.cols, [""] * grid.cols
    custom: list[tuple[str, int, int] | None] = [None] * grid.cols
    for col, block, slot in grid.row_slots(row):
        if trace.has_canvas:
            state, label, z[col], hover[col] = _canvas_cell(grid.steps[block], block, slot, call, emax)
        else:
            state, label, z[col], hover[col] = _cell(
                trace, grid.steps[block], history, block, slot, call, emax, verdicts, grid.labels
            )
        text[col] = label if label == MASK_GLYPH else cell_label(label, max_chars) if label else ""
        custom[col] = (state, block, slot)
    scale, zmax = (VERIFIED_SCALE, 6) if verdicts is not None else (STATE_SCALE, 4)
    return dict(
        z=[z],
        text=[text],
        hovertext=[hover],
        customdata=[custom],
        x=list(range(grid.cols)),
        y=[row],
        colorscale=scale,
        zmin=0,
        zmax=zmax,
        showscale=False,
        xgap=2,
        ygap=6,
        hoverongaps=False,
        texttemplate="%{text}",
        hovertemplate="%{hovertext}<extra></extra>",
        textfont=dict(family=FONT, size=font),
    )


def _row_outlines(grid: _Grid, fills: list, row: int, call: int) -> list:
    """Outlined cells of one grid row after ``call``: every gap fill made so far in its blocks."""
    cols = {(b, slot): col for col, b, slot in grid.row_slots(row)}
    return [
        (cols[g.block, g.slot], row, (g.block, g.slot, g.call))
        for g in fills
        if g.call <= call and (g.block, g.slot) in cols
    ]


def committed_counts(trace: Trace) -> list[int]:
    """Per call: the output tokens committed by the end of that call. A token counts once it is in the output for
    good: an unverified decode's commit at its call (a commit past the stop never), a verified decode's drafted token
    only at the call whose check accepted it (a draft still waiting for its check is not a token yet), NTP's own
    token at the call that wrote it. The last call's count is every output token of a decode that checked them all."""
    verdicts = trace.verdicts() if trace.verified else {}
    at = [0] * trace.nfe
    for s in trace.steps:
        for c in s.commits:
            if not trace.kept(s, c.slot):
                continue
            if trace.verified and not c.ntp:
                checked = verdicts.get((s.call, s.block_start + c.slot))
                if checked is None:  # never checked: not committed
                    continue
                at[checked[0]] += 1
            else:
                at[s.call] += 1
    return list(accumulate(at))


def _counters(trace: Trace) -> list[str]:
    """Per call: the running counters shown as the frame title (tokens counted as ``committed_counts`` counts them,
    the ratio named as ``COUNT_LABELS`` names it)."""
    label = COUNT_LABELS[(True, True)]
    titles = []
    for s, tokens in zip(trace.steps, committed_counts(trace)):
        titles.append(
            f"<b>call {s.call}</b> · block {s.block} step {s.step} · {s.call + 1}/{trace.nfe} calls · "
            f"{tokens} token{'' if tokens == 1 else 's'} committed"
            + (f" · {len(s.renoised)} renoised" if s.renoised else "")
            + f"<br>{tokens / (s.call + 1):.2f} {label}"
            + _verified_counter(trace, s)
        )
    return titles


def _verified_counter(trace: Trace, step: Step) -> str:
    """The frame title's verification part: what this call checked, and the running totals."""
    if not trace.verified:
        return ""
    done = [c for s in trace.steps[: step.call + 1] for c in s.checks]
    rollbacks = sum(1 for s in trace.steps[: step.call + 1] if s.rollback is not None)
    now = (f" · {CHECK_ONLY_MARK} <b>checking only</b>" if step.check_only else "") + (
        f" · {ROLLBACK_MARK} <b>rollback</b> at slot {step.rollback.slot}" if step.rollback is not None else ""
    )
    return (
        f"{now}<br>verified: {len(step.checks)} draft(s) checked in this call · {sum(c.accepted for c in done)}"
        f"/{len(done)} accepted so far · {rollbacks} rollback(s)"
    )


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
    left, right = 140, 120  # the row labels; the entropy scale
    grid = _Grid(trace, _shown_blocks(trace, max_blocks, last), (FIT_WIDTH - left - right) // MIN_CELL)
    history, verdicts = _history(trace), trace.verdicts() if trace.verified else None
    states = VERIFIED_STATES if verdicts is not None else CANVAS_STATES if trace.has_canvas else STATES
    fills, emax, titles = trace.gap_fills(), max_entropy(trace), _counters(trace)
    marks = tuple(
        m for m, shown in ((ROLLBACK_MARK, trace.rollbacks()), (CHECK_ONLY_MARK, trace.n_check_only)) if shown
    )
    # Pixel plan, top to bottom: counters (title), settings, prompt, legend, slot axis, grid, buttons, slider. A
    # title line past the first and a legend line past the second each push what is below by 18 px. The figure is
    # FIT_WIDTH wide: the cells share what the row labels and the entropy scale leave (a wide block wraps).
    width = FIT_WIDTH
    legend = legend_html(states, open_slot_label(trace), marks, width - 40)
    below_title = 18 * (max(t.count("<br>") for t in titles))
    below_legend = below_title + 18 * (legend.count("<br>") - 1)
    cell_w = int(min(64, (width - left - right) / grid.cols))
    plot_w, row_h, top, bottom = grid.cols * cell_w, 32, 180 + below_legend, 140
    height = top + bottom + grid.rows * row_h
    # the larger font only where a label of 8 characters (a BPE word with its ␣, ⟨im_end⟩) still fits whole
    font = 12 if cell_w - 4 >= 8 * text_px("x", 12) else 10
    max_chars = max(2, int((cell_w - 4) // text_px("x", font)))

    def rows_at(call: int, rows) -> list:
        """Heatmap and outline traces of these grid rows after ``call``."""
        return (
            [
                dict(type="heatmap", **_row_cells(trace, grid, history, r, call, emax, max_chars, font, verdicts))
                for r in rows
            ]
            + [outline_spec(_row_outlines(grid, fills, r, call), STATE_COLORS["gap"]) for r in rows]
            + [
                outline_spec(_renoise_outlines(grid, r, call), STATE_COLORS["renoised"], inset=0.04)
                for r in (rows if trace.has_canvas else ())
            ]
        )

    frames = []
    for step in trace.steps:
        # Only the rows of this call's block and the previous call's block change (now -> done).
        rows = (
            range(grid.rows)
            if step.call == 0
            else sorted(
                {
                    r
                    for s in trace.steps[step.call - 1 : step.call + 1]
                    if s.block in grid.index
                    for r in grid.rows_of(s.block)
                }
            )
        )
        frame = dict(
            name=str(step.call),
            data=rows_at(step.call, rows),
            traces=list(rows)
            + [grid.rows + r for r in rows]
            + [2 * grid.rows + r for r in (rows if trace.has_canvas else ())],
            layout=dict(title=dict(text=titles[step.call])),
        )
        if step.call:
            frame["baseframe"] = str(step.call - 1)
        frames.append(frame)

    # The first view is the finished decode; "play" replays from call 0.
    data = rows_at(trace.nfe - 1, range(grid.rows)) + [entropy_bar(emax, max(130, min(180, grid.rows * row_h)))]
    # boundaries between blocks sharing a row
    shapes = [
        dict(
            type="line",
            x0=j * grid.k - 0.5,
            x1=j * grid.k - 0.5,
            xref="x",
            y0=0,
            y1=1,
            yref="y domain",
            line=dict(color="white", width=5),
        )
        for j in range(1, grid.per_row if grid.k > 1 else 1)
    ]

    shown = (
        ""
        if len(grid.blocks) == trace.n_blocks
        else f" · showing blocks {grid.blocks[0]}–{grid.blocks[-1]} of {trace.n_blocks}"
    )
    prompt = visible(mark_special(trace.prompt, trace.special_tokens), spaces=True)
    prompt = prompt if len(prompt) * 8 < width - 100 else "…" + prompt[-((width - 100) // 8) :]
    layout = common_layout(
        width=width,
        height=height,
        margin=dict(l=left, r=width - left - plot_w, t=top, b=bottom),
        showlegend=False,
        modebar=dict(orientation="v"),
        title=dict(text=titles[-1], x=10 / width, xanchor="left", y=1 - 10 / height, yanchor="top", font=dict(size=14)),
        xaxis=dict(
            side="top",
            tickvals=list(range(grid.cols)),
            range=[-0.5, grid.cols - 0.5],
            fixedrange=True,
            showgrid=False,
            zeroline=False,
            title=dict(standoff=2, text=grid.axis_title()),
        ),
        yaxis=dict(
            tickvals=list(range(grid.rows)),
            ticktext=[grid.row_label(r) for r in range(grid.rows)],
            range=[grid.rows - 0.5, -0.5],
            fixedrange=True,
            showgrid=False,
            zeroline=False,
        ),
        annotations=[
            top_note(esc(settings_line(trace) + shown), top - 58 - below_title, left),
            top_note("prompt: " + esc(prompt), top - 80 - below_title, left),
            top_note(legend, top - 124 - below_legend, left),
        ],
        updatemenus=[_play_buttons()],
        sliders=[_slider(trace, max(1.0, 360 / plot_w))],
        meta=dict(
            rows=grid.rows,
            states=list(states),
            cells="fig.data[row].customdata[0][col] = (state, block, "
            "slot); fig.data[rows + row] = gap outlines; frames incremental via baseframe (sbd_viz.plots)",
        ),
    )
    if shapes:
        layout["shapes"] = shapes
    layout["template"] = _default_template()  # what go.Figure would add: the same picture either way
    return dict(data=data, layout=layout, frames=frames)


@functools.lru_cache(maxsize=1)
def _default_template() -> dict:
    """Plotly's default template as plain data (read once; callers must not mutate it)."""
    import plotly.io as pio

    return go.Figure().to_plotly_json()["layout"]["template"] if pio.templates.default else {}


def _play_buttons() -> dict:
    def play(from_current: bool) -> dict:
        return dict(
            frame=dict(duration=700, redraw=True),
            transition=dict(duration=0),
            mode="immediate",
            fromcurrent=from_current,
        )

    pause = dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0), mode="immediate")
    return dict(
        type="buttons",
        direction="left",
        x=0,
        xanchor="left",
        y=0,
        yanchor="top",
        pad=dict(t=12),
        showactive=False,
        buttons=[
            dict(label="▶ play", method="animate", args=[None, play(False)]),
            dict(label="■ pause", method="animate", args=[[None], pause]),
            dict(label="▷ resume", method="animate", args=[None, play(True)]),
        ],
    )


def _slider(trace: Trace, length: float) -> dict:
    jump = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    # a verified trace marks its rollbacks (↺) and checking-only calls (✓) on the scrubber
    steps = [
        dict(
            method="animate",
            label=f"call {s.call}"
            + (f" {ROLLBACK_MARK}" if s.rollback is not None else "")
            + (f" {CHECK_ONLY_MARK}" if s.check_only else ""),
            args=[[str(s.call)], jump],
        )
        for s in trace.steps
    ]
    return dict(
        active=len(steps) - 1,
        steps=steps,
        x=0,
        len=length,
        y=0,
        yanchor="top",
        pad=dict(t=58),
        currentvalue=dict(prefix="", font=dict(size=13)),
    )


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
    k, n, emax = steps[0].block_size, len(steps), max_entropy(trace)
    labels, special = output_labels(trace), trace.special_tokens
    z: list[list[float | None]] = [[None] * k for _ in range(n)]
    entropy: list[list[float | None]] = [[None] * k for _ in range(n)]
    text, hover = [[""] * k for _ in range(n)], [[""] * k for _ in range(n)]
    gaps, renoised = [], []
    cell_w = min(52.0, (FIT_WIDTH - 260) / k)  # at most FIT_WIDTH wide: a wide block's cells narrow
    chars = int((cell_w - 4) // text_px("x", 11))  # a cell's label; an entropy (4 characters) only where it fits
    for r, step in enumerate(steps):
        committed = {c.slot: c for c in step.commits}
        for slot in range(k):
            head, view = f"<b>step {step.step} (call {step.call}) · slot {slot}</b>", step.slot_view(slot)
            if slot in step.renoised:  # a canvas slot accepted before this step and taken back by it
                d = step.canvas[slot]
                z[r][slot], entropy[r][slot], text[r][slot] = masked_z(d.entropy, emax), d.entropy, "↺"
                hover[r][slot] = (
                    f"{head}<br><b>renoised</b>: accepted before, taken back by this step<br>"
                    f"draft {token_html(d.text)} p = {d.prob:.3f} · entropy {d.entropy:.3f} nats"
                )
                renoised.append((slot, r, (block, slot, step.call)))
                continue
            if slot not in step.masked:
                z[r][slot], hover[r][slot] = Z["done"], f"{head}<br>committed before"
                continue
            if view is not None:
                z[r][slot], entropy[r][slot], text[r][slot] = (
                    masked_z(view.entropy, emax),
                    view.entropy,
                    f"{view.entropy:.2f}" if chars >= 4 else "",
                )
                hover[r][slot] = f"{head}<br>entropy {view.entropy:.3f} nats" + candidates_hover(
                    step, slot, special=special
                )
            if slot in committed:
                c = committed[slot]
                label, note = (
                    labels[step.block_start + slot - len(trace.prompt_ids)]
                    if trace.kept(step, slot)
                    else (token_label(c.text, special), "")
                )
                z[r][slot], text[r][slot] = Z["now"], cell_label(label, max(1, min(6, chars)))
                hover[r][slot] += (
                    f"<br>committed <b>{esc(label)}</b>" + (f" · {esc(note)}" if note else "") + f" p = {c.prob:.3f}"
                )
                if c.gap:
                    hover[r][slot] += f"<br>gap fill: {c.gap} masked slot(s) to its left"
                    gaps.append((slot, r, (block, slot, step.call)))
    fig = go.Figure(
        [
            cell_grid(
                z,
                hover,
                (2, 2),
                text,
                customdata=entropy,
                colorscale=STATE_SCALE,
                zmin=0,
                zmax=4,
                showscale=False,
                textfont=dict(family=FONT, size=11),
            ),
            outline_trace(gaps, STATE_COLORS["gap"]),
        ]
    )
    fig.add_trace(entropy_bar(emax, 120))
    if trace.has_canvas:  # fig.data[3]: the renoised cells' outlines
        fig.add_trace(outline_trace(renoised, STATE_COLORS["renoised"], inset=0.04))
    fig.update_layout(
        **common_layout(
            title=dict(
                text=f"Entropy per slot and step · block {block}<br><sup>{esc(settings_line(trace))}</sup>",
                font=dict(size=13),
            ),
            width=max(560, int(260 + k * cell_w)),
            height=170 + max(n * 36, 120),
            margin=dict(l=140, r=120, t=130, b=40),
            showlegend=False,
            annotations=[
                top_note(
                    legend_html(
                        ("done", "now", "masked") + (("renoised",) if trace.has_canvas else ()),
                        open_slot_label(trace),
                        width=max(560, int(260 + k * cell_w)) - 40,
                    ),
                    8,
                    140,
                )
            ],
            xaxis=dict(title="slot", tickvals=list(range(k)), range=[-0.5, k - 0.5], fixedrange=True),
            yaxis=dict(
                tickvals=list(range(n)),
                ticktext=[f"step {s.step} (call {s.call})" for s in steps],
                range=[n - 0.5, -0.5],
                fixedrange=True,
            ),
        )
    )
    return fig
