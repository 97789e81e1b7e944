"""The sbd_viz app: watch Set Block Decoding fill its blocks, and trade speed for quality with gamma.

    sbd-viz app [--model DIR] [--port N]      # or, in the repository: python app.py

``build_demo`` builds the page, ``Handlers`` holds its handlers. How the page uses the library and what a session
keeps: docs/app_internals.md.
"""

from __future__ import annotations

import html
import json
import math
import shutil
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr

import sbd_viz as sv

from .. import tasks
from ..analysis import roofline
from ..analysis.incoherence import failure_events
from ..analysis.timing import ROUNDS as TIMING_ROUNDS
from ..decoders import door, registry
from ..decoders.rules import COMMIT_RULES
from ..decoders.sbd import MAX_BLOCK_SIZE
from ..decoders.verified.settings import MODES, fastest_mode
from ..models.causal_lm import CausalLM
from ..models.diffusion import DiffusionModel
from . import causal as causal_app  # a pretrained LM (with or without an SBD adapter): free text, chat template
from . import scrubber
from .assets import ANIM_JS, ANIM_TEMPLATE, PLOTLY_JS, SHOW_CALL_JS, STRIP_JS
from .compare import compare as compare_decoders
from .compare import decoders_tab
from .curve import (
    SWEEP_FILE,
    SWEEP_GRID,
    SWEEP_PER_FAMILY,
    SWEEP_VERIFIED,
    SpeedQualityCurve,
    compute_sweep,
    precompute_sweep,
)
from .examples import DEFAULTS, EXAMPLES, example_label
from .gallery import Gallery, gallery_section
from .inputs import (
    MAX_NEW_TOKENS,
    MAX_SEED,
    decoder_labels,
    fit_controls,
    knob_of,
    knob_slider,
    knob_start,
    prompt_limit,
    prompt_note,
    read_call,
    read_decoder,
    read_knob,
    read_mode,
    read_projection,
    read_settings,
    read_spec,
    refused,
    rule_slider,
)
from .map_builder import MAP_SESSIONS, GammaMaps, map_key
from .panels import (
    FAILURE_COLUMNS,
    FAILURE_TYPES,
    LADDER_HEADERS,
    animation_file,
    failure_label,
    failure_rows,
    fresh_folder,
    ladder_headers,
    results_table,
    stream_ladder,
    trace_file,
)
from .serving import HEAVY_QUEUE, MODEL_QUEUE, PROMPT_KEYS_JS
from .state import Controls, Session, decoded, reading_controls
from .views import (
    PROJECTION,
    PROJECTION_BATCHES,
    filling_html,
    fit,
    glossary_markdown,
    metrics_html,
    progress_html,
    step_markdown,
    texts_html,
)

__all__ = [
    "SWEEP_FILE",
    "SWEEP_GRID",
    "SWEEP_PER_FAMILY",
    "SWEEP_VERIFIED",
    "SpeedQualityCurve",
    "build_demo",
    "compute_sweep",
    "example_label",
    "precompute_sweep",
    "read_projection",
    "read_settings",
]

PROGRESS_EVERY = 0.1  # seconds between progress views while decoding


# -- handlers ---------------------------------------------------------------------------------
class Pick(NamedTuple):
    """One example of the page: what it fills in and the label it is shown by."""

    prompt: str
    chat: bool | None  # the chat template switch (None: the model has none)
    label: str
    decoder: str  # the decoder's label
    verified: bool
    start: float  # the decoder's knob (γ for SBD) at its start


