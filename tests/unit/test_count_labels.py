"""Every bench page names its tokens-per-call numbers as every view does: a table column of tokens per call is headed
by one of ``sv.COUNT_LABELS``' four names (end token and prefill counted or not), after an optional ``qualifier: ``
(``SBD: ``, ``long answers: ``), or is one of the few other ratios below, each saying why it is none of the four."""

import re
from pathlib import Path

from sbd_viz.trace.labels import COUNT_LABELS

BENCH = Path(__file__).resolve().parents[2] / "bench"
RATIO = re.compile(r"\btok(?:en)?s?\s*(?:/|per)\s*call\b", re.I)  # tokens/call, tokens per call, tok/call
RULE = re.compile(r"^\|\s*:?-{3,}")  # a table's |---| line: the line above it is the header

# Tokens-per-call ratios that are none of the four counts, by header (after the qualifier), with the reason
OTHER_RATIOS = {
    "tokens per call (single block)":
        "ADAPTER_TRAINING.md: predicted by the adapter's probe from slot accuracies on held-out text, not counted "
        "from decodes (adapter_training.py's docstring); PROBE_SETS.md names it so too",
}


def count_headers(text: str) -> list[str]:
    """The cells of every table header in ``text`` that name tokens per call."""
    lines = text.splitlines()
    cells = [c.strip() for above, line in zip(lines, lines[1:]) if RULE.match(line)
             for c in above.strip().strip("|").split("|")]
    return [c for c in cells if RATIO.search(c)]


def misnamed(text: str) -> list[str]:
    """The tokens-per-call headers of ``text`` that are neither a ``COUNT_LABELS`` name nor an ``OTHER_RATIOS`` one,
    each read after an optional ``qualifier: ``."""
    names = set(COUNT_LABELS.values()) | set(OTHER_RATIOS)
    out = []
    for cell in count_headers(text):
        qualifier, _, name = cell.rpartition(": ")
        if name not in names or RATIO.search(qualifier):
            out.append(cell)
    return out


def pages() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(BENCH.glob("*.md"))}


def test_every_bench_pages_tokens_per_call_column_is_named_as_the_views_name_it():
    bad = {name: cells for name, text in pages().items() if (cells := misnamed(text))}
    assert not bad, f"name these columns with sbd_viz.trace.labels.COUNT_LABELS (or explain them in OTHER_RATIOS): {bad}"
    named = [c for text in pages().values() for c in count_headers(text)]
    assert any(c.endswith(COUNT_LABELS[(True, True)]) for c in named)  # the scan reads the pages' real headers


def test_every_other_ratio_is_on_a_page_with_its_reason():
    """No allow-list entry outlives the column it explains."""
    names = {c.rpartition(": ")[2] for text in pages().values() for c in count_headers(text)}
    for name, reason in OTHER_RATIOS.items():
        assert name in names and reason.split(":")[0] in pages(), name


def test_the_scan_flags_a_column_named_its_own_way():
    table = "| γ | {} | accuracy |\n|---|---:|---|\n| 1 | 2.00 | 1 tokens/call in a row, not a header |\n"
    assert count_headers(table.format("tokens/call")) == ["tokens/call"]
    for own_way in ("tokens/call", "SBD tokens/call", "tokens per call", "tok/call long", "tokens per call, long",
                    f"tokens/call: {COUNT_LABELS[(True, True)]}", f"{COUNT_LABELS[(True, True)]} long"):
        assert misnamed(table.format(own_way)) == [own_way]
    for named in (*COUNT_LABELS.values(), f"SBD / remask: {COUNT_LABELS[(False, True)]}",
                  f"chat: {next(iter(OTHER_RATIOS))}"):
        assert misnamed(table.format(named)) == []
    assert misnamed("| γ | calls |\n|---|---|\n") == [] and misnamed("tokens/call in prose\n") == []
