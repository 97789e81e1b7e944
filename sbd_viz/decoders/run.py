"""The public base every decoder is built on; a decoder of another package uses only these names.

- ``Decoder``: what a ``DecoderSpec``'s ``decoding`` class provides (built as ``decoding(model, prompt, config,
  **own)``, then ``steps()`` and ``trace()``); ``Batchable`` adds ``requests()``, which ``decode_batch`` serves;
- ``DecodeRun``: one prompt's decode, checked on construction. A decoder writes its loop as ``loop()``, a
  coroutine of cache requests (``ModelCall``: send back a ``Reply``; ``CacheCut``: send back None) that
  ``record``s one ``Step`` per call and returns the output ids and their ``Stop``; ``requests()``, ``steps()``
  (the requests served on one cache, by ``serve``) and ``trace()`` (the config its ``trace_settings()`` gives)
  come from the base;
- ``DraftAndCheck``: the loop of the decoders that draft tokens, feed them causally after the accepted text and
  keep the drafts greedy NTP agrees with plus NTP's next token (Jacobi, prompt lookup): a decoder gives ``draft``;
  its text is greedy NTP's by construction;
- ``greedy_settings``: the settings of a ``DecodeConfig`` that a greedy decode reads, as its trace stores them.

The block loop of the decoders that fill blocks of mask slots (``BlockLoop``) is ``sbd_viz.decoders.base``'s,
and SBD's decoding class built on it (``sv.Decoding``) is a public base too.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

import torch

from .._version import __version__
from ..models.call import CacheCut, Model, ModelCall, Reply
from ..models.checks import check_model
from ..trace.checks import check_prompt
from ..trace.data import DRAFTS_CHECKED, Step, Trace
from .base import Stop, find_stop, greedy
from .config import DecodeConfig
from .steps import checked_step


@runtime_checkable
class Decoder(Protocol):
    """What a decoding class provides: built as ``decoding(model, prompt, config, **own)`` (``config`` an
    ``sv.DecodeConfig``, ``own`` its spec's own settings), checked then; ``steps()`` decodes, yielding one ``Step``
    per model call; ``trace()`` is the finished decode's ``Trace``."""

    def __init__(self, model, prompt: str, config: DecodeConfig, **own) -> None: ...

    def steps(self) -> Iterator[Step]: ...

    def trace(self) -> Trace: ...


@runtime_checkable
class Batchable(Decoder, Protocol):
    """A ``Decoder`` that ``decode_batch`` can serve: ``requests()`` is the decode as a coroutine of cache requests
    (``ModelCall``: send back a ``Reply``; ``CacheCut``: send back None)."""

    def requests(self) -> Generator[ModelCall | CacheCut, object, None]: ...


def serve(model: Model, cache, request: ModelCall | CacheCut) -> Reply | None:
    """Answer one request of a decode's ``requests()`` on a single-row cache: the model's one call, or a cut."""
    if isinstance(request, CacheCut):
        model.rollback(cache, request.length, request.keep)
        return None
    return model.call(cache, request)


def greedy_settings(config: DecodeConfig) -> dict:
    """The settings of ``config`` that a greedy decode reads (one token per call, temperature 0), as its trace's
    config stores them; a decoder adds its name and its own."""
    return {
        "max_new_tokens": config.max_new_tokens,
        "stop": list(config.stop),
        "top_n": config.top_n,
        "block_size": 1,
        "temperature": 0.0,
    }


class DecodeRun:
    """One decode of ``prompt``: the checked request, its steps so far, and how it ended.

    Everything is checked on construction (the settings, the prompt, the model's trained context), so a
    streaming UI hears of a bad request before it starts, not at the first step. A subclass writes ``loop()`` and
    ``trace_settings()``; a decode runs once (``steps()`` or ``requests()``), then ``trace()`` works."""

    def __init__(self, model, prompt: str, config: DecodeConfig | None = None):
        self.model: Model = check_model(model)  # what a decoder may ask of it: sbd_viz.models.call.Model
        self.prompt = check_prompt(prompt)
        self.config = DecodeConfig() if config is None else config
        if not isinstance(self.config, DecodeConfig):
            raise TypeError(f"config: expected an sbd_viz.DecodeConfig, got {type(self.config).__name__}")
        self.prompt_ids = model.encode(prompt)
        model.check_fits(len(self.prompt_ids), self.config.max_new_tokens)
        self.output_ids: list[int] | None = None  # set once the decode has finished
        self.stop_reason: str | None = None  # 'stop', 'eos' or 'length', once finished
        self._steps: list[Step] = []
        self._started = False

    # -- what a decoder writes ---------------------------------------------------------------------------------
    def loop(self) -> Generator[ModelCall | CacheCut, object, tuple[list[int], Stop]]:
        """The decode: yield requests, ``record`` one ``Step`` per model call, return the output ids and their
        ``Stop``."""
        raise NotImplementedError(f"{type(self).__name__}.loop: a decoder built on DecodeRun writes its loop")

    def trace_settings(self) -> dict:
        """The trace's config: every setting this decode read, JSON-native (``"decoder"``: its name)."""
        raise NotImplementedError(f"{type(self).__name__}.trace_settings: say which settings the trace records")

    def gamma_range(self):
        """The γ values at which this decode results the same (``Trace.gamma_range``); None: not a γ decoder."""
        return None

    def check_batchable(self) -> None:
        """A ``ValueError`` naming the setting if this decode's requests cannot be served beside others'
        (``decode_batch`` asks before it starts); every ``ModelCall`` can be."""

    # -- what the base gives -----------------------------------------------------------------------------------
    def record(self, step: Step) -> None:
        """Add one model call's step (a UI streaming ``steps()`` sees it before the next call)."""
        self._steps.append(step)

    @property
    def recorded_steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def begin(self) -> None:
        """Mark the decode started: a second run would append a second decode's steps to the first's."""
        if self._started:
            raise RuntimeError(f"steps: this {type(self).__name__} has already run; make a new one to decode again")
        self._started = True

    def requests(self) -> Generator[ModelCall | CacheCut, object, None]:
        """The decode as a coroutine of cache requests, for an engine that serves them itself (``decode_batch``);
        the steps so far are in ``recorded_steps``; once it ends, ``trace()`` works."""
        self.begin()
        return self._keep_output(self.loop())

    def _keep_output(
        self, loop: Generator[ModelCall | CacheCut, object, tuple[list[int], Stop]]
    ) -> Generator[ModelCall | CacheCut, object, None]:
        """Pass ``loop``'s requests and replies through; keep what it returns: the output ids and their ``Stop``."""
        self.output_ids, stop = yield from loop
        self.stop_reason = stop.reason

    def steps(self) -> Generator[Step, None, None]:
        """Decode, yielding one ``Step`` per model call: ``requests()`` served on one cache of its own."""
        cache, reply, seen = self.model.new_cache(), None, 0
        requests = self.requests()
        while True:
            try:
                request = requests.send(reply)
            except StopIteration:
                break
            yield from self._steps[seen:]  # a step is shown before the next forward starts
            seen = len(self._steps)
            reply = serve(self.model, cache, request)
        yield from self._steps[seen:]

    def trace(self) -> Trace:
        """The finished decode as a ``Trace``."""
        if self.stop_reason is None:
            raise RuntimeError("trace: the decode has not finished; iterate its steps (or requests) to the end first")
        assert self.output_ids is not None  # set with stop_reason, when the decode ended
        model, out = self.model, list(self.output_ids)
        meta = {
            "sbd_viz_version": __version__,
            "torch": torch.__version__,
            "dtype": str(model.dtype),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return Trace(
            prompt=self.prompt,
            prompt_ids=tuple(self.prompt_ids),
            config=self.trace_settings(),
            model_id=model.name,
            steps=tuple(self._steps),
            output_ids=tuple(out),
            output_texts=tuple(model.output_texts(self.prompt_ids, out)),
            text=model.text(out),
            stop_reason=self.stop_reason,
            meta={**meta, **model.trace_meta()},
            gamma_range=self.gamma_range(),
        )


class DraftAndCheck(DecodeRun):
    """A decoder that drafts and lets greedy NTP check: each call feeds ``draft``'s tokens causally after the
    accepted text; row i of the causal logits is NTP's greedy token after draft i - 1, so the decode keeps the
    drafts NTP agrees with and then NTP's own token at the first disagreement (or after the last draft): at least
    one exact token per call, greedy NTP's text, never more calls than NTP. The cache is cut back past the rejected
    drafts. Each call is a step of its own block, the drafts checked by NTP (``Step.checks``, a ``Rollback`` at the
    first wrong one).

    A subclass gives ``draft(ids, limit)`` and ``trace_settings()``; ``checked`` hears each call's verdicts."""

    def draft(self, ids: Sequence[int], limit: int) -> list[int]:
        """At most ``limit`` tokens to try after ``ids`` (the prompt and the accepted text); none is fine."""
        raise NotImplementedError(f"{type(self).__name__}.draft: a draft-and-check decoder says what to draft")

    def checked(self, drafts: list[int], verdicts: list[int], accepted: int) -> None:
        """One call's outcome: NTP's greedy token at each fed draft and after the last (``verdicts``), of which the
        first ``accepted`` drafts agreed. A decoder that drafts from it (Jacobi) keeps what it needs here."""

    def trace_settings(self) -> dict:
        """Greedy NTP's settings, marked exact and drafts-checked; a subclass adds its name and its own."""
        return {**greedy_settings(self.config), "exact": True, **DRAFTS_CHECKED}

    def loop(self):
        model, config = self.model, self.config
        n_prompt = len(self.prompt_ids)
        pending = list(self.prompt_ids)  # the accepted text not yet in the cache: its last token, or the prompt
        generated: list[int] = []
        call, found = 0, None
        while len(generated) < config.max_new_tokens:
            limit = config.max_new_tokens - len(generated) - 1  # a call keeps at most its drafts + 1 tokens
            drafts = [int(t) for t in self.draft(self.prompt_ids + generated, limit)][: max(limit, 0)]
            cached = n_prompt + len(generated) - len(pending)  # the cache's length before the call
            reply = yield ModelCall.fused(pending + drafts, [], len(drafts) + 1)
            rows = reply.causal  # (len(drafts) + 1, V)
            t0 = time.perf_counter()
            verdicts = greedy(model, rows).tolist()
            agree = next((i for i, d in enumerate(drafts) if d != verdicts[i]), len(drafts))
            kept = verdicts[: agree + 1]
            found = find_stop(model, generated + kept, len(generated) + 1, config.stop)
            kept = kept[: found.index - len(generated)] if found else kept
            step = checked_step(
                model,
                call,
                n_prompt + len(generated),
                drafts,
                rows,
                kept,
                len(pending) + len(drafts),
                0.0,
                config.top_n,
            )
            # the cache keeps the fed tokens up to the last right draft; the last kept token is fed next call
            yield CacheCut(cached + len(pending) + len(kept) - 1)
            self.record(replace(step, wall_time=reply.seconds + time.perf_counter() - t0))
            self.checked(drafts, verdicts, agree)
            generated += kept
            pending, call = kept[-1:], call + 1
            if found:
                break
        return generated, found or Stop(len(generated), "length")
