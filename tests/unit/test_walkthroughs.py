"""The walkthroughs keep their prose true to their outputs, link the glossary, and end with exercises.

No notebook is executed here; each check is cheap:

- **counts come from variables**: a Markdown cell or a code comment never states a count of items or families as a
  hand-written number ("ten task families", "# 40 held-out items"). Such counts are printed or shown by a Markdown
  display built from the notebook's variables, so a re-run cannot leave the prose behind.
- **shown numbers**: a number that must stay hand-written in a Markdown cell is marked
  ``<span class="shown">0.35</span>``, and the notebook's outputs must show it. Checked here on the rendered pages
  (``docs/notebooks/*.html``, what readers see), and in ``tests/notebooks/test_notebooks.py`` on every executed notebook.
- **the glossary** has at least 20 terms, its index links land on its headings, and every notebook's first
  Markdown cell links it.
- **exercises**: every notebook ends with an Exercises section and its answers in a collapsed cell.
- **claims**: the fixed prose's claims about a notebook's outputs (``walkthrough_claims``) hold on its rendered page;
  the test paths, the paper's sections and the review a notebook cites are the right ones.
"""

import io
import json
import re
import tokenize
from html.parser import HTMLParser
from pathlib import Path

import pytest

from walkthrough_claims import CLAIMS, contradicted

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GLOSSARY = ROOT / "sbd_viz" / "GLOSSARY.md"  # package data: the app's Glossary tab
PAGES = ROOT / "docs" / "notebooks"

WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen twenty thirty forty fifty sixty hundred dozen").split()
# "40 held-out items", "ten task families", "the same 20 held-out items": a number, at most two words, the noun
COUNT = re.compile(r"\b(\d+|" + "|".join(WORDS) + r")\s+(?:[\w-]+\s+){0,2}?(items|families)\b", re.IGNORECASE)
SHOWN = re.compile(r'<span class="shown">\s*([^<]+?)\s*</span>')


def cells(path: Path) -> list[dict]:
    return [dict(c, source="".join(c["source"])) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def comments(code: str) -> list[str]:
    """The ``#`` comments of a code cell (strings that hold a ``#`` are not comments)."""
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line[line.index("#"):] for line in code.splitlines() if "#" in line]


def hand_written_counts(path: Path) -> list[str]:
    """Counts of items or families written by hand in a notebook's prose or code comments."""
    found = []
    for i, cell in enumerate(cells(path)):
        texts = [cell["source"]] if cell["cell_type"] == "markdown" else comments(cell["source"])
        for text in texts:
            text = SHOWN.sub("", text)  # a marked number is checked against the outputs instead
            found += [f"cell {i}: {m.group(0)!r}" for m in COUNT.finditer(text)]
    return found


def is_shown(number: str, outputs: str) -> bool:
    return re.search(r"(?<![\d.])" + re.escape(number) + r"(?![\d])", outputs) is not None


def missing_shown_numbers(markdown: str, outputs: str) -> list[str]:
    """The marked numbers of ``markdown`` that ``outputs`` (all output text of the same notebook) does not show."""
    return [n for n in SHOWN.findall(markdown) if not is_shown(n, outputs)]


def executed_outputs(nb) -> str:
    """Every text an executed notebook's outputs show: streams, plain text, Markdown and HTML displays."""
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") if isinstance(out.get("text", ""), str) else "".join(out["text"]))
            data = out.get("data", {})
            for mime in ("text/plain", "text/markdown", "text/html"):
                value = data.get(mime, "")
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def assert_executed_notebook_shows_its_numbers(nb) -> None:
    """For tests/notebooks/test_notebooks.py: the marked numbers of an executed notebook's Markdown are in its outputs."""
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    missing = missing_shown_numbers(markdown, executed_outputs(nb))
    assert not missing, f"marked numbers the outputs do not show: {missing}"


