"""The app in a real headless Chromium (Playwright + Debian's /usr/bin/chromium).

Loads the page, waits for the first decode to draw the block-fill animation (with its frames),
moves the gamma slider, and checks that the metrics change and the figure redraws. Saves a
screenshot to test-artifacts/app.png for a human to look at.
"""

import pytest

from conftest import ARTIFACTS

pytestmark = [pytest.mark.no_gamma_maps, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]


def metrics_nfe(page) -> str:
    return page.locator("#sbd-metrics .cards").get_attribute("data-nfe")


def test_page_draws_the_animation_and_follows_the_gamma_slider(served, page):
    # ``page`` (conftest): headless Chromium, its errors in page.errors, a screenshot in test-artifacts on failure
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(served[0], wait_until="domcontentloaded")
    # The page decodes its first example on load: the figure is drawn with one frame per call.
    page.wait_for_function("() => Number(document.querySelector('#sbd-anim .sbd-anim-plot')"
                           "?.dataset.frames) > 0", timeout=60000)
    page.wait_for_selector("#sbd-anim .sbd-anim-plot .main-svg", timeout=10000)
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=30000)
    before = metrics_nfe(page)
    frames_before = page.locator("#sbd-anim .sbd-anim-plot").get_attribute("data-frames")
    assert before == frames_before  # one frame per model call

    # Move the slider from 0.5 to its right end (2.0): a click on the track, like a user's.
    track = page.locator("#sbd-gamma input[type=range]")
    track.scroll_into_view_if_needed()  # a mouse click lands only inside the viewport
    box = track.bounding_box()
    page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    # (progress views while decoding carry no data-nfe: wait for the finished numbers)
    page.wait_for_function("() => { const n = document.querySelector('#sbd-metrics .cards')?.dataset.nfe; "
                           f"return n !== undefined && n !== '{before}'; }}", timeout=30000)
    after = metrics_nfe(page)
    assert int(after) < int(before)  # a larger entropy budget commits more per call
    page.wait_for_function(f"() => document.querySelector('#sbd-anim .sbd-anim-plot')?.dataset.frames"
                           f" === '{after}'", timeout=30000)
    assert page.locator("#sbd-anim .sbd-anim-plot .main-svg").count() > 0
    assert page.locator("#sbd-texts table").inner_text().startswith("SBD")

    # A click on a gap-fill row shows its call: the animation jumps to that frame.
    fills = page.locator("#sbd-metrics .card:has-text('gap fills') .value").inner_text()
    assert int(fills) > 0
    page.locator("#sbd-gaps").get_by_text(f"gap fills ({fills})").wait_for(timeout=30000)
    call = int(page.locator("#sbd-gaps [data-testid='cell-0-1']").inner_text())  # kind, call, ...
    page.locator("#sbd-gaps [data-testid='cell-0-2']").click()
    page.wait_for_function(f"() => document.querySelector('#sbd-anim .sbd-anim-plot')?.layout"
                           f".sliders[0].active === {call}", timeout=30000)
    assert page.locator("#sbd-show-call input[type=number]").input_value() == str(call)
    page.wait_for_timeout(500)  # let the below-the-fold views settle for the picture
    page.screenshot(path=str(ARTIFACTS / "app.png"), full_page=True)
    assert not page.errors, page.errors


def test_a_long_prompt_is_never_cut_in_the_box_but_refused_by_name(served, page):
    """The box takes every character typed (no silent cut at the limit); the limit is the model's context (its BOS
    and one new token aside), said in the box; a prompt past it, or too long for the chosen new tokens, is refused
    with a message that says which limit and what fits."""
    from sbd_viz.app.inputs import MAX_PROMPT_CHARS, prompt_limit

    url, model = served
    limit = prompt_limit(model)
    assert limit == model.context_length - 2 > MAX_PROMPT_CHARS  # the context allows more than the longest answer's
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)
    said = page.locator("#sbd-prompt").inner_text()
    assert f"At most {limit:,} characters" in said and f"context of {model.context_length:,} positions" in said
    box = page.locator("#sbd-prompt textarea")
    long = "x" * (limit + 50)
    box.fill(long)
    assert len(box.input_value()) == len(long)
    page.locator("#sbd-run").click()
    page.get_by_text(f"this model takes at most {limit}").first.wait_for(timeout=30000)
    assert len(box.input_value()) == len(long)
    # within the limit but too long for the 64 new tokens asked: refused naming max new tokens and what fits
    box.fill("x" * (model.context_length - 64))
    page.locator("#sbd-run").click()
    page.get_by_text("use max_new_tokens <= 63").first.wait_for(timeout=30000)
    # a prompt past the old 383-character limit that fits is decoded
    box.fill("x" * (MAX_PROMPT_CHARS + 50))
    page.locator("#sbd-run").click()
    page.wait_for_function("(n) => document.querySelector(\"#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])"
                           "\")?.dataset.prompt.length === n", arg=MAX_PROMPT_CHARS + 50, timeout=60000)
