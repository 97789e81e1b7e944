"""The verifiable prompt suite ("pyasserts") and its scorer.

Every item is a Python assert cut at ``== ``: the model must produce the right-hand
side, and Python computed the expected value when the item was generated (model output
is compared as text, never executed). Items of the context families (``ctx_*``) start
with assignment lines that the assert refers to (``xs = [4, 1, 7]`` then
``assert sorted(xs) == ``), so the answer needs the earlier lines, not only the last one.

Train/test disjointness is by construction: every candidate line is hashed, and a fixed
1/16 of the hash space is reserved for the test split. Training data generation skips
those lines, the test split is drawn only from them.
"""

from __future__ import annotations

import ast
import hashlib
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

# Words for the string families: common English/programming words plus random letters
# (mixed 50/50 by the generators) so copy-type tasks cannot be memorised.
WORDS = tuple(
    """able about above access actual add after again agent alarm album alert alias align alive alpha amber angle
    apple april arena array arrow asset atlas audio audit aunt auto avoid award badge baker banana band bank base
    basic batch beach beam bear beast begin being bench berry best beta better bind bird black blade blank block blue
    board boat body bold bonus book boost border bound bowl brain brand bread break brick bridge brief bright broad
    brown buffer build bunch burst bus butter cable cache cake call camel camera canal candy canvas carbon card cargo
    carpet case cash castle cat cause cell chain chair chalk change chart check cheese chess chief child chip choice
    circle city claim class clean clear click client climb clock close cloud coach coast code coffee coin cold color
    column comet common config copy coral corner cotton count couple course cover craft crane cream credit crisp cross
    crowd crown cursor curve cycle daily dance data date dealer debug decode delta depth design desk detail device
    diary digit dinner direct disk doctor dollar domain door double draft dragon drama dream dress drift drink driver
    eagle early earth easy echo edge editor effect eight elbow element email empty energy engine enter entry equal
    error event exact exit extra fabric face factor fair family fancy farm fast feature field file filter final
    finger first fish flag flame flash float floor flower fluid focus folder font force forest format frame fresh
    friend front fruit future galaxy game garden gate gather gentle ghost giant glass global glove goal gold grace
    grain graph grass green grid ground group guard guess guide habit hammer hand happy harbor hash header heart
    heavy height hello helper hero hidden hint history hobby hold honey hook horse hotel house human hunter ice idea
    image index input inside iron island item jacket jelly jewel job join joke judge juice jump kernel key kind king
    kitchen kite label ladder lake lamp large laser later layer leader leaf lemon length letter level light limit
    line link lion liquid list little local lock logic long loop lucky lunch machine magic main major mango map
    marble market master match matrix meadow medal member memory menu merge metal method middle mirror mode model
    module moment money monkey month moon motor mountain mouse movie music name native nature navy needle nest
    network night noble node noise north note novel number object ocean offer office olive onion open option orange
    orbit order origin output owner oxygen packet paddle page paint panel paper parent parse party paste path
    pattern peace peach pencil people pepper piano picture pilot pixel place planet plant plate player plug pocket
    point policy polite pool port power press price print prize proof proxy public pulse puzzle query queue quick
    quiet rabbit radio rain range rapid raven reader record region remote render reply report result ribbon river
    road robot rocket roof room root round router royal rubber ruler runner safe salad sample sand scale scene
    school score screen script search season second secret select sender server session shadow shape share shell
    shift shore signal silver simple single sister sketch skill slice slide small smart smile snake socket solid
    sort sound source space spark speed spider spoon sport spring square stable stack stage star state status steam
    stone store storm story stream street string strong studio style sugar summer sunset super switch symbol syntax
    table tablet target task teacher team tempo tender test text theme thread ticket tiger timber timer title token
    tomato tool topic tower trace track trade train tree trend tribe truck trust tunnel turtle type union unit update
    upper usage user valid value valve vector velvet video view village violet virtual vision visit voice volume
    wagon wallet water wave weather widget window winter wire wizard wolf wonder wood word worker world yellow yield
    zebra zero zone""".split()
)

TEST_BUCKETS = 16  # 1 / TEST_BUCKETS of all lines are reserved for the test split


