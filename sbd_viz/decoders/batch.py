"""Batched decoding: many prompts share each forward, and every row advances on its own.

``decode_batch(model, prompts, ...)`` returns one ``Trace`` per prompt, with the output ``decode`` gives that prompt
alone: each row is an ordinary decoding driven through its ``requests()``, served here together. How (one cache,
rows advancing on their own, continuous batching, chunked prefill, compaction) and how exact: docs/decoders.md.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field, replace

import torch

from ..models.base import CausalModel
from ..models.call import CacheCut, ModelCall, Reply
from ..models.checks import check_model
from ..trace.checks import check_whole
from ..trace.data import Trace
from .config import DecodeConfig
from .door import prepare
from .registry import DecoderSpec, check_serves, decoders, default_decoder, get_decoder

MAX_BATCH_SIZE = 1024


class _BatchCache:
    """The batch's KV cache (a transformers ``DynamicCache``) plus which columns each row owns."""

    def __init__(self, model: CausalModel, rows: int):
        self.model, self.cache = model, model.new_cache()
        self.live = torch.zeros(rows, 0, dtype=torch.bool)  # (rows, columns): the row's cached tokens
        self.columns: list[list[int]] = [[] for _ in range(rows)]  # each row's live columns, in text order

    @property
    def width(self) -> int:
        return self.live.shape[1]

    def length(self, row: int) -> int:
        return len(self.columns[row])

    def reset(self, row: int) -> None:
        """The row starts a new prompt: none of its columns are live any more."""
        self.live[row] = False
        self.columns[row] = []

    def cut(self, row: int, length: int) -> None:
        """A rollback: the row keeps its first ``length`` cached tokens."""
        if not 0 <= length <= self.length(row):
            raise ValueError(f"length: must be in [0, {self.length(row)}] (the row's cached tokens), got {length}")
        self.live[row, self.columns[row][length:]] = False
        del self.columns[row][length:]

    def appended(self, fed: list[int], block_width: int) -> None:
        """After a call that appended ``max(fed)`` causal columns and ``block_width`` block columns to every
        row, of which row r's first ``fed[r]`` causal ones hold its tokens: drop the block, note the live."""
        if block_width:
            self.cache.crop(-block_width)
        start, width = self.width, max(fed)
        new = torch.arange(width)[None, :] < torch.tensor(fed)[:, None]  # (rows, width)
        self.live = torch.cat([self.live, new], dim=1)
        for row, n in enumerate(fed):
            self.columns[row].extend(range(start, start + n))

    def compact(self, keep_rows: list[int] | None = None) -> None:
        """Gather each row's live columns to the left (and keep only ``keep_rows``, in that order)."""
        rows = list(range(len(self.columns))) if keep_rows is None else list(keep_rows)
        width = max((self.length(r) for r in rows), default=0)
        index = torch.zeros(len(rows), width, dtype=torch.long)
        for i, r in enumerate(rows):
            index[i, : self.length(r)] = torch.tensor(self.columns[r], dtype=torch.long)
        layers = getattr(self.cache, "layers", [])
        if self.width and layers:
            device = layers[0].keys.device
            select = torch.tensor(rows, dtype=torch.long, device=device)
            for layer in layers:
                for name in ("keys", "values"):
                    t = getattr(layer, name)[select]  # (rows, heads, columns, dim)
                    idx = index.to(device)[:, None, :, None].expand(t.shape[0], t.shape[1], width, t.shape[3])
                    setattr(layer, name, torch.gather(t, 2, idx))
        lengths = [self.length(r) for r in rows]
        self.live = torch.arange(width)[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
        self.columns = [list(range(n)) for n in lengths]


@dataclass
class _Row:
    index: int  # the prompt's position in the input
    requests: Generator[ModelCall | CacheCut, Reply | None, None]  # the Decoding's request coroutine
    request: ModelCall | None = None
    entering: bool = True  # its first request (the prompt and first block) is not answered yet


@dataclass
class BatchStats:
    """How busy the batch was. A *row-call* is one row's forward within a batched call."""

    calls: int = 0  # batched forwards
    row_calls: int = 0  # rows with a request, summed over calls (what decoding one by one would call)
    row_slots: int = 0  # rows in the forward, summed over calls (busy or idle)
    tokens: int = 0  # tokens the rows asked to feed (causal tokens and block slots)
    computed: int = 0  # token positions the forwards computed, padding included
    compactions: int = 0
    prefill_pieces: int = 0  # row-forwards that fed a piece of a long causal feed, with no logits kept
    forward_seconds: float = 0.0
    seconds: float = 0.0  # the whole run

    @property
    def row_efficiency(self) -> float:
        """Busy row-calls / computed row-slots: 1.0 when no row of a forward sits idle."""
        return self.row_calls / self.row_slots if self.row_slots else float("nan")

    @property
    def token_efficiency(self) -> float:
        """Requested token positions / computed ones: what padding to the longest row costs."""
        return self.tokens / self.computed if self.computed else float("nan")

    def as_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in self.__dataclass_fields__},
            "row_efficiency": self.row_efficiency,
            "token_efficiency": self.token_efficiency,
        }


