"""docs/measure_and_export.md: its snippet runs as written, and every function the page names exists."""

import re
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz import plots

PAGE = Path(__file__).resolve().parents[2] / "docs" / "measure_and_export.md"


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_every_function_the_page_names_exists():
    text = PAGE.read_text(encoding="utf-8")
    for name in set(re.findall(r"`sv\.(\w+)", text)):
        assert hasattr(sv, name), name
    for name in set(re.findall(r"`plots\.(\w+)", text)):
        assert hasattr(plots, name), name


@pytest.mark.heavy
def test_the_snippet_runs(tmp_path, monkeypatch, capsys):
    (snippet,) = _snippets()
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(PAGE), "exec"), {})
    out = capsys.readouterr().out
    assert "tau " in out and "d3LLM's TPF" in out
    assert {p.name for p in tmp_path.iterdir()} == {"decodes.jsonl", "sbd.html", "sbd.gif"}
    assert len((tmp_path / "decodes.jsonl").read_text().splitlines()) == 2