@dataclass(frozen=True)
class SuiteItem:
    """One verifiable prompt: the model continues ``prompt`` and should produce ``answer``."""

    prompt: str  # e.g. 'assert 48 + 37 == '
    answer: str  # e.g. '85' (without the trailing newline)
    family: str

    @property
    def line(self) -> str:
        return self.prompt + self.answer


def _word(rng: random.Random, lo: int = 3, hi: int = 8) -> str:
    if rng.random() < 0.5:
        return rng.choice(WORDS)
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))


def _ints(rng: random.Random, lo_n: int, hi_n: int, hi: int = 99) -> list[int]:
    return [rng.randint(0, hi) for _ in range(rng.randint(lo_n, hi_n))]


def _add(rng):
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    return f"{a} + {b}", a + b


def _sorted(rng):
    xs = _ints(rng, 3, 6)
    return f"sorted({xs})", sorted(xs)


def _reverse(rng):
    w = _word(rng)
    return f'"{w}"[::-1]', w[::-1]


def _upper(rng):
    w = _word(rng)
    return f'"{w}".upper()', w.upper()


def _len(rng):
    w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 12)))
    return f'len("{w}")', len(w)


def _range(rng):
    a = rng.randint(0, 99)
    b = a + rng.randint(2, 10)
    return f"list(range({a}, {b}))", list(range(a, b))


def _max(rng):
    xs = _ints(rng, 3, 6)
    return f"max({xs})", max(xs)


def _double(rng):
    xs = _ints(rng, 2, 5, hi=49)
    return f"[x * 2 for x in {xs}]", [x * 2 for x in xs]


def _repeat(rng):
    w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 4)))
    n = rng.randint(2, 4)
    return f'"{w}" * {n}', w * n


def _join(rng):
    sep = rng.choice(["-", ", ", "", "_", " ", ".", "/"])
    parts = [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(2, 4))
    ]
    return f'"{sep}".join({parts!r})'.replace("'", '"'), sep.join(parts)


NAMES = (
    "a",
    "b",
    "n",
    "x",
    "y",
    "z",
    "k",
    "xs",
    "ys",
    "vals",
    "nums",
    "data",
    "items",
    "s",
    "t",
    "w",
    "word",
    "name",
    "key",
    "total",
    "count",
    "start",
    "first",
    "last",
    "value",
    "low",
    "high",
)


def _names(rng: random.Random, n: int) -> list[str]:
    return rng.sample(NAMES, n)


# Context families: a generator returns (expr, value, setup), where setup is the assignment
# lines the expression reads. A distractor assignment sits between or before them, so the
# model must find the right name, not copy the nearest line.
def _shuffled_setup(rng: random.Random, lines: list[str]) -> str:
    # Shuffled so that neither line's place gives the answer away: the model must look the
    # name up. One shuffle after all values are drawn keeps the suite byte for byte the same.
    rng.shuffle(lines)
    return "".join(line + "\n" for line in lines)


def _ctx_add(rng):
    # One name looked up among two assignments, plus a literal: "a value set two lines up".
    # The two-lookup sum (a + b out of three assignments) stayed at 0% after 1,145 steps of
    # 512-character fine-tuning (it answered 105 to nearly every prompt): composing two
    # lookups with 2-digit addition is past what the 5M model learns in a CPU session.
    a, b = _names(rng, 2)
    va, vb, lit = rng.randint(0, 99), rng.randint(0, 99), rng.randint(0, 99)
    lines = [f"{a} = {va}", f"{b} = {vb}"]
    return f"{a} + {lit}", va + lit, _shuffled_setup(rng, lines)


def _ctx_upper(rng):
    a, b = _names(rng, 2)
    wa, wb = _word(rng), _word(rng)
    lines = [f'{a} = "{wa}"', f'{b} = "{wb}"']
    return f"{a}.upper()", wa.upper(), _shuffled_setup(rng, lines)


def _ctx_sorted(rng):
    a, b = _names(rng, 2)
    xs, other = _ints(rng, 3, 6), rng.randint(0, 99)
    lines = [f"{a} = {xs}", f"{b} = {other}"]
    return f"sorted({a})", sorted(xs), _shuffled_setup(rng, lines)


