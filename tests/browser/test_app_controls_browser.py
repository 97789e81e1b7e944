"""The app's controls in a real headless Chromium: a pick in the decoder or rule menu sends its
event once (one decode, never two identical error toasts); Enter in the prompt decodes it unchanged, Shift+Enter
starts a new line and decodes nothing. Requests are counted on the page (Gradio's /queue/join posts)."""

import json
import urllib.request

import pytest

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]


def _fn_indexes(url: str) -> dict[str, int]:
    """Each event's index by its handler's name (the page's /config), so requests can be counted by what they run."""
    config = json.load(urllib.request.urlopen(url + "config"))
    return {d.get("api_name"): i for i, d in enumerate(config["dependencies"]) if d.get("api_name")}


def _ready(page, url):
    """The page loaded, its first decode and NTP done; returns the list the page's event requests go into."""
    sent = []

    def on_request(request):
        if "queue/join" in request.url:
            sent.append(json.loads(request.post_data or "{}"))

    page.on("request", on_request)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)
    page.wait_for_timeout(1500)  # the load's details and show-call settle
    sent.clear()
    return sent


def _pick(page, menu: str, option: str):
    page.locator(f"{menu} input").click()
    page.locator("ul[role=listbox] li", has_text=option).first.click()


def _count(sent, fn: int) -> int:
    return sum(r.get("fn_index") == fn for r in sent)


def test_a_menu_pick_sends_its_event_once(served, page):
    url = served[0]
    fns = _fn_indexes(url)
    sent = _ready(page, url)
    _pick(page, "#sbd-decoder", "Jacobi")
    page.wait_for_selector("#sbd-texts .who:has-text('Jacobi')", timeout=30000)
    page.wait_for_timeout(2000)  # a second request would come within this
    changed = [r for r in sent if r.get("data", [None])[0] == "Jacobi" and len(r["data"]) == 3]  # and rule, session
    assert len(changed) == 1, sent  # decoder_changed, once
    decodes = [r for r in sent if len(r.get("data", [])) >= 11]  # the controls' decode (its chains are undocumented)
    assert len(decodes) == 1, [r.get("fn_index") for r in sent]
    assert "details" in fns  # the page serves its named endpoints too

    _pick(page, "#sbd-decoder", "SBD")
    page.wait_for_timeout(2500)
    sent.clear()
    page.locator("input[aria-label='commit rule']").click()
    page.locator("ul[role=listbox] li", has_text="top_k").first.click()
    page.wait_for_timeout(3000)
    rule_changed = [r for r in sent if r.get("data") == ["top_k"]]
    assert len(rule_changed) == 1, sent
    decodes = [r for r in sent if len(r.get("data", [])) >= 11]
    assert len(decodes) == 1 and decodes[0]["data"][1] == "top_k"
    assert page.locator(".toast-body").count() == 0  # no error, let alone two
    assert not page.errors, page.errors


def test_enter_decodes_the_prompt_unchanged_and_shift_enter_starts_a_line(served, page):
    sent = _ready(page, served[0])
    box = page.locator("#sbd-prompt textarea")
    box.fill("assert 12 + 30 == ")
    box.press("End")
    box.press("Enter")
    page.wait_for_function("() => document.querySelector('#sbd-texts code')?.textContent.includes('12 + 30')",
                           timeout=30000)
    assert box.input_value() == "assert 12 + 30 == "  # no newline slipped in
    decodes = [r for r in sent if len(r.get("data", [])) >= 11]
    assert len(decodes) == 1 and decodes[0]["data"][0] == "assert 12 + 30 == "

    page.wait_for_timeout(2000)
    sent.clear()
    box.press("Shift+Enter")
    page.wait_for_timeout(1500)
    assert box.input_value() == "assert 12 + 30 == \n"  # a new line, and nothing sent
    assert [r for r in sent if len(r.get("data", [])) >= 11] == []
    assert not page.errors, page.errors


def test_a_decode_click_while_a_decode_runs_is_decoded_after_it(served, page):
    """The model is held inside the first decode's call (no clock: an event), a second prompt is typed and Decode
    clicked meanwhile; once the first decode ends, the second is decoded and shown (not dropped without a word)."""
    import threading

    url, model = served
    sent = _ready(page, url)
    held, entered, hold = threading.Event(), threading.Event(), {"on": False}
    forward = model.model.forward

    def holding(*args, **kwargs):  # the page's decode only: the γ maps' worker has a thread of its own
        if hold["on"] and threading.current_thread().name != "sbd-viz-gamma-maps":
            entered.set()
            held.wait(120)
        return forward(*args, **kwargs)

    model.model.forward = holding
    try:
        box = page.locator("#sbd-prompt textarea")
        hold["on"] = True
        box.fill("assert 71 + 12 == ")
        page.locator("#sbd-run").click()
        assert entered.wait(60)  # the first decode is inside a model call
        box.fill("assert 40 + 25 == ")
        page.locator("#sbd-run").click()  # while it runs
        hold["on"] = False
        held.set()
        page.wait_for_function("() => document.querySelector(\"#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])"
                               "\")?.dataset.prompt === 'assert 40 + 25 == '", timeout=60000)
    finally:
        hold["on"] = False
        held.set()
        model.model.forward = forward
    decodes = [r["data"][0] for r in sent if len(r.get("data", [])) >= 11]
    assert decodes[:2] == ["assert 71 + 12 == ", "assert 40 + 25 == "], decodes
    assert page.locator(".toast-body").count() == 0
    assert not page.errors, page.errors
