"""The data an SBD adapter learns from: prompts, and the base model's own greedy continuations of them.

``chat_prompts``, ``code_prompts`` and ``proposed_questions`` (the prompts), ``HELDOUT_CHAT`` (kept out of training),
``generate_continuations`` (the base's greedy continuations). Why the base's own text, and each source:
docs/training.md.
"""

from __future__ import annotations

import ast
import functools
import json
import random
import re
import sysconfig
from pathlib import Path

from ..models.causal_lm import user_turn

as_chat = user_turn  # a training prompt is a user's turn of the base's chat template, as the app sends it

TEMPLATES = [
    "What is {t}?",
    "Explain {t} in simple terms.",
    "Give me three facts about {t}.",
    "Why does {t} matter?",
    "Write a short paragraph about {t}.",
    "How would you describe {t} to a child?",
    "What are the main ideas behind {t}?",
    "List the pros and cons of {t}.",
    "Summarize the history of {t}.",
    "What is a common misconception about {t}?",
    "How do people use {t} in everyday life?",
    "Write a haiku about {t}.",
    "Give me a tip for learning about {t}.",
    "What questions should I ask about {t}?",
    "Compare {t} with something similar.",
    "Write two sentences that define {t}.",
    "What would happen without {t}?",
    "Tell me something surprising about {t}.",
    "How can I get started with {t}?",
    "Write a short story that involves {t}.",
]
TOPICS = [
    "photosynthesis",
    "the water cycle",
    "gravity",
    "volcanoes",
    "the moon",
    "electricity",
    "magnets",
    "the human heart",
    "vaccines",
    "climate",
    "recycling",
    "bees",
    "rainbows",
    "earthquakes",
    "the ocean tides",
    "the internet",
    "a database",
    "a compiler",
    "recursion",
    "sorting algorithms",
    "binary numbers",
    "encryption",
    "open source software",
    "version control",
    "unit tests",
    "a hash table",
    "machine learning",
    "neural networks",
    "probability",
    "prime numbers",
    "fractions",
    "the Pythagorean theorem",
    "statistics",
    "budgeting",
    "saving money",
    "inflation",
    "a job interview",
    "public speaking",
    "time management",
    "healthy sleep",
    "drinking water",
    "running",
    "yoga",
    "cooking pasta",
    "baking bread",
    "coffee",
    "tea",
    "gardening",
    "houseplants",
    "dogs",
    "cats",
    "birds",
    "the Roman Empire",
    "ancient Egypt",
    "the printing press",
    "democracy",
    "libraries",
    "museums",
    "poetry",
    "jazz music",
    "the piano",
    "painting",
    "photography",
    "chess",
    "football",
    "the Olympic Games",
    "mountains",
    "deserts",
    "rivers",
    "rain forests",
    "friendship",
    "kindness",
    "learning a language",
    "writing an essay",
    "reading books",
    "maps",
    "trains",
    "bicycles",
    "airplanes",
    "electric cars",
    "solar panels",
    "wind power",
    "batteries",
    "smartphones",
    "email",
]
# Held out: questions on topics absent from TOPICS, in wording absent from TEMPLATES (check_held_out).
HELDOUT_CHAT = [
    "Can you tell me how glaciers form?",
    "Describe the life cycle of a butterfly.",
    "What makes the sky look blue during the day?",
    "How do submarines dive and surface?",
    "Suggest a name for a small bakery and explain it.",
    "What should I pack for a weekend camping trip?",
    "How does a refrigerator keep food cold?",
    "Describe a calm morning by a lake.",
    "What is the difference between weather and a season?",
    "How do I politely decline an invitation?",
    "Why do hedgehogs roll into a ball?",
    "Write a thank-you note to a teacher.",
    "How does a thermometer work?",
    "What are good habits for studying math?",
    "Describe how a bill becomes a law.",
    "How do owls hunt at night?",
    "What is a good way to start a conversation with a stranger?",
    "Why is the Dead Sea so salty?",
    "Give advice to someone moving to a new city.",
    "How does a lighthouse help ships?",
    "Explain how a bicycle gear system changes effort.",
    "What does a linked list do that an array cannot?",
    "How would you plan a birthday party for ten kids?",
    "Why do leaves change colour in autumn?",
    "Describe the taste of a lemon to someone who never had one.",
    "How does a microwave oven heat food?",
    "What are the rules of tic-tac-toe?",
    "How can a small team keep meetings short?",
    "Why do we have leap years?",
    "How do penguins stay warm in winter?",
    "What is a stack in programming, and when is it useful?",
    "Write a limerick about a forgetful robot.",
]


