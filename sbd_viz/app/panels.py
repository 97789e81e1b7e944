"""The app's failure views: the failure table (gap fills and incoherent commits, each labelled), the "this prompt
across γ" ladder (streamed row by row), and the downloads (the animation as a GIF, the trace file, each in a folder
of its own). Pure functions of library results, plus one generator that streams the ladder; ``app.Handlers``
validates the inputs and calls these.
"""

from __future__ import annotations

import math
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from ..analysis.gamma_ladder import Ladder
from ..plots.animation import save_animation
from ..plots.ladder_figure import gamma_ladder_figure
from ..trace.labels import visible

FAILURE_COLUMNS = [
    "kind",
    "call",
    "block",
    "slot",
    "gap",
    "token",
    "entropy",
    "p",
    "NTP",
    "agrees",
    "suspicion",
    "block after the call",
]
ColumnType = Literal["str", "number"]  # a table column's type, as gr.Dataframe reads it
FAILURE_TYPES: list[ColumnType] = [
    "str",
    "number",
    "number",
    "number",
    "number",
    "str",
    "number",
    "number",
    "str",
    "str",
    "number",
    "str",
]
FAILURE_LABEL = (
    "gap fills ({gaps}) and incoherent commits ({incoherent}): commits made while slots to their left "
    "were still masked, and commits one call made side by side that repeat or contradict each other "
    "· click a row to show its call · this decode: {tokens} tokens in {calls} calls"
)
KIND_NAMES = {
    "gap_fill": "gap fill",
    "repeat": "repeat",
    "doubled_delimiter": "doubled delimiter",
    "ngram": "n-gram NTP would not write",
}

LADDER_HEADERS = [
    "γ",
    "calls",
    "tokens per call",
    "text = NTP's",
    "first divergence (call, block, slot: SBD / NTP)",
    "gap fills kept",
]


def results_table(headers: list[str], types: list[ColumnType], elem_id: str, **options: Any) -> Any:
    """A table of results, read and not edited (a ``gr.Dataframe``, inside the page being built): its columns'
    headers and types, its element id; ``options`` are ``gr.Dataframe``'s (``max_height``, ``label``, ...)."""
    import gradio as gr

    return gr.Dataframe(headers=headers, datatype=types, interactive=False, elem_id=elem_id, **options)


def failure_rows(events: list[dict]) -> list[list]:
    """The failure table's rows (``FAILURE_COLUMNS``); "—" where the stop cut the slot out of the output."""
    return [
        [
            KIND_NAMES[e["kind"]],
            e["call"],
            e["block"],
            e["slot"],
            e["gap"],
            visible(e["text"], spaces=True),
            round(e["entropy"], 3),
            round(e["prob"], 3),
            "—" if e["ntp_text"] is None else visible(e["ntp_text"], spaces=True),
            {True: "yes", False: "NO", None: "—"}[e["ntp_agrees"]],
            round(e["suspicion"], 2),
            e["state"],
        ]
        for e in events
    ]


def failure_label(events: list[dict], trace) -> str:
    """The table's title: gap fills as the metrics card counts them (kept in the output), then the incoherent
    commits kept, and how many more the stop discarded; and which decode it lists (``trace``'s tokens and calls, as
    the metrics card counts them)."""
    gaps = sum(e["kind"] == "gap_fill" for e in events)
    kept_gap_fills = sum(e["kept"] for e in events if e["kind"] == "gap_fill")  # the count the metrics card shows
    incoherent = [e for e in events if e["kind"] != "gap_fill"]
    kept_incoherent = sum(e["kept"] for e in incoherent)
    n_gaps = (
        f"{kept_gap_fills}"
        if kept_gap_fills == gaps
        else f"{kept_gap_fills} kept + {gaps - kept_gap_fills} the stop discarded"
    )
    n_incoherent = (
        f"{kept_incoherent}"
        if kept_incoherent == len(incoherent)
        else f"{kept_incoherent} kept + {len(incoherent) - kept_incoherent} the stop discarded"
    )
    return FAILURE_LABEL.format(gaps=n_gaps, incoherent=n_incoherent, tokens=trace.n_tokens, calls=trace.nfe)


def _cell(value):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def ladder_headers(knob: str = "gamma") -> list[str]:
    """The ladder table's headers; the first names the knob the ladder climbs (γ, or a decoder's own setting)."""
    return ["γ" if knob == "gamma" else knob] + LADDER_HEADERS[1:]


