"""The app's input checks: the UI's raw values (a raw API call can send anything) read into the library's
arguments, or a ``gr.Error`` that names the field. One place, so every handler says the same thing.
"""

from __future__ import annotations

import logging
import math

import gradio as gr

import sbd_viz as sv

from ..analysis import roofline
from ..analysis.evaluation import STOP  # an assert's answer ends at the end of its line
from ..decoders.rules import COMMIT_RULES, DEFAULT_RULE
from ..decoders.sbd import MAX_BLOCK_SIZE
from ..decoders.verified.settings import MODES
from .views import PROJECTION_BATCHES

# The longest prompt whose answer still fits the shipped model's trained context of 512 positions at the longest
# answer (512 = BOS + 383 characters + 128 new tokens): every prompt up to it decodes at any max new tokens. A
# longer one decodes if it fits with the chosen max new tokens (``prompt_limit``; SBDModel.check_fits names the fit).
MAX_PROMPT_CHARS = 383
# A text LM's prompt is limited by its tokens (check_fits names the limit); this bounds the characters a request
# may carry at all. The prompt box itself never cuts: a longer prompt is refused with a message, never shortened.
MAX_TEXT_PROMPT_CHARS = 8000
MAX_NEW_TOKENS = 128
MAX_SEED = 2**31 - 1  # the seed box's limit (the library takes up to 2**63 - 1)
# The main view's controls that a decoder may not take (its spec's ``takes``): greyed out when it is chosen, and
# refused by name if an API call sets them anyway
CONTROLS = ("rule", "gamma", "gap_free", "verify", "block_size", "temperature", "seed")
LOG = logging.getLogger("sbd_viz.app")
# characters a prompt may not hold: C0 controls but tab and line breaks, and DEL (a NUL reaches the tokenizer as text)
CONTROL_CHARS = frozenset(map(chr, [*range(0, 9), 11, 12, *range(14, 32), 127]))


def refused(message: str) -> gr.Error:
    """The error a refused input raises: the user sees ``message``; the server log gets one line, not Gradio's
    traceback (a bad input is the user's to fix, not a fault of the server)."""
    LOG.warning("refused: %s", message)
    return gr.Error(message, print_exception=False)


