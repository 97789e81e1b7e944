"""The list-task failures in a real headless Chromium: the section opens under the failure table, decodes the
chosen task, and a click on a row puts that item in the prompt box, decodes it and shows the row's call."""

import pytest

from sbd_viz.tasks import lists as lt

pytestmark = [pytest.mark.no_gamma_maps, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
DONE = "#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])"


def test_a_click_on_a_failure_decodes_its_item_and_shows_its_call(served, page):
    page.goto(served[0], wait_until="domcontentloaded")
    page.wait_for_selector(DONE, timeout=60000)
    first_prompt = page.locator("#sbd-prompt textarea").input_value()
    page.locator("#sbd-gallery-box").get_by_text("List tasks: every failure at these settings").click()
    task = page.locator("#sbd-gallery-task input")
    task.wait_for(state="visible", timeout=30000)
    task.fill("copy")  # typed and entered: the open option list can move while the page settles
    task.press("Enter")
    page.locator("#sbd-gallery-run").click()
    page.wait_for_function("() => (document.querySelector('#sbd-gallery-status') || {}).innerText"
                           "?.includes('3 of 3 items decoded')", timeout=120000)
    def cell(column: int):  # the first row's (GALLERY_HEADERS: rank, task, length, answer, output, ..., call 8)
        return page.locator(f"#sbd-gallery [data-testid='cell-0-{column}']")

    task, answer, call = (cell(c).inner_text().strip() for c in (1, 3, 8))
    assert task == "copy"
    item = next(i for i in lt.list_suite(tasks=("copy",), per_length=1) if i.answer == answer)
    cell(4).click()  # its output
    page.wait_for_function("(p) => document.querySelector('#sbd-prompt textarea').value === p",
                           arg=item.assert_prompt, timeout=30000)
    assert item.assert_prompt != first_prompt
    # the item decoded in the main view: its prompt in the texts panel, then the row's call shown
    page.wait_for_function("(p) => document.querySelector('#sbd-texts')?.innerText.includes(p.trim())",
                           arg=item.assert_prompt, timeout=60000)
    page.wait_for_function("(c) => document.querySelector('#sbd-show-call input[type=number]')?.value === c",
                           arg=call, timeout=60000)
    assert not page.errors, page.errors
