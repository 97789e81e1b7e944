"""The app's typed state: what the main view's controls send (``Controls``; ``reading_controls`` turns Gradio's
positional values into one) and what a browser session keeps between events (``Session``, in ``gr.State``). Plain
frozen data: a handler reads named fields and returns a new ``Session`` (``dataclasses.replace``), never edits one
another request may hold.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from typing import Any, TypeGuard

from .views import PROJECTION


@dataclass(frozen=True)
class Controls:
    """The main view's controls as the page sends them: raw values (a raw API call can send anything), checked by
    ``inputs.read_settings`` and ``inputs.read_decoder``. ``decoder``: the decoder menu's label (None: the model's
    first); ``chat``: a text LM's chat-template switch; ``draft_mode``: verified SBD's drafting menu's label (None: the
    mode measured fastest on the model, ``fastest_mode``), read only when ``verify`` is on."""

    prompt: Any
    rule: Any
    gamma: Any
    gap_free: Any
    block_size: Any
    max_new_tokens: Any
    temperature: Any
    seed: Any
    stop_at_newline: Any
    verify: Any = False
    decoder: Any = None
    chat: Any = False
    draft_mode: Any = None


@dataclass(frozen=True)
class Session:
    """One browser session's current decode and choices. Built after each decode (``Handlers._finished``); a
    session with no ``trace`` holds only the projection choice (the dropdown moved before any decode).

    - ``trace``: the decode shown; ``label``: its decoder's label; ``prompt``: what was decoded (the chat template
      applied); ``item``: the suite item its answer is scored against, or None;
    - ``seconds``: the decode's wall time; None when it was answered from the session's γ map (``from_map``);
    - ``ntp``: greedy NTP on the same prompt and length (``ntp_key``: prompt, max new tokens, stop), None while
      it runs; ``ntp_cached``: kept from an earlier decode of the same key; ``no_ntp``: a model without NTP (block
      diffusion);
    - ``rerun``: (decoder name, its settings), what "time it" decodes again; ``map_id``: the session's γ map;
    - ``projection``: the roofline projection's choice; ``timing``: the side-by-side timing, once asked for.
    """

    trace: Any = None
    label: str = "SBD"
    prompt: str = ""
    item: Any = None
    seconds: float | None = None
    ntp: Any = None
    ntp_key: tuple | None = None
    ntp_seconds: float | None = None
    ntp_cached: bool = False
    no_ntp: bool = False
    rerun: tuple | None = None
    map_id: str | None = None
    projection: dict = field(default_factory=lambda: dict(PROJECTION))
    timing: Any = None

    @property
    def from_map(self) -> bool:
        """Answered from the session's γ map: no model call for this move."""
        return decoded(self) and self.seconds is None


def decoded(session: Session | None) -> TypeGuard[Session]:
    """Whether ``session`` (None before the first event) holds a decode."""
    return session is not None and session.trace is not None


def reading_controls(handler, names):
    """``handler`` as Gradio calls it: the inputs' values in ``names``' order, the main view's controls read into one
    ``Controls`` and the rest (the session, the chosen decoders) passed by name. The wrapper keeps ``handler`` as
    its attribute of that name."""
    own = {f.name for f in fields(Controls)}

    def split(values):
        named = dict(zip(names, values))
        return (
            Controls(**{k: v for k, v in named.items() if k in own}),
            {k: v for k, v in named.items() if k not in own},
        )

    if inspect.isgeneratorfunction(handler):  # Gradio streams a generator's yields: the wrapper must be one too

        def run(*values):
            controls, rest = split(values)
            yield from handler(controls, **rest)
    else:

        def run(*values):
            controls, rest = split(values)
            return handler(controls, **rest)

    run.__name__ = run.__qualname__ = handler.__name__  # Gradio names an unnamed event's endpoint after it
    run.__dict__["handler"] = handler  # the function's attribute
    return run