def _ctx_range(rng, largest_start: int = 99):
    # Both lines shuffled, as in the other families: with the start always first, a model can learn
    # "the first line is the start" and never look the names up.
    a, b = _names(rng, 2)
    va, vb = rng.randint(0, largest_start), rng.randint(2, 10)
    lines = [f"{a} = {va}", f"{b} = {vb}"]
    return f"list(range({a}, {a} + {b}))", list(range(va, va + vb)), _shuffled_setup(rng, lines)


# (the assert's expression, its value) and, for a context family, the setup lines before the assert
FamilyGenerator = Callable[[random.Random], tuple[str, object] | tuple[str, object, str]]


def _table(*generators: FamilyGenerator, long: tuple[FamilyGenerator, ...]) -> dict[str, tuple[FamilyGenerator, str]]:
    """family -> (generator, answer length class), in the order given: a family is named by its generator (``_add``
    is "add"), and its answers are "long" if the generator is in ``long`` (they span most of a 16-slot block), else
    "short"."""
    return {g.__name__.removeprefix("_"): (g, "long" if g in long else "short") for g in generators}


FAMILIES = _table(
    _add,
    _sorted,
    _reverse,
    _upper,
    _len,
    _range,
    _max,
    _double,
    _repeat,
    _join,
    _ctx_add,
    _ctx_upper,
    _ctx_sorted,
    _ctx_range,
    long=(_sorted, _range, _double, _repeat, _join, _ctx_sorted, _ctx_range),
)


# Training-only families, never in the suite, for a mix that names them (``training.data.training_document``): the
# context families' parts taught one at a time, and their hard cases drawn on purpose.
# "ctx_get" is the lookup alone (``assert xs == [4, 1, 7]``): a lookup that lands on the other name,
# or drifts to it mid-copy, taught without arithmetic or sorting on top.
def any_value(rng: random.Random) -> object:
    """A random value an assignment line may hold: a number, a word or a short list."""
    kind = rng.randrange(3)
    return rng.randint(0, 99) if kind == 0 else _word(rng) if kind == 1 else _ints(rng, 3, 6)


def _ctx_get(rng):
    a, b = _names(rng, 2)
    va, vb = any_value(rng), any_value(rng)
    lines = [f"{a} = {render(va)}", f"{b} = {render(vb)}"]
    return a, va, _shuffled_setup(rng, lines)


def _range_sum(rng):
    # ctx_range's end is a sum the answer never writes out (``list(range(37, 37 + 6))``): the sum
    # taught without the lookups. Learned alone, it does not carry over to ctx_range behind a lookup
    # (docs/model_history.md, the parts curriculum).
    a, b = rng.randint(0, 99), rng.randint(2, 10)
    return f"list(range({a}, {a} + {b}))", list(range(a, a + b))


def _ctx_upper_overlap(rng):
    # ctx_upper with the other word holding a piece of the one asked for. A copy can jump to the other
    # word after a letter the two share ("ervw" beside "network" -> "ERVWORK"): here such a jump is
    # always on offer, so only following the name is right.
    a, b = _names(rng, 2)
    wa = _word(rng)
    start = rng.randrange(len(wa))
    piece = wa[start : start + rng.randint(1, 3)]
    while True:
        rest = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 5)))
        cut = rng.randint(0, len(rest))
        wb = rest[:cut] + piece + rest[cut:]
        if wb != wa:
            break
    lines = [f'{a} = "{wa}"', f'{b} = "{wb}"']
    return f"{a}.upper()", wa.upper(), _shuffled_setup(rng, lines)


def units_carry(a: int, b: int) -> bool:
    """Whether ``a + b`` carries out of the units: what ``ctx_add_carry`` draws."""
    return a % 10 + b % 10 >= 10


def _ctx_add_carry(rng):
    # ctx_add whose units carry (about 45% of plain ctx_add items do): every item offers a carry to
    # drop, the sum ten too low.
    a, b = _names(rng, 2)
    while True:
        va, lit = rng.randint(0, 99), rng.randint(0, 99)
        if units_carry(va, lit):
            break
    vb = rng.randint(0, 99)
    lines = [f"{a} = {va}", f"{b} = {vb}"]
    return f"{a} + {lit}", va + lit, _shuffled_setup(rng, lines)


def _ctx_range_small(rng):
    # ctx_range whose start is as small as its length (0..10, the length 2..10). Above 10 the larger
    # number is the start, so a model can tell start from length by size instead of by name; here only
    # the names tell them apart.
    return _ctx_range(rng, largest_start=10)


