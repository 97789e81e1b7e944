"""The glossary (``sbd_viz/GLOSSARY.md``) as the static site's HTML: each heading with the id its links name, as the
app's Glossary tab gives it (``app.views.glossary_markdown``), the rest rendered by markdown-it-py (CommonMark)."""

from __future__ import annotations

from markdown_it import MarkdownIt

from ..app.views import glossary_markdown


def _link_open(self, tokens, idx, options, env) -> str:
    """A link outside the page opens in a new tab: the site's own requests stay in its folder."""
    href = tokens[idx].attrGet("href") or ""
    if not href.startswith("#"):
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener")
    return self.renderToken(tokens, idx, options, env)


def markdown_html(text: str) -> str:
    """Markdown as HTML, CommonMark's way; the headings ``glossary_markdown`` writes as HTML pass through."""
    md = MarkdownIt("commonmark")
    md.add_render_rule("link_open", _link_open)
    return md.render(text)


def glossary_html() -> str:
    """The glossary as HTML, its headings as the app's Glossary tab gives them (ids for its links)."""
    return markdown_html(glossary_markdown())