class _Page(HTMLParser):
    """A rendered page (nbconvert's lab template) split into its outputs' text and everything else."""

    def __init__(self):
        super().__init__()
        self.depth, self.output_depth, self.outputs, self.in_code = 0, None, [], False

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):  # a figure's data and the table styles are not text a reader sees
            self.in_code = True
        if tag != "div":
            return
        self.depth += 1
        if self.output_depth is None and "jp-OutputArea-output" in (dict(attrs).get("class") or ""):
            self.output_depth = self.depth

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.in_code = False
        if tag != "div":
            return
        if self.output_depth == self.depth:
            self.output_depth = None
        self.depth -= 1

    def handle_data(self, data):
        if self.output_depth is not None and not self.in_code:
            self.outputs.append(data)


def page_outputs(html: str) -> str:
    page = _Page()
    page.feed(html)
    return "".join(page.outputs)


# -- counts and numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_counts_in_prose_come_from_variables(path):
    found = hand_written_counts(path)
    assert not found, (f"{path.name}: counts written by hand (show them from the notebook's variables, e.g. "
                       f"display(Markdown(f'...')), or mark a number that must stay: {found}")


def test_the_count_check_catches_what_it_is_for(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["Python asserts from ten task families, "]},
        {"cell_type": "code", "source": ["suite = load(per_family=4)  # 40 held-out items\n", "x = '# 7 items'"]},
        {"cell_type": "markdown", "source": ["Both models on the same 20 held-out items; 4 per family is fine"]},
        {"cell_type": "markdown", "source": ['kept: <span class="shown">3</span> items']},
    ]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    found = hand_written_counts(path)
    assert [f.split(":")[0] for f in found] == ["cell 0", "cell 1", "cell 2"], found
    assert "ten task families" in found[0] and "40 held-out items" in found[1] and "20 held-out items" in found[2]