def _ctx_add_small(rng):
    # ctx_add with an operand under ten, where the two operands' digits do not line up: a model trained
    # on the suite's share misses these about three times as often as the rest (3 + 5 answered 18).
    a, b = _names(rng, 2)
    while True:
        va = rng.randint(0, 9) if rng.random() < 0.5 else rng.randint(0, 99)
        lit = rng.randint(0, 9) if rng.random() < 0.5 else rng.randint(0, 99)
        if min(va, lit) < 10:
            break
    vb = rng.randint(0, 9) if rng.random() < 0.5 else rng.randint(0, 99)  # the other name's value as small
    lines = [f"{a} = {va}", f"{b} = {vb}"]
    return f"{a} + {lit}", va + lit, _shuffled_setup(rng, lines)


TRAINING_FAMILIES = _table(
    _ctx_get,
    _range_sum,
    _ctx_upper_overlap,
    _ctx_add_carry,
    _ctx_range_small,
    _ctx_add_small,
    long=(_range_sum, _ctx_range_small),
)
# Every generator make_item accepts, suite families first (training.data.training_document draws in this order).
GENERATORS = {**FAMILIES, **TRAINING_FAMILIES}
LONG_FAMILIES = tuple(f for f, (_, kind) in FAMILIES.items() if kind == "long")
SHORT_FAMILIES = tuple(f for f, (_, kind) in FAMILIES.items() if kind == "short")
CONTEXT_FAMILIES = tuple(f for f in FAMILIES if f.startswith("ctx_"))


def render(value: object) -> str:
    """A value as the suite spells it: Python's own ``repr``, strings in double quotes as in the prompts."""
    if isinstance(value, str):
        return '"' + value + '"'
    return repr(value)


def assignment(line: str) -> tuple[str, Any]:
    """A context item's setup line read back: ``'xs = [4, 1, 7]'`` -> ``('xs', [4, 1, 7])``."""
    name, value = line.split(" = ", 1)
    return name, ast.literal_eval(value)