def read_number(value, field: str) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise refused(f"{field}: must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise refused(f"{field}: must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise refused(f"{field}: must be a finite number, got {value!r}")
    return x


def _whole(value, field: str, lo: int, hi: int | None = None) -> int:
    x = read_number(value, field)
    if x != int(x) or x < lo or (hi is not None and x > hi):
        raise refused(f"{field}: must be a whole number from {lo}{'' if hi is None else f' to {hi}'}, got {value!r}")
    return int(x)


def prompt_limit(model) -> int:
    """The most characters the app takes in a prompt for ``model``: a character-level model's whole context but its
    BOS and one new token (``SBDModel.check_fits`` then refuses a prompt too long for the chosen max new tokens,
    naming both); a text LM's tokens are checked against its context when it decodes (``MAX_TEXT_PROMPT_CHARS``
    bounds its characters)."""
    from ..models.causal_lm import CausalLM

    if isinstance(model, CausalLM):
        return MAX_TEXT_PROMPT_CHARS
    context = getattr(model, "context_length", None)
    return MAX_PROMPT_CHARS if context is None else max(MAX_PROMPT_CHARS, context - 1 - model.tokens_written(1))


def prompt_note(model) -> str:
    """What the prompt box says of its limit."""
    from ..models.causal_lm import CausalLM

    if isinstance(model, CausalLM):
        return f" At most {prompt_limit(model):,} characters (and the model's context in tokens)."
    context = getattr(model, "context_length", None)
    if context is None:
        return f" At most {prompt_limit(model):,} characters."
    return (
        f" At most {prompt_limit(model):,} characters, fewer with more new tokens: the prompt and its new tokens "
        f"fit in the model's context of {context:,} positions (a longer one is refused, never cut)."
    )


def read_settings(
    prompt,
    rule,
    gamma,
    gap_free,
    block_size,
    max_new_tokens,
    temperature,
    seed,
    stop_at_newline,
    verify=False,
    max_block_size: int = MAX_BLOCK_SIZE,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> dict:
    """The UI's raw values as ``sv.decode`` keyword arguments, or a ``gr.Error`` naming the bad field."""
    if not isinstance(prompt, str):
        raise refused(f"prompt: must be text, got {type(prompt).__name__} {prompt!r}")
    if not prompt.strip():
        raise refused("prompt: is empty; type a prompt or pick an example, e.g. 'assert 48 + 37 == '")
    control = next((c for c in prompt if c in CONTROL_CHARS), None)
    if control is not None:
        raise refused(
            f"prompt: holds the control character {control!r} at position {prompt.index(control)}; "
            "only tabs and line breaks are taken"
        )
    if len(prompt) > max_prompt_chars:
        raise refused(
            f"prompt: is {len(prompt)} characters; this model takes at most {max_prompt_chars} here "
            "(nothing was cut: shorten it)"
        )
    if rule not in COMMIT_RULES:
        raise refused(f"rule: unknown commit rule {rule!r}; choose from {', '.join(sv.RULES)}")
    knob = COMMIT_RULES[rule]
    lo, hi, _ = knob.slider  # the app takes what its slider offers
    g = read_number(gamma, "gamma")
    if not lo <= g <= hi:
        raise refused(f"gamma: for {rule} it is {knob.meaning} and must be from {lo:g} to {hi:g}, got {gamma!r}")
    if knob.valid.whole:
        g = _whole(g, f"gamma ({knob.symbol})", int(lo), int(hi))
    return dict(
        prompt=prompt,
        rule=rule,
        gamma=g,
        gap_free=_flag(gap_free, "gap-free"),
        block_size=_whole(block_size, "block size", 1, max_block_size),
        max_new_tokens=_whole(max_new_tokens, "max new tokens", 1, MAX_NEW_TOKENS),
        temperature=_temperature(temperature),
        seed=_whole(seed, "seed", 0, MAX_SEED),
        stop=STOP if _flag(stop_at_newline, "stop at the end of the line") else None,
        verify=_flag(verify, "verified"),
    )


def read_mode(value) -> dict:
    """The verified drafting menu's raw value (a ``MODES`` label) as its settings, or a ``gr.Error`` naming it."""
    if value not in MODES:
        raise refused(f"drafting: unknown {value!r}; choose from {', '.join(map(repr, MODES))}")
    return dict(MODES[value])


def _flag(value, field: str) -> bool:
    if not isinstance(value, bool):  # a raw API call can send anything
        raise refused(f"{field}: must be true or false, got {value!r}")
    return value


def read_call(value, nfe: int) -> int:
    """The "show call" slider's raw value: a whole number from 0, or a ``gr.Error``. One past the decode's last call
    reads as its last: the browser can send the value an earlier, longer decode left on the slider while the new
    decode's range arrives, and that is no error of the user's."""
    return min(_whole(value, "show call", 0), nfe - 1)


def _temperature(value) -> float:
    t = read_number(value, "temperature")
    if not 0 <= t <= 2:
        raise refused(f"temperature: must be from 0 (greedy) to 2, got {value!r}")
    return t


def read_projection(hardware, model, batch) -> dict:
    """The projection dropdowns' raw values, or a ``gr.Error`` naming the bad one."""
    if hardware not in roofline.HARDWARE:  # the measured "this-cpu" entry is for bench/, not the demo
        raise refused(f"hardware: unknown {hardware!r}; choose from {', '.join(roofline.HARDWARE)}")
    if model not in roofline.MODELS:
        raise refused(f"model: unknown {model!r}; choose from {', '.join(roofline.MODELS)}")
    try:
        batch = int(batch)
    except (TypeError, ValueError):
        raise refused(f"batch: must be one of {PROJECTION_BATCHES}, got {batch!r}") from None
    if batch not in PROJECTION_BATCHES:
        raise refused(f"batch: must be one of {PROJECTION_BATCHES}, got {batch!r}")
    return dict(hardware=hardware, model=model, batch=batch)


def decoder_labels(model) -> list[str]:
    """The main view's decoder choices: every registered decoder that serves ``model`` (``sv.decoders(model)``),
    NTP aside (it is the comparison), by label."""
    from ..decoders.ntp import NTP
    from ..decoders.registry import decoders

    return [s.label for s in decoders(model) if s is not NTP]


def read_spec(label, model):
    """The decoder dropdown's raw value as the chosen decoder's spec (None: the model's first), or a ``gr.Error``."""
    from ..decoders.registry import by_label, default_decoder

    if label is None:  # an API call that leaves it out: the model's first (SBD)
        return default_decoder(model)
    if label not in decoder_labels(model):
        raise refused(f"decoder: unknown decoder {label!r}; choose from {', '.join(decoder_labels(model))}")
    return by_label(label)


def knob_of(spec) -> str | None:
    """What the main view's slider moves for ``spec``: ``"gamma"`` (the commit rule's γ), the name of one of its own
    settings that its spec's knob names (a plugin's ``slots``, prompt lookup's draft length), or None (it takes no γ;
    a knob over another control, Jacobi's block size, is moved by that control)."""
    knob = spec.knob
    if knob is None:
        return None
    if knob.name == "gamma":
        return "gamma"
    return knob.name if knob.name in spec.own else None


def knob_label(spec) -> str:
    """The slider's label for a decoder's own knob: the setting's name, and whose it is."""
    return f"{spec.knob.name} ({spec.label}'s own setting)"


def knob_start(spec, rule: str):
    """The slider's value when ``spec`` is chosen: its own knob's default (its spec's ``own``; the range's low end
    if it has none), else the rule's default γ."""
    name = knob_of(spec)
    if name in (None, "gamma"):
        return COMMIT_RULES[rule].default
    default = spec.own[name]
    return spec.knob.slider()[0] if default is None else default


def knob_slider(spec, rule: str) -> dict:
    """The slider's label and range (``gr.Slider``'s keywords) for ``spec``: its own knob's, from its spec, else the
    rule's γ."""
    if knob_of(spec) in (None, "gamma"):
        return _rule_range(rule)
    lo, hi, step = spec.knob.slider()
    return dict(label=knob_label(spec), minimum=lo, maximum=hi, step=step)


def read_knob(spec, value):
    """The slider's raw value as ``spec``'s own knob setting: a number in its spec's range (a whole number where the
    range is), or a ``gr.Error`` naming the setting and the decoder."""
    name = spec.knob.name
    lo, hi, step = spec.knob.slider()
    x = read_number(value, name)
    if all(float(v).is_integer() for v in (lo, hi, step)):
        if x != int(x) or not lo <= x <= hi:
            raise refused(
                f"{name}: {spec.label}'s own setting must be a whole number from {lo:g} to {hi:g}, got {value!r}"
            )
        return int(x)
    if not lo <= x <= hi:
        raise refused(f"{name}: {spec.label}'s own setting must be from {lo:g} to {hi:g}, got {value!r}")
    return x


def read_decoder(label, settings: dict, model):
    """The decoder dropdown's raw value and the read settings: (the decoder's spec, ``sv.decode`` keyword arguments
    besides prompt: those it takes). A control it does not take, when set, is a ``gr.Error`` naming it."""
    spec = read_spec(label, model)
    label = spec.label
    for field, set_ in (
        ("gap_free", settings["gap_free"]),
        ("verify", settings["verify"]),
        ("temperature", settings["temperature"] > 0),
    ):
        if set_ and field not in spec.takes:
            raise refused(
                f"{field.replace('_', '-')}: does not apply to the {label} decoder; switch it off or "
                f"choose one that takes it"
            )
    return spec, {k: v for k, v in settings.items() if k in spec.settings}


def fit_controls(spec, rule: str, value, causal: bool) -> tuple:
    """The updates of ``CONTROLS`` for ``spec``: grey out what it does not take (a switch, off), and give the slider its
    knob; ``value``: the slider's new value (None: unchanged); ``causal``: a text model's page, where γ's slider shows
    only for a decoder whose knob is its own setting."""
    rule = rule if rule in COMMIT_RULES else DEFAULT_RULE
    knob = knob_of(spec)
    slider = knob_slider(spec, rule)
    if value is not None:
        slider["value"] = value
    updates = {name: gr.update(interactive=name in spec.takes) for name in CONTROLS}
    for flag in ("gap_free", "verify"):  # a switch the decoder does not take is off: set, it would be refused
        if flag not in spec.takes:
            updates[flag] = gr.update(interactive=False, value=False)
    updates["gamma"] = gr.update(
        **slider,
        interactive=knob not in (None, "gamma") or (knob == "gamma" and COMMIT_RULES[rule].tunable),
        visible=not causal or knob not in (None, "gamma"),
    )
    return tuple(updates[name] for name in CONTROLS)


def rule_slider(rule: str):
    """The γ slider's update for ``rule``: its meaning and range depend on the rule."""
    if rule not in COMMIT_RULES:
        raise refused(f"rule: unknown commit rule {rule!r}; choose from {', '.join(sv.RULES)}")
    knob = COMMIT_RULES[rule]
    return gr.update(**_rule_range(rule), value=knob.default, interactive=knob.tunable)


def _rule_range(rule: str) -> dict:
    """The γ slider's label and range (``gr.Slider``'s keywords) under ``rule``."""
    knob = COMMIT_RULES[rule]
    lo, hi, step = knob.slider
    return dict(label=knob.label, minimum=lo, maximum=hi, step=step)
