"""The app's text panel shows real text as it is: code keeps its lines and indentation, and user text cannot reverse
the page around it (bidi isolation). On hand-made traces; the browser test renders the same HTML in Chromium."""

import pytest

from sbd_viz.app.state import Session
from sbd_viz.app.views import texts_html

CODE = "def area(w, h):\n    return w * h\n"


def result(text, ntp_text=None, prompt="go: "):
    fake = type("T", (), {"text": text, "prompt": prompt})()
    ntp = None if ntp_text is None else type("T", (), {"text": ntp_text})()
    return Session(trace=fake, ntp=ntp, label="SBD", item=None)


def test_code_keeps_its_line_breaks_and_indentation():
    html = texts_html(result(CODE, CODE))
    assert "<td class='text'>" in html
    assert "⏎\n    return w * h" in html  # the break is marked and kept; the four spaces stay


def test_user_text_is_isolated_so_an_override_cannot_reverse_the_page():
    evil = "abc\u202edef"
    html = texts_html(result(evil, "abc", prompt="say \u202e this"))
    assert "<bdi>abc</bdi><mark><bdi>\u202edef</bdi></mark>" in html
    assert "<code><bdi>say \u202e this</bdi></code>" in html


@pytest.mark.browser
def test_the_browser_shows_the_indentation_and_keeps_the_caption_in_order(page, tmp_path):
    from sbd_viz.app.assets import CSS

    html = texts_html(result(CODE + "x\u202ey", CODE))
    (tmp_path / "t.html").write_text(f"<html><head><style>{CSS}</style></head><body><div id='sbd-texts'>"
                                     f"{html}</div></body></html>", encoding="utf-8")
    page.goto((tmp_path / "t.html").as_uri())
    cell = page.locator("#sbd-texts td.text").first
    assert "\n    return w * h" in cell.inner_text()  # innerText keeps what pre-wrap renders
    note = page.locator("#sbd-texts .note").inner_text()
    assert note.index("prompt:") < note.index("SBD and NTP")  # the note after the prompt reads in order
