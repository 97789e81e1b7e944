"""A recorder for any block decoder's loop: report each step, get a ``Trace`` the pictures draw.

``CanvasRecorder``: ``encoder``, ``step`` and ``end_block`` as the loop runs, then ``trace``. What each report means:
docs/decoders.md; a toy loop recorded: docs/diffusion_recorder.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from ..trace.checks import check_whole
from ..trace.data import Candidate, Commit, Draft, Pass, SlotView, Step, Trace


class CanvasRecorder:
    """Builds a ``Trace`` from a block decoder's reports (see docs/decoders.md)."""

    def __init__(
        self,
        prompt_ids: Sequence[int],
        canvas_length: int,
        token_text: Callable[[int], str] = str,
        *,
        prompt: str = "",
        text: Callable[[list[int]], str] | None = None,
        eos_ids: Iterable[int] = (),
        config: dict[str, Any] | None = None,
        model_id: str = "",
        meta: dict[str, Any] | None = None,
        top_n: int = 5,
    ):
        check_whole(canvas_length, "canvas_length", 1)
        check_whole(top_n, "top_n", 1)
        self.prompt_ids = tuple(int(t) for t in prompt_ids)
        self.k, self.top_n, self.token_text = canvas_length, top_n, token_text
        self.prompt, self._text, self.eos_ids = prompt, text, {int(t) for t in eos_ids}
        self.config = {"decoder": "canvas", "block_size": canvas_length, **(config or {})}
        self.model_id, self.meta = model_id, dict(meta or {})
        self.steps: list[Step] = []
        self.output: list[int] = []
        self._block, self._step = 0, 0
        self._accepted = [False] * canvas_length  # after the block's last step
        self._passes: list[Pass] = []
        self._clock = time.perf_counter()

    def _elapsed(self, wall_time: float | None) -> float:
        now = time.perf_counter()
        elapsed, self._clock = (now - self._clock if wall_time is None else float(wall_time)), now
        return elapsed

    def encoder(self, n_input: int, wall_time: float | None = None, kind: str = "encoder") -> None:
        """An uncounted pass (e.g. the encoder extending the cache) before the next step; ``wall_time`` defaults
        to the time since the recorder's last report."""
        self._passes.append(Pass(kind, int(n_input), self._elapsed(wall_time)))

    def step(
        self,
        logits,
        accepted: Sequence[bool] | torch.Tensor,
        held: Sequence[int] | torch.Tensor | None = None,
        wall_time: float | None = None,
    ) -> Step:
        """One counted model call on the current block. ``logits``: (K, V) scores (or (1, K, V)); ``accepted``:
        K bools, the slots holding an accepted token after the step; ``held``: the K tokens the canvas holds
        then (accepted slots are read; default the drafts). Returns the recorded ``Step``."""
        elapsed = self._elapsed(wall_time)
        scores = torch.as_tensor(logits).detach().float().cpu()
        scores = scores[0] if scores.dim() == 3 and scores.shape[0] == 1 else scores
        if scores.dim() != 2 or scores.shape[0] != self.k:
            raise ValueError(f"logits: expected shape ({self.k}, vocab), got {tuple(scores.shape)}")
        accepted = [bool(a) for a in torch.as_tensor(accepted).reshape(-1).tolist()]
        if len(accepted) != self.k:
            raise ValueError(f"accepted: expected {self.k} values (one per slot), got {len(accepted)}")
        logp = torch.log_softmax(scores, -1)
        probs = logp.exp()
        entropy = -(probs * logp.nan_to_num(neginf=0.0)).sum(-1)
        top_p, top_i = probs.topk(min(self.top_n, probs.shape[-1]), -1)
        drafts_ids = [int(i) for i in top_i[:, 0]]
        held_ids = drafts_ids if held is None else [int(t) for t in torch.as_tensor(held).reshape(-1).tolist()]
        if len(held_ids) != self.k:
            raise ValueError(f"held: expected {self.k} token ids (one per slot), got {len(held_ids)}")
        tops = [
            tuple(Candidate(int(i), self.token_text(int(i)), float(p)) for p, i in zip(top_p[s], top_i[s]))
            for s in range(self.k)
        ]
        canvas = tuple(
            Draft(
                s,
                drafts_ids[s],
                tops[s][0].text,
                float(top_p[s, 0]),
                float(entropy[s]),
                tops[s],
                accepted[s],
                held_ids[s] if accepted[s] else None,
                self.token_text(held_ids[s]) if accepted[s] else None,
            )
            for s in range(self.k)
        )
        masked = tuple(s for s in range(self.k) if not self._accepted[s])
        commits = tuple(
            Commit(
                s,
                held_ids[s],
                self.token_text(held_ids[s]),
                float(probs[s, held_ids[s]]),
                float(entropy[s]),
                gap=sum(1 for left in range(s) if not accepted[left]),
            )
            for s in masked
            if accepted[s]
        )
        step = Step(
            call=len(self.steps),
            block=self._block,
            block_start=len(self.prompt_ids) + self._block * self.k,
            block_size=self.k,
            step=self._step,
            masked=masked,
            slots=tuple(SlotView(s, float(entropy[s]), tops[s]) for s in masked),
            commits=commits,
            wall_time=elapsed,
            n_input=self.k,
            canvas=canvas,
            renoised=tuple(s for s in range(self.k) if self._accepted[s] and not accepted[s]),
            passes=tuple(self._passes),
        )
        self.steps.append(step)
        self._accepted, self._passes, self._step = accepted, [], self._step + 1
        return step

    def end_block(self, tokens: Sequence[int]) -> None:
        """The block's final tokens (what the decoder appends to the text); the next step opens a new block."""
        tokens = [int(t) for t in torch.as_tensor(tokens).reshape(-1).tolist()]
        if len(tokens) != self.k:
            raise ValueError(f"tokens: expected {self.k} token ids (one per slot), got {len(tokens)}")
        if self._step == 0:
            raise ValueError("end_block: the block has no step (report at least one step first)")
        self.output += tokens
        self._block, self._step, self._accepted = self._block + 1, 0, [False] * self.k

    def trace(self) -> Trace:
        """The decode so far, the output cut after its first EOS (``eos_ids``)."""
        out, reason = list(self.output), "length"
        hit = next((i for i, t in enumerate(out) if t in self.eos_ids), None)
        if hit is not None:
            out, reason = out[: hit + 1], "eos"
        text = self._text(out) if self._text else "".join(self.token_text(t) for t in out)
        return Trace(
            prompt=self.prompt,
            prompt_ids=self.prompt_ids,
            config=dict(self.config),
            model_id=self.model_id,
            steps=tuple(self.steps),
            output_ids=tuple(out),
            output_texts=tuple(self.token_text(t) for t in out),
            text=text,
            stop_reason=reason,
            meta=dict(self.meta),
        )
