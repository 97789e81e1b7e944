"""The app's "compare decoders" tab: the same prompt through SBD, verified SBD, remasking, Jacobi and prompt lookup
(``sv.decode(..., decoder=...)``), beside greedy NTP: ``plots.compare_decoders`` and its rows as a table.
``app.Handlers.compare`` reads the settings and calls ``compare``; ``decoders_tab`` builds the tab's components.
"""

from __future__ import annotations

import gradio as gr

import sbd_viz as sv
from .. import plots

# the choices, in the order the figure stacks them: label -> sv.decode arguments besides the shared settings
DECODER_CHOICES = {
    "SBD": dict(decoder="sbd"),
    "verified SBD": dict(decoder="sbd", verify=True),
    "SBD + remasking": dict(decoder="remask"),
    "Jacobi": dict(decoder="jacobi"),
    "prompt lookup": dict(decoder="prompt_lookup"),
}
USES_RULE = ("sbd", "remask")  # decoders that take the commit rule and γ; Jacobi takes the block size only
COMPARE_HEADERS = ["decoder", "calls", "tokens", "tokens per call", "equals greedy", "slots remasked", "rollbacks"]
COMPARE_NOTE = ("The prompt above through each chosen decoder, greedy, with the rule, γ, block size, length and stop "
                "of the settings (gap-free and temperature do not apply here), beside NTP (HF `generate`): calls, "
                "tokens per call and whether each wrote NTP's exact text. Jacobi and prompt lookup are exact by "
                "construction; remasking takes back gap fills the model no longer believes.")


def compare(model, settings: dict, chosen) -> tuple:
    """(figure, table rows) of ``settings``' prompt (``app.read_settings``' output) through the ``chosen`` labels."""
    if not isinstance(chosen, (list, tuple)) or not chosen or any(c not in DECODER_CHOICES for c in chosen):
        raise ValueError(f"decoders: choose one or more of {', '.join(DECODER_CHOICES)}, got {chosen!r}")
    prompt, stop, n = settings["prompt"], settings["stop"], settings["max_new_tokens"]
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=n, stop=stop)
    traces = {"NTP": ntp}
    for label in [c for c in DECODER_CHOICES if c in chosen]:
        kwargs = dict(DECODER_CHOICES[label])
        if kwargs["decoder"] in USES_RULE:
            kwargs.update(rule=settings["rule"], gamma=settings["gamma"])
        if kwargs["decoder"] != "prompt_lookup":
            kwargs["block_size"] = settings["block_size"]
        traces[label] = sv.decode(model, prompt, max_new_tokens=n, stop=stop, **kwargs)
    figure = plots.compare_decoders(traces, ntp=ntp)
    rows = [[r["label"], r["calls"], r["tokens"], r["tokens_per_call"], "yes" if r["equals_greedy"] else "no",
             r["renoised"], r["rollbacks"]] for r in figure.layout.meta["rows"]]
    return figure, rows


def decoders_tab():
    """The tab's components, inside a ``gr.Tab``: (decoder choice, run button, table, figure)."""
    gr.Markdown(COMPARE_NOTE)
    chosen = gr.CheckboxGroup(list(DECODER_CHOICES), value=list(DECODER_CHOICES), label="decoders",
                              elem_id="sbd-decoders")
    run = gr.Button("Run this prompt through each decoder")
    table = gr.Dataframe(headers=COMPARE_HEADERS, datatype=["str", "number", "number", "number", "str", "number",
                                                            "number"], interactive=False, elem_id="sbd-compare-table")
    figure = gr.Plot(label="one block-fill panel per decoder; calls side by side", elem_id="sbd-compare")
    return chosen, run, table, figure