class Handlers:
    """The event handlers. They hold read-only things (the model, the suite lookup, the curve) and the γ maps, which
    one background thread builds (``map_builder``)."""

    def __init__(self, model, curve: SpeedQualityCurve, map_sessions: int = MAP_SESSIONS):
        self.model, self.curve = model, curve
        self.maps = GammaMaps(model, map_sessions)
        self.canvas = isinstance(model, DiffusionModel)  # block diffusion: no NTP, verify or gap-free
        self.causal = registry.model_kind(model) == "causal"  # a pretrained LM without SBD: no rule, no γ
        items = tasks.load_suite("pyasserts", "test")
        # recognise suite prompts, alone or at the end of a document, to score them
        self.suite = {item.prompt: item for item in items}
        self.files = Path(tempfile.mkdtemp(prefix="sbd_viz_app_"))

    def close(self) -> None:
        """Stop the γ maps' worker (a map being built stops at its next call) and the curve's background sweep (at
        the end of the setting it is on), and remove the files the handlers wrote (animations, trace downloads). The
        handlers answer no request after this."""
        self.maps.close()
        self.curve.close()
        shutil.rmtree(self.files, ignore_errors=True)

    def read_controls(self, controls: Controls) -> dict:
        """The controls as ``sv.decode`` keyword arguments (``read_settings``), the prompt among them, with a text
        LM's chat template applied if its switch is on."""
        c = controls
        spec = None if self.canvas else read_spec(c.decoder, self.model)
        own_knob = spec is not None and knob_of(spec) not in (None, "gamma")  # the slider moves its own setting
        gamma = COMMIT_RULES[c.rule].default if own_knob and c.rule in COMMIT_RULES else c.gamma
        settings = read_settings(
            c.prompt,
            c.rule,
            gamma,
            c.gap_free,
            c.block_size,
            c.max_new_tokens,
            c.temperature,
            c.seed,
            c.stop_at_newline,
            c.verify,
            max(MAX_BLOCK_SIZE, self.model.block_size),
            prompt_limit(self.model),
        )
        if own_knob and spec is not None:
            settings[spec.knob.name] = read_knob(spec, c.gamma)
        if settings["verify"] and spec is not None and "verify" in spec.takes:
            settings.update(read_mode(fastest_mode(self.model) if c.draft_mode is None else c.draft_mode))
        if c.chat is True:  # a pretrained LM's chat switch: the prompt as the user's turn of its template
            settings["prompt"] = sv.chat_prompt(self.model, settings["prompt"])
        return settings

    def decode(self, controls: Controls, session: Session | None = None):
        """Decode with the chosen decoder (``sv.decoders()``; SBD by default), streaming its steps while the block
        fills; then the metrics, then the animation; then NTP on the same prompt (once per prompt and length: it does
        not depend on the other settings)."""
        settings = self.read_controls(controls)
        prompt = settings.pop("prompt")
        if self.canvas:
            yield from self._decode_canvas(prompt, settings, session)
            return
        spec, own = read_decoder(controls.decoder, settings, self.model)
        map_id = (session.map_id if session is not None else None) or uuid.uuid4().hex
        key = map_key(prompt, spec, own)
        answered = self.maps.answer(map_id, key, own.get("gamma"))
        ntp_key = (prompt, settings["max_new_tokens"], tuple(settings["stop"] or ()))
        if answered is not None:  # a piece of this session's γ map holds γ: its decode, no model call
            with self.maps.gate.interactive(wait=False):  # no call to wait for; the worker stays off meanwhile
                yield from self._views(
                    self._finished(
                        session, prompt, answered, None, spec.label, ntp_key, rerun=(spec.name, own), map_id=map_id
                    )
                )
            return
        try:  # the one door's checks name the argument, before any call (the trained context included)
            spec, decoding = door.start(self.model, prompt, spec.name, **own)
        except ValueError as exc:
            raise refused(str(exc)) from None
        skip = gr.skip()
        steps, paused = [], 0.0
        with self.maps.gate.interactive():  # the background map waits (its call in flight ends first)
            t0 = last = time.perf_counter()
            for step in decoding.steps():
                steps.append(step)
                now = time.perf_counter()
                if now - last > PROGRESS_EVERY:  # a progress view now and then; the finished views cost more
                    yield skip, skip, progress_html(steps), filling_html(prompt, steps, spec.label), skip
                    last = time.perf_counter()
                    paused += last - now  # time spent showing progress is not decoding time
            trace = spec.trace(decoding)
            self.maps.want(map_id, key, prompt, spec, own)  # this prompt's map, built once this decode is shown
            yield from self._views(
                self._finished(
                    session,
                    prompt,
                    trace,
                    time.perf_counter() - t0 - paused,
                    spec.label,
                    ntp_key,
                    rerun=(spec.name, own),
                    map_id=map_id,
                )
            )

    def _finished(
        self,
        old: Session | None,
        prompt: str,
        trace,
        seconds: float | None,
        label: str,
        ntp_key: tuple | None,
        rerun: tuple | None = None,
        map_id: str | None = None,
    ) -> Session:
        """The session after a decode, the one place a ``Session`` is built: NTP kept from ``old`` if it ran on the
        same ``ntp_key`` (prompt, max new tokens, stop; None: a model without NTP), the projection choice kept."""
        old = old or Session()
        cached = ntp_key is not None and old.ntp_key == ntp_key and old.ntp is not None
        return Session(
            trace=trace,
            label=label,
            prompt=prompt,
            item=tasks.item_in_prompt(prompt, self.suite),
            seconds=seconds,
            ntp=old.ntp if cached else None,
            ntp_key=ntp_key,
            ntp_seconds=old.ntp_seconds if cached else None,
            ntp_cached=cached,
            no_ntp=ntp_key is None,
            rerun=rerun,
            map_id=map_id,
            projection=old.projection,
        )

    def _views(self, session: Session):
        """A finished decode's views: the metrics and texts, then the animation, then NTP beside it (unless the
        session holds it already, or the model has none)."""
        from .. import plots

        skip = gr.skip()
        # The numbers and texts first (cheap), then the animation (its frames take longer to build).
        yield session, skip, metrics_html(session), texts_html(session), skip
        # plain data, not graph objects: validating every frame's properties cost as much as the decode
        figure = json.dumps(plots.block_fill_spec(session.trace), separators=(",", ":"))
        last_call = session.trace.nfe - 1
        call_slider = gr.update(maximum=max(1, last_call), value=last_call, interactive=last_call > 0)
        yield session, figure, metrics_html(session), texts_html(session), call_slider
        if session.ntp is None and not session.no_ntp:
            assert session.ntp_key is not None  # a model with NTP: the session names its NTP decode
            prompt, max_new_tokens, stop = session.ntp_key
            t0 = time.perf_counter()
            ntp = sv.decode_ntp(self.model, prompt, max_new_tokens=max_new_tokens, stop=stop)
            session = replace(session, ntp=ntp, ntp_seconds=time.perf_counter() - t0)
            # Everything again in the last message (API clients read only that one); Gradio sends
            # generator updates as diffs, so the unchanged figure costs nothing on the wire.
            yield session, figure, metrics_html(session), texts_html(session), call_slider

    def _decode_canvas(self, prompt, settings, session):
        """A block-diffusion model: its own generate, recorded; no NTP to compare (it has no causal decoder)."""
        settings["stop"] = None  # it stops at its end-of-text token only
        t0 = time.perf_counter()
        try:
            trace = sv.decode(self.model, prompt, **settings)  # refuses verify and gap-free, naming them
        except ValueError as exc:
            raise refused(str(exc)) from None
        yield from self._views(
            self._finished(
                session,
                prompt,
                trace,
                time.perf_counter() - t0,
                registry.default_decoder(self.model).label,
                ntp_key=None,
            )
        )

    def details(self, session: Session | None):
        """The views below the fold: gap-fill table, timeline, comparison, curve, trace file."""
        from .. import plots

        if not decoded(session):
            raise refused("prompt: nothing decoded yet; decode a prompt first")
        trace, ntp, cfg = session.trace, session.ntp, session.trace.config
        # the table's NTP column is the model's own causal prediction (teacher forced on the final prefix): a
        # block-diffusion model has none
        with self.maps.gate.interactive():  # its teacher-forced calls go before the background map's
            events = [] if self.canvas else failure_events(self.model, trace, session.item)
        # the curve is the commit rules' sweep: Jacobi's and prompt lookup's traces name no rule there, and say so
        tradeoff, status = self.curve.figure(
            cfg.get("rule"), cfg.get("gamma", 0.0), cfg.get("gap_free", False), cfg.get("verify", False)
        )
        label = (
            failure_label(events, trace)
            if not self.canvas
            else (
                f"{len(trace.kept_gap_fills())} gap fill(s), as the card counts them; not listed: "
                "a block-diffusion model has no causal prediction to judge them against"
            )
        )
        table = gr.update(value=failure_rows(events), label=label)
        comparison = None if ntp is None else fit(plots.compare(trace, ntp, labels=(session.label, "NTP")))
        return (
            table,
            fit(plots.calls_timeline(trace, ntp)),
            comparison,
            fit(tradeoff),
            status,
            trace_file(trace, fresh_folder(self.files)),
        )

    def show_call(self, session: Session | None, call):
        """What one call saw and did, and the entropy heatmap of its block."""
        from .. import plots

        if not decoded(session):
            return None, ""
        trace = session.trace
        step = trace.steps[read_call(call, trace.nfe)]
        return fit(plots.entropy_heatmap(trace, step.block)), step_markdown(trace, step)

    def select_failure(self, session: Session | None, evt: gr.SelectData):
        """A click on a failure row: show that call (the animation jumps to it in the browser)."""
        row = evt.row_value if isinstance(evt.row_value, (list, tuple)) else None
        if not decoded(session) or not row or len(row) < 2:
            return gr.update()
        try:
            call = int(row[1])  # FAILURE_COLUMNS: kind, call, ...
        except (TypeError, ValueError):
            return gr.update()
        return gr.update(value=call) if 0 <= call < session.trace.nfe else gr.update()

    def ladder(self, controls: Controls):
        """This prompt across the chosen decoder's knob (γ for SBD): NTP once, then every value of its ladder, each
        row streamed as it is decoded. A decoder without a knob is refused by name."""
        import pandas as pd

        if self.canvas:
            raise refused("ladder: a block-diffusion model has no NTP to compare each γ with")
        settings = self.read_controls(controls)
        spec, own = read_decoder(controls.decoder, settings, self.model)
        if spec.knob is None:
            raise refused(
                f"decoder: {spec.label} has no knob to climb; choose one of "
                f"{', '.join(s.label for s in registry.decoders(self.model) if s.knob)}"
            )
        try:
            for rows, figure, status, frame in stream_ladder(self.model, settings.pop("prompt"), settings, spec, own):
                table = pd.DataFrame(rows, columns=ladder_headers(frame.attrs.get("knob", "gamma")))
                yield table, fit(figure), status
        except ValueError as exc:  # the library's checks name the argument
            raise refused(str(exc)) from None

    def compare(self, controls: Controls, chosen):
        """The prompt through each ``chosen`` decoder (their labels), beside NTP (``app.compare``)."""
        if self.canvas:
            raise refused("decoders: a block-diffusion model decodes with its own sampler only")
        settings = self.read_controls(controls)
        try:
            figure, rows, order = compare_decoders(self.model, settings, chosen)
        except ValueError as exc:  # the library's checks name the argument
            raise refused(str(exc)) from None
        return fit(figure), rows, fit(order)

    def strip(self, session: Session | None):
        """The γ strip under the slider (the session's map as built so far), and its timer: on while it builds."""
        from .. import plots

        if not decoded(session):
            return "", gr.Timer(active=False)
        found = self.maps.current(session.map_id)
        if found is None:  # no map for this decode (another decoder, sampling) or none yet
            return "", gr.Timer(active=False)
        gamma_map, state = found
        if state == "failed":
            return (
                "<div class='sbd-strip' data-failed='1'>This prompt's γ map failed (the server log says why); "
                "each release decodes.</div>",
                gr.Timer(active=False),
            )
        ntp = session.ntp  # None until NTP has run (or for a model without one)
        strip = plots.gamma_strip(gamma_map, session.trace.config.get("gamma"), None if ntp is None else ntp.text)
        return strip, gr.Timer(active=state in ("queued", "building"))

    def strip_pick(self, evt: gr.EventData):
        """A click on a piece of the γ strip: its slider position goes to the slider, which shows that piece."""
        try:
            gamma = float(evt.gamma)
        except (AttributeError, TypeError, ValueError):  # a raw API call can send anything: no move
            return gr.update()
        return gr.update(value=gamma) if math.isfinite(gamma) else gr.update()

    def ladder_pick(self, label, evt: gr.SelectData):
        """A click on a ladder row: its value goes to the control the chosen decoder's knob is (the slider, or
        Jacobi's block size), and the main view decodes it (the same decode)."""
        row = evt.row_value if isinstance(evt.row_value, (list, tuple)) else None
        if row is None:
            return gr.update(), gr.update()
        try:
            value = float(row[0])
            spec = read_spec(label, self.model)
        except (TypeError, ValueError, IndexError, gr.Error):
            return gr.update(), gr.update()
        if spec.knob is not None and spec.knob.name == "block_size":
            return gr.update(), gr.update(value=int(value))
        return gr.update(value=value), gr.update()

    def open_trace(self, path, session: Session | None = None):
        """A trace file (the Downloads tab's, ``sbd-viz trace --out``'s, or a sample's from ``sbd-viz lm-eval``) shown
        as a decode of this page: its views, NTP on its prompt beside it. A file this page's model did not write is
        refused by name: its views read the model (NTP's verdicts in the failure table)."""
        if not isinstance(path, str) or not path:
            raise refused("trace: no file given; choose a trace JSON file (saved by the app, sbd-viz trace --out, ...)")
        try:
            trace = sv.load_trace(path)
        except (ValueError, TypeError, KeyError, OSError) as exc:
            raise refused(f"trace: {exc}") from None
        if trace.model_id != self.model.name:
            raise refused(
                f"trace: written by the model {trace.model_id!r}, and this page's model is {self.model.name!r}; open "
                "it on that model's page (the model menu), or with sbd-viz gaps FILE --model ..."
            )
        cfg = trace.config
        try:
            label = registry.get_decoder(cfg.get("decoder")).label
        except ValueError:  # a decoder this process has not registered (a plugin's): its name
            label = str(cfg.get("decoder"))
        ntp_key = (trace.prompt, cfg.get("max_new_tokens", len(trace.output_ids)), tuple(cfg.get("stop") or ()))
        yield from self._views(  # its seconds as the file recorded its calls
            self._finished(session, trace.prompt, trace, trace.wall_time, label, None if self.canvas else ntp_key)
        )

    def gif(self, session: Session | None):
        """The current decode's block-fill animation as a GIF, one frame per call."""
        if not decoded(session):
            raise refused("prompt: nothing decoded yet; decode a prompt first")
        return str(animation_file(session.trace, fresh_folder(self.files)))

    def time_it(self, session: Session | None):
        """The current decode and NTP timed side by side (``analysis.timing``): a speedup in seconds, as a median of
        rounds with its range, on the metrics card."""
        from ..analysis.timing import side_by_side

        if not decoded(session) or session.ntp is None or session.rerun is None:
            raise refused("prompt: nothing decoded beside NTP yet; decode a prompt first")
        name, own = session.rerun
        assert session.ntp_key is not None  # NTP ran on it
        prompt, max_new_tokens, stop = session.ntp_key
        decoded_prompt = session.prompt
        with self.maps.gate.interactive():  # no background map call runs beside the timed rounds
            timing = side_by_side(
                lambda: door.decode(self.model, decoded_prompt, name, **own),
                lambda: sv.decode_ntp(self.model, prompt, max_new_tokens=max_new_tokens, stop=stop),
            )
        session = replace(session, timing=timing)
        return session, metrics_html(session)

    def project(self, hardware, model, batch, session: Session | None):
        """A projection dropdown changed: re-cost the current decode's calls (no re-decode)."""
        session = replace(session or Session(), projection=read_projection(hardware, model, batch))
        # nothing decoded yet: the next decode uses the choice
        return session, metrics_html(session) if decoded(session) else gr.skip()

    def decoder_changed(self, label, rule, session: Session | None = None):
        """Fit the controls to the chosen decoder (its spec): grey out the ones it does not take, and give the slider
        its knob (the rule's γ, or its own setting, e.g. a plugin's ``slots``, with its spec's range and default).
        γ keeps its value from a decoder moved by γ (or by none) to another."""
        spec = read_spec(label, self.model)
        previous = session.rerun[0] if session is not None and session.rerun else None
        try:
            before = knob_of(registry.get_decoder(previous)) if previous else "gamma"
        except ValueError:
            before = None
        keep = before in (None, "gamma") and knob_of(spec) in (None, "gamma")
        return fit_controls(spec, rule, None if keep else knob_start(spec, rule), self.causal)

    def example_changed(self, label, rule, value):
        """An example was picked: its decoder's controls, the slider at the example's own value."""
        return fit_controls(read_spec(label, self.model), rule, value, self.causal)

    def rule_changed(self, rule):
        """Relabel the knob: its meaning and range depend on the rule."""
        return rule_slider(rule)


