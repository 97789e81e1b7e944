"""The app's list-task failures: every item of the list-task suite (``sbd_viz.tasks.lists``: copy, reverse, sort,
shuffle, insert, replace, repeat) that the main view's decoder gets wrong at its settings, most suspicious first,
with NTP's verdict (``analysis.list_failures``). It sits under the failure table; a click on a row puts that item in
the prompt box and decodes it, and the failure table then lists the row's commit among the others.

``stream_failures`` decodes the items one by one and yields the ranked table after each, as the ladder streams;
``gallery_section`` builds the components inside the failure table's tab.
"""

from __future__ import annotations

from dataclasses import replace

import gradio as gr

from ..analysis.list_failures import list_failures
from ..tasks.lists import LENGTHS, LIST_TASKS, list_suite
from ..trace.labels import visible
from .panels import KIND_NAMES, ColumnType, results_table

ALL_TASKS = "all tasks"
PER_LENGTH = 1  # items per task and list length: 3 lengths x 7 tasks = 21 items, a minute or two on a CPU
GALLERY_HEADERS = [
    "rank",
    "task",
    "length",
    "answer",
    "output",
    "NTP wrote",
    "NTP right",
    "commit",
    "call",
    "slot",
    "token",
    "NTP's token",
    "NTP agrees",
    "suspicion",
]
GALLERY_TYPES: list[ColumnType] = [
    "number",
    "str",
    "number",
    "str",
    "str",
    "str",
    "str",
    "str",
    "number",
    "number",
    "str",
    "str",
    "str",
    "number",
]
NOTE = (
    "Every item of the list-task suite (`sbd_viz.tasks.lists`, ParallelBench-style: copy, reverse, sort, shuffle, "
    "insert, replace, repeat; exact match) that the decoder above gets wrong at the settings above, ranked by its "
    "most suspicious commit (a gap fill or an incoherent commit, judged as in the table above), with NTP's own "
    "answer beside it: a failure NTP shares is the model's, not the parallel decode's. Click a row to decode "
    "that item above; the failure table then lists its commits."
)


def style_of(model) -> str:
    """How ``model`` is asked a list task: a Python assert (the character model) or a chat message (a text LM)."""
    from ..models.causal_lm import CausalLM

    return "chat" if isinstance(model, CausalLM) else "assert"


def items_of(task) -> list:
    """The suite's items for ``task`` (one of ``LIST_TASKS``, or ``ALL_TASKS``), ``PER_LENGTH`` per list length."""
    if task != ALL_TASKS and task not in LIST_TASKS:
        raise ValueError(f"task: choose {ALL_TASKS!r} or one of {', '.join(LIST_TASKS)}, got {task!r}")
    return list_suite(tasks=LIST_TASKS if task == ALL_TASKS else (task,), lengths=LENGTHS, per_length=PER_LENGTH)


def _cell(value):
    """A table cell: None (empty) where the frame has no value (no commit to blame: NaN, or pandas' NA in its
    nullable integer columns)."""
    import pandas as pd

    return None if pd.isna(value) else value


def gallery_rows(frame) -> list[list]:
    """The table's rows (``GALLERY_HEADERS``) from ``list_failures``' frame, its rank order."""
    rows = []
    for r in frame.to_dict("records"):
        kind = _cell(r["kind"])
        rows.append(
            [
                r["rank"],
                r["task"],
                r["length"],
                r["answer"],
                visible(r["output"], spaces=True),
                visible(r["ntp_output"], spaces=True),
                "yes" if r["ntp_correct"] else "NO",
                "none (left to right, coherent)" if kind is None else KIND_NAMES[kind],
                _cell(r["call"]),
                _cell(r["slot"]),
                None if kind is None else visible(r["text"], spaces=True),
                None if kind is None or r["ntp_text"] is None else visible(r["ntp_text"], spaces=True),
                {True: "yes", False: "NO"}.get(_cell(r["ntp_agrees"])),
                None if kind is None else round(float(r["suspicion"]), 2),
            ]
        )
    return rows


