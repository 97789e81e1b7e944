"""The app's "compare decoders" tab: the same prompt through every registered decoder that serves the model
(``sv.decoders(model)``: SBD, verified SBD, remasking, Jacobi, prompt lookup, and any a package adds), beside
greedy NTP: ``plots.compare_decoders`` and its rows as a table, with each decode's order (``sv.decode_order``: Kendall
τ against left to right, the share of commits made right of a still-masked slot) and the decode-order picture
(``plots.order.commit_order``: commit step against position, every decode on one step axis).
``app.Handlers.compare`` reads the settings and calls ``compare``; ``decoders_tab`` builds the tab's components.
"""

from __future__ import annotations

import gradio as gr

import sbd_viz as sv

from .. import plots
from .panels import results_table

COMPARE_HEADERS = [
    "decoder",
    "calls",
    "tokens",
    "tokens per call",
    "equals greedy",
    "slots remasked",
    "rollbacks",
    "Kendall τ",
    "out of order",
]
COMPARED_SETTINGS = ("rule", "gamma", "block_size")  # the settings above that a compared decoder gets, if it takes them


def choices(model) -> dict[str, tuple]:
    """The tab's choices, in the order the figure stacks them: label -> (spec, settings of its variant). Every
    registered decoder that serves ``model`` (``sv.decoders(model)``), NTP aside (it is always shown), each followed
    by its variants (SBD's "verified SBD")."""
    from ..decoders.ntp import NTP
    from ..decoders.registry import decoders

    out: dict[str, tuple] = {}
    for spec in decoders(model):
        if spec is not NTP:
            out[spec.label] = (spec, {})
            out.update({label: (spec, dict(settings)) for label, settings in spec.variants.items()})
    return out


def compare_note(model) -> str:
    exact = [label for label, (spec, variant) in choices(model).items() if spec.exact or variant.get("verify")]
    return (
        "The prompt above through each chosen decoder, greedy, with the rule, γ, block size, length and stop of "
        "the settings where the decoder takes them (gap-free and temperature do not apply here), beside NTP "
        "(HF `generate`): calls, tokens per call and whether each wrote NTP's exact text. "
        + (f"Exact by construction: {', '.join(exact)}." if exact else "")
    )


def compare(model, settings: dict, chosen) -> tuple:
    """(figure, table rows, decode-order figure) of ``settings``' prompt (``inputs.read_settings``' output, with the
    main view's decoder's own knob if it has one) through the ``chosen`` labels."""
    offered = choices(model)
    if not isinstance(chosen, (list, tuple)) or not chosen or any(c not in offered for c in chosen):
        raise ValueError(f"decoders: choose one or more of {', '.join(offered)}, got {chosen!r}")
    prompt, stop, n = settings["prompt"], settings["stop"], settings["max_new_tokens"]
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n, stop=stop)
    traces = {"NTP": ntp}
    for label in [c for c in offered if c in chosen]:
        spec, variant = offered[label]
        shared = {k: settings[k] for k in COMPARED_SETTINGS if k in spec.takes}
        own = {k: settings[k] for k in spec.own if k in settings}  # the main view's slider, if it moves one
        traces[label] = sv.decode(
            model, prompt, decoder=spec.name, max_new_tokens=n, stop=stop, **shared, **own, **variant
        )
    figure = plots.compare_decoders(traces, ntp=ntp)
    order = {r["label"]: r for r in sv.order_rows(list(traces.values()), list(traces))}
    rows = [
        [
            r["label"],
            r["calls"],
            r["tokens"],
            r["tokens_per_call"],
            "yes" if r["equals_greedy"] else "no",
            r["renoised"],
            r["rollbacks"],
            _rounded(order[r["label"]]["kendall_tau"], 3),
            _rounded(order[r["label"]]["out_of_order_rate"], 3),
        ]
        for r in figure.layout.meta["rows"]
    ]
    return figure, rows, plots.commit_order(traces)


def _rounded(x: float, digits: int):
    """A table cell: ``x`` rounded, or None (an empty cell) where it is undefined (NaN)."""
    return None if x != x else round(x, digits)


def decoders_tab(model):
    """The tab's components, inside a ``gr.Tab``: (decoder choice, run button, table, figure)."""
    offered = list(choices(model))
    gr.Markdown(compare_note(model))
    chosen = gr.CheckboxGroup(offered, value=offered, label="decoders", elem_id="sbd-decoders")
    run = gr.Button("Run this prompt through each decoder")
    table = results_table(
        COMPARE_HEADERS,
        ["str", "number", "number", "number", "str", "number", "number", "number", "number"],
        "sbd-compare-table",
    )
    figure = gr.Plot(
        label="each decoder's output token by token, shaded by call; calls side by side", elem_id="sbd-compare"
    )
    gr.Markdown(
        "**Decode order.** Kendall τ compares the order the calls committed the output in with left to right "
        "(1: left to right; tokens of one call are tied, so several per call scores a little below 1); out "
        "of order: the share of commits made right of a slot still masked (gap fills)."
    )
    order = gr.Plot(
        label="decode order: the call that committed each token, one step axis", elem_id="sbd-compare-order"
    )
    return chosen, run, table, figure, order
