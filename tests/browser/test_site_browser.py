"""The static site in a real headless Chromium, opened from ``file://`` with every request outside its folder refused
(built from the shipped character model, two short prompts): every prompt opens from its card and from its URL, the
scrubber's slider reaches every piece of both maps and redraws the block fill for each, previous/next walk the
decoded pieces, plain/verified switches the map, a gap fill's row opens the block at its call, and the decode order
follows the piece; the same folder works from a static server. Saves a screenshot to test-artifacts/site.png."""

import json

import pytest

from conftest import ARTIFACTS

PROMPTS = ["assert 79 + 48 == ", 'assert "safe"[::-1] == ']  # gap fills at small γ, a few pieces each
ROOT = "#view .sbd-scrub"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def site(shipped, tmp_path_factory):
    from sbd_viz.site.export import export_site

    folder = tmp_path_factory.mktemp("site") / "site"
    export_site(folder, [shipped], prompts=PROMPTS)
    entries = {}
    for path in sorted((folder / "data").glob("*.js")):
        text = path.read_text(encoding="utf-8")
        entry = json.loads(text[len("sbdSiteData("):-3])
        entries[entry["key"]] = entry
    return folder, entries


@pytest.fixture
def opened(site, page):
    """The page at the site's index.html from file://, every request outside the folder refused and listed in
    ``page.refused``, every request made listed in ``page.asked``."""
    folder, _ = site
    inside = folder.resolve().as_uri() + "/"
    page.refused, page.asked = [], []

    def route(r):
        page.asked.append(r.request.url)
        if r.request.url.startswith(inside):
            r.continue_()
        else:
            page.refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto((folder / "index.html").resolve().as_uri())
    return page


def holds(p: dict, g: float) -> bool:
    return p["lo"] < g < p["hi"] or (g == p["lo"] and p["lo_closed"]) or (g == p["hi"] and p["hi_closed"])


def aim(p: dict) -> float:
    """A γ inside piece ``p``: its middle, else an end it holds."""
    mid = (p["lo"] + p["hi"]) / 2
    return mid if holds(p, mid) else p["lo"] if p["lo_closed"] else p["hi"]


def state(page) -> dict:
    return page.evaluate(f"""() => {{ const r = document.querySelector('{ROOT}'), v = document.getElementById('view');
        return {{piece: r.dataset.piece, pieces: r.dataset.pieces, fill: r.querySelector('.fill').innerHTML,
                 nums: r.querySelector('.nums').textContent, view: {{...v.dataset}},
                 order: v.querySelector('.order svg')?.dataset.piece ?? null,
                 rows: [...v.querySelectorAll('table.failures tbody tr[data-call]')].length}}; }}""")


def open_card(page, key: str, entry: dict) -> None:
    page.click(f"#gallery .card[data-key='{key}']")
    page.wait_for_function(f"() => document.getElementById('view').dataset.key === '{key}'")
    assert page.locator("#view .prompt").text_content() == entry["text"]


def slide_to(page, gamma: float) -> None:
    """Move the scrubber's range input to ``gamma`` as a drag does: its value set, then an input event."""
    page.evaluate(f"""() => {{ const i = document.querySelector('{ROOT} input[type=range]');
        i.value = String({gamma!r}); i.dispatchEvent(new Event('input', {{bubbles: true}})); }}""")


def test_every_prompt_opens_and_the_slider_reaches_every_piece_of_both_maps(site, opened):
    page = opened
    _, entries = site
    assert page.locator("#gallery .card").count() == len(entries) == 2
    for key, entry in entries.items():
        open_card(page, key, entry)
        for mode in ("plain", "verified"):
            page.check(f"#view input[name='mode'][value='{mode}']")
            pieces = entry["maps"][mode]["pieces"]
            page.wait_for_function(f"() => document.getElementById('view').dataset.mode === '{mode}' && "
                                   f"document.querySelector('{ROOT}').dataset.pieces === '{len(pieces)}'")
            fills = []
            for i, p in enumerate(pieces):
                slide_to(page, aim(p))
                now = state(page)
                assert now["piece"] == now["view"]["piece"] == str(i), (key, mode, i)
                assert f"{p['calls']} call" in now["nums"] and now["order"] == str(i)  # its numbers, its order
                assert now["rows"] == len(p["failures"]["rows"])  # its failure table
                assert not fills or now["fill"] != fills[-1], (key, mode, i)  # the block fill redrawn
                fills.append(now["fill"])
            assert len(set(fills)) == len(pieces)
    assert page.refused == [] and not page.errors, (page.refused, page.errors)
    assert all(url.startswith("file://") for url in page.asked)