def is_test_line(line: str) -> bool:
    """Whether a full assert line belongs to the held-out test split (a fixed hash bucket)."""
    digest = hashlib.blake2b(line.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % TEST_BUCKETS == 0


def make_item(family: str, rng: random.Random) -> SuiteItem:
    """One random item of ``family`` (either split; a training-only family is accepted too)."""
    if family not in GENERATORS:
        raise ValueError(f"family: unknown family {family!r}; choose from {sorted(GENERATORS)}")
    expr, value, *setup = GENERATORS[family][0](rng)
    return SuiteItem(prompt="".join(setup) + f"assert {expr} == ", answer=render(value), family=family)


def sample_item(family: str, rng: random.Random, split: str) -> SuiteItem:
    """A random item of ``family`` that lies in ``split`` ('train' or 'test')."""
    want_test = {"train": False, "test": True}[split]
    while True:
        item = make_item(family, rng)
        if is_test_line(item.line) == want_test:
            return item


SUITE_SEED = 1234  # the suite's own draw, the items the model card reports; another seed draws other items


def load_suite(
    name: str = "pyasserts",
    split: str = "test",
    per_family: int = 40,
    families: tuple[str, ...] | None = None,
    seed: int = SUITE_SEED,
) -> list[SuiteItem]:
    """The verifiable suite: ``per_family`` distinct items of each family, in a fixed order."""
    if name != "pyasserts":
        raise ValueError(f"name: unknown suite {name!r}; the only suite is 'pyasserts'")
    if split not in ("train", "test"):
        raise ValueError(f"split: must be 'train' or 'test', got {split!r}")
    if per_family < 1:
        raise ValueError(f"per_family: must be >= 1, got {per_family}")
    items: list[SuiteItem] = []
    for family in families or tuple(FAMILIES):
        rng = random.Random(f"{seed}-{split}-{family}")
        items += distinct_draws(partial(sample_item, family, rng, split), lambda item: item.line, per_family, 200)
    return items


def distinct_draws(draw, key, n: int, tries_per_item: int) -> list:
    """Up to ``n`` results of ``draw()`` with distinct ``key(result)``, in the order drawn, giving up after
    ``n * tries_per_item`` draws (a family with fewer distinct items than asked yields what it has)."""
    found: dict = {}
    for _ in range(n * tries_per_item):
        item = draw()
        found.setdefault(key(item), item)
        if len(found) == n:
            break
    return list(found.values())


def score(item: SuiteItem, output: str) -> bool:
    """Exact match of the generated text's first line against the expected answer."""
    return output.split("\n", 1)[0].rstrip() == item.answer


def item_in_prompt(prompt: str, items: dict[str, SuiteItem]) -> SuiteItem | None:
    """The suite item a prompt ends with, so a prompt can be scored inside a document.

    ``items`` maps suite prompts to items. The whole prompt is tried first, then every suffix
    that starts a line, longest first: the lines before an item (a document's earlier asserts)
    do not change its answer, since an item's own setup lines come last and define every name
    it reads.
    """
    if prompt in items:
        return items[prompt]
    at = prompt.find("\n")
    while at != -1:
        found = items.get(prompt[at + 1 :])
        if found is not None:
            return found
        at = prompt.find("\n", at + 1)
    return None


# Prompt-length buckets (characters) for in-document evaluation. The last one ends where a
# prompt plus its answer still fits a 512-position context (see ``in_document``).
LENGTH_BUCKETS = ((0, 128), (128, 256), (256, 512))


def in_document(
    items: list[SuiteItem], length: tuple[int, int], seed: int = 0, max_chars: int | None = None
) -> list[SuiteItem]:
    """Each item placed after train-split lines, so that its whole prompt is ``length`` characters long.

    ``length`` is a (lo, hi) range: the prompt gets ``lo < len(prompt) <= hi`` characters
    (``hi`` is lowered to ``max_chars`` when given: a model's context minus the answer's room).
    The lines before it are train-split items of every family with their answers, as a document
    would hold them; the test item stays last and is scored as before. An item whose own prompt
    is already longer than the range is kept as it is only if it falls inside it, else skipped.
    """
    lo, hi = length
    if max_chars is not None:
        hi = min(hi, max_chars)
    if not 0 <= lo < hi:
        raise ValueError(f"length: need 0 <= lo < hi (after max_chars), got {(lo, hi)}")
    out = []
    for i, item in enumerate(items):
        rng = random.Random(f"{seed}-doc-{i}-{item.line}")
        # a target length drawn across the range, so prompts spread over the bucket, not just past lo
        target = rng.randint(max(lo + 1, len(item.prompt)), hi) if len(item.prompt) <= hi else hi
        context, misses = "", 0
        for _ in range(2000):
            line = sample_item(rng.choice(list(FAMILIES)), rng, "train").line + "\n"
            if len(context) + len(line) + len(item.prompt) <= target:
                context, misses = context + line, 0
                continue
            misses += 1
            if misses > 20:  # no line fits the rest: done if inside the range, else start again
                if lo < len(context) + len(item.prompt):
                    break
                context, misses = "", 0
        if lo < len(context) + len(item.prompt) <= hi:
            out.append(SuiteItem(prompt=context + item.prompt, answer=item.answer, family=item.family))
    return out


def document_buckets(
    suite: list[SuiteItem], context_length: int, room: int
) -> list[tuple[tuple[int, int], list[SuiteItem]]]:
    """The suite placed inside documents, per ``LENGTH_BUCKETS``: ``[((lo, hi), items), ...]``.

    Prompts end where the prompt, a BOS and ``room`` answer tokens still fit ``context_length``
    (a character model: one token a character), so the last bucket fills the context and a
    bucket the context cannot reach is left out.
    """
    max_chars = context_length - 1 - room
    out = []
    for lo, hi in LENGTH_BUCKETS:
        if lo >= max_chars:
            break
        out.append(((lo, min(hi, max_chars)), in_document(suite, (lo, hi), max_chars=max_chars)))
    return out


def places(suite: list[SuiteItem], context_length: int, room: int) -> list[tuple[str, list[SuiteItem]]]:
    """Where the model card asks the suite: ``[("standalone", suite), ("0-128", items), ...]``, the suite as it is
    and then inside documents per ``document_buckets`` (each bucket named ``"lo-hi"``)."""
    return [("standalone", suite)] + [
        (f"{lo}-{hi}", placed) for (lo, hi), placed in document_buckets(suite, context_length, room)
    ]
