"""The README and the pages it links read for a reader: every link lands, and the front door speaks about the
toolkit, not about the machine it was built on."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "sbd_viz" / "GLOSSARY.md"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+?)\s*$", markdown, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page):
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{page.name}: links that land nowhere: {broken}"


def test_the_readme_is_about_the_toolkit_not_our_machine():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for phrase in ("this busy", "this 2-core", "this CPU", "never ran on a GPU", "what CI installs", ".ci/run",
                   "16, the paper's"):
        assert phrase not in text, phrase


def test_the_readme_opens_with_a_picture_the_two_commands_and_where_to_start():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text[:text.index("## ", text.index("## Start here") + 3)]
    assert re.search(r"!\[[^\]]+\]\(docs/[\w.]+\.(png|gif)\)", head), "a picture before the first section's end"
    assert "make run" in head and "make test" in head and "## Start here" in head


def test_the_package_map_names_every_module_in_its_folders_row():
    """docs/architecture.md's map of the package is where a contributor finds a module: each module is named in its
    folder's row (a module added without a word there fails here)."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        head = re.match(r"^\| `(sbd_viz|\w+)/`(?: top)? \|", line)
        if head:
            rows[head.group(1)] = line
    package = ROOT / "sbd_viz"
    missing = []
    for path in sorted(package.rglob("*.py")):
        if path.stem in ("__main__", "_version") or (path.stem == "__init__" and path.parent != package):
            continue
        folder = "sbd_viz" if path.parent == package else path.relative_to(package).parts[0]
        assert folder in rows, f"docs/architecture.md's package map has no row for {folder}/"
        if f"`{path.stem}`" not in rows[folder]:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"modules docs/architecture.md's package map does not name: {missing}"