def test_shown_numbers_are_matched_as_whole_numbers():
    markdown = 'γ_low = <span class="shown">0.1</span>, blocks of <span class="shown">8</span>'
    assert missing_shown_numbers(markdown, "γ = 0.1 : accuracy 0.93, block size 8") == []
    assert missing_shown_numbers(markdown, "γ = 0.15, block size 18") == ["0.1", "8"]
    assert missing_shown_numbers(markdown, "γ = 0.10 and 80") == ["0.1", "8"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_rendered_page_shows_the_marked_numbers(path):
    page = PAGES / f"{path.stem}.html"
    assert page.is_file(), f"{page.name} is not rendered (make docs)"
    html = page.read_text(encoding="utf-8")
    outputs = page_outputs(html)
    assert outputs.strip(), f"{page.name}: no output text found (has nbconvert's template changed?)"
    missing = missing_shown_numbers(html, outputs)  # the marks sit in Markdown cells, outside the outputs
    assert not missing, f"{page.name}: marked numbers its outputs do not show: {missing}"


def test_the_page_parser_separates_outputs():
    html = ('<div class="jp-MarkdownCell"><p>see <span class="shown">56</span></p></div>'
            '<div class="jp-OutputArea-output"><div><pre>56 held-out items</pre></div>'
            '<script>Plotly.newPlot("f", [{"x": [40]}])</script></div><p>after</p>')
    assert page_outputs(html) == "56 held-out items"  # a figure's script is not text a reader sees
    assert missing_shown_numbers(html, page_outputs(html)) == []
    assert missing_shown_numbers(html.replace("56 held", "40 held"), page_outputs(html.replace("56 held", "40 held")))


# -- the glossary -------------------------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_glossary_has_twenty_terms_and_its_index_resolves():
    text = GLOSSARY.read_text(encoding="utf-8")
    terms = re.findall(r"^### (.+)$", text, re.MULTILINE)
    assert len(terms) >= 20, f"{len(terms)} terms"
    anchors = {slug(t) for t in terms}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and not [a for a in links if a not in anchors]
    assert len(set(links)) == len(terms), "every term is in the index once"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_markdown_cell_links_the_glossary(path):
    first = next(c for c in cells(path) if c["cell_type"] == "markdown")
    assert "](../sbd_viz/GLOSSARY.md)" in first["source"], f"{path.name}: link ../sbd_viz/GLOSSARY.md in the first cell"


# -- exercises -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_ends_with_exercises_and_collapsed_answers(path):
    all_cells = cells(path)
    at = next((i for i, c in enumerate(all_cells) if c["cell_type"] == "markdown" and "## Exercises" in c["source"]),
              None)
    assert at is not None, f"{path.name}: no '## Exercises' section"
    exercises = re.findall(r"^\d+\. ", all_cells[at]["source"].split("## Exercises", 1)[1], re.MULTILINE)
    assert 2 <= len(exercises) <= 3, f"{path.name}: {len(exercises)} exercises"
    answers = [c for c in all_cells[at + 1:]
               if (c["cell_type"] == "markdown" and "<details>" in c["source"] and "</details>" in c["source"])
               or c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]
    assert answers, f"{path.name}: the answers belong in a collapsed cell after the exercises"


# -- claims ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", sorted(CLAIMS))
def test_rendered_page_keeps_its_claims(stem):
    outputs = page_outputs((PAGES / f"{stem}.html").read_text(encoding="utf-8"))
    assert not contradicted(stem, outputs), f"{stem}: its prose and its outputs disagree: {contradicted(stem, outputs)}"


def test_the_claim_checks_catch_what_they_are_for():
    table = ("each SmolLM2 decode below: at most 24 new tokens\n"
             "quoting        ntp             11 calls   11 tokens  1.00 tokens/call\n"
             "quoting        jacobi          11 calls   11 tokens  1.00 tokens/call\n"
             "quoting        prompt_lookup    4 calls   11 tokens  2.75 tokens/call\n"
             "open question  ntp              8 calls    8 tokens  1.00 tokens/call\n"
             "open question  jacobi           8 calls    8 tokens  1.00 tokens/call\n"
             "open question  prompt_lookup    6 calls    8 tokens  1.33 tokens/call\n")
    assert contradicted("07_real_lm", table + "drafting pays there too") == []
    assert contradicted("07_real_lm", table + "no saving there")  # saved calls, and the text says none
    assert contradicted("07_real_lm", table.replace(" 4 calls", "11 calls") + "drafting pays there too")
    assert contradicted("07_real_lm", table.replace("at most 24", "at most 8") + "drafting pays there too")
    verified = "block size 8: 4.18 tokens per call at γ 4, 4.20 at γ 8: "
    assert contradicted("05_verified_sbd", verified + "a larger γ changed the decodes") == []
    assert contradicted("05_verified_sbd", verified + "no change")
    assert contradicted("01_what_is_sbd", "wall clock 10723 ms the model calls, summed")
    assert contradicted("08_real_text_sbd", "") == []  # a notebook without claims here


def notebook_text(path: Path) -> str:
    return "\n".join(c["source"] for c in cells(path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_tests_a_notebook_cites_exist(path):
    cited = set(re.findall(r"\btests/[\w/]+\.py", notebook_text(path)))
    assert not [c for c in cited if not (ROOT / c).is_file()], f"{path.name} cites missing tests: {cited}"


def test_the_paper_sections_cited_are_the_right_ones():
    """The paper's γ_low / γ_high and Table 1 are its 8B experiments, section 3.1; its section 4 is the roofline."""
    for path in NOTEBOOKS:
        text = notebook_text(path)
        for m in re.finditer(r"section 4\b", text):
            assert "roofline" in text[max(0, m.start() - 300):m.end() + 300].lower(), \
                f"{path.name}: cites the paper's section 4 (the roofline analysis) for something else"
    text = notebook_text(ROOT / "notebooks" / "02_gamma_tradeoff.ipynb")
    assert "section 3.1" in text[:text.index("γ_low")] .split("## The paper's γ values")[-1]


def test_the_gap_fill_concern_credits_the_review_that_raised_it():
    first = next(c for c in cells(ROOT / "notebooks" / "03_gap_fill_failures.ipynb") if c["cell_type"] == "markdown")
    assert "PREFIX <m> <m> TOKEN" in first["source"]
    assert "Graphcore" in first["source"] and "Papers of the Month" in first["source"]
