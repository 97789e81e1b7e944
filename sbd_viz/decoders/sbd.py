"""The SBD decoding loop (paper Algorithms 2-3) and the NTP baseline, both recorded as traces.

``Decoding.steps()`` is a generator: one ``Step`` per model call, so a UI can stream steps and a
progress bar can count them; ``Decoding.trace()`` then gives the whole ``Trace``, and ``decode``
does both in one call. With ``verify=True`` the block loop also checks every drafted token
against greedy NTP on the same weights, from the causal logits each call computes anyway, and
rolls back at the first disagreement: the output is then exactly ``decode_ntp``'s (that loop is
``sbd_viz.decoders.verified``). Both loops are coroutines of cache requests (``Decoding.requests()``), so
``decode_batch`` serves many of them with the same logic; ``sbd_viz.decoders.steps`` builds their steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Generator, Iterable

import torch

from .._version import __version__
from ..checks import check_model, check_prompt
from ..model import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, CacheCut, ModelCall, SBDModel
from ..rules import DEFAULT_GAMMA, DEFAULT_RULE, CommitRule
from .steps import draft, ends_output, ntp_step, propose, slot_views, stop_index
from ..trace import Step, Trace
from .verified import VerifiedDecode

MAX_NEW_TOKENS = 4096


def serve(model: SBDModel, cache, request: "ModelCall | CacheCut"):
    """Answer one request of ``Decoding.requests()`` on a single-row cache."""
    if isinstance(request, CacheCut):
        model.rollback(cache, request.length)
        return None
    t0 = time.perf_counter()
    causal, block = model.fused_call(cache, request.new_ids, request.block_ids, request.n_causal)
    return causal, block, time.perf_counter() - t0


@dataclass(frozen=True)
class DecodeConfig:
    """Settings of one SBD decode; validated on construction (errors name the argument)."""

    rule: str = DEFAULT_RULE
    gamma: float = DEFAULT_GAMMA
    block_size: int = DEFAULT_BLOCK_SIZE  # decode() and the other entry points default to the model's
    max_new_tokens: int = 64
    temperature: float = 0.0  # 0 = argmax (the paper's setting); > 0 samples with ``seed``
    seed: int = 0
    stop: tuple[str, ...] = ()  # stop strings; decoding also stops at the tokenizer's EOS
    gap_free: bool = False
    top_n: int = 5  # candidates recorded per masked slot
    verify: bool = False  # check every draft against NTP greedy on the same weights: the output is NTP's
    _rule: CommitRule = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        def _whole(name, lo, hi):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name}: must be a whole number in [{lo}, {hi}], got {v!r}")

        _whole("block_size", 1, MAX_BLOCK_SIZE)
        _whole("max_new_tokens", 1, MAX_NEW_TOKENS)
        _whole("top_n", 1, 50)
        _whole("seed", 0, 2**63 - 1)
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature: must be a finite number >= 0, got {t!r}")
        if not isinstance(self.verify, bool):
            raise ValueError(f"verify: must be True or False, got {self.verify!r}")
        if self.verify and t > 0:
            # Speculative sampling (accept a draft with min(1, p/q), else resample from max(0, p - q)) is
            # exact only if each draft was sampled from q given its left context alone. SBD's drafts break
            # that: a gap fill was conditioned on tokens to its right, and confidence rules choose which
            # slots to commit by the sampled tokens themselves; both bias the accepted text.
            raise ValueError(f"verify: verified decoding checks drafts against NTP's greedy choice, so it needs "
                             f"temperature 0, got temperature={t!r}. Sampled drafts cannot be verified exactly "
                             "(gap fills are conditioned on tokens to their right and confidence rules pick "
                             "slots by the sampled tokens, so the speculative-sampling rule would be biased)")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop: must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "_rule", CommitRule(self.rule, self.gamma, self.gap_free))

    def as_dict(self) -> dict:
        """JSON-native settings, as stored in a trace."""
        return {"decoder": "sbd", "rule": self.rule, "gamma": self.gamma, "gap_free": self.gap_free,
                "block_size": self.block_size, "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature, "seed": self.seed, "stop": list(self.stop), "top_n": self.top_n,
                "verify": self.verify}


class _Run:
    """What every decode of one prompt holds: the checked request, its steps so far, and how it ended.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first step."""

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None):
        self.model, self.prompt = check_model(model), check_prompt(prompt)
        self.config = DecodeConfig() if config is None else config
        if not isinstance(self.config, DecodeConfig):
            raise TypeError(f"config: expected an sbd_viz.DecodeConfig, got {type(self.config).__name__}")
        self.prompt_ids = model.encode(prompt)
        model.check_fits(len(self.prompt_ids), self.config.max_new_tokens)
        self.output_ids: list[int] | None = None  # set once the decode has finished
        self.stop_reason: str | None = None  # 'stop', 'eos' or 'length', once finished
        self._steps: list[Step] = []
        self._started = False

    @property
    def recorded_steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def _start(self) -> None:
        if self._started:  # a second run would append a second decode's steps to the first's
            raise RuntimeError(f"steps: this {type(self).__name__} has already run; make a new one to decode again")
        self._started = True

    def _keep_output(self, loop: Generator) -> Generator:
        """Pass ``loop``'s requests and replies through; keep what it returns: the output ids and why they end."""
        self.output_ids, self.stop_reason = yield from loop

    def _finished(self) -> None:
        if self.stop_reason is None:
            raise RuntimeError("trace: the decode has not finished; iterate its steps (or requests) to the end first")


