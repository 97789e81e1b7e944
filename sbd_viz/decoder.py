"""The SBD decoding loop (paper Algorithms 2-3) and the NTP baseline, both recorded as traces.

``Decoding.steps()`` is a generator: one ``Step`` per model call, so a UI can stream steps and a
progress bar can count them; ``Decoding.trace()`` then gives the whole ``Trace``, and ``decode``
does both in one call. With ``verify=True`` the same block loop also checks every drafted token
against greedy NTP on the same weights, from the causal logits each call computes anyway, and
rolls back at the first disagreement: the output is then exactly ``decode_ntp``'s.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Generator, Iterable

import torch

from ._version import __version__
from .model import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, SBDModel
from .rules import DEFAULT_GAMMA, DEFAULT_RULE, CommitRule
from .trace import Candidate, Check, Commit, Rollback, SlotView, Step, Trace

MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class ModelCall:
    """A forward a decode asks for: feed ``new_ids`` causally, predict the block ``block_ids``.

    The reply is ``(causal, block, seconds)``: the logits of the last ``n_causal`` causal positions
    (n_causal, V), the block's logits (len(block_ids), V), float32, and the forward's wall time.
    """

    new_ids: list[int]
    block_ids: list[int]
    n_causal: int = 0


@dataclass(frozen=True)
class CacheCut:
    """A rollback a verified decode asks for: keep the cache's first ``length`` positions. The reply is None."""

    length: int


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


def _propose(logits: torch.Tensor, temperature: float, gen: torch.Generator | None):
    """(m, V) slot logits -> probs (m, V), entropy (m,) nats of the untempered distribution, proposal (m,),
    confidence (m,) = probability of the proposal. The (m,) vectors are on the CPU, where the rules run:
    they are a few numbers, wherever the model is."""
    logp = torch.log_softmax(logits, -1)
    probs = logp.exp()
    if temperature == 0:
        proposal = probs.argmax(-1)
    else:
        proposal = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen).squeeze(-1)
    confidence = probs.gather(-1, proposal[:, None]).squeeze(-1)
    return probs, _entropy(probs, logp).cpu(), proposal.cpu(), confidence.cpu()


def _ntp_commit(model: SBDModel, slot: int, token: int, probs: torch.Tensor, logp: torch.Tensor) -> Commit:
    """NTP's exact token written into ``slot`` (from one causal row of logits), not drafted."""
    h = float(_entropy(probs[None], logp[None])[0])
    return Commit(slot, token, model.token_text(token), float(probs[token]), h, gap=0, ntp=True)


def _slot_views(model: SBDModel, masked, probs, entropy, top_n) -> tuple[SlotView, ...]:
    top_p, top_i = torch.topk(probs, min(top_n, probs.shape[-1]), dim=-1)  # (m, n)
    return tuple(
        SlotView(slot, float(h), tuple(Candidate(int(i), model.token_text(int(i)), float(p))
                                       for p, i in zip(ps, ids)))
        for slot, h, ps, ids in zip(masked, entropy.tolist(), top_p.tolist(), top_i.tolist()))


