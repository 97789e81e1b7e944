"""The Glossary tab in a real headless Chromium: every link names a heading's id, and a click scrolls to it. (Code's
indentation and the isolation of user text are tested in tests/unit/test_app_texts.py, in Chromium too.)"""

import pytest

pytestmark = [pytest.mark.no_gamma_maps, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]


def _ready(page, url):
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)


def test_every_glossary_link_has_a_heading_and_a_click_scrolls_to_it(served, page):
    _ready(page, served[0])
    page.get_by_role("tab", name="Glossary").click()
    glossary = page.locator("#sbd-glossary")
    glossary.locator("h1, h2, h3").first.wait_for(timeout=10000)
    # each link's target id, as the browser reads its fragment (percent-decoded: "#%CE%B3-gamma" is "γ-gamma")
    targets = glossary.evaluate("(g) => [...g.querySelectorAll('a[href^=\"#\"]')]"
                                ".map((a) => decodeURIComponent(a.getAttribute('href').slice(1)))")
    assert len(targets) >= 30, targets
    missing = page.evaluate("(ids) => ids.filter((id) => !document.getElementById(id))", targets)
    assert missing == [], missing  # every link lands on an element with its id
    # a click scrolls: the linked heading comes into the viewport (the glossary is far longer than one screen)
    link = glossary.locator("a[href^='#']").last
    target = targets[-1]
    heading = page.locator(f"[id='{target}']")
    page.evaluate("() => window.scrollTo(0, 0)")
    assert not _in_view(page, heading)
    link.scroll_into_view_if_needed()
    page.evaluate("() => window.scrollTo(0, 0)")  # the link far away again: only the click can bring the heading
    link.click()
    # (a heading scrolled to may sit a fraction of a pixel above the top)
    page.wait_for_function("(id) => { const r = document.getElementById(id).getBoundingClientRect(); "
                           "return r.top > -2 && r.top < window.innerHeight; }", arg=target, timeout=30000)
    assert not page.errors, page.errors


def _in_view(page, locator) -> bool:
    return locator.evaluate("(e) => { const r = e.getBoundingClientRect(); "
                            "return r.top >= 0 && r.top < window.innerHeight; }")