class Decoding(_Run):
    """One SBD decode of ``prompt``: iterate ``steps()`` (one ``Step`` per model call), then ``trace()``.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first ``next``::

        decoding = sv.Decoding(model, "assert 48 + 37 == ", sv.DecodeConfig(gamma=0.5, stop="\\n"))
        for step in decoding.steps():
            ...  # show the step while the block fills
        trace = decoding.trace()
    """

    def steps(self) -> Generator[Step, None, None]:
        """Decode, yielding one ``Step`` per model call (paper Algorithms 2-3)."""
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

    def requests(self) -> Generator["ModelCall | CacheCut", object, None]:
        """The decode as a coroutine of cache requests, for an engine that serves them itself (``decode_batch``).

        Yields ``ModelCall`` (send back ``(causal, block, seconds)``) and ``CacheCut`` (send back None);
        the steps so far are in ``recorded_steps``; once it ends, ``trace()`` works. ``steps()`` serves
        the same requests on one cache of its own.
        """
        self._start()
        if self.config.verify:
            return self._keep_output(VerifiedDecode(self.model, self.config, self.prompt_ids, self._steps).requests())
        return self._keep_output(self._plain_requests())

    def _plain_requests(self):
        """Plain SBD: the rule commits from each call's block logits, block after block. Returns the output ids
        and why they end."""
        model, config, prompt_ids = self.model, self.config, self.prompt_ids
        mask_id, rule, k_max = model.mask_token_id, config._rule, config.block_size
        gen = torch.Generator(device=model.device).manual_seed(config.seed)  # samples where the logits are
        pending = list(prompt_ids)  # final tokens not yet in the cache: fed causally with the next block
        generated: list[int] = []
        call, block, reason = 0, 0, "length"
        while len(generated) < config.max_new_tokens and reason == "length":
            k = min(k_max, config.max_new_tokens - len(generated))
            start = len(prompt_ids) + len(generated)
            tokens = [mask_id] * k  # the block: mask ids in masked slots
            masked = list(range(k))
            step, done_prefix = 0, 0
            while masked:
                _, logits, seconds = yield ModelCall(pending, list(tokens))
                t0 = time.perf_counter()
                logits = logits[masked]  # (m, V) for the masked slots
                n_input, pending = len(pending) + k, []
                probs, entropy, proposal, confidence = propose(logits, config.temperature, gen)  # (m, V), (m,) x3
                commits, still = draft(model, rule, masked, proposal, confidence, entropy)
                for c in commits:
                    tokens[c.slot] = c.token_id
                views = slot_views(model, masked, probs, entropy, config.top_n)
                self._steps.append(Step(call=call, block=block, block_start=start, block_size=k, step=step,
                                        masked=tuple(masked), slots=views, commits=tuple(commits),
                                        wall_time=seconds + time.perf_counter() - t0, n_input=n_input))
                call, step, masked = call + 1, step + 1, still
                # "Generate until": once a slot holds a stop token, slots right of it can never reach the
                # output, so they are no longer decoded (on short answers they would cost whole calls).
                ends = [s for s in range(k) if s not in masked and ends_output(model, tokens[s], config.stop)]
                if ends:
                    masked = [s for s in masked if s < ends[0]]
                # Finish early once the block's committed prefix holds a stop: later slots would be discarded.
                prefix = next((s for s in range(k) if s in masked), k)
                if prefix > done_prefix:
                    hit = stop_index(model, generated + tokens[:prefix], len(generated) + done_prefix + 1,
                                     config.stop)
                    done_prefix = prefix
                    if hit:
                        generated, reason = (generated + tokens[:prefix])[: hit[0]], hit[1]
                        break
            if reason == "length":
                generated += tokens
                pending = list(tokens)
            block += 1
        return generated, reason

    def trace(self) -> Trace:
        """The finished decode as a ``Trace``."""
        self._finished()
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      self.config.as_dict())