# What the held-out questions are about, as whole words (a plural "s" allowed): a proposed question that names one is
# dropped, so the held-out set stays unseen in subject as well as in wording.
HELDOUT_SUBJECTS = (
    "glacier",
    "butterfly",
    "butterflies",
    "sky",
    "submarine",
    "bakery",
    "bakeries",
    "camping",
    "refrigerator",
    "fridge",
    "lake",
    "weather",
    "season",
    "invitation",
    "hedgehog",
    "thank-you",
    "teacher",
    "thermometer",
    "bill",
    "law",
    "owl",
    "stranger",
    "dead sea",
    "salty",
    "new city",
    "lighthouse",
    "gear",
    "linked list",
    "array",
    "birthday",
    "leaves",
    "autumn",
    "lemon",
    "microwave",
    "tic-tac-toe",
    "meeting",
    "leap year",
    "penguin",
    "stack",
    "limerick",
    "robot",
    "studying",
)
_HELDOUT_WORDS = re.compile(r"\b(" + "|".join(re.escape(w) for w in HELDOUT_SUBJECTS) + r")s?\b", re.IGNORECASE)
# The list the base continues in ``proposed_questions``: each batch shows four of these, drawn with its seed.
PROPOSE_EXAMPLES = [
    "How do volcanoes form?",
    "What is a good way to learn the guitar?",
    "Can you explain what inflation means?",
    "Write a short poem about the sea.",
    "What should I cook for a quick dinner?",
    "How does a vaccine work?",
    "Give me three tips for a job interview.",
    "Why do cats purr?",
    "What is the capital of Australia?",
    "How can I save money on groceries?",
    "Explain recursion with an example.",
    "What was the Renaissance?",
    "Suggest a name for a pet goldfish.",
    "How far away is the moon?",
    "What are some fun things to do in the rain?",
    "How do I write a good cover letter?",
    "What is the difference between a virus and bacteria?",
    "Tell me a joke about computers.",
    "How do plants drink water?",
    "What is a healthy breakfast?",
]
_LIST_ITEM = re.compile(r"^\s*(\d+)[.)]\s+(.*\S)\s*$")


def _cached_rows(out: Path) -> list[dict]:
    """The JSON lines of ``out`` (none if it does not exist). A last line cut short by a killed run is dropped from
    the file too, so the rows appended next start on a line of their own."""
    if not out.is_file():
        return []
    text = out.read_text()
    rows, lines = [], text.splitlines()
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:  # the last line of a run killed while writing
            break
    if len(rows) < len(lines) or (text and not text.endswith("\n")):
        out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def held_out_subject(text: str) -> str | None:
    """The held-out subject (``HELDOUT_SUBJECTS``) that ``text`` names, or None."""
    hit = _HELDOUT_WORDS.search(text)
    return hit.group(1).lower() if hit else None


def parse_questions(continuation: str) -> list[str]:
    """The list items of a continuation of ``N.``: its first line, then each line numbered ``N+1.``, ``N+2.``,
    ... up to the first line that is not the next item. Items of 12 to 160 characters are kept."""
    lines = continuation.split("\n")
    items = [lines[0].strip()]
    for line in lines[1:]:
        hit = _LIST_ITEM.match(line)
        if hit is None:
            break
        items.append(hit.group(2).strip())
    return [q for q in items if 12 <= len(q) <= 160]


