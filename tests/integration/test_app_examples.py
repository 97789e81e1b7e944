"""Every example the app offers decodes and fills every panel (the views below the fold included), on the shipped
model, through the page's own handlers."""

import pytest

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def handlers(shipped):
    from sbd_viz.app import page

    h = page.Handlers(shipped, page.SpeedQualityCurve(compute=False))
    yield page, h
    h.close()  # its background γ maps stop with the module, and its files go


@pytest.mark.parametrize("which", range(8))
def test_every_example_decodes_and_fills_every_panel(handlers, which):
    from sbd_viz.app.state import Controls

    page, h = handlers
    prompt = page.EXAMPLES[which]
    d = page.DEFAULTS
    session = None
    controls = Controls(prompt, d["rule"], 0.5, d["gap_free"], h.model.block_size, d["max_new_tokens"],
                        d["temperature"], d["seed"], d["stop_at_newline"], d["verify"])
    for session, *_ in h.decode(controls):
        pass
    assert session.trace.prompt == prompt and session.ntp is not None
    table, timeline, comparison, tradeoff, status, trace_file = h.details(session)
    assert timeline is not None and comparison is not None and trace_file
    assert table["value"] is not None  # the failure table was rebuilt for this decode


def test_there_are_eight_examples():
    from sbd_viz.app import page

    assert len(page.EXAMPLES) == 8
