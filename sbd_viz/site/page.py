"""The static site's two written pages: ``index_html`` (the gallery, the prompt's view with the app's scrubber, the
failure table, the block at a call, the decode order and the glossary; the data comes in ``data/*.js`` files) and
``readme`` (the folder as a Hugging Face static Space: its front matter, what it is, its size, how to publish it)."""

from __future__ import annotations

import html

from .._version import __version__
from ..app.scrubber import TEMPLATE
from ..plots.style import MASK_GLYPH, STATE_COLORS
from .glossary import glossary_html

TITLE = "sbd_viz · Set Block Decoding"
SHORT = "Set Block Decoding's γ maps, precomputed, in your browser"  # a Space's short_description: 60 at most
FILES = ("index.html", "README.md", "scrubber.js", "scrubber.css", "site.js", "site.css")  # and data/*.js

INTRO = (
    "<b>Set Block Decoding</b> (SBD; Gat, Ben-Hamu et al., "
    "<a href='https://arxiv.org/abs/2509.04185' target='_blank' rel='noopener'>arXiv 2509.04185</a>) fills a block "
    "of future tokens in a few model calls: each call predicts every masked slot, and a commit rule fixes the slots "
    "it is sure of while their entropies add up to at most <b>γ</b>. A larger γ commits more per call (fewer calls) "
    "and risks more wrong tokens. <b>Verified SBD</b> (this toolkit's extension) checks every draft against greedy "
    "next-token decoding (NTP) in the same calls: exactly NTP's text, fewer tokens per call."
)
HOW = (
    "Each prompt below was decoded at <i>every</i> γ ahead of time: its exact γ map holds every distinct decode "
    "and the γ range that gives it. Open a prompt and drag γ: the block fill, the numbers and the strip are "
    "redrawn in your browser from that data, by the same scrubber the sbd_viz app uses; no model runs and nothing "
    "is fetched. Under it, that decode's gap fills and incoherent commits (a row opens the block at its call) and "
    "its decode order."
)


def human_size(n: int) -> str:
    """A byte count as people read it (decimal units, as a Space's file list shows them)."""
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def size_line(total: int, files: int) -> str:
    return f"This folder: {human_size(total)} ({total:,} bytes) in {files} files, everything the page needs."


def _palette() -> str:
    """The call view's states in the figures' palette (``STATE_COLORS``), as CSS variables site.css reads."""
    names = ("done", "now", "masked", "future", "gap")
    return ":root {" + "; ".join(f"--sbd-{n}: {STATE_COLORS[n]}" for n in names) + "}"


def _card(entry: dict, file: str) -> str:
    plain, verified = (entry["maps"][m] for m in ("plain", "verified"))
    decoded = sum(p["decoded"] for p in plain["pieces"])
    shown = entry["text"] if len(entry["text"]) <= 110 else entry["text"][:107] + "…"
    return (
        f"<button type='button' class='card' data-key='{entry['key']}' data-file='{html.escape(file, quote=True)}'>"
        f"<span class='label'>{html.escape(entry['label'] or 'a prompt')}</span>"
        f"<code>{html.escape(shown)}</code><span class='meta'>{decoded} distinct decodes across γ · verified "
        f"({html.escape(verified.get('mode') or 'single drafting')}): "
        f"{sum(p['decoded'] for p in verified['pieces'])} · NTP: {entry['ntp']['calls']} calls</span></button>"
    )


def gallery_html(entries: list[dict], files: dict[str, str], notes: dict[str, str]) -> str:
    """The prompts, one card each, under their model's name and note."""
    out, models = [], list(dict.fromkeys(e["model"] for e in entries))
    for model in models:
        cards = "".join(_card(e, files[e["key"]]) for e in entries if e["model"] == model)
        out.append(
            f"<div class='model'><h3><code>{html.escape(model)}</code></h3><p class='note'>"
            f"{html.escape(notes.get(model, ''))}</p><div class='cards'>{cards}</div></div>"
        )
    return "".join(out)


