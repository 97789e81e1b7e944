"""The SBD decoding loop (paper Algorithms 2-3), recorded as a trace; the NTP baseline is ``sbd_viz.decoders.ntp``.

``Decoding.steps()`` is a generator: one ``Step`` per model call, so a UI can stream steps and a
progress bar can count them; ``Decoding.trace()`` then gives the whole ``Trace``, and ``decode``
does both in one call. With ``verify=True`` the block loop also checks every drafted token
against greedy NTP on the same weights, from the causal logits each call computes anyway, and
rolls back at the first disagreement: the output is then exactly ``decode_ntp``'s (that loop is
``sbd_viz.decoders.verified``). Both loops are coroutines of cache requests (``Decoding.requests()``), so
``decode_batch`` serves many of them with the same logic; ``sbd_viz.decoders.steps`` builds their steps.
Verified SBD drafts one block per call (``drafting="single"``, the default) or a block after every possible
accepted length (``drafting="tree"``, SBD's own setting: its requests are ``TreeCall``s, which ``serve`` answers
and ``decode_batch`` does not).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Generator, Iterable

import torch

from .._version import __version__
from ..checks import check_block_size, check_model, check_number, check_prompt, check_whole
from ..model import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, CacheCut, ModelCall, SBDModel, TreeCall
from ..rules import COMMIT_RULES, DEFAULT_GAMMA, DEFAULT_RULE, CommitRule, Interval
from .base import Block, BlockLoop, Reply, propose
from .steps import draft, slot_views
from ..trace import Step, Trace
from .verified import TreeDecode, VerifiedDecode, check_drafting
from . import registry

MAX_NEW_TOKENS = 4096


def serve(model: SBDModel, cache, request: "ModelCall | TreeCall | CacheCut"):
    """Answer one request of ``Decoding.requests()`` on a single-row cache."""
    if isinstance(request, CacheCut):
        model.rollback(cache, request.length)
        return None
    t0 = time.perf_counter()
    if isinstance(request, TreeCall):
        causal, block = model.tree_call(cache, request.new_ids, request.n_branches, request.block_size)
    else:
        causal, block = model.fused_call(cache, request.new_ids, request.block_ids, request.n_causal)
    return Reply(causal, block, time.perf_counter() - t0)


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
        check_whole(self.block_size, "block_size", 1, MAX_BLOCK_SIZE)
        check_whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        check_whole(self.top_n, "top_n", 1, 50)
        check_whole(self.seed, "seed", 0, 2**63 - 1)
        t = self.temperature
        check_number(t, "temperature", 0)
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
        """Every setting, JSON-native, as an SBD trace's config stores it: ``"decoder"`` is ``"sbd"`` whichever
        decoder holds this config. ``Decoding.trace`` adds ``drafting`` when it is not ``"single"``; remasking's
        trace names its own decoder and adds ``remask_threshold``; NTP, Jacobi and prompt lookup do not use it (they
        store the settings greedy NTP reads, ``sbd_viz.decoders.ntp._ntp_config``, and their own)."""
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
        self._knob_intervals: list = []  # each commit-rule choice's knob interval (``draft``): the γ range
        self._started = False

    @property
    def recorded_steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def _start(self) -> None:
        if self._started:  # a second run would append a second decode's steps to the first's
            raise RuntimeError(f"steps: this {type(self).__name__} has already run; make a new one to decode again")
        self._started = True

    def _keep_output(self, loop: Generator) -> Generator:
        """Pass ``loop``'s requests and replies through; keep what it returns: the output ids and their ``Stop``."""
        self.output_ids, stop = yield from loop
        self.stop_reason = stop.reason

    def _finished(self) -> None:
        if self.stop_reason is None:
            raise RuntimeError("trace: the decode has not finished; iterate its steps (or requests) to the end first")


