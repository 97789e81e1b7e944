"""The app's γ maps: after a prompt's first decode its slider-step map builds in the background, and a slider release
inside a decoded piece answers from it, without calling the model.

``GammaMaps`` holds every session's map and the one worker thread that builds them; ``Gate`` puts interactive requests
first; ``map_key`` is what a map is built for. How the worker schedules its calls: docs/app_internals.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import math
import threading
import time
from collections import OrderedDict
from typing import Any

from ..analysis.gamma_map import GammaMap, GammaMapWalk, walks_gamma
from ..decoders.rules import COMMIT_RULES
from ..trace.checks import check_whole

MAP_SESSIONS = 32  # maps kept (one per session), the least recently used dropped first
# Seconds the worker stays off after an interactive request ends: Gradio builds and ships the response meanwhile, and
# the worker's Python (between torch's ops) would hold the GIL against it. Measured in bench/APP.md.
QUIET = 0.3
LOG = logging.getLogger("sbd_viz.app")


class Gate:
    """Interactive requests before the background maps. ``interactive()`` goes around a request a user waits for
    (any number at once); ``background()`` around one model call of the worker, which starts only when no
    interactive request has run for ``quiet`` seconds. An interactive decode that arrives during a background call
    waits for that call alone; ``interactive(wait=False)`` (a request that calls no model) does not wait for it."""

    def __init__(self, quiet: float = QUIET):
        self._cond = threading.Condition()
        self._interactive = 0
        self._busy = False  # a background call in flight
        self._quiet, self._last = quiet, -math.inf  # when the last interactive request ended

    @contextlib.contextmanager
    def interactive(self, wait: bool = True):
        with self._cond:
            self._interactive += 1
            if wait:
                self._cond.wait_for(lambda: not self._busy)
        try:
            yield
        finally:
            with self._cond:
                self._interactive -= 1
                self._last = time.monotonic()
                self._cond.notify_all()

    @contextlib.contextmanager
    def background(self):
        with self._cond:
            while True:
                if self._interactive:
                    self._cond.wait()
                    continue
                left = self._last + self._quiet - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


def map_key(prompt: str, spec, own: dict) -> tuple | None:
    """What a session's map is built for: the prompt, the decoder and every setting in ``own`` (``read_decoder``'s)
    but γ; None where there is no γ map (``walks_gamma`` false, temperature above 0, a rule that ignores its knob)."""
    rule = own.get("rule")
    if (
        not walks_gamma(spec)
        or own.get("temperature", 0) > 0
        or rule not in COMMIT_RULES
        or not COMMIT_RULES[rule].tunable
    ):
        return None
    settings = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in own.items() if k != "gamma"))
    return prompt, spec.name, settings


class _Dropped(Exception):
    """Raised inside a background call whose map is no longer wanted: the walk stops there."""


@dataclasses.dataclass(eq=False)
class _Entry:
    key: tuple
    walk: Any  # the GammaMapWalk, until it ends
    map: GammaMap | None  # the walk's map: set as soon as the walk is made, before the entry is kept
    state: str = "queued"  # queued (unfinished), building (a piece in progress), done, failed, dropped
    pieces: Any = None  # walk.pieces(), once started: the worker takes one piece at a time from it
    error: str = ""


class GammaMaps:
    """Every session's γ map and the one worker thread that builds them (how: docs/app_internals.md).

    ``capacity``: how many sessions' maps are kept; 0 builds none (every slider release decodes, and no background
    thread takes a core). ``want(session, key, prompt, spec, own)`` after a decode; ``answer(session, key, gamma)``
    before one (a trace, or None: decode); ``current(session)`` for the strip; ``wait()`` blocks until every map is
    built (the tests wait for a map this way, never by time)."""

    def __init__(self, model, capacity: int = MAP_SESSIONS):
        self.model, self.capacity = model, check_whole(capacity, "capacity", 0, note=" (0: no maps)")
        self.gate = Gate()
        self._cond = threading.Condition()
        self._maps: OrderedDict[str, _Entry] = OrderedDict()  # session id -> its map, least recently used first
        self._building: _Entry | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def want(self, session: str, key: tuple | None, prompt: str, spec, own: dict) -> None:
        """A session decoded with ``key``: keep its map if it has this key, else drop it and queue this one (None:
        drop it, and queue nothing)."""
        with self._cond:
            old = self._maps.get(session)
            if old is not None and old.key == key:
                self._maps.move_to_end(session)
                return
            if old is not None:
                self._drop(session)
        if key is None or self.capacity == 0:  # no map for this decode, or none kept at all
            return
        entry = _Entry(key, None, None)
        settings = {k: v for k, v in own.items() if k not in ("gamma", "rule")}
        lo, hi, step = COMMIT_RULES[own["rule"]].slider
        try:  # checks its settings and tokenizes: no model call
            entry.walk = GammaMapWalk(
                self.model, prompt, own["rule"], lo, hi, step, spec.name, gate=lambda: self._call(entry), **settings
            )
        except Exception as exc:  # the decode just ran with these settings; the log says why, and releases decode
            LOG.warning("γ map refused: %s", exc)
            return
        entry.map = entry.walk.map
        with self._cond:
            if self._closed:  # the app is stopping: no new maps
                return
            if session in self._maps:  # another request of the session got here first
                self._drop(session)
            self._maps[session] = entry
            while len(self._maps) > self.capacity:
                self._drop(next(iter(self._maps)))
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="sbd-viz-gamma-maps", daemon=True)
                self._thread.start()
                atexit.register(self.close)  # stop between calls: a thread killed inside torch aborts the exit
            self._cond.notify_all()

    def answer(self, session: str | None, key: tuple | None, gamma):
        """The session's map's trace at ``gamma``, its config's γ set to ``gamma``, if the map has ``key`` and has
        decoded the piece holding ``gamma``; else None (decode)."""
        if session is None or key is None:
            return None
        with self._cond:
            entry = self._maps.get(session)
            if entry is None or entry.key != key or entry.state == "failed":
                return None
            self._maps.move_to_end(session)
            gamma_map = entry.map
        assert gamma_map is not None  # a kept entry has its map
        trace = gamma_map.decoded_trace_at(gamma)  # the worker may be appending: it reads a copy of the pieces
        if trace is None:
            return None
        return dataclasses.replace(trace, config={**trace.config, "gamma": gamma})

    def current(self, session: str | None) -> tuple[GammaMap, str] | None:
        """The session's map (as built so far) and its state, or None."""
        with self._cond:
            entry = self._maps.get(session) if session is not None else None
            if entry is None:
                return None
            assert entry.map is not None  # a kept entry has its map
            return entry.map, entry.state

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no map is queued or building; False if ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._building is None and self._next() is None, timeout)

    def close(self) -> None:
        """Stop the worker (a map being built stops at its next call); the maps go."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for session in list(self._maps):
                self._drop(session)
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)

    # -- the worker -------------------------------------------------------------------------------------------------
    def _drop(self, session: str) -> None:
        entry = self._maps.pop(session)
        entry.state = "dropped"  # a piece in progress stops at its next call (``_call``)
        if entry is not self._building:
            entry.walk = entry.pieces = None

    def _next(self) -> _Entry | None:
        """The most recently used unfinished map."""
        return next((e for e in reversed(self._maps.values()) if e.state == "queued"), None)

    @contextlib.contextmanager
    def _call(self, entry: _Entry):
        """One model call of ``entry``'s walk: after every interactive decode, and only while the map is wanted."""
        with self.gate.background():
            if entry.state == "dropped" or self._closed:
                raise _Dropped
            yield

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._next() is not None)
                if self._closed:
                    return
                entry = self._building = self._next()
                assert entry is not None  # wait_for found one, and the lock is still held
                entry.state = "building"
                if entry.pieces is None:
                    entry.pieces = entry.walk.pieces()
            state = "queued"  # one piece, then look again: a map wanted meanwhile goes first
            try:
                next(entry.pieces)
            except StopIteration:
                state = "done"
            except _Dropped:
                state = "dropped"
            except Exception as exc:  # the app keeps serving; this session decodes on every release instead
                LOG.warning("γ map failed: %s", exc)
                state, entry.error = "failed", str(exc)
            with self._cond:
                if entry.state != "dropped":
                    entry.state = state
                if entry.state != "queued":
                    entry.walk = entry.pieces = None  # the walk's cache snapshots go with it
                self._building = None
                self._cond.notify_all()