class _Run:
    """What every decode of one prompt holds: the checked request, its steps so far, and how it ended.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first step."""

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

    @property
    def recorded_steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def _start(self) -> None:
        if self._started:  # a second run would append a second decode's steps to the first's
            raise RuntimeError(f"steps: this {type(self).__name__} has already run; make a new one to decode again")
        self._started = True

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
            return self._verified_requests()
        return self._plain_requests()

    def _plain_requests(self):
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
                probs, entropy, proposal, confidence = _propose(logits, config.temperature, gen)  # (m, V), (m,) x3
                chosen = rule.select(entropy, confidence)
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
                                        wall_time=seconds + time.perf_counter() - t0, n_input=n_input))
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

    def _verified_requests(self):
        """Verified SBD: the commit rule drafts, NTP greedy on the same weights checks every draft.

        Invariant between calls: the cache holds exactly the accepted text but its last token ``x``,
        NTP's greedy choice there (exact, never a draft). Each call feeds causally ``x`` and the
        drafts after it up to the block's first open slot, then the block from that slot on. The
        causal logits accept or reject each fed draft; with all accepted, the last one is NTP's
        exact token for the open slot, written in instead of drafted, and the rule drafts among the
        other open slots from the block's logits. The first rejection keeps the accepted prefix,
        writes NTP's token there, cuts the cache back and redrafts the block's slots after it. Once
        the drafts reach a stop or the length limit, a checking-only call verifies the rest.
        """
        model, config, prompt_ids = self.model, self.config, self.prompt_ids
        mask_id, rule, n_max, stop = model.mask_token_id, config._rule, config.max_new_tokens, config.stop
        n_prompt = len(prompt_ids)
        line: list[int] = []  # generated tokens before the current block; its tail may hold unchecked drafts
        n_ok = 0  # generated tokens known to be NTP's; all but the last are in the cache
        clean = 0  # generated tokens known to hold no stop
        call, block, start, step = 0, 0, 0, 0
        k = min(config.block_size, n_max)
        tokens, filled = [mask_id] * k, [False] * k
        prev = (0, 0, 0)  # the previous block's (start, size, steps): its tail is checked by this block's first call

        def at(g: int) -> int:  # the token at generated position g (accepted, exact or drafted)
            return line[g] if g < start else tokens[g - start]

        while True:
            q = filled.index(False) if False in filled else k  # the block's committed prefix is tokens[:q]
            hit = _stop_index(model, line + tokens[:q], clean + 1, stop)
            if hit and hit[0] <= n_ok:
                break  # the accepted text holds a stop
            if n_ok >= n_max:
                hit = (n_max, "length")
                break
            clean = n_ok
            # "Generate until": slots right of a committed stop can never reach the output, as in plain decoding
            cut = next((s for s in range(k) if filled[s] and _ends_output(model, tokens[s], stop)), k)
            masked = [s for s in range(k) if not filled[s] and s < cut]
            checking = bool(hit) or (q == k and start + k == n_max)
            if not checking and not masked:
                if q < k:  # a stop token whose text never ends the output: decode the slots after it after all
                    masked = [s for s in range(k) if not filled[s]]
                else:  # the block is complete: open the next one after it
                    line, prev = line + tokens, (start, k, step)
                    block, start, step = block + 1, start + k, 0
                    k = min(config.block_size, n_max - start)
                    tokens, filled = [mask_id] * k, [False] * k
                    continue
            if checking:  # the drafts reach the end: check them, and predict no block
                target = hit[0] if hit else n_max
                first_open, block_ids = None, []
                new_ids = [at(g) for g in range(n_ok - 1, target - 1)]
            else:
                p = masked[0]
                first_open, block_ids = start + p, tokens[p:]
                new_ids = (list(prompt_ids) if call == 0 else []) + [at(g) for g in range(max(n_ok - 1, 0), start + p)]
            # causal rows predict positions n_ok, n_ok + 1, ...; of the prompt only its last row is needed
            n_causal = len(new_ids) if call else 1
            causal, logits, seconds = yield ModelCall(new_ids, list(block_ids), n_causal)  # (n_causal, V), (len(block_ids), V)
            t0 = time.perf_counter() - seconds  # wall times below: the forward plus this decode's own work
            logp_c = torch.log_softmax(causal, -1)
            probs_c = logp_c.exp()
            ntp = probs_c.argmax(-1).tolist()
            checks, rejected = [], None
            for r in range(n_causal):
                g = n_ok + r
                if g == first_open:
                    break  # not a draft: NTP's token for the open slot
                draft = at(g)
                b, slot = (block, g - start) if g >= start else (block - 1, g - prev[0])
                checks.append(Check(b, slot, n_prompt + g, draft, model.token_text(draft), ntp[r],
                                    model.token_text(ntp[r]), float(probs_c[r, ntp[r]]), float(probs_c[r, draft]),
                                    accepted=ntp[r] == draft))
                if ntp[r] != draft:
                    rejected = r
                    break
            n_input = len(new_ids) + len(block_ids)
            if rejected is not None:  # roll back to the accepted text; NTP's token goes in the rejected slot
                g = n_ok + rejected
                yield CacheCut(n_prompt + g)
                n_ok = g + 1
                fix = ntp[rejected]
                discarded = len(masked) if not checking else 0
                if g >= start:  # in this block: its drafts right of the rejected one were built on it
                    j = g - start
                    dropped = tuple(s for s in range(j + 1, k) if filled[s])
                    tokens[j] = fix
                    for s in dropped:
                        tokens[s], filled[s] = mask_id, False
                    where = (block, start, k, step)
                    step += 1
                else:  # in the previous block's tail, found by this block's first call: reopen after it
                    j = g - prev[0]
                    dropped = tuple(range(j + 1, prev[1]))
                    where = (block - 1, prev[0], prev[1], prev[2])
                    line, start, step = line[:g] + [fix], g + 1, 0
                    k = max(0, min(config.block_size, n_max - start))
                    tokens, filled = [mask_id] * k, [False] * k
                    masked = []  # the call's slot predictions were for the block just abandoned
                commit = _ntp_commit(model, j, fix, probs_c[rejected], logp_c[rejected])
                self._steps.append(Step(
                    call=call, block=where[0], block_start=n_prompt + where[1], block_size=where[2], step=where[3],
                    masked=tuple(masked) if not checking else (), slots=(), commits=(commit,),
                    wall_time=time.perf_counter() - t0, n_input=n_input, checks=tuple(checks),
                    rollback=Rollback(j, n_prompt + g, dropped, discarded), check_only=checking))
            elif checking:  # every draft up to the end accepted
                n_ok = target
                self._steps.append(Step(call=call, block=block, block_start=n_prompt + start, block_size=k,
                                        step=step, masked=(), slots=(), commits=(), wall_time=time.perf_counter() - t0,
                                        n_input=n_input, checks=tuple(checks), check_only=True))
                step += 1
            else:  # drafts accepted; write NTP's token in the open slot, then draft among the others
                p, x = first_open - start, ntp[-1]
                tokens[p], filled[p], n_ok = x, True, first_open + 1
                commits = [_ntp_commit(model, p, x, probs_c[-1], logp_c[-1])]
                probs, entropy, proposal, confidence = _propose(logits[[s - p for s in masked]], 0.0, None)
                others = [i for i, s in enumerate(masked) if s != p]
                if others:
                    chosen = [others[i] for i in rule.select(entropy[others], confidence[others])]
                    still = [masked[i] for i in others if i not in chosen]
                    for i in chosen:
                        slot, tok = masked[i], int(proposal[i])
                        tokens[slot], filled[slot] = tok, True
                        commits.append(Commit(slot, tok, model.token_text(tok), float(confidence[i]),
                                              float(entropy[i]), gap=sum(1 for s in still if s < slot)))
                self._steps.append(Step(
                    call=call, block=block, block_start=n_prompt + start, block_size=k, step=step,
                    masked=tuple(masked), slots=_slot_views(model, masked, probs, entropy, config.top_n),
                    commits=tuple(sorted(commits, key=lambda c: c.slot)), wall_time=time.perf_counter() - t0,
                    n_input=n_input, checks=tuple(checks)))
                step += 1
            call += 1
        self.output_ids, self.stop_reason = (line + tokens)[: hit[0]], hit[1]

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
        return self._requests()

    def _requests(self):
        model, config, n_prompt = self.model, self.config, len(self.prompt_ids)
        generated: list[int] = []
        reason = "length"
        while len(generated) < config.max_new_tokens:
            fed = list(self.prompt_ids) if not generated else generated[-1:]
            causal, _, seconds = yield ModelCall(fed, [], 1)
            t0 = time.perf_counter()
            logp = torch.log_softmax(causal, -1)  # (1, V)
            probs = logp.exp()
            token = int(probs[0].argmax())
            h = _entropy(probs, logp)
            i = len(generated)
            generated.append(token)
            self._steps.append(Step(
                call=i, block=i, block_start=n_prompt + i, block_size=1, step=0, masked=(0,),
                slots=_slot_views(self.model, (0,), probs, h.cpu(), config.top_n),
                commits=(Commit(0, token, model.token_text(token), float(probs[0, token]), float(h[0]), 0),),
                wall_time=seconds + time.perf_counter() - t0, n_input=len(fed)))
            hit = _stop_index(model, generated, len(generated), config.stop)
            if hit:
                generated, reason = generated[: hit[0]], hit[1]
                break
        self.output_ids, self.stop_reason = generated, reason

    def trace(self) -> Trace:
        self._finished()
        cfg = {"decoder": "ntp", "rule": "ntp", "max_new_tokens": self.config.max_new_tokens,
               "stop": list(self.config.stop), "top_n": self.config.top_n, "block_size": 1, "temperature": 0.0}
        return _trace(self.model, self.prompt, self.prompt_ids, self._steps, self.output_ids, self.stop_reason, cfg)


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
    block_size = _check_model(model).block_size if block_size is None else block_size
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
    cfg = {"decoder": "ntp", "rule": "ntp", "max_new_tokens": config.max_new_tokens,
           "stop": list(config.stop), "top_n": config.top_n, "block_size": 1, "temperature": 0.0}
    return _trace(model, prompt, prompt_ids, steps, new, hit[1] if hit else "length", cfg)
