"""The app's failure views: the failure table (gap fills and incoherent commits, each labelled), the "this prompt
across γ" ladder (streamed row by row), and the animation as a GIF file. Pure functions of library results, plus
one generator that streams the ladder; ``app.Handlers`` validates the inputs and calls these.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..analysis.gamma_ladder import Ladder
from ..plots.animation import save_animation
from ..plots.ladder_figure import gamma_ladder_figure
from ..labels import visible

FAILURE_COLUMNS = ["kind", "call", "block", "slot", "gap", "token", "entropy", "p", "NTP", "agrees", "suspicion",
                   "block after the call"]
FAILURE_TYPES = ["str"] + ["number"] * 4 + ["str", "number", "number", "str", "str", "number", "str"]
FAILURE_LABEL = ("gap fills ({gaps}) and incoherent commits ({incoherent}): commits made while slots to their left "
                 "were still masked, and commits one call made side by side that repeat or contradict each other "
                 "· click a row to show its call")
KIND_NAMES = {"gap_fill": "gap fill", "repeat": "repeat", "doubled_delimiter": "doubled delimiter",
              "ngram": "n-gram NTP would not write"}

LADDER_HEADERS = ["γ", "calls", "tokens per call", "text = NTP's", "first divergence (call, block, slot: SBD / NTP)",
                  "gap fills kept"]


def failure_rows(events: list[dict]) -> list[list]:
    """The failure table's rows (``FAILURE_COLUMNS``); "—" where the stop cut the slot out of the output."""
    return [[KIND_NAMES[e["kind"]], e["call"], e["block"], e["slot"], e["gap"], visible(e["text"], spaces=True),
             round(e["entropy"], 3), round(e["prob"], 3),
             "—" if e["ntp_text"] is None else visible(e["ntp_text"], spaces=True),
             {True: "yes", False: "NO", None: "—"}[e["ntp_agrees"]], round(e["suspicion"], 2), e["state"]]
            for e in events]


def failure_label(events: list[dict], kept_gap_fills: int) -> str:
    """The table's title: gap fills as the metrics card counts them (kept in the output), then the incoherent
    commits kept, and how many more the stop discarded."""
    gaps = sum(e["kind"] == "gap_fill" for e in events)
    incoherent = [e for e in events if e["kind"] != "gap_fill"]
    kept_incoherent = sum(e["kept"] for e in incoherent)
    n_gaps = f"{kept_gap_fills}" if kept_gap_fills == gaps else f"{kept_gap_fills} kept + {gaps - kept_gap_fills} " \
                                                                "the stop discarded"
    n_incoherent = f"{kept_incoherent}" if kept_incoherent == len(incoherent) else \
        f"{kept_incoherent} kept + {len(incoherent) - kept_incoherent} the stop discarded"
    return FAILURE_LABEL.format(gaps=n_gaps, incoherent=n_incoherent)


def _cell(value):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def ladder_rows(frame) -> list[list]:
    """The ladder table's rows (``LADDER_HEADERS``) from ``gamma_ladder``'s frame."""
    rows = []
    for r in frame.to_dict("records"):
        where = "" if r["same_as_ntp"] else (
            f"call {_cell(r['divergence_call'])}, block {_cell(r['divergence_block'])}, slot "
            f"{_cell(r['divergence_slot'])}: {visible(str(_cell(r['divergence_token'])), spaces=True)} / "
            f"{visible(str(_cell(r['divergence_ntp_token'])), spaces=True)}")
        rows.append([r["gamma"], r["calls"], round(r["tokens_per_call"], 2), "yes" if r["same_as_ntp"] else "NO",
                     where, r["gap_fills"]])
    return rows


def ladder_status(frame, total: int) -> str:
    """The ladder's headline: how far it got, NTP's calls, and the largest safe γ so far."""
    attrs = frame.attrs
    done = len(frame)
    safe = attrs.get("largest_safe_gamma")
    head = f"**{done} of {total} γ decoded** · NTP: {attrs.get('ntp_calls', '?')} calls · "
    if done == 0:
        return head + "the largest safe γ comes with the first row"
    exact = f" · {attrs['safe']}" if attrs.get("exact") else ""  # the exact γ map's safe ranges, once it is built
    if safe is None:
        return head + "**no safe γ**: no γ tried" + (" so far" if done < total else "") + " writes NTP's text" + exact
    return head + (f"**largest safe γ: {safe:g}** (the text equals NTP's from the smallest γ that keeps it up to this "
                   "one" + (")" if done == total else ", so far)")) + exact


def stream_ladder(model, prompt: str, settings: dict):
    """Decode ``prompt`` with NTP, then at every γ of the rule's ladder (greedy, unverified: the ladder asks where
    plain SBD leaves NTP); yield (rows, figure, status, frame) after each γ."""
    ladder = Ladder(model, prompt, rule=settings["rule"], block_size=settings["block_size"],
                    max_new_tokens=settings["max_new_tokens"], stop=settings["stop"], gap_free=settings["gap_free"])
    total = len(ladder.gammas)
    for _ in ladder.rows():
        frame = ladder.frame()
        yield ladder_rows(frame), gamma_ladder_figure(frame), ladder_status(frame, total), frame


def animation_file(trace, folder: Path) -> Path:
    """The trace's block-fill animation as a GIF in ``folder`` (one frame per call)."""
    cfg = trace.config
    name = f"sbd_{cfg['decoder']}_{cfg.get('rule', 'none')}_g{cfg.get('gamma', 0):g}.gif"
    return save_animation(trace, Path(folder) / name)
