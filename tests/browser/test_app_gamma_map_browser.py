"""The γ strip in a real headless Chromium: after the page's first decode the strip under the slider fills in as the
background map builds (its timer polls), and a click on a piece moves the slider there and shows that piece's decode,
answered from the map. Saves a screenshot to test-artifacts/gamma_strip.png for a human to look at."""

import pytest

from conftest import ARTIFACTS

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]

# the widest decoded piece that is not the current one: a click on its middle lands on it alone
WIDEST = """() => {
  const pieces = [...document.querySelectorAll('#sbd-gamma-strip .piece[data-gamma]')]
    .filter(p => p.dataset.current === '0');
  pieces.sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width);
  pieces[0].id = 'sbd-test-target';
  return pieces[0].dataset.gamma;
}"""


def test_a_click_on_the_strip_moves_the_slider_to_that_piece(served, page):
    page.goto(served[0], wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)
    # the strip polls while the map builds, and says when it is complete (a condition, not a time)
    page.wait_for_selector("#sbd-gamma-strip .sbd-strip[data-complete='true']", timeout=180000)
    assert page.locator("#sbd-gamma-strip .piece[data-current='1']").count() == 1
    gamma = page.evaluate(WIDEST)
    assert page.locator("#sbd-gamma input[type=number]").input_value() != gamma
    page.locator("#sbd-test-target").click()
    page.wait_for_function(f"() => document.querySelector('#sbd-gamma input[type=number]')?.value === '{gamma}'",
                           timeout=30000)
    page.wait_for_selector("#sbd-metrics .cards[data-from-map='1']", timeout=30000)  # that piece, from the map
    page.wait_for_selector(f"#sbd-gamma-strip .piece[data-current='1'][data-gamma='{gamma}']", timeout=30000)
    assert "this exact decode for every γ in" in page.locator("#sbd-metrics").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#sbd-gamma-strip").screenshot(path=str(ARTIFACTS / "gamma_strip.png"))
    page.screenshot(path=str(ARTIFACTS / "gamma_strip_page.png"))
    assert not page.errors, page.errors