@dataclass
class BatchDecoding:
    """Decodes of many prompts served together (SBD by default; ``decoder``: any registered decoder whose class
    has ``requests()``); ``run()`` returns their traces in input order.

    Every prompt is checked on construction (settings, prompt, trained context), before any call.
    ``stats`` says how busy the batch was. In a batched trace, a step's ``wall_time`` is the
    batched forward it shared with the other rows plus the row's own work after it: it measures
    the batch's latency, not one row's cost (``trace.meta['batch_size']`` says so).
    """

    model: CausalModel
    prompts: Sequence[str]
    config: DecodeConfig = field(default_factory=DecodeConfig)
    batch_size: int = 8
    decoder: str | DecoderSpec | None = None  # any registered decoder with requests() (sv.decoders()); None: SBD
    # smallest prefill piece; None feeds every prompt whole; "auto": the decoding class's ``prefill_chunk`` (NTP's
    # 16), else None. SBD measured on the suite at batch 32 (2 threads): 0.93-1.05x the items/s of whole prompts:
    # its rows enter in waves and are ~32 tokens wide anyway, so pieces only add calls.
    prefill_chunk: int | str | None = "auto"
    own: dict = field(default_factory=dict)  # the decoder's own settings (its spec's ``own``), e.g. remask_threshold
    stats: BatchStats = field(default_factory=BatchStats, init=False)

    def __post_init__(self):
        self.model = check_model(self.model)
        if isinstance(self.prompts, str):
            raise ValueError("prompts: expected a list of prompts, got one string (use sv.decode for one prompt)")
        self.prompts = list(self.prompts)
        if not self.prompts:
            raise ValueError("prompts: no prompts to decode")
        b = self.batch_size
        check_whole(b, "batch_size", 1, MAX_BATCH_SIZE)
        if not isinstance(self.config, DecodeConfig):
            raise TypeError(f"config: expected an sbd_viz.DecodeConfig, got {type(self.config).__name__}")
        self._spec = spec = default_decoder(self.model) if self.decoder is None else get_decoder(self.decoder)
        check_serves(spec, self.model)
        if not spec.batchable:
            raise ValueError(
                f"decoder: {spec.name!r} cannot be batched (its decoding class has no requests()); "
                f"batchable: {', '.join(s.name for s in decoders(self.model) if s.batchable)}"
            )
        stray = [k for k in self.own if k not in spec.own]
        if stray:
            raise ValueError(
                f"{stray[0]}: not a setting of decoder {spec.name!r}'s own "
                f"({', '.join(spec.own) or 'none'}); shared settings go in config"
            )
        own = {**spec.own, **self.own}
        if self.prefill_chunk == "auto":
            self.prefill_chunk = getattr(spec.decoding, "prefill_chunk", None)
        c = self.prefill_chunk
        if c is not None:
            check_whole(c, "prefill_chunk", 1)
        self._decodings = []
        for i, prompt in enumerate(self.prompts):
            try:
                self._decodings.append(spec.decoding(self.model, prompt, self.config, **own))
            except ValueError as exc:
                raise ValueError(f"{exc} (prompts[{i}])") from None
            self._decodings[-1].check_batchable()  # the decoder's own settings may ask for calls a batch cannot make
        self._ran = False

    def run(self, progress: bool = False) -> list[Trace]:
        if self._ran:
            raise RuntimeError("run: this BatchDecoding has already run; make a new one to decode again")
        self._ran = True
        t_start = time.perf_counter()
        width = min(self.batch_size, len(self.prompts))
        cache = _BatchCache(self.model, width)
        rows: list[_Row | None] = [None] * width
        # prompts of similar length enter together, so fewer rows are padded to a long prompt (order of the
        # results is the input's; each row's decode is independent of its neighbours)
        queue = deque(sorted(range(len(self.prompts)), key=lambda i: len(self._decodings[i].prompt_ids)))
        traces: list[Trace | None] = [None] * len(self.prompts)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(self.prompts), desc=f"decode_batch x{self.batch_size}", unit="prompt")

        def advance(r: int, reply) -> None:
            """Send ``reply`` to row r's decode and serve its requests up to its next forward (or its end)."""
            row = rows[r]
            assert row is not None, "a row is advanced only while it decodes"
            while True:
                try:
                    request = row.requests.send(reply)
                except StopIteration:
                    traces[row.index] = self._trace(row.index)
                    rows[r] = None
                    if bar is not None:
                        bar.update(1)
                    return
                if isinstance(request, CacheCut):
                    cache.cut(r, request.length)
                    reply = None
                    continue
                row.request = request
                return

        with torch.inference_mode():
            while True:
                for r in range(len(rows)):  # continuous batching: a free place takes the next prompt
                    while rows[r] is None and queue:
                        i = queue.popleft()
                        cache.reset(r)
                        rows[r] = _Row(i, self._decodings[i].requests())
                        advance(r, None)
                busy = [r for r, row in enumerate(rows) if row is not None]
                if not busy:
                    break
                if not queue and len(busy) < len(rows):  # the tail: idle rows would still cost compute
                    cache.compact(busy)
                    rows = [rows[r] for r in busy]
                    self.stats.compactions += 1
                elif cache.width > 16 + 2 * max(cache.length(r) for r in busy):
                    cache.compact()
                    self.stats.compactions += 1
                requests = [row.request if row else None for row in rows]
                served, rests = self._pieces(requests, [bool(row and row.entering) for row in rows])
                replies = self._forward(cache, served)
                for r, reply in enumerate(replies):
                    row = rows[r]
                    if row is None:
                        continue
                    if rests[r] is not None:  # a prefill piece went in: the rest of the request waits
                        row.request = rests[r]
                    elif reply is not None:
                        row.entering = False
                        advance(r, reply)
        if bar is not None:
            bar.close()
        self.stats.seconds = time.perf_counter() - t_start
        done = [t for t in traces if t is not None]
        assert len(done) == len(traces), "every prompt's decode ran to its end"
        return done

    def _trace(self, index: int) -> Trace:
        trace = self._spec.trace(self._decodings[index])
        meta = {
            **trace.meta,
            "batch_size": self.batch_size,
            "wall_time": "the batched forward each step shared, plus the row's own work",
        }
        return replace(trace, meta=meta)

    def _pieces(
        self, requests: list[ModelCall | None], entering: list[bool]
    ) -> tuple[list[ModelCall | None], list[ModelCall | None]]:
        """What each row feeds in this call, and what is left of its request (None: nothing is left).

        An entering row's request (its prompt and first block) wider than the call's other rows, and than
        ``prefill_chunk``, sends the head of its prompt alone, as wide as that limit; the tokens whose logits the
        row needs, and its block, stay in the rest."""
        served: list[ModelCall | None] = list(requests)
        rests: list[ModelCall | None] = [None] * len(requests)
        chunk = self.prefill_chunk
        if chunk is None:
            return served, rests
        assert isinstance(chunk, int), "prefill_chunk 'auto' is resolved on construction"
        widths = [len(q.new_ids) + len(q.block_ids) if q else 0 for q in requests]
        limit = max([chunk] + [w for w, e in zip(widths, entering) if not e])
        for r, q in enumerate(requests):
            if q is None or not entering[r] or widths[r] <= limit:
                continue
            piece = min(limit, widths[r] - limit, len(q.new_ids) - max(q.n_causal, 1))
            if piece < 1:
                continue
            served[r] = ModelCall.fused(q.new_ids[:piece])
            rests[r] = ModelCall.fused(q.new_ids[piece:], q.block_ids, q.n_causal)
            self.stats.prefill_pieces += 1
        return served, rests

    def _forward(self, cache: _BatchCache, requests: list[ModelCall | None]) -> list[Reply | None]:
        """One forward for every row: row r feeds its new tokens, then its block, padded to the longest."""
        model = self.model
        n_rows = len(requests)
        fed = [len(q.new_ids) if q else 0 for q in requests]
        sizes = [len(q.block_ids) if q else 0 for q in requests]
        n_max, k_max = max(fed), max(sizes)
        width, q_len = cache.width, n_max + k_max
        ids = torch.zeros(n_rows, q_len, dtype=torch.long)
        positions = torch.zeros(n_rows, q_len, dtype=torch.long)
        allowed = torch.zeros(n_rows, q_len, width + q_len, dtype=torch.bool)
        real = torch.zeros(n_rows, q_len, dtype=torch.bool)
        keep = torch.zeros(n_rows, q_len, dtype=torch.bool)  # positions whose logits a row needs
        for r, req in enumerate(requests):
            if req is None:
                continue
            n, k, base = fed[r], sizes[r], cache.length(r)
            blk = slice(n_max, n_max + k)
            ids[r, :n] = torch.tensor(req.new_ids, dtype=torch.long)
            ids[r, blk] = torch.tensor(req.block_ids, dtype=torch.long)
            positions[r, :n] = torch.arange(base, base + n)
            positions[r, blk] = torch.arange(base + n, base + n + k)
            real[r, :n] = real[r, blk] = True
            keep[r, n - req.n_causal : n] = keep[r, blk] = True
            live = cache.live[r]
            allowed[r, :n, :width] = live
            allowed[r, blk, :width] = live
            allowed[r, :n, width : width + n] = torch.ones(n, n, dtype=torch.bool).tril()
            allowed[r, blk, width : width + n] = True  # the block sees the row's new tokens
            allowed[r, blk, width + n_max : width + n_max + k] = True  # and itself, both ways
        # a padding position attends to itself alone: a query with no key would give NaN keys downstream
        allowed[:, :, width:] |= torch.eye(q_len, dtype=torch.bool)[None] & ~real[:, :, None]
        mask = model.attention_mask(allowed)  # (rows, 1, q, keys)
        device = model.device
        layers = getattr(cache.cache, "layers", [])
        saved = [(layer.keys, layer.values) for layer in layers]
        t0 = time.perf_counter()
        block_rows = real.clone()
        block_rows[:, :n_max] = False  # every row's block sits at [n_max, n_max + its size)
        try:
            with model.block_rows(rows=block_rows.to(device)):
                out = model.model(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    position_ids=positions.to(device),
                    past_key_values=cache.cache,
                    use_cache=True,
                    logits_to_keep=keep.to(device),
                )
        except BaseException:  # leave the cache as it was, as the single-row engine does
            for layer, (keys, values) in zip(cache.cache.layers, saved):
                layer.keys, layer.values = keys, values
            raise
        cache.appended(fed, k_max)
        seconds = time.perf_counter() - t0
        logits = out.logits.float().reshape(-1, out.logits.shape[-1])  # (kept positions, V), row by row
        replies: list[Reply | None] = []
        offset = 0
        for r, req in enumerate(requests):
            if req is None:
                replies.append(None)
                continue
            c, k = req.n_causal, sizes[r]
            block = logits[offset + c : offset + c + k]  # (k, V)
            replies.append(Reply(logits[offset : offset + c], block.reshape(int(k > 0), k, block.shape[-1]), seconds))
            offset += c + k
        busy = sum(q is not None and bool(q.block_ids or q.n_causal) for q in requests)  # prefill pieces are not
        self.stats.calls += 1
        self.stats.row_calls += busy
        self.stats.row_slots += n_rows
        self.stats.tokens += sum(fed) + sum(sizes)
        self.stats.computed += n_rows * q_len
        self.stats.forward_seconds += seconds
        return replies