VIEW = """<section id='view' hidden data-key='' data-mode='plain'>
<h2 class='title'></h2>
<pre class='prompt'></pre>
<p class='settings'></p>
<div class='modes' role='radiogroup' aria-label='decoder'>
<label><input type='radio' name='mode' value='plain' checked> plain SBD</label>
<label><input type='radio' name='mode' value='verified'> verified SBD: every draft checked, NTP's exact text
<span class='drafted'></span></label>
</div>
<div class='stepper'><button type='button' class='prev'>◀ previous decode</button>
<span class='where'></span><button type='button' class='next'>next decode ▶</button></div>
<div id='sbd-scrubber'>{template}</div>
<p class='ntp'></p>
<h3>Gap fills and incoherent commits</h3>
<p class='failure-label'></p>
<div class='table'><table class='failures'><thead></thead><tbody></tbody></table></div>
<div class='call' hidden></div>
<h3>Decode order</h3>
<div class='order'></div>
</section>"""


def index_html(entries: list[dict], files: dict[str, str], notes: dict[str, str], size: str, built: str) -> str:
    """The page: the intro (with ``size``, the folder's, and ``built``, how it was made), the gallery, the prompt's
    view (filled by site.js from a prompt's data file) and the glossary."""
    return f"""<!DOCTYPE html>
<html lang='en'><head><meta charset='utf-8'>
<meta name='viewport' content='width=device-width, initial-scale=1'>
<title>{html.escape(TITLE)}</title>
<link rel='stylesheet' href='scrubber.css'>
<link rel='stylesheet' href='site.css'>
<style>{_palette()}</style>
</head><body>
<header>
<h1>{html.escape(TITLE)}</h1>
<p>{INTRO}</p>
<p>{HOW}</p>
<p class='size' id='site-size'>{html.escape(size)} {html.escape(built)}</p>
</header>
<main>
<section id='gallery'><h2>Prompts</h2>{gallery_html(entries, files, notes)}</section>
{VIEW.replace("{template}", TEMPLATE)}
<section id='glossary'>{glossary_html()}</section>
</main>
<footer>Made by <code>sbd-viz site</code> (sbd_viz {html.escape(__version__)}); {MASK_GLYPH} marks a slot never
committed.</footer>
<script src='scrubber.js'></script>
<script src='site.js'></script>
</body></html>
"""


def _cell(text: str) -> str:
    """A prompt in a Markdown table's cell: its last line, at most 60 characters, as code (a pipe escaped)."""
    line = text.rstrip("\n").rsplit("\n", 1)[-1]
    line = line if len(line) <= 60 else line[:57] + "…"
    return "`" + line.replace("|", "\\|").replace("`", "'") + "`"


def readme(entries: list[dict], size: str, command: str) -> str:
    """The folder's README: a Hugging Face Space's front matter (``sdk: static``, ``app_file: index.html``), what the
    folder is, its size, its prompts, and how to open and publish it."""
    rows = "\n".join(
        f"| `{e['model']}` | {_cell(e['text'])} | {e['label'] or ''} "
        f"| {sum(p['decoded'] for p in e['maps']['plain']['pieces'])} "
        f"| {sum(p['decoded'] for p in e['maps']['verified']['pieces'])} | {e['ntp']['calls']} |"
        for e in entries
    )
    return f"""---
title: {TITLE}
emoji: 🧩
colorFrom: blue
colorTo: yellow
sdk: static
app_file: index.html
pinned: false
license: mit
short_description: {SHORT}
---

# {TITLE}: a static demo

Set Block Decoding's decodes, drawn in the browser with no server: each prompt's exact γ map (every distinct decode
across the threshold γ, plain and verified SBD) was computed ahead of time by sbd_viz, and the page's γ scrubber
redraws the block fill, the numbers and the strip from it as γ moves, with each decode's gap fills (a row opens the
block at its call), its decode order, and the glossary.

{size} Nothing is fetched from elsewhere: the page, its scripts and its data are these files.

| model | prompt (its last line) | what it is | decodes across γ (plain SBD) | decodes (verified SBD) | NTP's calls |
| --- | --- | --- | --- | --- | --- |
{rows}

Open `index.html` in a browser (from the disk works), or serve the folder with any static server
(`python -m http.server`). As a Hugging Face Space: this README's front matter makes the folder a static Space as it
is; create a Space with the static SDK and upload the folder (from inside it:
`huggingface-cli upload OWNER/NAME . . --repo-type space`).

Made with `{command}` (sbd_viz {__version__}).
"""
