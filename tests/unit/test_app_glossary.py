"""The app's Glossary tab: every link of the glossary names the id of one of its headings, as the tab renders them
(the browser test clicks one; tests/browser/test_app_text_browser.py)."""

import re
from urllib.parse import unquote

from sbd_viz.app.views import glossary_markdown, heading_id


def test_every_glossary_link_names_a_rendered_headings_id():
    text = glossary_markdown()
    ids = re.findall(r"<h[1-6] id='([^']+)'>", text)
    assert len(ids) == len(set(ids)) > 30
    links = {unquote(t) for t in re.findall(r"\]\(#([^)]+)\)", text)}
    assert links and links <= set(ids), sorted(links - set(ids))


def test_heading_ids_are_githubs():
    assert heading_id("call / NFE") == "call--nfe"
    assert heading_id("γ (gamma)") == "γ-gamma"
    assert heading_id("[clean ; masked] layout") == "clean--masked-layout"
    assert heading_id("speedup in calls, speedup in wall-clock") == "speedup-in-calls-speedup-in-wall-clock"
