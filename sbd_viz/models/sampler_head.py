"""A sampler head: a block's drafts chained left to right, each slot reading the token before it.

``SamplerHead`` is the module, ``chain`` the drafting, ``save``/``load`` its weights (safetensors) beside an
adapter's, and its width in the adapter's settings (``extra["sampler_head"]``). Training:
``sbd_viz.training.head_train`` (``sbd-viz train --sampler-head``). What it mends, and how: docs/models.md.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

WEIGHTS = "sampler_head.safetensors"


class SamplerHead(nn.Module):
    """``h + down(silu(up([h ; norm(e)])))`` for a slot's final hidden state ``h`` and the embedding ``e`` of the
    token before it. ``down`` starts at zero, so an untrained head is the adapter's own slot logits."""

    def __init__(self, hidden_size: int, width: int):
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width: must be a whole number >= 1, got {width!r}")
        self.norm = nn.RMSNorm(hidden_size, eps=torch.finfo(torch.float32).eps)
        self.up = nn.Linear(2 * hidden_size, width)
        self.down = nn.Linear(width, hidden_size)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    @property
    def width(self) -> int:
        return self.up.out_features

    def forward(self, hidden: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """The slots' new hidden states: ``hidden`` (..., d) and ``previous`` (..., d), the embeddings of the
        tokens before them."""
        x = torch.cat([hidden, self.norm(previous.to(hidden.dtype))], -1)
        return hidden + self.down(nn.functional.silu(self.up(x)))


# A chained pass over the whole vocabulary (``chain`` without candidates; ``AdaptedLM`` passes them) feeds a few rows (a
# branch's slots not yet final) through the 49,152-row output layer, and MKL's product for a few rows is slow. Measured
# on a 2-core AMD EPYC, 1 thread: 2, 3, 4 rows took 25, 37, 20 ms as ``out_head(x)`` and 7, 10, 10 ms as ``W @ x.T``
# (the rows as the narrow side); one row 10 ms, and 6 ms fed twice. A tree call with the head cost 2.3-4.3 one-token
# calls with ``out_head(x)``, 2.2-3.0 this way, 1.8-2.5 without the head (bench/CALL_COST.md, before sv.load_model
# packed its layers). On the packed output layer sv.load_model gives, 1 to 4 rows took 6.8, 6.7, 10.2, 9.5 ms this way
# and 7.9, 8.9, 6.9, 6.6 ms as ``out_head(x)``: near even, kept.
NARROW_ROWS = range(1, 9)


def output_logits(out_head, x: torch.Tensor) -> torch.Tensor:
    """``out_head(x)`` for (n, d) ``x``, taken as ``W @ x.T`` when ``n`` is in ``NARROW_ROWS`` (one row twice). The
    two differ in the last bits only; the head drafts, and NTP checks every draft, so no output depends on them."""
    n = x.shape[0]
    if n not in NARROW_ROWS or not isinstance(out_head, nn.Linear):
        return out_head(x)
    x = x.to(out_head.weight.dtype)
    logits = (out_head.weight @ (torch.cat([x, x]) if n == 1 else x).T).T[:n]
    return logits if out_head.bias is None else logits + out_head.bias


def chain(
    head: SamplerHead,
    hidden: torch.Tensor,
    first: torch.Tensor,
    embed,
    out_head,
    guess: torch.Tensor | None = None,
    candidates: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits of slots 1..k-1 of ``n`` blocks, drafted left to right: ``hidden`` (n, k, d) the blocks' final hidden
    states, ``first`` (n,) the token at each block's slot 0; ``embed``/``out_head`` the model's input embeddings
    and output head. Slot ``s`` reads the argmax of slot ``s - 1`` (``first`` for slot 1). Returns (n, k - 1, V).

    Taken one slot at a time, that is k - 1 passes through the 49,152-row output layer, a third of a tree call's
    time on a CPU. So every pass takes all the slots not yet final, each reading the token the slot before it is
    expected to get: ``guess`` (n, k), the adapter's own argmaxes, at first, then the last pass's argmaxes. A slot is
    final when the token it read is the one the slot before it got: the result is the left-to-right chain's whatever
    the guess, and a right guess saves passes (one pass when every guess holds).

    ``candidates`` (n, k, c): token ids per slot (``own_candidates``). Given, each slot's logits are taken for its
    candidates alone, -inf elsewhere, and its argmax is among them: c rows of the output layer a slot, not 49,152."""
    n, k, d = hidden.shape
    if k < 2:
        return hidden.new_zeros(n, 0, out_head.out_features)
    previous = first[:, None].repeat(1, k - 1)  # column s - 1: the token slot s reads
    if guess is not None:
        previous[:, 1:] = guess[:, 1 : k - 1]
    out, done = [], 0  # slots 1..done are final
    while done < k - 1:
        reads = previous[:, done:]  # (n, m): slots done + 1 .. k - 1
        m = reads.shape[1]
        x = head(hidden[:, done + 1 :], embed(reads)).reshape(n * m, d)
        if candidates is None:
            rows = output_logits(out_head, x).reshape(n, m, -1)
        else:
            rows = candidate_logits(out_head, x.reshape(n, m, d), candidates[:, done + 1 :])
        best = rows.argmax(-1)
        final = 1  # slot done + 1 read a final token
        while final < m and torch.equal(reads[:, final], best[:, final - 1]):
            final += 1
        out.append(rows[:, :final])
        previous[:, done + final :] = best[:, final - 1 : m - 1]  # an exact token, then this pass's guesses
        done += final
    return torch.cat(out, 1)


# The head's drafts are taken among the adapter's own best tokens at each slot. On the adapter's probe blocks (the
# held-out chat questions and HumanEval, 32 prompts each), the head's argmax over the whole vocabulary is among the
# adapter's best 32 at 96% and 99% of slots, and the probe's tokens per call are the same to within 0.01 (1.74 and
# 2.17 against 1.75 and 2.17); a slot's pass then multiplies by 32 rows of the output layer, not 49,152.
CANDIDATES = 32


def own_candidates(logits: torch.Tensor, c: int = CANDIDATES) -> torch.Tensor:
    """(..., V) a block's own slot logits -> (..., min(c, V)) the ids of each slot's ``c`` best tokens."""
    return logits.topk(min(c, logits.shape[-1]), -1).indices


def candidate_logits(out_head, x: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """The output layer's logits of (n, m, d) ``x`` at each row's (n, m, c) ``candidates`` only, -inf at every other
    token: (n, m, V)."""
    weight = out_head.weight[candidates]  # (n, m, c, d)
    picked = torch.einsum("nmd,nmcd->nmc", x.to(weight.dtype), weight)
    if out_head.bias is not None:
        picked = picked + out_head.bias[candidates]
    rows = picked.new_full((*x.shape[:2], out_head.out_features), -torch.inf)
    return rows.scatter(-1, candidates, picked)


def parameter_count(head: SamplerHead) -> int:
    return sum(p.numel() for p in head.parameters())


def save(head: SamplerHead, folder, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write the head's weights into ``folder`` (beside an adapter's); returns the file."""
    from safetensors.torch import save_file

    path = Path(folder) / WEIGHTS
    save_file({k: v.detach().to(dtype).contiguous() for k, v in head.state_dict().items()}, str(path))
    return path


def settings(head: SamplerHead) -> dict:
    """What an adapter's settings record of its head (``extra["sampler_head"]``)."""
    return {"width": head.width}


def load(folder, hidden_size: int, recorded: dict | None) -> SamplerHead | None:
    """The head in ``folder``, or None where its settings record none (``recorded``: ``extra["sampler_head"]``)."""
    if not recorded:
        return None
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"folder: the adapter's settings record a sampler head, but {path} is missing")
    head = SamplerHead(hidden_size, int(recorded["width"]))
    head.load_state_dict({k: v.float() for k, v in load_file(str(path)).items()})
    return head.eval()