def proposed_questions(
    model,
    tokenizer,
    n: int,
    out: Path,
    seed: int = 0,
    exclude=(),
    batch_size: int = 8,
    max_new_tokens: int = 120,
    log=print,
) -> list[str]:
    """``n`` distinct questions sampled from the base (temperature 1, top-p 0.95) as the next items of a numbered
    list of questions people asked an assistant, each batch's list head drawn with ``seed`` and the batch's number.
    A question that names a held-out subject (``held_out_subject``), repeats one kept (case aside) or is in
    ``exclude`` is dropped. Cached in ``out`` (JSON lines ``{"batch", "question"}``): a stopped run resumes at the
    batch after the last one written, and draws the same questions as an unstopped run."""
    import torch

    out = Path(out)
    kept, seen, next_batch = [], {q.lower() for q in exclude}, 0
    for row in _cached_rows(out):
        kept.append(row["question"])
        seen.add(row["question"].lower())
        next_batch = max(next_batch, row["batch"] + 1)
    tokenizer.padding_side = "left"
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with out.open("a") as f:
        while len(kept) < n:
            rng = random.Random(seed * 1_000_003 + next_batch)
            heads = []
            for _ in range(batch_size):
                shown = rng.sample(PROPOSE_EXAMPLES, 4)
                heads.append(
                    "A list of questions people asked an assistant:\n"
                    + "".join(f"{i}. {q}\n" for i, q in enumerate(shown, 1))
                    + "5."
                )
            enc = tokenizer(heads, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            torch.manual_seed(seed * 1_000_003 + next_batch)
            with torch.inference_mode():
                gen = model.generate(
                    **enc, max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_p=0.95, pad_token_id=pad
                ).cpu()
            for row in gen:
                text = tokenizer.decode(row[enc.input_ids.shape[1] :], skip_special_tokens=True)
                for question in parse_questions(text):
                    if len(kept) >= n or question.lower() in seen or held_out_subject(question):
                        continue
                    seen.add(question.lower())
                    kept.append(question)
                    f.write(json.dumps({"batch": next_batch, "question": question}) + "\n")
            f.flush()
            next_batch += 1
            log(f"proposed {len(kept)}/{n} questions ({next_batch} batches)")
    return kept[:n]


def chat_prompts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct user messages from ``TEMPLATES`` x ``TOPICS``, drawn with ``seed``."""
    pairs = [(tpl, topic) for tpl in TEMPLATES for topic in TOPICS]
    random.Random(seed).shuffle(pairs)
    if n > len(pairs):
        raise ValueError(f"n: at most {len(pairs)} chat prompts exist, got {n}")
    return [tpl.format(t=topic) for tpl, topic in pairs[:n]]


def _functions(path: Path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and ast.get_docstring(node):
            yield node


def code_prompt(node: ast.FunctionDef) -> str | None:
    """A function's signature and docstring as code to complete (HumanEval's shape), or None if too long."""
    doc = ast.get_docstring(node)
    if not doc or len(doc) > 600 or "\n\n\n" in doc:
        return None
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    body = "\n    ".join(doc.splitlines())
    return f'def {node.name}({args}){returns}:\n    """{body}\n    """\n'


@functools.lru_cache(maxsize=4)  # parsing the standard library takes seconds; a process asks for it again
def _all_code_prompts(root: Path) -> tuple[str, ...]:
    prompts = set()
    for path in sorted(root.rglob("*.py")):
        if any(part in ("test", "tests", "idlelib", "site-packages", "lib2to3") for part in path.parts):
            continue
        for node in _functions(path):
            text = code_prompt(node)
            if text:
                prompts.add(text)
    return tuple(sorted(prompts))


def code_prompts(n: int, seed: int = 0, root: Path | None = None) -> list[str]:
    """``n`` distinct code prompts from the standard library's public, documented functions, drawn with ``seed``."""
    prompts = list(_all_code_prompts(Path(root or sysconfig.get_paths()["stdlib"]).resolve()))
    random.Random(seed).shuffle(prompts)
    return prompts[:n]


def check_held_out(train: list[str], held_out: list[str], topics: bool = True) -> None:
    """Raise ``ValueError`` if a held-out prompt occurs in training, or (``topics``) names a training topic."""
    train_set = set(train)
    for prompt in held_out:
        if prompt in train_set:
            raise ValueError(f"held_out: {prompt!r} is also a training prompt")
    for topic in TOPICS if topics else ():
        word = re.compile(rf"\b{re.escape(topic)}\b", re.IGNORECASE)
        hits = [p for p in held_out if word.search(p)]
        if hits:
            raise ValueError(f"held_out: {hits[0]!r} names the training topic {topic!r}")


def generate_continuations(
    model, tokenizer, prompts: list[str], out: Path, max_new_tokens: int = 64, batch_size: int = 16, log=print
) -> list[dict]:
    """Greedy continuations of ``prompts`` (already templated text), cached in ``out`` (JSON lines of
    ``{"prompt", "prompt_ids", "ids"}``). Prompts already in the file are skipped, so a stopped run resumes."""
    import torch

    out = Path(out)
    done = {row["prompt"]: row for row in _cached_rows(out)}
    todo = [p for p in prompts if p not in done]
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos])
    # longest first: batches of similar length waste less on padding
    todo.sort(key=lambda p: -len(p))
    with out.open("a") as f:
        for i in range(0, len(todo), batch_size):
            chunk = todo[i : i + batch_size]
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.inference_mode():
                gen = model.generate(
                    **enc.to(model.device),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                ).cpu()
            enc = enc.to("cpu")
            width = enc.input_ids.shape[1]
            for j, prompt in enumerate(chunk):
                prompt_ids = enc.input_ids[j][enc.attention_mask[j].bool()].tolist()
                ids = []
                for t in gen[j, width:].tolist():
                    ids.append(t)
                    if t in eos:
                        break
                row = {"prompt": prompt, "prompt_ids": prompt_ids, "ids": ids}
                done[prompt] = row
                f.write(json.dumps(row) + "\n")
            f.flush()
            log(f"generated {min(i + batch_size, len(todo))}/{len(todo)}")
    return [done[p] for p in prompts]
