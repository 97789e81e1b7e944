"""The glossary (``sbd_viz/GLOSSARY.md``) as the static site's HTML: each heading with the id its links name, as the
app's Glossary tab gives it (``app.views.glossary_markdown``), and the few Markdown forms the file uses (paragraphs,
``**bold**``, ``*italic*``, ``code`` and links) turned into HTML here, so the page needs no Markdown library."""

from __future__ import annotations

import html
import re

from ..app.views import glossary_markdown

_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[((?:[^\]\\]|\\.)+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<!\*)\*([^*\s][^*]*?)(?<!\s)\*(?!\*)")
_ESCAPED = re.compile(r"\\([\\`*_\[\]()#<>])")


def _link(match: re.Match) -> str:
    """A Markdown link as HTML; one outside the page opens in a new tab (the site's own requests stay in its folder)."""
    target = html.unescape(match[2])
    outside = "" if target.startswith("#") else " target='_blank' rel='noopener'"
    return f"<a href='{html.escape(target, quote=True)}'{outside}>{match[1]}</a>"


def _prose(text: str) -> str:
    """Markdown outside code spans as HTML: links, bold and italic, backslash-escaped characters kept as they are."""
    held: list[str] = []  # the escaped characters, kept out of the patterns

    def hold(match: re.Match) -> str:
        held.append(html.escape(match[1]))
        return f"\x00{len(held) - 1}\x00"

    text = html.escape(_ESCAPED.sub(hold, text), quote=False)
    text = _ITALIC.sub(r"<i>\1</i>", _BOLD.sub(r"<b>\1</b>", _LINK.sub(_link, text)))
    return re.sub("\x00(\\d+)\x00", lambda m: held[int(m[1])], text)


def inline(text: str) -> str:
    """One paragraph's Markdown as HTML: code spans first (nothing inside them is Markdown), then the rest."""
    parts = _CODE.split(text)
    return "".join(f"<code>{html.escape(part)}</code>" if i % 2 else _prose(part) for i, part in enumerate(parts))


def glossary_html() -> str:
    """The glossary as HTML: its headings as the app's Glossary tab gives them (ids for its links), each paragraph a
    ``<p>``."""
    blocks: list[str] = []
    paragraph: list[str] = []
    for line in glossary_markdown().splitlines():
        if line.startswith("<h"):  # a heading, already HTML with its id
            blocks += [f"<p>{inline(' '.join(paragraph))}</p>"] if paragraph else []
            blocks.append(line.strip())
            paragraph = []
        elif not line.strip():
            blocks += [f"<p>{inline(' '.join(paragraph))}</p>"] if paragraph else []
            paragraph = []
        else:
            paragraph.append(line.strip())
    blocks += [f"<p>{inline(' '.join(paragraph))}</p>"] if paragraph else []
    return "\n".join(blocks)