# -- the page ---------------------------------------------------------------------------------
def build_demo(model=None, model_dir=None, sweep="auto", map_sessions: int = MAP_SESSIONS, nav=None) -> gr.Blocks:
    """The app as a ``gr.Blocks``. ``model=None`` loads the shipped model.

    ``sweep``: ``"auto"`` shows the curve from ``sweep.json`` beside the model, or computes it in a background thread;
    a list of rows / a DataFrame shows those; ``None`` shows no curve. ``map_sessions``: how many sessions' γ maps are
    kept (``map_builder``); 0 builds none, so every slider release decodes and no background thread takes a core.
    ``nav``: the model menu's HTML (``menu.Menu.nav_html``), asked again each time the page opens (a model may have
    loaded or failed since); None: no menu."""
    if model is None:
        model_dir = model_dir or sv.default_model_path()
        model = sv.load_model(model_dir)
    canvas = isinstance(model, DiffusionModel)  # block diffusion: the SBD-only controls are hidden
    # a pretrained LM (sbd_viz.models.causal_lm, or with an SBD adapter: sbd_viz.models.adapted_lm): free text, its chat
    # template
    text_lm = isinstance(model, CausalLM)
    causal = registry.model_kind(model) == "causal"  # without SBD training: the exact decoders only
    if canvas or text_lm:  # the suite sweep runs SBD's rules on the pyassert suite: a text LM is not scored on it
        curve = SpeedQualityCurve(compute=False)
    elif sweep == "auto":
        curve = SpeedQualityCurve(model, model_dir)
    else:
        curve = SpeedQualityCurve(results=sweep) if sweep is not None else SpeedQualityCurve(compute=False)
    h = Handlers(model, curve, map_sessions)
    gr.set_static_paths([PLOTLY_JS])
    knob = COMMIT_RULES[DEFAULTS["rule"]]

    with gr.Blocks(title="sbd_viz · Set Block Decoding", delete_cache=(600, 1800), fill_width=True) as demo:
        session = gr.State(None, time_to_live=3600)
        if nav is not None:
            menu_bar = gr.HTML(nav(), elem_id="sbd-menu", padding=False)
            demo.load(nav, outputs=[menu_bar], show_progress="hidden", api_visibility="undocumented")
        gr.Markdown(
            "# Set Block Decoding, visualised\n"
            "A language model fills a **block** of future slots, all starting as a mask, over a few model "
            "**calls**; after each call a commit rule fixes the slots it is sure about, not necessarily in order "
            "(*gap fills*). Move **γ** and watch speed trade against quality. "
            f"Model: `{html.escape(model.name)}` · paper: [arXiv 2509.04185](https://arxiv.org/abs/2509.04185) · "
            "words used here: the **Glossary** tab below"
            + (
                "\n\n**A block-diffusion model** (DiffusionGemma): transformers' own `generate`, recorded step by "
                "step; γ is its sampler's entropy bound, the block its canvas. Accepted slots can be renoised "
                "(outlined when they turn grey again). Verified decoding, gap-free and NTP do not apply to it."
                if canvas
                else ""
            )
            + (causal_app.header(model) if text_lm else ""),
            elem_id="sbd-title",
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                labels = decoder_labels(model)
                # each example opens with its own decoder, verified switch and slider value: an SBD model's verified
                # SBD (its numbers measured by bench/scripts/app_examples.py for a text model, when the page is built
                # for the character model, whose examples show plain SBD at the default γ); a text LM without SBD
                # training the decoder measured to write the most tokens per call on it
                # (prompt, chat template, label, decoder label, verified)
                chosen: list[tuple[str, bool | None, str, str, bool]]
                if text_lm:
                    chosen = list(causal_app.example_choices(model, labels))
                else:
                    chosen = [(p, None, example_label(model, h.suite, p), labels[0], False) for p in EXAMPLES]
                picks = [Pick(*c, knob_start(registry.by_label(c[3]), DEFAULTS["rule"])) for c in chosen]
                opening = picks[0]  # the page opens on the first example
                first = registry.by_label(opening.decoder) if not canvas else None
                # made before the examples that set them, drawn below in their places
                slider = (
                    dict(
                        label=knob.label,
                        minimum=model.gamma_slider[0],
                        maximum=model.gamma_slider[1],
                        step=model.gamma_slider[2],
                    )
                    if canvas
                    else knob_slider(first, DEFAULTS["rule"])
                )
                own_knob = first is not None and knob_of(first) not in (None, "gamma")
                gamma = gr.Slider(
                    **slider,
                    value=knob.default if canvas else opening.start,
                    elem_id="sbd-gamma",
                    visible=not causal or own_knob,
                    render=False,
                    interactive=canvas or own_knob or knob_of(first) == "gamma",
                )
                verify = gr.Checkbox(
                    opening.verified,
                    label="verified (lossless)",
                    visible=not canvas and not causal,
                    info="check every draft against NTP in the same calls: the text is exactly "
                    "NTP's greedy text (temperature 0)",
                    elem_id="sbd-verify",
                    render=False,
                )
                # how verified SBD drafts (its MODES), at the fastest mode measured on this model
                draft_mode = gr.Dropdown(
                    list(MODES),
                    value=fastest_mode(model),
                    label="drafting (verified SBD)",
                    info="single: one block a call; tree: a block after the drafts NTP may accept, so a rejected draft "
                    "is redrafted in the same call; a token tree checks several candidates a slot",
                    visible=not canvas and not causal,
                    interactive=opening.verified,
                    elem_id="sbd-drafting",
                    render=False,
                )
                decoder = gr.Dropdown(
                    labels,
                    value=opening.decoder,
                    label="decoder",
                    visible=not canvas,
                    elem_id="sbd-decoder",
                    render=False,
                    info="SBD, or another way of writing several tokens per call (the Compare "
                    "decoders tab runs them all); the slider above moves its knob",
                )
                prompt = gr.Textbox(
                    opening.prompt,
                    label="prompt",
                    lines=2,
                    max_lines=6,
                    elem_id="sbd-prompt",  # never cut in the box: refused by name
                    info=(
                        "Free text."
                        if text_lm
                        else "A suite prompt ends with '== ' (with the space); its answer is scored."
                    )
                    + prompt_note(model)
                    + " Enter decodes; Shift+Enter starts a new line.",
                )
                chat = gr.Checkbox(
                    text_lm,
                    label="chat template",
                    visible=text_lm,
                    elem_id="sbd-chat",
                    info="the prompt as the user's turn of the model's chat template; off: raw text",
                )
                if text_lm:
                    examples = gr.Examples(
                        [[x.prompt, x.chat, x.decoder, x.verified, x.start] for x in picks],
                        inputs=[prompt, chat, decoder, verify, gamma],
                        label="examples",
                        elem_id="sbd-examples",
                        example_labels=[x.label for x in picks],
                    )
                else:
                    examples = gr.Examples(
                        [[x.prompt, x.decoder, x.start] for x in picks],
                        inputs=[prompt, decoder, gamma],
                        label="examples",
                        example_labels=[x.label for x in picks],
                        elem_id="sbd-examples",
                    )
                rule = gr.Dropdown(
                    list(model.rules if canvas else sv.RULES),
                    value=DEFAULTS["rule"],
                    label="commit rule",
                    info="which masked slots to fix after each call",
                    interactive=not canvas and (first is None or "rule" in first.takes),
                    visible=not causal,
                )
                gamma.render()
                # this prompt's γ map, drawn as it builds: each piece one decode; a click shows it
                strip = gr.HTML("", js_on_load=STRIP_JS, elem_id="sbd-gamma-strip", visible=not canvas and not causal)
                strip_timer = gr.Timer(1.0, active=False)
                gap_free = gr.Checkbox(
                    DEFAULTS["gap_free"],
                    label="gap-free",
                    visible=not canvas and not causal,
                    info="only commit a contiguous run from the left: no gap fills",
                )
                verify.render()
                draft_mode.render()
                decoder.render()
                with gr.Accordion("more settings", open=False):
                    block_size = gr.Slider(
                        1,
                        max(MAX_BLOCK_SIZE, model.block_size),
                        value=model.block_size,
                        step=1,
                        label="block size (slots decoded together)",
                        interactive=not canvas,
                    )
                    max_new_tokens = gr.Slider(
                        1,
                        MAX_NEW_TOKENS,
                        step=1,
                        label="max new tokens",
                        value=causal_app.MAX_NEW_TOKENS if text_lm else DEFAULTS["max_new_tokens"],
                    )
                    stop_at_newline = gr.Checkbox(
                        DEFAULTS["stop_at_newline"] and not text_lm,
                        label="stop at the end of the line",
                        visible=not canvas,
                    )
                    temperature = gr.Slider(
                        0,
                        2,
                        value=DEFAULTS["temperature"],
                        step=0.05,
                        visible=not canvas,
                        label="temperature (0 = greedy, the paper's setting)",
                    )
                    # a block-diffusion sampler renoises with random tokens at any temperature: the seed always counts
                    seed = gr.Number(
                        DEFAULTS["seed"],
                        label="seed (the sampler's random renoising)" if canvas else "seed (for temperature > 0)",
                        precision=0,
                        minimum=0,
                        maximum=MAX_SEED,
                    )
                with gr.Accordion("projected on a GPU (roofline model)", open=False):
                    gr.Markdown(
                        "What this decode's calls would cost for a large model on a GPU, against the "
                        "same text one token per call (the paper's App. A.2 roofline, `sbd_viz.analysis.roofline`)."
                    )
                    hardware = gr.Dropdown(list(roofline.HARDWARE), value=PROJECTION["hardware"], label="hardware")
                    shape = gr.Dropdown(list(roofline.MODELS), value=PROJECTION["model"], label="model shape")
                    batch = gr.Dropdown(list(PROJECTION_BATCHES), value=PROJECTION["batch"], label="batch")
                run = gr.Button("Decode", variant="primary", elem_id="sbd-run")
            with gr.Column(scale=3, min_width=600):
                # the γ map's decodes in the page: a move of γ redraws them there, without a request
                live = scrubber.component("sbd-gamma", visible=not canvas and not causal)
                metrics = gr.HTML(elem_id="sbd-metrics", js_on_load=None)
                time_run = gr.Button(
                    f"Time it: this decode and NTP side by side, {TIMING_ROUNDS} rounds (a speedup in seconds)",
                    size="sm",
                    elem_id="sbd-time",
                    visible=not canvas,
                )
                animation = gr.HTML(
                    None,
                    html_template=ANIM_TEMPLATE,
                    js_on_load=ANIM_JS,
                    elem_id="sbd-anim",
                    head=f"<script src='gradio_api/file={PLOTLY_JS}'></script>",
                    min_height=420,
                )
                show_call = gr.Slider(
                    0,
                    1,
                    value=0,
                    step=1,
                    label="show call",
                    elem_id="sbd-show-call",
                    info="jump the animation to a call (or click a gap fill below)",
                )
                texts = gr.HTML(elem_id="sbd-texts", js_on_load=None)
        with gr.Tabs():
            with gr.Tab("Gap fills and incoherent commits"):
                gaps = results_table(
                    FAILURE_COLUMNS,
                    FAILURE_TYPES,
                    "sbd-gaps",
                    max_height=300,
                    # a short first label: API clients name the output by it; each decode's label counts and explains
                    label="gap fills and incoherent commits",
                    column_widths=["10%", "5%", "5%", "5%", "5%", "6%", "7%", "6%", "6%", "7%", "8%", "30%"],
                )
                with gr.Row():
                    call_info = gr.Markdown(elem_id="sbd-call-info")
                    heatmap = gr.Plot(label="entropy of the shown call's block", show_label=True)
                if not canvas:  # the list tasks' failures, ranked; a row decodes its item above
                    gallery_task, gallery_run, gallery_status, gallery_table, gallery_picks = gallery_section()
            with gr.Tab("Tokens per call" if canvas else "Calls vs NTP"):  # a block-diffusion model has no NTP
                timeline = gr.Plot(label="tokens per call")
                comparison = gr.Plot(label="this decode vs NTP, token by token", visible=not canvas)
            with gr.Tab("Speed vs quality (suite)", visible=not canvas and not text_lm):  # the suite sweeps SBD's rules
                curve_status = gr.Markdown(curve.status)
                tradeoff = gr.Plot(label="speed vs suite accuracy")
            with gr.Tab("This prompt across γ" if not causal else "This prompt across the knob", visible=not canvas):
                gr.Markdown(
                    "The prompt decoded with the chosen decoder at every value of its knob (SBD's: γ over the "
                    "rule's range; Jacobi's: the block size; a decoder's own knob over its spec's range), "
                    "greedy, not verified, and once with NTP: where its text first leaves NTP's, and the "
                    "**largest safe value**, the largest whose text equals NTP's at it and at every smaller "
                    "value tried. Click a row to show that value above."
                )
                ladder_run = gr.Button("Decode this prompt across the chosen decoder's knob", elem_id="sbd-ladder-run")
                ladder_status = gr.Markdown(elem_id="sbd-ladder-status")
                ladder_table = results_table(
                    LADDER_HEADERS, ["number", "number", "number", "str", "str", "number"], "sbd-ladder", max_height=320
                )
                ladder_plot = gr.Plot(label="calls against the knob")
            with gr.Tab("Compare decoders", visible=not canvas):
                chosen, compare_run, compare_table, compare_plot, compare_order = decoders_tab(model)
            with gr.Tab("Downloads"):
                trace_file = gr.File(label="the full trace of the current decode (sbd_viz.load_trace reads it)")
                gr.Markdown(
                    "A trace file this page's model wrote (this tab's download, `sbd-viz trace --out`, a sample of "
                    "`sbd-viz lm-eval`) opens as a decode of the page, every view with it:"
                )
                trace_upload = gr.File(
                    label="open a trace file: its decode shown above",  # short: API clients name the input by it
                    file_types=[".json"],
                    type="filepath",
                    elem_id="sbd-open-trace",
                )
                gif_run = gr.Button("Make a GIF of the animation (one frame per call)")
                gif_file = gr.File(label="the block-fill animation as a GIF", elem_id="sbd-gif")
            with gr.Tab("Glossary"):
                # our own file: its headings are HTML with the ids its links name (sanitising would drop them)
                gr.Markdown(glossary_markdown(), sanitize_html=False, elem_id="sbd-glossary")

        # -- wiring -------------------------------------------------------------------------------
        # the inputs by name: the main view's controls reach a handler as one Controls (``reading_controls``)
        settings = dict(
            prompt=prompt,
            rule=rule,
            gamma=gamma,
            gap_free=gap_free,
            block_size=block_size,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            stop_at_newline=stop_at_newline,
            verify=verify,
        )
        chat_switch = dict(chat=chat) if text_lm else {}
        # verified SBD's drafting mode last: an API client's positional values before it keep their places
        decode_inputs = {**settings, "decoder": decoder, "session": session, **chat_switch, "draft_mode": draft_mode}
        # preprocess=False: the handler checks the raw values itself, so errors name the field
        # (Gradio's own range check would say "Value 3 is greater than maximum value 2").
        # Two concurrency groups, each with its own line in the queue (Gradio takes the next event from any group
        # with room, not first-in-first-out across groups): "model" for what a control move runs (a decode and its
        # details, MODEL_LIMIT at a time), "heavy" for the many-decode jobs (ladder, compare, list tasks, GIF),
        # HEAVY_LIMIT at a time. So a slider move never waits behind a heavy job, and heavy jobs take at most one core.
        # trigger_mode "always_last": a click or move while a decode runs is kept and decoded after it (Gradio's
        # default for a click drops it without a word)
        decode_kw: dict[str, Any] = dict(
            fn=reading_controls(h.decode, list(decode_inputs)),
            inputs=list(decode_inputs.values()),
            outputs=[session, animation, metrics, texts, show_call],
            preprocess=False,
            show_progress="minimal",
            trigger_mode="always_last",
            **MODEL_QUEUE,
        )
        # Views of each decode's session, "always_last": a decode ending while the last one's views are pending gets its
        # own after them (a .then's default drops it). The shown call too: a decode may leave the call slider as it was.
        after: dict[str, Any] = dict(show_progress="hidden", trigger_mode="always_last")
        details_kw: dict[str, Any] = dict(
            fn=h.details,
            inputs=[session],
            outputs=[gaps, timeline, comparison, tradeoff, curve_status, trace_file],
            **after,
            **MODEL_QUEUE,
        )
        call_kw: dict[str, Any] = dict(
            fn=h.show_call, inputs=[session, show_call], outputs=[heatmap, call_info], preprocess=False, **after
        )
        strip_kw: dict[str, Any] = dict(fn=h.strip, inputs=[session], outputs=[strip, strip_timer], **after)
        hidden: dict[str, Any] = dict(api_visibility="undocumented")
        scrub_kw: dict[str, Any] = dict(fn=scrubber.Feed(h.maps).scrubber, inputs=[session], outputs=[live], **after)

        def views(event, **api):
            for beside in (scrub_kw, call_kw):
                event.then(**beside, **hidden)
            return event.then(**strip_kw, **hidden).then(**details_kw, **(api or hidden))

        def heavy_run(button, handler, inputs: dict, outputs: list, api_name: str) -> None:
            """A many-decode job's button: ``handler`` reads the controls named in ``inputs``, in the heavy line."""
            button.click(
                reading_controls(handler, list(inputs)),
                inputs=list(inputs.values()),
                outputs=outputs,
                preprocess=False,
                show_progress="minimal",
                **HEAVY_QUEUE,
                api_name=api_name,
            )

        views(gamma.release(**decode_kw, api_name="decode"), api_name="details")
        for event in (
            run.click,
            gap_free.input,
            block_size.release,
            max_new_tokens.release,
            stop_at_newline.input,
            temperature.release,
            seed.submit,
            verify.input,
            draft_mode.input,
        ) + ((chat.input,) if text_lm else ()):
            views(event(**decode_kw, **hidden))
        fitted = [rule, gamma, gap_free, verify, block_size, temperature, seed]  # CONTROLS' order
        # the drafting menu counts only for verified SBD (in the browser: no request)
        verify.change(None, inputs=[verify], outputs=[draft_mode], js="(v) => ({__type__: 'update', interactive: v})")
        views(
            decoder.select(h.decoder_changed, inputs=[decoder, rule, session], outputs=fitted, **hidden).then(
                **decode_kw, **hidden
            )
        )
        views(rule.select(h.rule_changed, inputs=[rule], outputs=[gamma], **hidden).then(**decode_kw, **hidden))
        # an example, and the page's first screen (the first example): its decoder's controls, its slider value
        example_kw: dict[str, Any] = dict(
            fn=h.example_changed, inputs=[decoder, rule, gamma], outputs=fitted, show_progress="hidden"
        )
        if canvas:  # one sampler: nothing to fit
            views(examples.load_input_event.then(**decode_kw, **hidden))
            views(demo.load(**decode_kw, **hidden))
        else:
            views(examples.load_input_event.then(**example_kw, **hidden).then(**decode_kw, **hidden))
            views(demo.load(**example_kw, **hidden).then(**decode_kw, **hidden))
        strip_timer.tick(**strip_kw, api_name="gamma_strip").then(**scrub_kw, **hidden)
        for pick in (strip.click, live.release):  # a piece clicked, the scrubber released: that γ, from the map
            views(pick(h.strip_pick, outputs=[gamma], **hidden).then(**decode_kw, **hidden))
        demo.load(None, js=PROMPT_KEYS_JS)  # Enter decodes, Shift+Enter a new line (in the browser, no request)

        project_kw: dict[str, Any] = dict(
            fn=h.project,
            inputs=[hardware, shape, batch, session],
            outputs=[session, metrics],
            preprocess=False,
            show_progress="hidden",
        )
        hardware.input(**project_kw, api_name="project")
        for control in (shape, batch):
            control.input(**project_kw, api_visibility="undocumented")
        show_call.change(None, inputs=[show_call], js=SHOW_CALL_JS)
        gamma.change(None, inputs=[gamma], js=scrubber.follow_js("sbd-gamma"))  # in the browser: no request
        show_call.change(**call_kw, api_name="show_call")  # read_call checks the call (preprocess=False)
        gaps.select(h.select_failure, inputs=[session], outputs=[show_call], api_visibility="undocumented")
        if not canvas:
            gallery, call_picked = Gallery(h), gr.State(None)
            gallery_inputs = {**settings, "decoder": decoder, **chat_switch, "task": gallery_task}
            gallery_outputs = [gallery_table, gallery_status, gallery_picks]
            heavy_run(gallery_run, gallery.list_failures, gallery_inputs, gallery_outputs, "list_failures")
            picked = gallery_table.select(
                gallery.pick,
                inputs=[gallery_picks],
                outputs=[prompt, chat, max_new_tokens, stop_at_newline, call_picked],
                **hidden,
            )
            views(picked.then(**decode_kw, **hidden)).then(
                gallery.show, inputs=[call_picked, session], outputs=[show_call], **hidden
            )
        ladder_inputs = {**settings, "decoder": decoder, **chat_switch}
        heavy_run(ladder_run, h.ladder, ladder_inputs, [ladder_table, ladder_plot, ladder_status], "ladder")
        views(
            ladder_table.select(h.ladder_pick, inputs=[decoder], outputs=[gamma, block_size], **hidden).then(
                **decode_kw, **hidden
            )
        )
        compare_inputs = {**settings, "chosen": chosen, "decoder": decoder, **chat_switch}
        heavy_run(compare_run, h.compare, compare_inputs, [compare_plot, compare_table, compare_order], "compare")
        gif_run.click(h.gif, inputs=[session], outputs=[gif_file], **HEAVY_QUEUE, api_name="gif")
        views(
            trace_upload.upload(
                h.open_trace,
                inputs=[trace_upload, session],
                outputs=[session, animation, metrics, texts, show_call],
                api_name="open_trace",
                **MODEL_QUEUE,
            )
        )
        time_run.click(h.time_it, inputs=[session], outputs=[session, metrics], **HEAVY_QUEUE, api_name="time_it")
    return demo
