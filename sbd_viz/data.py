"""Training data and tokenizer for the shipped model: all built offline, from a seed.

Measured on this project's 2-core CPU (shared/reference/proto1_bpe_40min.md and
proto2_charlevel.md): a 4096-token BPE over stdlib code + asserts learned almost
nothing in 40 minutes, while a character-level vocabulary over generated asserts reached
78.5% exact match in the same time. Characters make copy-type tasks learnable and keep the
LM head tiny, so a 16-slot block call costs little more than a one-token call.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch

from . import tasks

EOS = "<|endoftext|>"
MASK = "<|mask|>"
UNK = "<|unk|>"
# Line mix by family. Prototype 2 (equal weights, 42 min) had add at 5% and sorted at 17.5%,
# range and max at 80-85%, and the copy-type families at ~100% by minute 20: the hard
# families are drawn more often and the saturated ones less.
# v3 adds the context families (new to the model, so drawn often) and keeps v2's mix otherwise.
MIXES = {
    "v2": {"add": 4.0, "sorted": 4.0, "range": 2.0, "max": 1.5, "repeat": 0.75, "upper": 0.75,
           "reverse": 0.75, "len": 0.75, "ctx_add": 0.0, "ctx_upper": 0.0, "ctx_sorted": 0.0, "ctx_range": 0.0},
    "v3": {"add": 4.0, "sorted": 4.0, "range": 2.0, "max": 1.5, "repeat": 0.75, "upper": 0.75,
           "reverse": 0.75, "len": 0.75, "ctx_add": 3.0, "ctx_upper": 1.5, "ctx_sorted": 3.0, "ctx_range": 2.0},
    # The v3 fine-tune's second leg: after 240 steps of "v3" the old families held at 80-100% on the
    # probe while the context families stood at 0-30%, so they are drawn twice as often from there on.
    "v3-ctx": {"add": 4.0, "sorted": 4.0, "range": 2.0, "max": 1.5, "repeat": 0.75, "upper": 0.75,
               "reverse": 0.75, "len": 0.75, "ctx_add": 6.0, "ctx_upper": 3.0, "ctx_sorted": 6.0, "ctx_range": 5.0},
    # v3.1, a fine-tune of v3: v3's context families were half learned (ctx_upper right 17/20 when the
    # name is on the nearest line, 6/20 when it is on the line before; ctx_add off by a few units).
    # The lookups are drawn about two lines in three; ctx_sorted (0.93) and the old families less.
    "v3-lookup": {"add": 3.0, "sorted": 3.0, "range": 1.5, "max": 1.0, "repeat": 0.5, "upper": 0.5,
                  "reverse": 0.5, "len": 0.5, "ctx_add": 8.0, "ctx_upper": 6.0, "ctx_sorted": 3.0, "ctx_range": 6.0},
    # A trial beside v3.2's last leg: the context families' parts also taught alone (training-only
    # families, see tasks.TRAINING_FAMILIES): the lookup ("ctx_get") and range's unwritten sum ("range_sum").
    # With --distractors 3 it lost to "v3-lookup" on every row in 70 minutes (model card, section "v3.2").
    "v3-parts": {"add": 3.0, "sorted": 3.0, "range": 1.5, "max": 1.0, "repeat": 0.5, "upper": 0.5,
                 "reverse": 0.5, "len": 0.5, "ctx_add": 8.0, "ctx_upper": 6.0, "ctx_sorted": 3.0, "ctx_range": 6.0,
                 "ctx_get": 6.0, "range_sum": 4.0},
}
# Leg O, a fine-tune of v3.6: its weakest family in documents is ctx_add (NTP 0.875 of 40 at 256-512
# characters, SBD 0.875 in every bucket), so "v3-lookup" with ctx_add drawn twice as often (37% of the
# items instead of 23%: "double" and "join", unnamed, weigh 1.0).
MIXES["v3-add"] = {**MIXES["v3-lookup"], "ctx_add": 16.0}
# A diagnostic, not a shipped recipe (bench/ctx_add_alone.sh): ctx_add and nothing else, to tell whether the
# 6-layer model can learn that family past v3.6's 0.92 at all (capacity) or only not inside the mix.
# Every family is named: an unnamed one would be drawn at weight 1.0.
MIXES["ctx-add-alone"] = {**{family: 0.0 for family in tasks.FAMILIES}, "ctx_add": 1.0}
# Leg P (bench/ctx_heavy.sh), a fine-tune of v3.6 at a higher learning rate: trained on ctx_add alone the
# 6-layer model reached 0.98 (section "ctx_add alone" of the model card) while forgetting the rest, so here
# ctx_add is 46% of the items, the other three context families 30%, and the ten others keep 2-4% each
# (24% in all) so they are not forgotten. Every family is named.
MIXES["ctx-heavy"] = {"add": 1.0, "sorted": 1.0, "range": 0.75, "max": 0.5, "repeat": 0.5, "upper": 0.5,
                      "reverse": 0.5, "len": 0.5, "double": 0.5, "join": 0.5,
                      "ctx_add": 12.0, "ctx_upper": 3.0, "ctx_sorted": 2.0, "ctx_range": 3.0}
# A fine-tune of v3.8 toward its last context misses (model card, v3.8's second draw): ctx_upper copies
# that jump to the other word at a shared letter, ctx_add sums off by ten. Part of each family's weight
# goes to its training-only hard case (tasks.TRAINING_FAMILIES): the other word holds a piece of the
# asked one ("ctx_upper_overlap"), the units carry ("ctx_add_carry"). Measured (leg U, 75 minutes from v3.8, model
# card section "v3.8"): the context families moved by one to four items of 480 a place; not shipped.
MIXES["v3-hard"] = {**MIXES["v3-lookup"], "ctx_add": 5.0, "ctx_add_carry": 4.0,
                    "ctx_upper": 4.0, "ctx_upper_overlap": 3.0}
# Leg AA, a fine-tune of v3.8 toward SBD's losses: in each of the 26 candidates carded since v3.8 (model card,
# section "Where SBD's losses fall, by family"), 7-15 of the 10-27 document items SBD gamma 0.1 loses to NTP are long
# answers of range, repeat and sorted, whose far slots a block's first call writes from the prompt alone;
# "v3-lookup" draws them 4.2%, 1.4% and 8.5% of the lines. Here 9.8%, 4.9% and 11%: the context families go from
# 65% of the lines to 56%. Measured: SBD's losses fell (21 to 10-13) because NTP lost context items; not shipped.
MIXES["v3-long"] = {**MIXES["v3-lookup"], "range": 4.0, "repeat": 2.0, "sorted": 4.5}
# Leg AH, a fine-tune of leg AF's average toward where its context misses fall (`bench/context_errors.py
# --standalone` on 1,000 items of ctx_add and ctx_range): every ctx_range miss has a start of 10 or less, the size
# of its length, and ctx_add misses most where an operand has one digit. Those items are about a tenth of each
# family, so "v3-hard" plus the training-only families that hold only them (tasks.TRAINING_FAMILIES).
MIXES["v3-small"] = {**MIXES["v3-hard"], "ctx_range_small": 3.0, "ctx_add_small": 3.0}
# Leg AI: 700 steps of "v3-small" left the small starts where they were (62 of 92 right against 60, model card
# section "Where the context misses gather"), so from leg AH's raw weights and moments they are drawn more: three
# ranges in five start at 10 or less, and the two small families are a quarter of the items.
MIXES["v3-small-heavy"] = {**MIXES["v3-hard"], "ctx_range_small": 8.0, "ctx_add_small": 4.0}
# Leg AJ, from leg AI's average: AI took the small starts to 75 of 92 while ctx_upper, its share cut from 19% of
# the items to 14%, and ctx_add slipped (model card section "Where the context misses gather"). Here half the
# ranges start small and ctx_upper and ctx_add keep about v3-hard's shares (18% and 24%).
MIXES["v3-small-mid"] = {**MIXES["v3-hard"], "ctx_range_small": 5.0, "ctx_add_small": 2.0, "ctx_upper": 5.0}
# Leg AK: "v3-small-mid" with ctx_add's carries at the suite's share. "ctx_add_carry" (since v3-hard) makes 65% of
# the sums carry where the suite's 44% do, and the misses followed (bench/context_errors.py --standalone, 1,000
# ctx_add items, draw 999): sums ten too high where nothing carries, 8 for v3.8 (trained at 44%) and 19 for leg
# AJ's average, while the carrying sums gained 2 of 443 (425 -> 427). Here ctx_add takes the carry family's
# weight: the same share of sums, 44% of them carrying.
MIXES["v3-even"] = {**MIXES["v3-small-mid"], "ctx_add": 9.0, "ctx_add_carry": 0.0}
# Leg AN, toward SBD's losses at block 8: on leg AM's average (three draws of the card's documents,
# bench/block_sizes.py) SBD gamma 0.1 loses 32 items net against NTP at block 8, 20 of them in the two
# families that copy out of an earlier line: ctx_upper 11 and ctx_sorted 9 (the five read: a word cut
# at the other word's length or finished with its letters, one list element off). Here those two draw
# more: ctx_sorted twice v3-even's weight, the overlapping words 5 of ctx_upper's 10; the small starts
# give back some (ctx_range's kinds 19% of the items instead of 24%), and ctx_add keeps 19% (v3-even 20%).
MIXES["v3-copy"] = {**MIXES["v3-even"], "ctx_sorted": 6.0, "ctx_upper_overlap": 5.0, "ctx_range_small": 3.0}
DEFAULT_WEIGHTS = MIXES["v3"]
# Special tokens first, then newline, tab and printable ASCII: 100 ids in all.
CHARS = ["\n", "\t"] + [chr(c) for c in range(32, 127)]


def build_char_tokenizer():
    """A character-level ``PreTrainedTokenizerFast`` built with ``tokenizers``.

    Every character is one token; the tokenizer prepends ``<|endoftext|>`` as BOS, so a
    prompt looks like the start of a training document. ``<|mask|>`` is its mask token.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([EOS, MASK, UNK] + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Isolate every character (newlines included) as its own piece.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{EOS} $A", pair=f"{EOS} $A {EOS} $B", special_tokens=[(EOS, vocab[EOS])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=UNK, mask_token=MASK,
        pad_token=EOS, model_max_length=4096, clean_up_tokenization_spaces=False)