class NTPDecoding(_Run):
    """Greedy NTP decoding of ``prompt`` as cache requests: one token per call, the argmax of the causal
    logits at the last token (what HF ``generate`` computes). For engines that serve calls themselves
    (``decode_batch(..., decoder="ntp")``); the trace has ``decode_ntp``'s form and, up to float
    rounding, its text. Only ``max_new_tokens``, ``stop`` and ``top_n`` of ``config`` apply.

    (SBD with one-slot blocks is *not* this: its token comes from a mask slot's prediction, a different
    output of the same weights, which disagrees with NTP wherever the model is unsure.)
    """

    def requests(self) -> Generator["ModelCall | CacheCut", object, None]:
        self._start()
        return self._keep_output(self._requests())

    def _requests(self):
        model, config, n_prompt = self.model, self.config, len(self.prompt_ids)
        generated: list[int] = []
        reason = "length"
        while len(generated) < config.max_new_tokens:
            fed = list(self.prompt_ids) if not generated else generated[-1:]
            causal, _, seconds = yield ModelCall(fed, [], 1)  # (1, V)
            t0 = time.perf_counter()
            step = ntp_step(model, len(generated), causal, n_prompt, len(fed), seconds, config.top_n)
            # the step's wall time: the forward plus this decode's own work, building the step included
            self._steps.append(replace(step, wall_time=seconds + time.perf_counter() - t0))
            generated.append(step.commits[0].token_id)
            hit = stop_index(model, generated, len(generated), config.stop)
            if hit:
                generated, reason = generated[: hit[0]], hit[1]
                break
        return generated, reason

    def trace(self) -> Trace:
        self._finished()
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      _ntp_config(self.config))


def decode_steps(model: SBDModel, prompt: str, config: DecodeConfig | None = None) -> Generator[Step, None, None]:
    """Decode ``prompt`` with SBD, yielding one ``Step`` per model call (``Decoding`` also gives the trace)."""
    return Decoding(model, prompt, config).steps()


def _meta(model: SBDModel) -> dict:
    return {"sbd_viz_version": __version__, "torch": torch.__version__, "dtype": str(model.model.dtype),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _ntp_config(config: DecodeConfig) -> dict:
    """An NTP trace's settings: the ones of ``config`` that apply to greedy NTP."""
    return {"decoder": "ntp", "rule": "ntp", "max_new_tokens": config.max_new_tokens, "stop": list(config.stop),
            "top_n": config.top_n, "block_size": 1, "temperature": 0.0}


def _trace(model: SBDModel, prompt: str, prompt_ids: list[int], steps: Iterable[Step], output_ids: list[int],
           stop_reason: str, config: dict) -> Trace:
    out = list(output_ids)
    return Trace(prompt=prompt, prompt_ids=tuple(prompt_ids), config=config, model_id=model.name,
                 steps=tuple(steps), output_ids=tuple(out), output_texts=tuple(model.token_text(t) for t in out),
                 text=model.text(out), stop_reason=stop_reason, meta=_meta(model))


def decode(model: SBDModel, prompt: str, rule: str = DEFAULT_RULE, gamma: float = DEFAULT_GAMMA,
           block_size: int | None = None, max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0,
           stop: str | Iterable[str] | None = None, gap_free: bool = False, top_n: int = 5,
           verify: bool = False) -> Trace:
    """Decode ``prompt`` with Set Block Decoding and return the full ``Trace``.

    ``block_size``: slots decoded together; None takes the model's (``SBDModel.block_size``: the
    one recorded in its folder, else 16).

    ``verify=True`` checks every drafted token against greedy NTP on the same weights (from the
    causal logits each call computes anyway), so the output is exactly ``decode_ntp``'s; needs
    temperature 0.
    """
    block_size = check_model(model).block_size if block_size is None else block_size
    config = DecodeConfig(rule=rule, gamma=gamma, block_size=block_size, max_new_tokens=max_new_tokens,
                          temperature=temperature, seed=seed, stop=stop or (), gap_free=gap_free, top_n=top_n,
                          verify=verify)
    decoding = Decoding(model, prompt, config)
    for _ in decoding.steps():
        pass
    return decoding.trace()


class _Clock:
    """A logits processor that only notes when each generation step's forward has finished."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


@torch.inference_mode()
def decode_ntp(model: SBDModel, prompt: str, max_new_tokens: int = 64,
               stop: str | Iterable[str] | None = None, top_n: int = 5) -> Trace:
    """The same weights decoded causally and greedily with HF ``generate``: one token per call."""
    from transformers import LogitsProcessorList

    model, prompt = check_model(model), check_prompt(prompt)
    config = DecodeConfig(max_new_tokens=max_new_tokens, stop=stop or (), top_n=top_n)  # validates the arguments
    prompt_ids = model.encode(prompt)
    model.check_fits(len(prompt_ids), config.max_new_tokens)
    ids = torch.tensor([prompt_ids], device=model.device)
    clock = _Clock()
    t0 = time.perf_counter()
    out = model.model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=config.max_new_tokens, do_sample=False,
        temperature=None, top_p=None, top_k=None, logits_processor=LogitsProcessorList([clock]),
        output_logits=True, return_dict_in_generate=True, stop_strings=list(config.stop) or None,
        tokenizer=model.tokenizer, eos_token_id=model.eos_token_id, pad_token_id=model.eos_token_id)
    new = out.sequences[0, len(prompt_ids):].tolist()
    hit = stop_index(model, new, 1, config.stop)
    new = new[: hit[0]] if hit else new
    times = [t0] + clock.times
    steps = [ntp_step(model, i, out.logits[i].float(), len(prompt_ids), len(prompt_ids) if i == 0 else 1,
                      times[i + 1] - times[i], config.top_n, token=tok)  # out.logits[i]: (1, V)
             for i, tok in enumerate(new)]
    return _trace(model, prompt, prompt_ids, steps, new, hit[1] if hit else "length", _ntp_config(config))