def stream_failures(model, settings: dict, task=ALL_TASKS, label: str | None = None):
    """Decode the list tasks with ``settings`` (``sv.decode`` keyword arguments: the decoder and its settings, no
    prompt, length or stop: each item sets its own), item by item; yield (rows, status, picks) after each: the ranked
    table so far, a line saying how far it got, and per row what decodes it again in the main view (the prompt as
    the box takes it, and its length). ``label``: the decoder's name in the status line."""
    import pandas as pd

    items = items_of(task)
    style = style_of(model)
    frames, wrong = [], 0
    for done, item in enumerate(items, start=1):
        frame = list_failures(model, [item], style=style, **settings)
        if len(frame):
            frames.append(frame.assign(item=[item]))
            wrong += 1
        ranked = pd.concat(frames, ignore_index=True) if frames else frame.assign(item=[])
        ranked = ranked.sort_values("suspicion", ascending=False, kind="stable", na_position="last").reset_index(
            drop=True
        )
        ranked["rank"] = range(1, len(ranked) + 1)
        picks = [
            {
                "prompt": i.prompt(style),
                "chat": style == "chat",
                "max_new_tokens": s["max_new_tokens"],
                "call": None if _cell(c) is None else int(c),
            }
            for i, s, c in zip(ranked["item"], ranked["settings"], ranked["call"])
        ]
        status = (
            f"{done} of {len(items)} items decoded: **{wrong} wrong**"
            + (" so far" if done < len(items) else "")
            + f" ({label or settings.get('decoder', 'SBD')}, {style} prompts)."
        )
        yield gallery_rows(ranked), status, picks


def gallery_section():
    """The components, inside the failure table's tab: (task menu, run button, status, table, picks state)."""
    with gr.Accordion("List tasks: every failure at these settings, ranked", open=False, elem_id="sbd-gallery-box"):
        gr.Markdown(NOTE)
        with gr.Row():
            task = gr.Dropdown(
                [ALL_TASKS, *LIST_TASKS], value=ALL_TASKS, label="task", elem_id="sbd-gallery-task", scale=1
            )
            run = gr.Button("Decode the list tasks at these settings", elem_id="sbd-gallery-run", scale=2)
        status = gr.Markdown(elem_id="sbd-gallery-status")
        label = "list-task failures, most suspicious first"
        table = results_table(GALLERY_HEADERS, GALLERY_TYPES, "sbd-gallery", max_height=320, label=label)
        picks = gr.State([])
    return task, run, status, table, picks


class Gallery:
    """The section's handlers, over the app's ``Handlers`` (its model, and its reading of the main view's controls)."""

    def __init__(self, handlers):
        self.h = handlers

    def list_failures(self, controls, task):
        """Decode the list tasks with the main view's decoder and settings; stream the ranked failures."""
        from .inputs import read_decoder, refused

        if self.h.canvas:
            raise refused("task: a block-diffusion model has no NTP to judge its failures against")
        # the items bring their own prompts, lengths and stop: the box's prompt (maybe empty) is not read
        settings = self.h.read_controls(replace(controls, prompt=".", chat=False))
        spec, own = read_decoder(controls.decoder, settings, self.h.model)
        own = {k: v for k, v in own.items() if k not in ("prompt", "max_new_tokens", "stop")}  # each item sets them
        try:
            yield from stream_failures(self.h.model, {"decoder": spec.name, **own}, task, label=spec.label)
        except ValueError as exc:  # the library's checks name the argument
            raise refused(str(exc)) from None

    @staticmethod
    def pick(picks, evt: gr.SelectData):
        """A click on a row: (prompt, chat switch, max new tokens, stop at the end of the line, call to show) for
        the main view, which then decodes it."""
        try:
            chosen = picks[evt.index[0]]
        except (TypeError, IndexError, KeyError):  # a raw API call can send anything: no move
            return (gr.update(),) * 4 + (None,)
        return chosen["prompt"], chosen["chat"], chosen["max_new_tokens"], True, chosen["call"]

    @staticmethod
    def show(call, session):
        """After the picked item's decode: its blamed call in the animation (if it has one and the decode has it)."""
        from .state import decoded

        if call is None or not decoded(session) or not 0 <= int(call) < session.trace.nfe:
            return gr.update()
        return gr.update(value=int(call))
