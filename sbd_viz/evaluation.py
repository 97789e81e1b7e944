"""Score a decoder on the verifiable suite: accuracy, model calls per token, and speed vs NTP.

Wall-clock speedups are measured in the same run: for every item the SBD decode and the
NTP decode (HF ``generate``, greedy, same weights) run back to back, alternating which
goes first, so drift on a noisy machine hits both alike.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Iterable

from .decoder import decode, decode_ntp
from .model import SBDModel
from .solvers import DEFAULT_GAMMA, DEFAULT_RULE
from .tasks import LONG_FAMILIES, SuiteItem, score

STOP = ("\n",)  # an assert's answer ends at the end of its line


def _summarise(rows: list[dict], prefix: str = "") -> dict:
    calls = sum(r[prefix + "nfe"] for r in rows)
    tokens = sum(r[prefix + "n_tokens"] for r in rows)
    return {"accuracy": sum(r[prefix + "correct"] for r in rows) / len(rows) if rows else float("nan"),
            "calls": calls, "tokens": tokens,
            "calls_per_token": calls / tokens if tokens else float("nan"),
            "tokens_per_call": tokens / calls if calls else float("nan"),
            "wall_time": sum(r[prefix + "wall_time"] for r in rows)}


def evaluate(model: SBDModel, suite: Iterable[SuiteItem], solver: str = DEFAULT_RULE, gamma: float = DEFAULT_GAMMA,
             block_size: int = 16, gap_free: bool = False, decoder: str = "sbd", max_new_tokens: int = 64,
             measure_speedup: bool = True, progress: bool = False, keep_traces: bool = False,
             stop: tuple[str, ...] = STOP) -> dict:
    """Decode every suite item and score it.

    ``stop``: stop strings (default: the end of the line, where an assert's answer ends).
    Returns a dict: ``accuracy``, ``by_family`` (accuracy per family), ``calls_per_token``,
    ``tokens_per_call``, ``calls``, ``tokens``, ``long`` / ``short`` (the same measures on the
    long- and short-answer families), ``gap_fill_rate`` (kept gap fills, ``Trace.kept_gap_fills``,
    per output token), ``rows`` (one dict per item, ``gap_fills`` its kept gap fills) and, with
    ``measure_speedup``, ``ntp`` (NTP's measures on the same items), ``speedup_calls`` (NTP
    calls / SBD calls) and ``speedup_wall`` (NTP seconds / SBD seconds).
    """
    if decoder not in ("sbd", "ntp"):
        raise ValueError(f"decoder: must be 'sbd' or 'ntp', got {decoder!r}")
    items = list(suite)
    if not items:
        raise ValueError("suite: no items to evaluate")
    for i, item in enumerate(items):  # every item checked against the trained context before any decode
        try:
            model.check_fits(len(model.encode(item.prompt)), max_new_tokens)
        except ValueError as exc:
            raise ValueError(f"{exc} (suite item {i}, family {item.family!r})") from None
    paired = measure_speedup and decoder == "sbd"

    def run_sbd(item):
        return decode(model, item.prompt, solver=solver, gamma=gamma, block_size=block_size, gap_free=gap_free,
                      max_new_tokens=max_new_tokens, stop=stop)

    def run_ntp(item):
        return decode_ntp(model, item.prompt, max_new_tokens=max_new_tokens, stop=stop)

    main_run = run_sbd if decoder == "sbd" else run_ntp
    rows = []
    iterator = items
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(items, desc=f"{decoder} {solver} gamma={gamma:g}" if decoder == "sbd" else "ntp")
    for i, item in enumerate(iterator):
        order = [("", main_run), ("ntp_", run_ntp)] if paired else [("", main_run)]
        if i % 2:
            order.reverse()
        row = {"prompt": item.prompt, "answer": item.answer, "family": item.family}
        for prefix, run in order:
            t0 = time.perf_counter()
            trace = run(item)
            row[prefix + "wall_time"] = time.perf_counter() - t0
            row[prefix + "output"] = trace.text
            row[prefix + "correct"] = score(item, trace.text)
            row[prefix + "nfe"] = trace.nfe
            row[prefix + "n_tokens"] = trace.n_tokens
            row[prefix + "gap_fills"] = len(trace.kept_gap_fills())
            if keep_traces:
                row[prefix + "trace"] = trace
        rows.append(row)

    result = _summarise(rows)
    families = defaultdict(list)
    for r in rows:
        families[r["family"]].append(r)
    result["by_family"] = {f: _summarise(rs)["accuracy"] for f, rs in families.items()}
    result["by_family_calls_per_token"] = {f: _summarise(rs)["calls_per_token"] for f, rs in families.items()}
    result["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES])
    result["short"] = _summarise([r for r in rows if r["family"] not in LONG_FAMILIES])
    result["gap_fill_rate"] = (sum(r["gap_fills"] for r in rows) / result["tokens"] if result["tokens"]
                               else float("nan"))
    if paired:
        ntp = _summarise(rows, "ntp_")
        ntp["by_family"] = {f: _summarise(rs, "ntp_")["accuracy"] for f, rs in families.items()}
        ntp["long"] = _summarise([r for r in rows if r["family"] in LONG_FAMILIES], "ntp_")
        long = result["long"]
        long["speedup_calls"] = ntp["long"]["calls"] / max(1, long["calls"])
        long["speedup_wall"] = ntp["long"]["wall_time"] / max(1e-9, long["wall_time"])
        result["ntp"] = ntp
        result["speedup_calls"] = ntp["calls"] / result["calls"]
        result["speedup_wall"] = ntp["wall_time"] / result["wall_time"]
    result["rows"] = rows
    result["settings"] = {"decoder": decoder, "solver": solver if decoder == "sbd" else "ntp", "gamma": gamma,
                          "block_size": block_size, "gap_free": gap_free, "max_new_tokens": max_new_tokens,
                          "n_items": len(items)}
    return result


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
    import random
    from collections import Counter

    import torch

    from . import tasks
    from .data import TrainingStream
    from .train import DEFAULT_WEIGHTS, sbd_inputs

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