class Decoding(BlockLoop, _Run):
    """One SBD decode of ``prompt``: iterate ``steps()`` (one ``Step`` per model call), then ``trace()``.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first ``next``::

        decoding = sv.Decoding(model, "assert 48 + 37 == ", sv.DecodeConfig(gamma=0.5, stop="\\n"))
        for step in decoding.steps():
            ...  # show the step while the block fills
        trace = decoding.trace()

    ``drafting``: how a verified decode drafts, ``"single"`` or ``"tree"`` (``sbd_viz.decoders.verified``).
    """

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None, drafting: str = "single"):
        super().__init__(model, prompt, config)
        self.drafting = check_drafting(drafting, self.config)

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

        Yields ``ModelCall`` (send back a ``Reply``) and ``CacheCut`` (send back None);
        the steps so far are in ``recorded_steps``; once it ends, ``trace()`` works. ``steps()`` serves
        the same requests on one cache of its own.
        """
        self._start()
        if self.config.verify:
            loop = TreeDecode if self.drafting == "tree" else VerifiedDecode
            return self._keep_output(loop(self.model, self.config, self.prompt_ids, self._steps,
                                          self._knob_intervals).requests())
        return self._keep_output(self._plain_requests())

    def _plain_requests(self):
        """Plain SBD: the rule commits from each call's block logits, block after block (``BlockLoop``). Returns
        the output ids and their ``Stop``."""
        # a sampled decode draws from its own generator, on the device the logits are on
        self._gen = torch.Generator(device=self.model.device).manual_seed(self.config.seed)
        return (yield from self._block_loop())

    def _call(self, block: Block, live: list[int], reply: Reply, call: int, n_input: int, started: float) -> Step:
        """The rule commits among the ``live`` slots, from the call's block logits."""
        model, config = self.model, self.config
        proposal = propose(model, reply.block[live], config.temperature, self._gen)  # (m, V) for the live slots
        commits, _ = draft(model, config._rule, live, proposal, self._knob_intervals)
        for c in commits:
            block.write(c.slot, c.token_id)
        views = slot_views(model, live, proposal, config.top_n)
        return Step(call=call, block=block.index, block_start=len(self.prompt_ids) + block.start,
                    block_size=block.size, step=block.steps, masked=tuple(live), slots=views, commits=tuple(commits),
                    wall_time=time.perf_counter() - started, n_input=n_input)

    def trace(self) -> Trace:
        """The finished decode as a ``Trace``."""
        self._finished()
        config = self.config.as_dict()
        if self.drafting != "single":  # the default is left out: a single-drafting trace is the file it always was
            config["drafting"] = self.drafting
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      config, self._gamma_range())

    def _gamma_range(self):
        """The γ values at which this decode results (``Trace.gamma_range``): the intersection of every rule
        choice's knob interval, rolled-back drafts' included (they shaped what came after); None when sampled."""
        if self.config.temperature != 0:
            return None
        valid = COMMIT_RULES[self.config.rule].valid
        found = Interval(valid.lo, valid.hi, not valid.lo_open, True, valid.whole)  # no choice: every γ
        for interval in self._knob_intervals:
            found = found & interval
        return found


def decode_steps(model: SBDModel, prompt: str, config: DecodeConfig | None = None) -> Generator[Step, None, None]:
    """Decode ``prompt`` with SBD, yielding one ``Step`` per model call (``Decoding`` also gives the trace)."""
    return Decoding(model, prompt, config).steps()


def _meta(model: SBDModel) -> dict:
    return {"sbd_viz_version": __version__, "torch": torch.__version__, "dtype": str(model.model.dtype),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _trace(model: SBDModel, prompt: str, prompt_ids: list[int], steps: Iterable[Step], output_ids: list[int],
           stop_reason: str, config: dict, gamma_range=None) -> Trace:
    out = list(output_ids)
    return Trace(prompt=prompt, prompt_ids=tuple(prompt_ids), config=config, model_id=model.name,
                 steps=tuple(steps), output_ids=tuple(out), output_texts=tuple(model.output_texts(prompt_ids, out)),
                 text=model.text(out), stop_reason=stop_reason, meta={**_meta(model), **model.trace_meta()},
                 gamma_range=gamma_range)


def decode(model: SBDModel, prompt: str, rule: str = DEFAULT_RULE, gamma: float = DEFAULT_GAMMA,
           block_size: int | None = None, max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0,
           stop: str | Iterable[str] | None = None, gap_free: bool = False, top_n: int = 5,
           verify: bool = False, drafting: str = "single") -> Trace:
    """Decode ``prompt`` with Set Block Decoding and return the full ``Trace``.

    ``block_size``: slots decoded together; None takes the model's (``SBDModel.block_size``: the
    one recorded in its folder, else 16).

    ``verify=True`` checks every drafted token against greedy NTP on the same weights (from the
    causal logits each call computes anyway), so the output is exactly ``decode_ntp``'s; needs
    temperature 0. ``drafting="tree"`` (with ``verify=True``) drafts a block after every possible accepted length
    in each call, so a rejected draft never wastes the call's drafts (``sbd_viz.decoders.verified``).
    """
    # SBD's own function, with SBD's signature; sv.decode (sbd_viz.decoders.door) is the door to every decoder
    config = DecodeConfig(rule=rule, gamma=gamma, block_size=check_block_size(block_size, check_model(model)),
                          max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, stop=stop or (),
                          gap_free=gap_free, top_n=top_n, verify=verify)
    decoding = Decoding(model, prompt, config, drafting)
    for _ in decoding.steps():
        pass
    return SBD.trace(decoding)


# verified SBD is a mode of SBD's block loop, not a decoder of its own: its traces say decoder "sbd", verify true
SBD = registry.DecoderSpec(
    name="sbd", label="SBD", decoding=Decoding, model="sbd", knob=registry.Knob("gamma"),
    takes=("rule", "gamma", "block_size", "temperature", "seed", "gap_free", "verify"),
    own={"drafting": "single"},  # verified SBD's drafting: "single" or "tree" (sbd_viz.decoders.verified)
    variants={"verified SBD": {"verify": True}})
SPECS = (SBD,)
