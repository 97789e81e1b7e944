"""An ipywidgets explorer for one prompt: turn the knobs, re-decode, scrub through the calls.

    import sbd_viz as sv
    sv.explore(model, "assert 48 + 37 == ", stop="\\n")

``explore`` returns an ``Explorer``. What each control does and where its measures come from:
docs/app_internals.md.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import ipywidgets as widgets
import plotly.graph_objects as go
import plotly.io as pio

from . import plots
from .analysis.order import decode_order
from .analysis.timing import ROUNDS, Timing, side_by_side
from .decoders.door import decode, start
from .decoders.ntp import NTP, decode_ntp
from .decoders.registry import decoders, default_decoder, get_decoder
from .decoders.rules import COMMIT_RULES, DEFAULT_RULE, RULES
from .models.base import CausalModel
from .models.checks import check_block_size
from .models.diffusion import DiffusionModel
from .plots.animation import save_animation
from .trace.checks import check_trace
from .trace.data import Trace
from .trace.labels import first_difference, visible
from .trace.words import Measure, measures, step_text

PLOTLY_MIME = "application/vnd.plotly.v1+json"
GAMMA_WIDTH = "460px"  # the γ slider's width: its 110 px description, a track to drag, and the readout


def figure_at_call(fig: go.Figure, call: int) -> go.Figure:
    """A still copy of a ``plots.block_fill`` figure showing the blocks after ``call``.

    block_fill's frames are incremental (frame 0 holds every row, frame ``c`` only the rows that
    changed at call ``c``), so the state at ``call`` is frame 0 with frames 1..call applied in order.
    The play buttons and slider are dropped: without frames they would do nothing.
    """
    if not 0 <= call < len(fig.frames):
        raise ValueError(f"call: must be in [0, {len(fig.frames) - 1}], got {call!r}")
    data = list(fig.frames[0].data)
    for frame in fig.frames[1 : call + 1]:
        for index, trace in zip(frame.traces, frame.data):
            data[index] = trace
    extra = list(fig.data[len(data) :])  # the entropy colour bar, which no frame touches
    still = go.Figure(data + extra, layout=fig.layout)
    still.layout.updatemenus, still.layout.sliders = (), ()  # (update_layout would merge, not clear)
    # The bottom margin held the play buttons and slider: give it back, but keep room for the entropy
    # scale, which hangs from the top of the grid and can be taller than a short grid.
    margin, grid = fig.layout.margin, fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    bar = max(
        (t.marker.colorbar.len or 0 for t in extra if getattr(t, "marker", None) and t.marker.showscale), default=0
    )
    bottom = max(30, int(bar - grid) + 20)
    still.update_layout(
        title_text=fig.frames[call].layout.title.text,
        margin=dict(b=bottom),
        height=fig.layout.height - (margin.b - bottom),
    )
    return still


def _display_data(fig: go.Figure, name: str = "block-fill") -> dict:
    """An output record for an ``Output`` widget, as the Jupyter plotly renderer would make it.

    Built directly (not with ``display``) so the widget also updates without a running kernel."""
    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {PLOTLY_MIME: bundle[PLOTLY_MIME], "text/plain": f"<{name} figure>"},
    }


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


_VERDICT_COLORS = {"good": "#009E73", "bad": "#D55E00"}  # the app's colours for a measure's verdict


def _value_html(measure: Measure) -> str:
    color = _VERDICT_COLORS.get(measure.verdict)
    style = f" style='color:{color}'" if color else ""
    return f"<b{style}>{_esc(measure.value)}</b>"


WALL_CLOCK = ("wall clock", "speedup · wall clock")  # the library's seconds rows, which the explorer says its own way


def wall_clock_measures(trace: Trace, ntp: Trace, timing, label: str) -> list[Measure]:
    """The explorer's seconds: none before "time it" (one decode's seconds hold its warm-up and the machine's other
    work, and NTP's were timed at another moment), then both medians of the paired rounds and their ratio per
    generated token, with the median of the per-round ratios beside it, each named by what it is."""
    if timing is None:
        return [
            Measure(
                "wall clock",
                "not timed",
                "press “time it”: this decode and NTP in paired rounds after a "
                "warm-up run of each (a single run's seconds are not a speed)",
            )
        ]
    ms, ntp_ms = (1000 * x for x in timing.median_seconds())
    mid, lo, hi = timing.speedup(trace.n_tokens, ntp.n_tokens)
    warmed = "after a warm-up run of each" if timing.warmed else "no warm-up run"
    return [
        Measure(
            "wall clock · medians",
            f"{label} {ms:.0f} ms · NTP {ntp_ms:.0f} ms",
            f"median seconds of {timing.rounds} paired rounds, {warmed} · {trace.n_tokens} and {ntp.n_tokens} tokens",
        ),
        Measure(
            "speedup · wall clock",
            f"{timing.ratio_of_medians(trace.n_tokens, ntp.n_tokens):.2f}×",
            f"ratio of the medians above, per generated token (NTP's ÷ {label}'s) · median of the "
            f"{timing.rounds} per-round ratios: {mid:.2f}× (range {lo:.2f}–{hi:.2f}×)",
        ),
    ]


def order_measure(trace: Trace) -> Measure:
    """Kendall τ of the commit order against left to right, and the share of commits made right of a masked slot."""
    order = decode_order(trace)
    tau = "n/a" if math.isnan(order.kendall_tau) else f"{order.kendall_tau:.2f}"
    rate = "n/a" if math.isnan(order.out_of_order_rate) else f"{order.out_of_order_rate:.0%}"
    return Measure(
        "decode order",
        f"τ {tau} · {rate} out of order",
        f"Kendall τ of the commit call against position (1: left to right, one token per call) · "
        f"{order.n_out_of_order} of {order.n_commits} output tokens committed right of a masked slot",
    )


class Explorer(widgets.VBox):
    """The widget ``explore`` returns. Its parts are attributes so notebooks and tests can drive it:
    ``decoder``, ``gamma``, ``rule``, ``gap_free``, ``verify``, ``block_size``, ``max_new_tokens``, ``prompt``
    (controls; ``decoder`` picks a registered decoder, whose unused controls grey out),
    ``call`` / ``play`` (scrubber), ``metrics`` / ``step_info`` (HTML), ``view`` (Output holding the
    figure), ``order`` (Output holding the decode-order picture), ``time_button`` and ``timing`` (the paired rounds,
    once timed), and the current ``trace``, ``ntp_trace``, ``figure`` (the full animation) and ``order_figure``."""

    def __init__(self, model: CausalModel | DiffusionModel, prompt: str, **decode_kwargs):
        if not isinstance(model, (CausalModel, DiffusionModel)):
            raise TypeError(f"model: expected a model of sbd_viz (see sv.load_model), got {type(model).__name__}")
        self.canvas = isinstance(model, DiffusionModel)  # block diffusion: its own generate, no NTP
        given = {k: v for k, v in decode_kwargs.items() if k != "decoder"}  # as the caller gave them
        if decode_kwargs.get("block_size") is None:  # as decode: the model's own block size
            decode_kwargs = {**decode_kwargs, "block_size": check_block_size(None, model)}
        # the dropdown: every registered decoder that serves the model; NTP is the comparison
        self.choices = tuple(s.name for s in decoders(model) if s is not NTP)
        decoder = decode_kwargs.pop("decoder", None) or default_decoder(model).name
        if decoder not in self.choices:
            raise ValueError(f"decoder: choose from {', '.join(self.choices)}, got {decoder!r}")
        # bad settings (and a prompt past the context) fail here, named, before a slider clamps them silently
        start(model, prompt, decoder, **given)
        self.model = model
        self.extra = dict(decode_kwargs)  # temperature, seed, stop, top_n: passed through unchanged
        rule = self.extra.pop("rule", DEFAULT_RULE)
        knob = COMMIT_RULES[rule]
        lo, hi, step = model.gamma_slider if isinstance(model, DiffusionModel) else knob.slider
        gamma = self.extra.pop("gamma", knob.default)
        wide = {"description_width": "110px"}
        self.decoder = widgets.Dropdown(
            options=[(get_decoder(n).label, n) for n in self.choices],
            value=decoder,
            description="decoder",
            style=wide,
            layout=widgets.Layout(display="none" if self.canvas else None),
        )
        self.prompt = widgets.Text(
            prompt, description="prompt", continuous_update=False, style=wide, layout=widgets.Layout(width="640px")
        )
        self.rule = widgets.Dropdown(
            options=model.rules if isinstance(model, DiffusionModel) else RULES,
            value=rule,
            description="rule",
            style=wide,
            disabled=self.canvas,
        )
        # The range stretches to hold a gamma given outside it, rather than clamping it silently.
        # A slider in a row shrinks to what the row leaves it (a 20 px track beside the dropdown and the checkboxes):
        # a fixed width it never shrinks below keeps it draggable.
        self.gamma = widgets.FloatSlider(
            description=knob.symbol,
            tooltip=knob.label,
            min=min(lo, gamma),
            max=max(hi, gamma),
            step=step,
            value=gamma,
            continuous_update=False,
            readout_format=".2f",
            style=wide,
            disabled=not knob.tunable,
            layout=widgets.Layout(width=GAMMA_WIDTH, min_width=GAMMA_WIDTH, flex="0 0 auto"),
        )
        shown = "none" if self.canvas else None  # verified and gap-free mean nothing for block diffusion
        # checkboxes as wide as their words (ipywidgets gives each 300 px, which squeezed the slider)
        self.gap_free = widgets.Checkbox(
            self.extra.pop("gap_free", False),
            description="gap-free",
            indent=False,
            layout=widgets.Layout(display=shown, width="auto"),
        )
        self.verify = widgets.Checkbox(
            self.extra.pop("verify", False),
            description="verified",
            indent=False,
            layout=widgets.Layout(display=shown, width="auto"),
            tooltip="check every draft against greedy NTP: exactly NTP's text",
        )
        self.block_size = widgets.IntSlider(
            self.extra.pop("block_size"),
            min=1,
            max=max(64, model.block_size),
            description="block size k",
            continuous_update=False,
            style=wide,
            disabled=self.canvas,
        )
        length = self.extra.pop("max_new_tokens", 64)
        self.max_new_tokens = widgets.IntSlider(
            length, min=1, max=max(256, length), description="max tokens", continuous_update=False, style=wide
        )
        self.call = widgets.IntSlider(
            0, min=0, max=0, description="call", style=wide, layout=widgets.Layout(width="520px")
        )
        self.play = widgets.Play(interval=700, min=0, max=0, description="play the calls")
        widgets.link((self.play, "value"), (self.call, "value"))
        self.metrics, self.step_info, self.view = widgets.HTML(), widgets.HTML(), widgets.Output()
        self.order = widgets.Output()  # the decode-order picture: this decode and NTP on one step axis
        # the animation as a GIF file (one frame per call), for slides and posts
        self.gif_path = widgets.Text(
            "sbd_animation.gif", description="GIF file", style=wide, layout=widgets.Layout(width="420px")
        )
        self.save = widgets.Button(description="save GIF", tooltip="write the animation here, one frame per call")
        self.saved = widgets.HTML()
        self.save.on_click(lambda _: self.save_gif(self.gif_path.value))
        # a speedup in seconds needs both decodes timed in the same rounds; one decode's own clock gives none
        self.time_button = widgets.Button(
            description="time it",
            layout=widgets.Layout(display=shown),
            tooltip=f"one warm-up run of each, then this decode and NTP in {ROUNDS} "
            "paired rounds: both medians, their ratio, and the median of the "
            "rounds' ratios",
        )
        self.time_button.on_click(lambda _: self.time_it())
        self.timing: Timing | None = None  # of the current decode, once timed
        self.trace: Trace | None = None
        self.ntp_trace: Trace | None = None
        self.figure: go.Figure | None = None
        self.order_figure: go.Figure | None = None
        self._ntp_key: tuple | None = None  # (prompt, max new tokens, stop) of ntp_trace
        self._quiet = False  # set while the widget itself moves controls, so they do not re-decode

        self.rule.observe(self._rule_changed, "value")
        self.decoder.observe(self._decoder_changed, "value")
        for control in (self.prompt, self.gamma, self.gap_free, self.verify, self.block_size, self.max_new_tokens):
            control.observe(self._redecode, "value")
        self.call.observe(lambda change: self.show_call(change["new"]), "value")
        super().__init__(
            [
                widgets.HBox([self.prompt, self.decoder]),
                widgets.HBox([self.rule, self.gamma, self.gap_free, self.verify]),
                widgets.HBox([self.block_size, self.max_new_tokens]),
                self.metrics,
                widgets.HBox([self.play, self.call]),
                self.step_info,
                self.view,
                self.order,
                widgets.HBox([self.time_button, self.gif_path, self.save, self.saved]),
            ]
        )
        self._grey_out()
        self.redecode()

    # -- decoding -------------------------------------------------------------------------
    def settings(self) -> dict:
        """The keyword arguments of ``sv.decode`` that the controls currently say (those the decoder takes; the
        others, e.g. another decoder's knob given up front, are kept for when that decoder is chosen)."""
        spec = get_decoder(self.decoder.value)
        given = dict(
            rule=self.rule.value,
            gamma=self.gamma.value,
            gap_free=self.gap_free.value,
            verify=self.verify.value,
            block_size=self.block_size.value,
            max_new_tokens=self.max_new_tokens.value,
            **self.extra,
        )
        return dict(decoder=spec.name, **{k: v for k, v in given.items() if k in spec.settings})

    def redecode(self) -> None:
        """Decode with the current settings and redraw everything; a bad setting shows its error."""
        try:
            trace = decode(self.model, self.prompt.value, **self.settings())
            ntp = self._ntp_settings()
            key = (self.prompt.value, ntp["max_new_tokens"], ntp["stop"])
            # NTP does not depend on the rule, gamma or k; a block-diffusion model (canvas) has none
            if key != self._ntp_key and not isinstance(self.model, DiffusionModel):
                self.ntp_trace = decode_ntp(self.model, self.prompt.value, **ntp)
                self._ntp_key = key
        except (ValueError, TypeError) as exc:
            self.metrics.value = f"<p style='color:#D55E00'><b>error:</b> {html.escape(str(exc))}</p>"
            return
        self.trace, self.figure, self.timing = trace, plots.block_fill(trace), None
        label = get_decoder(self.decoder.value).label
        shown = {label: trace} if self.canvas or self.ntp_trace is None else {label: trace, "NTP": self.ntp_trace}
        self.order_figure = plots.commit_order(shown)
        self.order.outputs = (_display_data(self.order_figure, "decode-order"),)
        self.metrics.value = self._metrics_html()
        last = trace.nfe - 1
        self._quiet = True  # moving the scrubber's range must not redraw a stale call
        try:
            self.play.playing = False
            self.play.max = self.call.max = last
            self.play.value = self.call.value = last
        finally:
            self._quiet = False
        self.show_call(last)  # the finished decode first; ▶ replays from call 0

    def save_gif(self, path) -> Path | None:
        """Write the current decode's animation to ``path`` as a GIF (``plots.save_animation``); the widget says
        where, or why not."""
        try:
            trace = check_trace(self.trace)  # None before the first decode: its error is shown
            written = save_animation(trace, path)
        except (ValueError, TypeError, OSError) as exc:
            self.saved.value = f"<span style='color:#D55E00'><b>error:</b> {html.escape(str(exc))}</span>"
            return None
        self.saved.value = f"saved {trace.nfe} frames to <code>{html.escape(str(written))}</code>"
        return written

    def time_it(self, rounds: int = ROUNDS) -> None:
        """Time the current settings' decode and NTP in ``rounds`` paired rounds after one warm-up run of each
        (``analysis.timing.side_by_side``) and show both medians, their ratio and the median of the rounds' ratios
        in the measures."""
        if self.trace is None or self.ntp_trace is None:  # nothing decoded, or a model without NTP
            return
        settings, prompt, ntp = self.settings(), self.prompt.value, self._ntp_settings()
        model = self.model
        assert not isinstance(model, DiffusionModel)  # it has an NTP trace
        self.timing = side_by_side(
            lambda: decode(model, prompt, **settings), lambda: decode_ntp(model, prompt, **ntp), rounds, warm_up=True
        )
        self.metrics.value = self._metrics_html()

    def _ntp_settings(self) -> dict:
        """``decode_ntp``'s keyword arguments for the comparison: the decode's length and stop."""
        return dict(max_new_tokens=self.max_new_tokens.value, stop=self.extra.get("stop"))

    def _redecode(self, change) -> None:
        if not self._quiet:
            self.redecode()

    def _grey_out(self) -> None:
        """Disable the controls the chosen decoder does not take."""
        if self.canvas:
            return
        own = get_decoder(self.decoder.value).takes
        self.rule.disabled = "rule" not in own
        self.gamma.disabled = "gamma" not in own or not COMMIT_RULES[self.rule.value].tunable
        self.gap_free.disabled, self.verify.disabled = "gap_free" not in own, "verify" not in own
        self.block_size.disabled = "block_size" not in own

    def _decoder_changed(self, change) -> None:
        self._grey_out()
        self.redecode()

    def _rule_changed(self, change) -> None:
        knob = COMMIT_RULES[change["new"]]
        lo, hi, step = knob.slider
        self._quiet = True  # one decode for a rule change, not one per slider attribute
        try:
            self.gamma.description, self.gamma.tooltip = knob.symbol, knob.label
            # Widen first so the new value is never clamped by the old range.
            self.gamma.min, self.gamma.max = min(self.gamma.min, lo), max(self.gamma.max, hi)
            self.gamma.step, self.gamma.value = step, knob.default
            self.gamma.min, self.gamma.max = lo, hi
            self.gamma.disabled = not knob.tunable
        finally:
            self._quiet = False
        self.redecode()

    # -- views ----------------------------------------------------------------------------
    def show_call(self, call: int) -> None:
        """Show the blocks after ``call`` (0-based model call) in the figure and the step line."""
        if self._quiet or self.trace is None:
            return
        call = max(0, min(int(call), self.trace.nfe - 1))
        self.view.outputs = (_display_data(figure_at_call(self.figure, call)),)
        self.step_info.value = self._step_html(call)

    def _metrics_html(self) -> str:
        t, n = self.trace, self.ntp_trace
        assert t is not None  # after a decode
        label = get_decoder(self.decoder.value).label
        shown = []
        for m in measures(t, n, label=label, timing=self.timing):
            if m.label not in WALL_CLOCK:
                shown.append(m)
            elif n is not None:  # beside NTP: seconds only from paired, warmed rounds
                shown += wall_clock_measures(t, n, self.timing, label)
        shown.append(order_measure(t))
        rows = [(_esc(m.label), _value_html(m) + (f" · {_esc(m.note)}" if m.note else "")) for m in shown]
        if n is None:  # a block-diffusion model: no NTP to compare with
            rows.append((_esc(t.config.get("decoder", "text")), f"<code>{_esc(visible(t.text))}</code>"))
            body = "".join(f"<tr><td style='padding-right:12px'><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
            return f"<table style='font-family:monospace;font-size:13px'>{body}</table>"
        diff = first_difference(t.text, n.text)
        rows += [
            (f"{get_decoder(self.decoder.value).label} text", f"<code>{_esc(visible(t.text))}</code>"),
            (
                "NTP text",
                f"<code>{_esc(visible(n.text))}</code> · "
                + ("the same text" if diff is None else f"the texts first differ at character {diff}"),
            ),
        ]
        body = "".join(f"<tr><td style='padding-right:12px'><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
        return f"<table style='font-family:monospace;font-size:13px'>{body}</table>"

    def _step_html(self, call: int) -> str:
        assert self.trace is not None  # show_call checked it
        head, rest = step_text(self.trace, self.trace.steps[call]).split("\n", 1)
        return (
            f"<div style='font-family:monospace;font-size:13px;white-space:pre-wrap'><b>{_esc(head)}</b>\n"
            f"{_esc(rest)}</div>"
        )


def explore(model: CausalModel | DiffusionModel, prompt: str, **decode_kwargs) -> Explorer:
    """An interactive explorer of ``prompt`` decoded by ``model``: decoder (``decoder=``: any registered one that serves
    the model, ``sv.decoders(model)``), rule, gamma, gap-free, verified, block size and length controls (each change
    re-decodes), a call scrubber with play, the block-fill view at that call, and the measures beside NTP.
    ``decode_kwargs`` are ``sv.decode``'s (``stop="\\n"`` etc.)."""
    return Explorer(model, prompt, **decode_kwargs)
