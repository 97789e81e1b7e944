"""The SBD decoding loop (paper Algorithms 2-3) and the NTP baseline, both recorded as traces.

``Decoding.steps()`` is a generator: one ``Step`` per model call, so a UI can stream steps and a
progress bar can count them; ``Decoding.trace()`` then gives the whole ``Trace``, and ``decode``
does both in one call.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Generator, Iterable

import torch

from ._version import __version__
from .model import SBDModel
from .solvers import DEFAULT_GAMMA, DEFAULT_RULE, Solver
from .trace import Candidate, Commit, SlotView, Step, Trace

MAX_BLOCK_SIZE = 64
MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class DecodeConfig:
    """Settings of one SBD decode; validated on construction (errors name the argument)."""

    solver: str = DEFAULT_RULE
    gamma: float = DEFAULT_GAMMA
    block_size: int = 16
    max_new_tokens: int = 64
    temperature: float = 0.0  # 0 = argmax (the paper's setting); > 0 samples with ``seed``
    seed: int = 0
    stop: tuple[str, ...] = ()  # stop strings; decoding also stops at the tokenizer's EOS
    gap_free: bool = False
    top_n: int = 5  # candidates recorded per masked slot
    _solver: Solver = field(init=False, repr=False, compare=False)

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
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop: must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "_solver", Solver(self.solver, self.gamma, self.gap_free))

    def as_dict(self) -> dict:
        """JSON-native settings, as stored in a trace."""
        return {"decoder": "sbd", "solver": self.solver, "gamma": self.gamma, "gap_free": self.gap_free,
                "block_size": self.block_size, "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature, "seed": self.seed, "stop": list(self.stop), "top_n": self.top_n}


def _check_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt: must be a non-empty string, got {prompt!r}")
    return prompt


def _check_model(model) -> SBDModel:
    if not isinstance(model, SBDModel):
        raise TypeError(f"model: expected an sbd_viz.SBDModel (see sv.load_model), got {type(model).__name__}")
    return model


def _stop_index(model: SBDModel, ids: list[int], first: int, stop: tuple[str, ...]) -> tuple[int, str] | None:
    """The length of ``ids`` up to and including the first stop, if one ends at or after ``first``."""
    eos = model.eos_token_id
    for n in range(max(first, 1), len(ids) + 1):
        if eos is not None and ids[n - 1] == eos:
            return n, "eos"
        if stop and any(s in model.text(ids[:n]) for s in stop):
            return n, "stop"
    return None


def _ends_output(model: SBDModel, token_id: int, stop: tuple[str, ...]) -> bool:
    """Whether this one token ends the output by itself (EOS, or a token containing a stop string)."""
    if token_id == model.eos_token_id:
        return True
    text = model.token_text(token_id)
    return any(st in text for st in stop)


def _entropy(probs: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """(m, V) -> (m,) nats. A token the model rules out (logit -inf) adds 0, not 0 * -inf = NaN."""
    return -torch.where(probs > 0, probs * logp, 0.0).sum(-1)


def _slot_views(model: SBDModel, masked, probs, entropy, top_n) -> tuple[SlotView, ...]:
    top_p, top_i = torch.topk(probs, min(top_n, probs.shape[-1]), dim=-1)  # (m, n)
    return tuple(
        SlotView(slot, float(h), tuple(Candidate(int(i), model.token_text(int(i)), float(p))
                                       for p, i in zip(ps, ids)))
        for slot, h, ps, ids in zip(masked, entropy.tolist(), top_p.tolist(), top_i.tolist()))


class Decoding:
    """One SBD decode of ``prompt``: iterate ``steps()`` (one ``Step`` per model call), then ``trace()``.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first ``next``::

        decoding = sv.Decoding(model, "assert 48 + 37 == ", sv.DecodeConfig(gamma=0.5, stop="\\n"))
        for step in decoding.steps():
            ...  # show the step while the block fills
        trace = decoding.trace()
    """

    def __init__(self, model: SBDModel, prompt: str, config: DecodeConfig | None = None):
        self.model, self.prompt = _check_model(model), _check_prompt(prompt)
        self.config = DecodeConfig() if config is None else config
        if not isinstance(self.config, DecodeConfig):
            raise TypeError(f"config: expected an sbd_viz.DecodeConfig, got {type(self.config).__name__}")
        self.prompt_ids = model.encode(prompt)
        model.check_fits(len(self.prompt_ids), self.config.max_new_tokens)
        self.output_ids: list[int] | None = None  # set once the decode has finished
        self.stop_reason: str | None = None  # 'stop', 'eos' or 'length', once finished
        self._steps: list[Step] = []
        self._started = False

    def steps(self) -> Generator[Step, None, None]:
        """Decode, yielding one ``Step`` per model call (paper Algorithms 2-3)."""
        if self._started:  # a second run would append a second decode's steps to the first's
            raise RuntimeError("steps: this Decoding has already run; make a new one to decode again")
        self._started = True
        model, config, prompt_ids = self.model, self.config, self.prompt_ids
        mask_id, solver, k_max = model.mask_token_id, config._solver, config.block_size
        gen = torch.Generator().manual_seed(config.seed)
        cache = model.new_cache()
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
                t0 = time.perf_counter()
                logits = model.block_call(cache, pending, tokens)[masked]  # (m, V) for the masked slots
                n_input, pending = len(pending) + k, []
                logp = torch.log_softmax(logits, -1)
                probs = logp.exp()
                entropy = _entropy(probs, logp)  # (m,) nats, of the untempered distribution
                if config.temperature == 0:
                    proposal = probs.argmax(-1)
                else:
                    proposal = torch.multinomial(torch.softmax(logits / config.temperature, -1), 1,
                                                 generator=gen).squeeze(-1)
                confidence = probs.gather(-1, proposal[:, None]).squeeze(-1)  # (m,)
                chosen = solver.select(entropy, confidence)
                views = _slot_views(model, masked, probs, entropy, config.top_n)
                chosen_slots = {masked[i] for i in chosen}
                still = [s for s in masked if s not in chosen_slots]
                commits = []
                for i in chosen:
                    slot, tok = masked[i], int(proposal[i])
                    tokens[slot] = tok
                    commits.append(Commit(slot, tok, model.token_text(tok), float(confidence[i]),
                                          float(entropy[i]), gap=sum(1 for s in still if s < slot)))
                self._steps.append(Step(call=call, block=block, block_start=start, block_size=k, step=step,
                                        masked=tuple(masked), slots=views, commits=tuple(commits),
                                        wall_time=time.perf_counter() - t0, n_input=n_input))
                yield self._steps[-1]
                call, step, masked = call + 1, step + 1, still
                # "Generate until": once a slot holds a stop token, slots right of it can never reach the
                # output, so they are no longer decoded (on short answers they would cost whole calls).
                ends = [s for s in range(k) if s not in masked and _ends_output(model, tokens[s], config.stop)]
                if ends:
                    masked = [s for s in masked if s < ends[0]]
                # Finish early once the block's committed prefix holds a stop: later slots would be discarded.
                prefix = next((s for s in range(k) if s in masked), k)
                if prefix > done_prefix:
                    hit = _stop_index(model, generated + tokens[:prefix], len(generated) + done_prefix + 1,
                                      config.stop)
                    done_prefix = prefix
                    if hit:
                        generated, reason = (generated + tokens[:prefix])[: hit[0]], hit[1]
                        break
            if reason == "length":
                generated += tokens
                pending = list(tokens)
            block += 1
        self.output_ids, self.stop_reason = generated, reason

    def trace(self) -> Trace:
        """The finished decode as a ``Trace``."""
        if self.stop_reason is None:
            raise RuntimeError("trace: the decode has not finished; iterate steps() to the end first")
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason,
                      self.config.as_dict())


def decode_steps(model: SBDModel, prompt: str, config: DecodeConfig | None = None) -> Generator[Step, None, None]:
    """Decode ``prompt`` with SBD, yielding one ``Step`` per model call (``Decoding`` also gives the trace)."""
    return Decoding(model, prompt, config).steps()


def _meta(model: SBDModel) -> dict:
    return {"sbd_viz_version": __version__, "torch": torch.__version__, "dtype": str(model.model.dtype),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _trace(model: SBDModel, prompt: str, prompt_ids: list[int], steps: Iterable[Step], output_ids: list[int],
           stop_reason: str, config: dict) -> Trace:
    out = list(output_ids)
    return Trace(prompt=prompt, prompt_ids=tuple(prompt_ids), config=config, model_id=model.name,
                 steps=tuple(steps), output_ids=tuple(out), output_texts=tuple(model.token_text(t) for t in out),
                 text=model.text(out), stop_reason=stop_reason, meta=_meta(model))


def decode(model: SBDModel, prompt: str, solver: str = DEFAULT_RULE, gamma: float = DEFAULT_GAMMA,
           block_size: int = 16, max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0,
           stop: str | Iterable[str] | None = None, gap_free: bool = False, top_n: int = 5) -> Trace:
    """Decode ``prompt`` with Set Block Decoding and return the full ``Trace``."""
    config = DecodeConfig(solver=solver, gamma=gamma, block_size=block_size, max_new_tokens=max_new_tokens,
                          temperature=temperature, seed=seed, stop=stop or (), gap_free=gap_free, top_n=top_n)
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

    model, prompt = _check_model(model), _check_prompt(prompt)
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
    hit = _stop_index(model, new, 1, config.stop)
    new = new[: hit[0]] if hit else new
    times = [t0] + clock.times
    steps = []
    for i, tok in enumerate(new):
        logp = torch.log_softmax(out.logits[i][0].float(), -1)[None]  # (1, V)
        probs = logp.exp()
        h = float(_entropy(probs, logp)[0])
        steps.append(Step(call=i, block=i, block_start=len(prompt_ids) + i, block_size=1, step=0, masked=(0,),
                          slots=_slot_views(model, (0,), probs, torch.tensor([h]), config.top_n),
                          commits=(Commit(0, tok, model.token_text(tok), float(probs[0, tok]), h, 0),),
                          wall_time=times[i + 1] - times[i], n_input=len(prompt_ids) if i == 0 else 1))
    cfg = {"decoder": "ntp", "solver": "ntp", "max_new_tokens": config.max_new_tokens,
           "stop": list(config.stop), "top_n": config.top_n, "block_size": 1, "temperature": 0.0}
    return _trace(model, prompt, prompt_ids, steps, new, hit[1] if hit else "length", cfg)