def test_previous_and_next_walk_every_decoded_piece(site, opened):
    page = opened
    _, entries = site
    entry = entries["p02"]
    open_card(page, "p02", entry)
    pieces = entry["maps"]["plain"]["pieces"]
    slide_to(page, aim(pieces[0]))
    assert page.locator("#view .prev").is_disabled()
    seen = [state(page)["piece"]]
    while not page.locator("#view .next").is_disabled():
        page.click("#view .next")
        seen.append(state(page)["piece"])
    assert seen == [str(i) for i in range(len(pieces))]
    page.click("#view .prev")
    assert state(page)["piece"] == str(len(pieces) - 2)
    assert page.refused == [] and not page.errors


def test_the_mode_switch_shows_the_other_map(site, opened):
    page = opened
    _, entries = site
    entry = entries["p02"]
    open_card(page, "p02", entry)
    strip = "() => [...document.querySelectorAll('#view .track > div')].map((d) => d.dataset.lo + '/' + d.dataset.hi)"
    plain = page.evaluate(strip)
    page.check("#view input[name='mode'][value='verified']")
    verified = page.evaluate(strip)
    assert plain != verified
    assert len(plain) == len(entry["maps"]["plain"]["pieces"])
    assert len(verified) == len(entry["maps"]["verified"]["pieces"])
    page.check("#view input[name='mode'][value='plain']")
    assert page.evaluate(strip) == plain


def test_a_gap_fill_opens_at_its_call(site, opened):
    page = opened
    _, entries = site
    key, entry, i, row = next((k, e, i, r) for k, e in entries.items()
                              for i, p in enumerate(e["maps"]["plain"]["pieces"]) if p["decoded"]
                              for r in p["failures"]["rows"] if r[0] == "gap fill")
    open_card(page, key, entry)
    slide_to(page, aim(entry["maps"]["plain"]["pieces"][i]))
    assert page.locator("#view .call").is_hidden()
    kind, call, block, slot = row[:4]
    page.locator(f"#view table.failures tbody tr[data-call='{call}'][data-kind='gap fill']").first.click()
    page.wait_for_function(f"() => document.getElementById('view').dataset.call === '{call}'")
    view = page.locator("#view .call")
    assert view.is_visible() and f"call {call}" in view.locator("h4").text_content()
    cells = view.locator(".row").nth(0).locator(".cell")
    assert cells.nth(slot).get_attribute("data-state") == "gap"
    assert f"call {call} " in view.locator("pre").text_content()
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#view").screenshot(path=str(ARTIFACTS / "site.png"))
    # another piece closes it: the call belonged to that decode
    slide_to(page, aim(entry["maps"]["plain"]["pieces"][-1]))
    assert page.locator("#view .call").is_hidden()
    assert page.refused == [] and not page.errors


def test_a_prompt_opens_from_its_url(site, opened):
    page = opened
    folder, entries = site
    page.goto((folder / "index.html").resolve().as_uri() + "#p02")
    page.wait_for_function("() => document.getElementById('view').dataset.key === 'p02'")
    assert page.locator("#view .prompt").text_content() == entries["p02"]["text"]
    assert page.locator("#site-size").text_content().startswith("This folder: ")
    assert page.refused == [] and not page.errors


def test_a_glossary_link_scrolls_to_its_term(opened):
    """A glossary link to a term named with γ (its href percent-encoded, as CommonMark writes it) lands on the term's
    heading, and the open prompt's view is left as it was."""
    page = opened
    link = page.locator("#glossary a[href^='#%CE%B3']").first
    target = page.evaluate("(a) => decodeURIComponent(a.getAttribute('href').slice(1))", link.element_handle())
    page.evaluate("() => window.scrollTo(0, 0)")
    link.click()
    page.wait_for_function("(id) => decodeURIComponent(location.hash.slice(1)) === id", arg=target)
    top = page.evaluate("(id) => document.getElementById(id).getBoundingClientRect().top", target)
    assert -2 <= top < page.viewport_size["height"] / 2, (target, top)  # at the top, to a pixel
    assert page.refused == [] and not page.errors


def test_it_works_from_a_static_server_too(site, page):
    """The same folder served over HTTP by Python's static server (what a static Space is): a prompt opens and its
    scrubber draws, every request answered by the folder's server."""
    import functools
    import http.server
    import threading

    from conftest import free_port

    folder, entries = site
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base, refused = f"http://127.0.0.1:{port}/", []
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else (
        refused.append(r.request.url), r.abort()))
    try:
        page.goto(base)
        open_card(page, "p01", entries["p01"])
        page.wait_for_function(f"() => document.querySelector('{ROOT}').dataset.pieces === "
                               f"'{len(entries['p01']['maps']['plain']['pieces'])}'")
        assert page.locator(f"{ROOT} .fill .cell").count() > 0
        assert refused == [] and not page.errors
    finally:
        server.shutdown()
        server.server_close()
