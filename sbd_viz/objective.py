"""The SBD training objective (arXiv 2509.04185, §3 and appendix A), and a probe of what it taught.

Each training sequence ``x`` (length n) is fed twice, as ``[x ; x_masked]`` with the same
position ids. The clean half learns next-token prediction (shifted). The masked half is
tiled into blocks of size k; each block sees the clean tokens strictly before it and
itself bidirectionally, and predicts the original token at each masked slot (no shift).
One mask rate ~ U(0,1) per sequence, i.i.d. per token; the two losses (NTP and MATP) are
summed with no weights.

``sbd_inputs`` builds that input once, for the loss (``sbd_loss``, which ``train.py``'s loop
minimises) and for the masked-slot probe (``masked_slot_accuracy``), so both see exactly the
same masking.
"""

from __future__ import annotations

import random
from collections import Counter

import torch
import torch.nn.functional as F

from . import tasks
from .data import DEFAULT_WEIGHTS, TrainingStream
from .model import SBDModel


def sbd_attention_mask(n: int, block_size: int, device=None) -> torch.Tensor:
    """The Fig. 9 training mask for ``[clean ; masked]`` of total length 2n: (2n, 2n) bool, True = attend."""
    q = torch.arange(2 * n, device=device)[:, None]
    kv = torch.arange(2 * n, device=device)[None, :]
    clean_q, clean_kv = q < n, kv < n
    q_block = (q - n) // block_size
    causal = clean_q & clean_kv & (kv <= q)
    same_block = ~clean_q & ~clean_kv & (q_block == (kv - n) // block_size)
    # masked block b sees clean positions [0, b*k): strictly before its own start
    earlier = ~clean_q & clean_kv & (q_block > kv // block_size)
    return causal | same_block | earlier


def mask_copy(ids: torch.Tensor, mask_id: int, generator: torch.Generator) -> torch.Tensor:
    """(B, n) ids -> (B, n) bool, True where masked: one rate ~ U(0,1) per row, i.i.d. tokens."""
    rate = torch.rand(ids.shape[0], 1, generator=generator)
    return torch.rand(ids.shape, generator=generator) < rate


def sbd_inputs(ids: torch.Tensor, mask_id: int, block_size: int, generator: torch.Generator):
    """The paper's input for (B, n) ids: ``[clean ; masked]`` with its attention mask and position ids.

    Returns ``(input_ids (B, 2n), attention_mask (B, 1, 2n, 2n), position_ids (B, 2n), scored (B, n))``;
    ``scored`` marks the masked slots that carry MATP loss (a trailing partial block is outside the
    paper's block set T: its masked slots carry none).
    """
    bsz, n = ids.shape
    masked = mask_copy(ids, mask_id, generator)  # (B, n)
    noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
    in_full_block = torch.arange(n) < (n // block_size) * block_size
    positions = torch.arange(n).repeat(2)[None].expand(bsz, -1)  # (B, 2n): shared position ids
    attn = sbd_attention_mask(n, block_size)[None, None].expand(bsz, 1, -1, -1)  # (B, 1, 2n, 2n)
    return torch.cat([ids, noisy], 1), attn, positions, masked & in_full_block


def sbd_loss(model, seq: torch.Tensor, mask_id: int, block_size: int, generator: torch.Generator,
             loss_on: torch.Tensor | None = None):
    """Loss on one batch ``seq`` (B, n+1): returns (ntp + matp, ntp, matp), each a token mean.

    ``loss_on`` (B, n+1) bool, optional: only these tokens are scored, as NTP targets and as masked
    slots (``TrainingStream.answer_slots``: the asserts' answers); the rest stay in the input as context.
    The masking and the attention are the same either way.
    """
    ids, ntp_labels = seq[:, :-1], seq[:, 1:]  # (B, n) each
    n = ids.shape[1]
    inputs, attn, positions, scored = sbd_inputs(ids, mask_id, block_size, generator)
    if loss_on is not None:
        ntp_labels = torch.where(loss_on[:, 1:], ntp_labels, torch.full_like(ntp_labels, -100))
        scored = scored & loss_on[:, :-1]
    matp_labels = torch.where(scored, ids, torch.full_like(ids, -100))
    logits = model(input_ids=inputs.to(model.device), attention_mask=attn.to(model.device),
                   position_ids=positions.to(model.device)).logits.float()  # (B, 2n, V)
    ntp, matp = _token_mean(logits[:, :n], ntp_labels), _token_mean(logits[:, n:], matp_labels)
    return ntp + matp, ntp, matp


def _token_mean(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the labels that are not -100; zero (with a graph) when there are none."""
    labels = labels.reshape(-1).to(logits.device)
    if (labels != -100).any():
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
    return logits.sum() * 0.0  # e.g. no masked slot in a full block (tiny n): contributes nothing


def masked_slot_accuracy(model: SBDModel, n_windows: int = 96, seq_len: int = 128, block_size: int = 16,
                         seed: int = 0) -> dict:
    """Did the MATP head learn? Its accuracy on held-out text, masked exactly as in training, vs a unigram guess.

    The text is test-split suite lines (never seen in training) cut into ``n_windows`` windows of
    ``seq_len`` tokens; each window is masked at one rate ~ U(0,1) and fed as ``[clean ; masked]``
    with the Fig. 9 mask (blocks of ``block_size``). Returns ``matp_accuracy`` (argmax at the masked
    slots), ``unigram_accuracy`` (always guessing the most frequent token of the training data at the
    same slots), ``ntp_accuracy`` (the causal half's next-token argmax for the same tokens, for
    scale), ``n_slots`` and ``unigram_token``.
    """
    if n_windows < 1 or seq_len < block_size or block_size < 1:
        raise ValueError(f"n_windows/seq_len/block_size: need n_windows >= 1 and seq_len >= block_size >= 1, "
                         f"got {n_windows}, {seq_len}, {block_size}")
    rng = random.Random(seed)
    lines = [item.line + "\n" for item in tasks.load_suite(split="test", per_family=40)]
    eos = model.tokenizer.eos_token_id
    stream: list[int] = []
    while len(stream) < n_windows * seq_len:
        doc = "".join(rng.sample(lines, rng.randint(3, 8)))
        stream += [eos] + model.tokenizer.encode(doc, add_special_tokens=False)
    x = torch.tensor(stream[:n_windows * seq_len]).view(n_windows, seq_len)  # (W, n)

    # the unigram baseline: the most frequent token of the training data
    train_rows = TrainingStream(model.tokenizer, seq_len, seed=seed + 1, weights=DEFAULT_WEIGHTS).batch(0, 256)
    top_token = Counter(train_rows[:, 1:].flatten().tolist()).most_common(1)[0][0]

    n = seq_len
    # masked exactly as in training: one rate per window, the Fig. 9 mask, shared position ids
    inputs, attn, pos, scored = sbd_inputs(x, model.mask_token_id, block_size, torch.Generator().manual_seed(seed))
    hits = ntp_hits = ntp_total = uni_hits = total = 0
    with torch.inference_mode():
        for w in range(n_windows):
            logits = model.model(input_ids=inputs[w:w + 1].to(model.device),
                                 attention_mask=attn[w:w + 1].to(model.device),
                                 position_ids=pos[w:w + 1].to(model.device)).logits[0].float().cpu()  # (2n, V)
            m = scored[w]
            target = x[w][m]
            hits += (logits[n:][m].argmax(-1) == target).sum().item()
            uni_hits += (target == top_token).sum().item()
            total += int(m.sum())
            # NTP for x_i is read at clean position i-1; slot 0 has no context inside the window
            at = torch.nonzero(m).flatten()
            at = at[at > 0]
            ntp_hits += (logits[at - 1].argmax(-1) == x[w][at]).sum().item()
            ntp_total += len(at)
    return {"matp_accuracy": hits / max(1, total), "unigram_accuracy": uni_hits / max(1, total),
            "ntp_accuracy": ntp_hits / max(1, ntp_total), "n_slots": total,
            "unigram_token": model.token_text(top_token), "block_size": block_size, "n_windows": n_windows}