def ladder_rows(frame) -> list[list]:
    """The ladder table's rows (``LADDER_HEADERS``) from ``gamma_ladder``'s frame."""
    knob = frame.attrs.get("knob", "gamma")
    rows = []
    for r in frame.to_dict("records"):
        where = (
            ""
            if r["same_as_ntp"]
            else (
                f"call {_cell(r['divergence_call'])}, block {_cell(r['divergence_block'])}, slot "
                f"{_cell(r['divergence_slot'])}: {visible(str(_cell(r['divergence_token'])), spaces=True)} / "
                f"{visible(str(_cell(r['divergence_ntp_token'])), spaces=True)}"
            )
        )
        rows.append(
            [
                r[knob],
                r["calls"],
                round(r["tokens_per_call"], 2),
                "yes" if r["same_as_ntp"] else "NO",
                where,
                r["gap_fills"],
            ]
        )
    return rows


def ladder_status(frame, total: int, label: str = "SBD") -> str:
    """The ladder's headline: the decoder and its knob, how far it got, NTP's calls, and the largest safe value so
    far."""
    attrs = frame.attrs
    knob = attrs.get("knob", "gamma")
    name = "γ" if knob == "gamma" else knob
    done = len(frame)
    safe = attrs.get("largest_safe_gamma")
    head = f"**{label}: {done} of {total} {name} decoded** · NTP: {attrs.get('ntp_calls', '?')} calls · "
    if done == 0:
        return head + f"the largest safe {name} comes with the first row"
    exact = f" · {attrs['safe']}" if attrs.get("exact") else ""  # the exact γ map's safe ranges, once it is built
    if safe is None:
        return (
            head
            + f"**no safe {name}**: no {name} tried"
            + (" so far" if done < total else "")
            + " writes NTP's text"
            + exact
        )
    return (
        head
        + (
            f"**largest safe {name}: {safe:g}** (the text equals NTP's from the smallest {name} that keeps it "
            "up to this one" + (")" if done == total else ", so far)")
        )
        + exact
    )


def stream_ladder(model, prompt: str, settings: dict, spec=None, own: dict | None = None):
    """Decode ``prompt`` with NTP, then at every value of the decoder's knob (``spec``: the model's first decoder by
    default; the rule's γ ladder, or the values its spec's knob spreads over), greedy, unverified (the ladder asks where
    the decoder leaves NTP); yield (rows, figure, status, frame) after each value. ``own``: ``spec``'s own settings held
    fixed (its knob's among them is climbed instead). A decoder without a knob is a ``ValueError`` naming
    ``decoder``."""
    from ..decoders.registry import SHARED, default_decoder, get_decoder

    spec = default_decoder(model) if spec is None else get_decoder(spec)
    held = {k: v for k, v in (own or {}).items() if k in spec.own and (spec.knob is None or k != spec.knob.name)}
    shared = {k: settings[k] if k in spec.takes else SHARED[k] for k in ("rule", "gap_free")}
    ladder = Ladder(
        model,
        prompt,
        block_size=settings["block_size"] if "block_size" in spec.takes else None,
        max_new_tokens=settings["max_new_tokens"],
        stop=settings["stop"],
        decoder=spec.name,
        **shared,
        **held,
    )
    total = len(ladder.gammas)
    for _ in ladder.rows():
        frame = ladder.frame()
        yield ladder_rows(frame), gamma_ladder_figure(frame), ladder_status(frame, total, spec.label), frame


def animation_file(trace, folder: Path) -> Path:
    """The trace's block-fill animation as a GIF in ``folder`` (one frame per call)."""
    cfg = trace.config
    name = f"sbd_{cfg['decoder']}_{cfg.get('rule', 'none')}_g{cfg.get('gamma', 0):g}.gif"
    return save_animation(trace, Path(folder) / name)


def fresh_folder(root: Path) -> Path:
    """A new folder under ``root`` for one download (one folder per file keeps the file's name readable); folders
    there older than 10 minutes go."""
    now = time.time()
    for old in Path(root).iterdir():
        if now - old.stat().st_mtime > 600:
            shutil.rmtree(old, ignore_errors=True)
    folder = Path(root) / uuid.uuid4().hex
    folder.mkdir()
    return folder


def trace_file(trace, folder: Path) -> str:
    """The trace saved in ``folder`` (``sbd_viz.load_trace`` reads it), named after its decoder and settings."""
    cfg = trace.config
    gamma = f"_g{cfg['gamma']:g}" if "gamma" in cfg else ""
    name = f"sbd_trace_{cfg['decoder']}_{cfg.get('rule', 'none')}{gamma}_k{cfg.get('block_size', 0)}.json"
    return str(trace.save(Path(folder) / name))
