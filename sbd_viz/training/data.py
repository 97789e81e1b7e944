"""Training data and tokenizer for the shipped model: all built offline, from a seed.

Why characters: on this project's 2-core CPU a 4096-token BPE over stdlib code + asserts
learned almost nothing in 40 minutes, while a character-level vocabulary over generated asserts
reached 78.5% exact match in about the same time (the two prototypes in docs/model_history.md).
Characters make copy-type tasks learnable and keep the LM head tiny, so a 16-slot block call
costs little more than a one-token call.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from pathlib import Path
from typing import Any

import torch

from .. import tasks

EOS = "<|endoftext|>"
MASK = "<|mask|>"
UNK = "<|unk|>"
# Line mixes: how often a training document draws each family (``--mix``). A suite family left out weighs
# 1.0 ("double" and "join" below); a training-only family (tasks.asserts.TRAINING_FAMILIES) weighs 0 unless named.
# The hard families are drawn more often and the ones learned in minutes less: with equal weights, a
# from-scratch run has the copy-type families right long before add and sorted. Each mix here made the
# shipped model or is the default; the model card's training procedure uses them in order.
# The ten families without earlier lines as the shipped model's first run drew them ("double" and "join", left out,
# at 1.0): "v2", "v3" and "v3-ctx" draw them alike and differ in the four context families.
_TEN = {
    "add": 4.0,
    "sorted": 4.0,
    "range": 2.0,
    "max": 1.5,
    "repeat": 0.75,
    "upper": 0.75,
    "reverse": 0.75,
    "len": 0.75,
}
MIXES = {
    # From scratch, the ten families without earlier lines: the shipped model's first run.
    "v2": {**_TEN, "ctx_add": 0.0, "ctx_upper": 0.0, "ctx_sorted": 0.0, "ctx_range": 0.0},
    # The default: all fourteen suite families, the ten as in "v2" and the four context families beside them.
    "v3": {**_TEN, "ctx_add": 3.0, "ctx_upper": 1.5, "ctx_sorted": 3.0, "ctx_range": 2.0},
    # Teaching the context families to a model that knows the other ten: "v3" with the four drawn about
    # twice as often.
    "v3-ctx": {**_TEN, "ctx_add": 6.0, "ctx_upper": 3.0, "ctx_sorted": 6.0, "ctx_range": 5.0},
    # Lookup-heavy, for a model that has started on the context families: they are about two lines in three,
    # so each step holds many lookups by name; the families already learned are drawn less. The recipe of
    # most of the shipped model's fine-tunes.
    "v3-lookup": {
        "add": 3.0,
        "sorted": 3.0,
        "range": 1.5,
        "max": 1.0,
        "repeat": 0.5,
        "upper": 0.5,
        "reverse": 0.5,
        "len": 0.5,
        "ctx_add": 8.0,
        "ctx_upper": 6.0,
        "ctx_sorted": 3.0,
        "ctx_range": 6.0,
    },
}
# ctx_add and nothing else (every family named, so none is drawn at 1.0). The 6-layer model learns ctx_add
# on its own better than inside a mix, and forgets the other families meanwhile: "ctx-heavy" brings them back.
MIXES["ctx-add-alone"] = {**dict.fromkeys(tasks.FAMILIES, 0.0), "ctx_add": 1.0}
# After "ctx-add-alone": ctx_add 46% of the items, the other three context families 30%, the ten others
# 2-4% each (24% in all), enough for the forgotten families to come back while ctx_add stays.
MIXES["ctx-heavy"] = {
    "add": 1.0,
    "sorted": 1.0,
    "range": 0.75,
    "max": 0.5,
    "repeat": 0.5,
    "upper": 0.5,
    "reverse": 0.5,
    "len": 0.5,
    "double": 0.5,
    "join": 0.5,
    "ctx_add": 12.0,
    "ctx_upper": 3.0,
    "ctx_sorted": 2.0,
    "ctx_range": 3.0,
}
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
        single=f"{EOS} $A", pair=f"{EOS} $A {EOS} $B", special_tokens=[(EOS, vocab[EOS])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=UNK,
        mask_token=MASK,
        pad_token=EOS,
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )


_OUTSIDE_VOCAB = re.compile("[^" + "".join(re.escape(ch) for ch in CHARS) + "]")  # one pass over a file, not a
# list lookup per character (the standard library's 12 million characters: 14 s that way, under a second this way)


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
        text = _OUTSIDE_VOCAB.sub("", path.read_text(encoding="utf-8", errors="ignore"))  # the vocabulary is ASCII
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

    def __init__(
        self,
        tokenizer,
        seq_len: int = 128,
        seed: int = 0,
        rank: int = 0,
        weights: dict[str, float] | None = None,
        code_docs: list[str] | None = None,
        code_frac: float = 0.0,
        doc_lines: tuple[int, int] = (3, 8),
        distractors: int = 0,
        follow_ups: int = 0,
    ):
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
        lo, hi = doc_lines  # a list from a config file too
        self.doc_lines = (lo, hi)
        self.distractors, self.follow_ups = distractors, follow_ups  # see training_document
        vocab = tokenizer.get_vocab()
        if all(ch in vocab for ch in CHARS) and EOS in vocab:  # the character-level tokenizer
            self.eos_id, self._encode = vocab[EOS], None
            self._ids = {ch: vocab[ch] for ch in CHARS}
        else:  # a base model's own tokenizer (e.g. byte-level BPE): documents encoded by it, joined by its EOS
            self.eos_id = tokenizer.eos_token_id
            self._encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
            self._ids = {ch: ids[0] for ch in CHARS if len(ids := self._encode(ch)) == 1}

    def _document(self, rng: random.Random) -> list[int]:
        if self.code_frac and rng.random() < self.code_frac:
            text = rng.choice(self.code_docs)
            start = rng.randrange(max(1, len(text) - 4 * self.seq_len))
            text = text[start : start + 4 * self.seq_len]
        else:
            text = training_document(rng, self.weights, self.doc_lines, self.distractors, self.follow_ups)
        return [self.eos_id] + (self._encode(text) if self._encode else [self._ids[ch] for ch in text])

    def row(self, step: int, r: int) -> list[int]:
        rng = random.Random(f"{self.seed}-{self.rank}-{step}-{r}")
        first = self._document(rng)
        ids = list(first)
        while len(ids) < len(first) + self.seq_len + 1:
            ids += self._document(rng)
        start = rng.randrange(len(first))
        return ids[start : start + self.seq_len + 1]

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
                elif tok not in ends and row[max(0, i - len(marker)) : i] == marker:
                    out[r, i] = inside = True
        return out


# -- training documents: the suite's train split as a corpus ------------------------------------
def training_document(
    rng: random.Random,
    weights: dict[str, float] | None = None,
    lines: tuple[int, int] = (3, 8),
    distractors: int = 0,
    follow_ups: int = 0,
) -> str:
    """A few newline-terminated items from the train split (the training corpus unit).

    ``lines`` is the (min, max) number of items; a context item brings its tasks.asserts.assignment lines.
    ``weights`` may also name the training-only families (``tasks.asserts.TRAINING_FAMILIES``, default weight 0); any
    other name is an error, as is a negative weight or a mix with nothing to draw.
    ``distractors``: each context item gets up to this many extra assignments of other names,
    shuffled in among its own, so the nearest line is rarely the one asked for.
    ``follow_ups``: each context item gets up to this many more asserts on the same assignments
    (``_follow_ups``): more lookups per character (the ``v3-lookup`` mix, 4-16 items: 18.5 per 1,000
    characters with ``follow_ups=3``, against 12.1 without).
    """
    if not 1 <= lines[0] <= lines[1]:
        raise ValueError(f"lines: need 1 <= min <= max, got {lines}")
    if distractors < 0:
        raise ValueError(f"distractors: must be >= 0, got {distractors}")
    if follow_ups < 0:
        raise ValueError(f"follow_ups: must be >= 0, got {follow_ups}")
    weights = weights or {}
    unknown = sorted(set(weights) - set(tasks.asserts.GENERATORS))
    if unknown:  # a misspelt family would be ignored and the family it meant drawn at its default weight
        raise ValueError(f"weights: unknown families {unknown}; choose from {sorted(tasks.asserts.GENERATORS)}")
    fams = list(tasks.asserts.GENERATORS)
    w = [weights.get(f, 1.0 if f in tasks.FAMILIES else 0.0) for f in fams]
    if min(w) < 0 or sum(w) <= 0:
        raise ValueError(f"weights: need weights >= 0 with a positive sum, got {weights}")
    out = []
    for _ in range(rng.randint(*lines)):
        item = tasks.asserts.sample_item(rng.choices(fams, weights=w)[0], rng, "train")
        text = item.line
        if distractors and "\n" in text:
            text = _with_distractors(text, rng, rng.randint(0, distractors))
        if follow_ups and "\n" in text:
            text = "\n".join([text, *_follow_ups(text, rng, rng.randint(0, follow_ups))])
        out.append(text + "\n")
    return "".join(out)


def _follow_up(name: str, value: int | str | list, setup: dict[str, Any], rng: random.Random) -> tuple[str, object]:
    # The suite's own context expressions, on whichever assigned name has the right type.
    if isinstance(value, str):
        return f"{name}.upper()", value.upper()
    if isinstance(value, list):
        return f"sorted({name})", sorted(value)
    counts = [other for other, v in setup.items() if other != name and isinstance(v, int) and 2 <= v <= 10]
    if counts and rng.random() < 0.5:  # ctx_range's shape, when another name holds a count as it does
        count = rng.choice(counts)
        return f"list(range({name}, {name} + {count}))", list(range(value, value + setup[count]))
    lit = rng.randint(0, 99)
    return f"{name} + {lit}", value + lit


def _follow_ups(text: str, rng: random.Random, n: int) -> list[str]:
    """Up to ``n`` more assert lines on a context item's assignments, none a held-out item's.

    In the suite one assert follows two assignments; here the same assignments are read again
    (``a + 7``, then ``b + 31``), so lookups and their arithmetic get more of the training signal.
    A follow-up brings at most a two-digit literal the model cannot predict, where a new item brings
    two assignments of random values (as ``distractors`` adds).
    A follow-up that would make a test-split item with any two of the assignments, in either
    order, is skipped, so no held-out item is taught in another layout.
    """
    *assignments, first = text.split("\n")
    setup = dict(tasks.asserts.assignment(line) for line in assignments)
    pairs = list(itertools.permutations(assignments, 2))
    asserts = [first]
    for _ in range(n):
        name = rng.choice(list(setup))
        expr, value = _follow_up(name, setup[name], setup, rng)
        line = f"assert {expr} == {tasks.asserts.render(value)}"
        if line in asserts or any(tasks.asserts.is_test_line("\n".join([*pair, line])) for pair in pairs):
            continue
        asserts.append(line)
    return asserts[1:]


def _with_distractors(line: str, rng: random.Random, n: int) -> str:
    *setup, last = line.split("\n")
    used = {a.split(" = ")[0] for a in setup}
    names = rng.sample([name for name in tasks.asserts.NAMES if name not in used], n)
    setup += [f"{name} = {tasks.asserts.render(tasks.asserts.any_value(rng))}" for name in names]
    while True:
        rng.shuffle(setup)
        # The last two assignments and the assert read as a suite item of their own: keep that
        # one in the train split too, so no shuffle writes out a held-out test item.
        if not tasks.asserts.is_test_line("\n".join(setup[-2:] + [last])):
            return "\n".join(setup + [last])