def code_documents(folder: str | os.PathLike | None = None, min_chars: int = 200) -> list[str]:
    """ASCII text of the ``.py`` files under ``folder`` (default: this interpreter's stdlib), tests skipped."""
    root = Path(folder) if folder else Path(os.__file__).parent
    if not root.is_dir():
        raise ValueError(f"folder: {root} is not a directory")
    docs = []
    for path in sorted(root.rglob("*.py")):
        parts = set(path.relative_to(root).parts)
        if parts & {"test", "tests", "idle_test", "site-packages"}:
            continue
        text = path.read_text(encoding="utf-8", errors="ignore")
        text = "".join(ch for ch in text if ch in CHARS)  # the char vocabulary is ASCII
        if len(text) >= min_chars:
            docs.append(text)
    return docs


class TrainingStream:
    """Deterministic, endless batches of ``(batch, seq_len + 1)`` token ids.

    Row ``r`` of step ``s`` depends only on ``(seed, s, r)``, so a resumed run sees exactly
    the batches it would have seen, and processes of a multi-process run (different
    ``rank``) see different data. Each row is a window into ``EOS doc EOS doc ...``
    starting at a random offset inside the first document.
    """

    def __init__(self, tokenizer, seq_len: int = 128, seed: int = 0, rank: int = 0,
                 weights: dict[str, float] | None = None, code_docs: list[str] | None = None,
                 code_frac: float = 0.0, doc_lines: tuple[int, int] = (3, 8), distractors: int = 0,
                 follow_ups: int = 0):
        if not 0.0 <= code_frac <= 1.0:
            raise ValueError(f"code_frac: must be in [0, 1], got {code_frac}")
        if code_frac > 0 and not code_docs:
            raise ValueError("code_docs: needed when code_frac > 0")
        self.seq_len, self.seed, self.rank = seq_len, seed, rank
        if not 1 <= doc_lines[0] <= doc_lines[1]:
            raise ValueError(f"doc_lines: need 1 <= min <= max, got {doc_lines}")
        self.weights, self.code_docs, self.code_frac = weights, code_docs or [], code_frac
        # items per document: long documents let one document fill a long window, so late
        # positions see real context instead of a run of short unrelated documents
        self.doc_lines = tuple(doc_lines)
        self.distractors, self.follow_ups = distractors, follow_ups  # see tasks.training_document
        vocab = tokenizer.get_vocab()
        self.eos_id = vocab[EOS]
        self._ids = {ch: vocab[ch] for ch in CHARS}

    def _document(self, rng: random.Random) -> list[int]:
        if self.code_frac and rng.random() < self.code_frac:
            text = rng.choice(self.code_docs)
            start = rng.randrange(max(1, len(text) - 4 * self.seq_len))
            text = text[start:start + 4 * self.seq_len]
        else:
            text = tasks.training_document(rng, self.weights, self.doc_lines, self.distractors, self.follow_ups)
        return [self.eos_id] + [self._ids[ch] for ch in text]

    def row(self, step: int, r: int) -> list[int]:
        rng = random.Random(f"{self.seed}-{self.rank}-{step}-{r}")
        first = self._document(rng)
        ids = list(first)
        while len(ids) < len(first) + self.seq_len + 1:
            ids += self._document(rng)
        start = rng.randrange(len(first))
        return ids[start:start + self.seq_len + 1]

    def batch(self, step: int, batch_size: int) -> torch.Tensor:
        return torch.tensor([self.row(step, r) for r in range(batch_size)], dtype=torch.long)

    def answer_slots(self, batch: torch.Tensor) -> torch.Tensor:
        """(B, L) ids -> (B, L) bool: True at an assert's answer, the characters after ``" == "`` and the newline.

        What ``TrainConfig.answers_only`` keeps the loss on (an SFT-style response mask): the prompt
        side holds the random literals nobody can predict, the answers hold what the suite scores.
        A window that starts inside an answer leaves that answer's head unmarked (its ``" == "`` is cut off).
        """
        marker = [self._ids[ch] for ch in " == "]
        newline = self._ids["\n"]
        ends = (newline, self.eos_id)
        out = torch.zeros(batch.shape, dtype=torch.bool)
        for r, row in enumerate(batch.tolist()):
            inside = False
            for i, tok in enumerate(row):
                if inside:  # the answer runs to its newline, which is scored too: it is where the answer stops
                    out[r, i] = tok != self.eos_id
                    inside = tok not in ends
                elif tok not in ends and row[max(0, i - len(marker)):i] == marker:
                    out[r, i] = inside = True
        return out
