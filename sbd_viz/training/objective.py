"""The SBD training objective (arXiv 2509.04185, §3 and appendix A), and a probe of what it taught.

``sbd_inputs`` builds that input once, for the loss (``sbd_loss``, which ``train.py``'s loop
minimises) and for the masked-slot probe (``masked_slot_accuracy``), so both see exactly the
same masking. The objective, and the one option that departs from the paper: docs/training.md.
"""

from __future__ import annotations

import random
from collections import Counter

import torch
import torch.nn.functional as F

from .. import tasks
from ..models.sbd_model import SBDModel
from .data import DEFAULT_WEIGHTS, TrainingStream


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


def mask_copy(
    ids: torch.Tensor, generator: torch.Generator, block_size: int = 16, prefix_frac: float = 0.0
) -> torch.Tensor:
    """(B, n) ids -> (B, n) bool, True where masked: one rate ~ U(0,1) per row, i.i.d. tokens (eq. 13).

    ``prefix_frac`` > 0 (not the paper's): that share of the rows, drawn per row, is masked as a block
    stands after some of the decoder's calls instead: in each block of ``block_size`` slots, the first
    c ~ U{0..block_size} slots are committed and the rest masked. Under i.i.d. masking a slot rarely
    sees every earlier slot of its block committed (at slot 13, one slot-draw in about 200), yet that
    is the state in which a later call commits its slots. With 0 the draws are exactly the paper's.
    """
    rate = torch.rand(ids.shape[0], 1, generator=generator)
    masked = torch.rand(ids.shape, generator=generator) < rate
    if prefix_frac <= 0:
        return masked
    bsz, n = ids.shape
    slot, block = torch.arange(n) % block_size, torch.arange(n) // block_size
    cut = torch.randint(0, block_size + 1, (bsz, n // block_size + 1), generator=generator)  # (B, blocks)
    prefix_rows = torch.rand(bsz, 1, generator=generator) < prefix_frac
    return torch.where(prefix_rows, slot[None] >= cut[:, block], masked)


def sbd_inputs(ids: torch.Tensor, mask_id: int, block_size: int, generator: torch.Generator, prefix_frac: float = 0.0):
    """The paper's input for (B, n) ids: ``[clean ; masked]`` with its attention mask and position ids.

    Returns ``(input_ids (B, 2n), attention_mask (B, 1, 2n, 2n), position_ids (B, 2n), scored (B, n))``;
    ``scored`` marks the masked slots that carry MATP loss (a trailing partial block is outside the
    paper's block set T: its masked slots carry none).
    """
    bsz, n = ids.shape
    masked = mask_copy(ids, generator, block_size, prefix_frac)  # (B, n)
    noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
    in_full_block = torch.arange(n) < (n // block_size) * block_size
    positions = torch.arange(n).repeat(2)[None].expand(bsz, -1)  # (B, 2n): shared position ids
    attn = sbd_attention_mask(n, block_size)[None, None].expand(bsz, 1, -1, -1)  # (B, 1, 2n, 2n)
    return torch.cat([ids, noisy], 1), attn, positions, masked & in_full_block


def sbd_loss(
    model,
    seq: torch.Tensor,
    mask_id: int,
    block_size: int,
    generator: torch.Generator,
    loss_on: torch.Tensor | None = None,
    prefix_frac: float = 0.0,
):
    """Loss on one batch ``seq`` (B, n+1): returns (ntp + matp, ntp, matp), each a token mean.

    ``loss_on`` (B, n+1) bool, optional: only these tokens are scored, as NTP targets and as masked
    slots (``TrainingStream.answer_slots``: the asserts' answers); the rest stay in the input as context.
    The masking and the attention are the same either way. ``prefix_frac``: see ``mask_copy``.
    """
    ids, ntp_labels = seq[:, :-1], seq[:, 1:]  # (B, n) each
    n = ids.shape[1]
    inputs, attn, positions, scored = sbd_inputs(ids, mask_id, block_size, generator, prefix_frac)
    if loss_on is not None:
        ntp_labels = torch.where(loss_on[:, 1:], ntp_labels, torch.full_like(ntp_labels, -100))
        scored = scored & loss_on[:, :-1]
    matp_labels = torch.where(scored, ids, torch.full_like(ids, -100))
    logits = model(
        input_ids=inputs.to(model.device), attention_mask=attn.to(model.device), position_ids=positions.to(model.device)
    ).logits.float()  # (B, 2n, V)
    ntp, matp = _token_mean(logits[:, :n], ntp_labels), _token_mean(logits[:, n:], matp_labels)
    return ntp + matp, ntp, matp


def _token_mean(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the labels that are not -100; zero (with a graph) when there are none."""
    labels = labels.reshape(-1).to(logits.device)
    if (labels != -100).any():
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
    return logits.sum() * 0.0  # e.g. no masked slot in a full block (tiny n): contributes nothing


def masked_slot_accuracy(
    model: SBDModel, n_windows: int = 96, seq_len: int = 128, block_size: int = 16, seed: int = 0
) -> dict:
    """Did the MATP head learn? Its accuracy on held-out text, masked exactly as in training, vs a unigram guess.

    The text is test-split suite lines (never seen in training) cut into ``n_windows`` windows of
    ``seq_len`` tokens; each window is masked at one rate ~ U(0,1) and fed as ``[clean ; masked]``
    with the Fig. 9 mask (blocks of ``block_size``). Returns ``matp_accuracy`` (argmax at the masked
    slots), ``unigram_accuracy`` (always guessing the most frequent token of the training data at the
    same slots), ``ntp_accuracy`` (the causal half's next-token argmax for the same tokens, for
    scale), ``n_slots`` and ``unigram_token``.
    """
    _check_windows(n_windows, seq_len, block_size)
    x, _ = held_out_windows(model, n_windows, seq_len, seed)

    # the unigram baseline: the most frequent token of the training data
    train_rows = TrainingStream(model.tokenizer, seq_len, seed=seed + 1, weights=DEFAULT_WEIGHTS).batch(0, 256)
    top_token = Counter(train_rows[:, 1:].flatten().tolist()).most_common(1)[0][0]

    hits = masked_slot_hits(model, x, block_size, seed)
    uni_hits = int((x[hits.pop("scored")] == top_token).sum())
    total = hits["n_slots"]
    return {
        "matp_accuracy": hits["matp_hits"] / max(1, total),
        "unigram_accuracy": uni_hits / max(1, total),
        "ntp_accuracy": hits["ntp_hits"] / max(1, hits["ntp_slots"]),
        "n_slots": total,
        "unigram_token": model.token_text(top_token),
        "block_size": block_size,
        "n_windows": n_windows,
    }


def masked_slot_hits(model: SBDModel, x: torch.Tensor, block_size: int = 16, seed: int = 0) -> dict:
    """Windows ``x`` (W, n) of any held-out text, masked exactly as in training (one rate per window, the Fig. 9
    mask, shared position ids) and fed as ``[clean ; masked]``, one window a call. Returns ``matp_hits`` (argmax
    right at the masked slots), ``n_slots``, ``ntp_hits`` (the causal half's argmax right for the same tokens;
    slot 0 has no context inside its window, so ``ntp_slots`` may be fewer) and ``scored`` (W, n) bool."""
    n = x.shape[1]
    inputs, attn, pos, scored = sbd_inputs(x, model.mask_token_id, block_size, torch.Generator().manual_seed(seed))
    hits = ntp_hits = ntp_total = total = 0
    with torch.inference_mode():
        for w in range(x.shape[0]):
            logits = (
                model.model(
                    input_ids=inputs[w : w + 1].to(model.device),
                    attention_mask=attn[w : w + 1].to(model.device),
                    position_ids=pos[w : w + 1].to(model.device),
                )
                .logits[0]
                .float()
                .cpu()
            )  # (2n, V)
            m = scored[w]
            hits += (logits[n:][m].argmax(-1) == x[w][m]).sum().item()
            total += int(m.sum())
            # NTP for x_i is read at clean position i-1
            at = torch.nonzero(m).flatten()
            at = at[at > 0]
            ntp_hits += (logits[at - 1].argmax(-1) == x[w][at]).sum().item()
            ntp_total += len(at)
    return {"matp_hits": hits, "n_slots": total, "ntp_hits": ntp_hits, "ntp_slots": ntp_total, "scored": scored}


def _check_windows(n_windows: int, seq_len: int, block_size: int) -> None:
    if n_windows < 1 or seq_len < block_size or block_size < 1:
        raise ValueError(
            f"n_windows/seq_len/block_size: need n_windows >= 1 and seq_len >= block_size >= 1, "
            f"got {n_windows}, {seq_len}, {block_size}"
        )


def held_out_windows(
    model: SBDModel, n_windows: int, seq_len: int, seed: int = 0, lines_per_doc: tuple[int, int] = (3, 8)
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Held-out text for the probes: ``(ids (W, n), answer (W, n) bool)``.

    Documents of ``lines_per_doc`` test-split suite lines (never seen in training), each after an
    end-of-text token, cut into ``n_windows`` windows of ``seq_len`` tokens. ``answer`` marks the
    characters a model is scored on in the suite: each line's answer and the newline that ends it
    (``None`` for a tokenizer that is not one token per character).
    """
    rng = random.Random(seed)
    items = tasks.load_suite(split="test", per_family=40)
    lines = [item.line + "\n" for item in items]
    answer_len = {item.line + "\n": len(item.answer) + 1 for item in items}
    eos = model.tokenizer.eos_token_id
    stream: list[int] = []
    answer: list[bool] = []
    while len(stream) < n_windows * seq_len:
        picked = rng.sample(lines, rng.randint(*lines_per_doc))
        stream += [eos] + model.tokenizer.encode("".join(picked), add_special_tokens=False)
        answer += [False] + [i >= len(line) - answer_len[line] for line in picked for i in range(len(line))]
    shape, size = (n_windows, seq_len), n_windows * seq_len
    # character positions are token positions only for a character-level tokenizer
    marks = torch.tensor(answer[:size]).view(shape) if len(answer) == len(stream) else None
    return torch.tensor(stream[:size]).view(shape), marks


def decoder_state_accuracy(
    model: SBDModel, n_windows: int = 120, seq_len: int = 512, block_size: int = 16, seed: int = 0
) -> dict:
    """The masked side in the states the decoder leaves a block in, slot by slot, on the suite's answers.

    Training masks i.i.d. (eq. 13), so a slot rarely sees every earlier slot of its block committed; a
    block's later calls commit in just that state, and many of the items SBD loses to NTP first go wrong
    there (``sbd_viz.analysis.divergence`` counts them per model: gap 0, a later call; ``bench/DIVERGENCE.md`` for the
    shipped one). For each slot b of each block of held-out documents (``held_out_windows``, 4-16 lines,
    answer characters only, blocks after the first):

    - ``ntp``: the causal half's next-token accuracy for the same character (the same information);
    - ``committed_prefix``: MATP accuracy at slot b with slots 0..b-1 of its block committed (the true
      characters) and b.. masked, a later call's state;
    - ``whole_block``: MATP accuracy at slot b with the whole block masked, a block's first call.

    Also ``ntp_right_prefix_wrong`` and ``prefix_right_ntp_wrong`` (answer characters where the two
    disagree in the committed-prefix state) and ``n_chars`` per slot. One forward of ``block_size`` rows per
    window: row b commits the first b slots of every block.
    """
    _check_windows(n_windows, seq_len, block_size)
    x, answer = held_out_windows(model, n_windows, seq_len, seed, lines_per_doc=(4, 16))
    if answer is None:
        raise ValueError("model: its tokenizer is not one token per character, so the answers cannot be marked")
    n, k = seq_len, block_size
    slot = torch.arange(n) % k
    attn = sbd_attention_mask(n, k)[None, None].to(model.device)
    positions = torch.arange(n).repeat(2)[None].expand(k, -1).to(model.device)
    committed = slot[None] < torch.arange(k)[:, None]  # (k, n): row b commits slots 0..b-1 of every block
    hits = {"ntp": torch.zeros(k), "committed_prefix": torch.zeros(k), "whole_block": torch.zeros(k)}
    chars = torch.zeros(k)
    ntp_only = prefix_only = 0
    in_full_block = torch.arange(n) < (n // k) * k
    with torch.inference_mode():
        for w in range(n_windows):
            ids = x[w]
            noisy = torch.where(committed, ids[None], torch.full_like(ids, model.mask_token_id)[None])  # (k, n)
            inputs = torch.cat([ids[None].expand(k, -1), noisy], 1).to(model.device)
            logits = (
                model.model(input_ids=inputs, attention_mask=attn.expand(k, 1, -1, -1), position_ids=positions)
                .logits.float()
                .cpu()
            )  # (k, 2n, V)
            at = torch.nonzero(answer[w] & in_full_block & (torch.arange(n) >= k)).flatten()
            truth, s = ids[at], slot[at]
            ntp_ok = logits[0, at - 1].argmax(-1) == truth  # the clean half is the same in every row
            prefix_ok = logits[s, n + at].argmax(-1) == truth  # row s: this slot's own committed prefix
            block_ok = logits[0, n + at].argmax(-1) == truth
            for hit, ok in zip(hits.values(), (ntp_ok, prefix_ok, block_ok)):  # in the order hits names them
                hit.index_add_(0, s, ok.float())
            chars.index_add_(0, s, torch.ones(len(at)))
            ntp_only += int((ntp_ok & ~prefix_ok).sum())
            prefix_only += int((prefix_ok & ~ntp_ok).sum())
    per_slot = {name: (h / chars.clamp(min=1)).tolist() for name, h in hits.items()}
    return {
        **per_slot,
        "n_chars": chars.int().tolist(),
        "ntp_right_prefix_wrong": ntp_only,
        "prefix_right_ntp_wrong": prefix_only,
        "block_size": k,
        "n_windows": n_windows,
        "seq_len": n,
    }
