"""The list tasks' failures (``sbd_viz.tasks.lists``), ranked: every item a decoder gets wrong, with the commit most
likely to blame and NTP's verdict on it.

``list_failures(model, items, style=..., **settings)`` returns them as a frame (``LIST_FAILURE_COLUMNS``). How a
failure is judged and ranked, and what re-draws it: docs/list_tasks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..decoders.door import decode
from ..decoders.ntp import decode_ntp
from ..models.checks import check_model
from ..tasks.asserts import SuiteItem
from ..tasks.lists import STYLES, ListItem, answer_room, model_prompt, score
from .incoherence import failure_events

LIST_FAILURE_COLUMNS = (
    "rank",
    "task",
    "length",
    "prompt",
    "answer",
    "output",
    "ntp_output",
    "ntp_correct",
    "same_as_ntp",
    "kind",
    "call",
    "block",
    "slot",
    "gap",
    "text",
    "ntp_text",
    "ntp_agrees",
    "suspicion",
    "events",
    "settings",
)
STOP = "\n"


def list_failures(model, items: Sequence[ListItem], style: str = "assert", **settings):
    """Every item of ``items`` that ``sv.decode(model, prompt, **settings)`` gets wrong, most suspicious first: a
    ``pandas.DataFrame`` (``LIST_FAILURE_COLUMNS``; see docs/list_tasks.md). ``settings``: ``sv.decode``'s
    (``decoder``, ``rule``, ``gamma``, ``block_size``, ...); ``max_new_tokens`` and ``stop`` are set per item.
    ``rank`` counts from 1; ``events`` is how many gap fills and incoherent commits the failure holds, ``settings``
    the keywords that decode it again."""
    import pandas as pd

    model = check_model(model)
    if style not in STYLES:
        raise ValueError(f"style: choose from {', '.join(STYLES)}, got {style!r}")
    items = list(items)
    if not items or not all(isinstance(i, ListItem) for i in items):
        raise ValueError("items: need one or more list_tasks.ListItem (list_tasks.list_suite())")
    for key in ("max_new_tokens", "stop"):
        if key in settings:
            raise ValueError(f"{key}: set per item (room for the item's answer, stopped at the end of the line)")
    rows = []
    for item in items:
        prompt = model_prompt(model, item, style)
        kw = dict(settings, max_new_tokens=answer_room(model, item, style), stop=STOP)
        trace = decode(model, prompt, **kw)
        if score(item, trace.text):
            continue
        ntp = decode_ntp(model, prompt, max_new_tokens=kw["max_new_tokens"], stop=STOP)
        # the answer is wrong, so tasks.score agrees (its rstrip keeps no more than list_tasks.score's strip)
        events = failure_events(model, trace, SuiteItem(prompt=prompt, answer=item.answer, family=item.task))
        top = max(events, key=lambda e: e["suspicion"], default=None)  # the first of equals: call order
        row = dict(
            task=item.task,
            length=item.length,
            prompt=prompt,
            answer=item.answer,
            output=trace.text,
            ntp_output=ntp.text,
            ntp_correct=score(item, ntp.text),
            same_as_ntp=trace.text == ntp.text,
            events=len(events),
            settings=kw,
        )
        if top is not None:
            row.update(
                kind=top["kind"],
                call=top["call"],
                block=top["block"],
                slot=top["slot"],
                gap=top["gap"],
                text=top["text"],
                ntp_text=top["ntp_text"],
                ntp_agrees=top["ntp_agrees"],
                suspicion=top["suspicion"],
            )
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(LIST_FAILURE_COLUMNS))
    df = df.sort_values("suspicion", ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    df["rank"] = range(1, len(df) + 1)
    for col in ("call", "block", "slot", "gap"):
        df[col] = df[col].astype("Int64")
    return df