def decode_batch(
    model: CausalModel,
    prompts: Iterable[str],
    decoder: str | None = None,
    batch_size: int = 8,
    progress: bool = False,
    prefill_chunk: int | str | None = "auto",
    **settings,
) -> list[Trace]:
    """Decode many prompts with ``decoder``, ``batch_size`` rows per forward; one ``Trace`` per prompt, in order.

    ``decoder``: any registered decoder whose class has ``requests()`` (None: SBD; ``"ntp"`` is greedy NTP, one
    token per call, the batched baseline for SBD's speed); ``settings`` are ``sv.decode``'s (``rule``, ``gamma``,
    ``block_size``, ``max_new_tokens``, ``stop``, ..., and the decoder's own, e.g. ``remask_threshold=0.7``); a
    setting the decoder does not take is refused by name, as ``sv.decode`` refuses it.

    Each trace holds what ``sv.decode`` gives that prompt alone (same settings; at temperature 0 up to
    float rounding, see ``sbd_viz.decoders.batch``). A finished row's place goes to the next prompt at once.
    ``prefill_chunk`` feeds long prompts in pieces (see ``BatchDecoding``).
    ``BatchDecoding`` gives the same traces and ``stats`` (how busy the batch was).
    """
    spec, config, own = prepare(model, decoder, **settings)
    return BatchDecoding(
        model, prompts if isinstance(prompts, str) else list(prompts), config, batch_size, spec, prefill_chunk, own
    ).run(progress=progress)
