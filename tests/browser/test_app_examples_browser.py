"""Every example, clicked in a real headless Chromium, on the character model and on SmolLM2 with the SBD adapter
("smollm2-135m-sbd"): it decodes with its own decoder and slider value (not the ones left by the last move), and fills
every panel: the metrics and texts of this prompt, the failure table of this decode (its title names this decode's
tokens and calls) and, after a decode of one call, that call (two such examples follow each other), with no error. On SmolLM2 without the adapter, the first screen opens with the decoder
measured to draft the most on its first example ("drafting pays"), and shows it writing in fewer calls than NTP."""

import pytest

import sbd_viz as sv
from conftest import SWEEP_ROWS, app_server

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
# The pages are served with map_sessions=0: these tests read no γ map (test_app_gamma_map*.py do), so no background map
# builds beside them and takes a core from the other test worker.
CARDS = "#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])"
# this prompt's finished cards: the example's prompt (in a text LM's chat template, if on) decoded, NTP beside it
# (and at the example's own value of the decoder's knob: γ, or a setting of its own)
THIS_DECODE = f"""([prompt, knob]) => {{ const c = document.querySelector("{CARDS}");
  return c && c.dataset.prompt.includes(prompt) && (knob === null || Number(c.dataset.knob) === knob); }}"""


def _value(page, control: str) -> str:
    return page.locator(f"{control} input").first.input_value()


def _move_slider_to_its_end(page):
    """A user's click at the right end of the slider's track; returns once that decode is shown."""
    before = page.locator(CARDS).get_attribute("data-knob")
    assert before is not None  # the first screen's decoder has a knob on the slider
    track = page.locator("#sbd-gamma input[type=range]")
    track.scroll_into_view_if_needed()
    box = track.bounding_box()
    page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    page.wait_for_function(f"""(b) => {{ const c = document.querySelector("{CARDS}");
        return c && c.dataset.knob !== undefined && c.dataset.knob !== b; }}""", arg=before, timeout=600000)


def click_every_example(page, url, expected, timeout_ms):
    """``expected``: per example, in the page's order, (prompt, decoder label, slider value, verified, the calls its
    label says, or None)."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(CARDS, timeout=timeout_ms)
    buttons = page.locator("#sbd-examples .gallery-item")
    assert buttons.count() == len(expected)
    _move_slider_to_its_end(page)  # a γ of the user's: each example brings its own back
    for i, (prompt, decoder, value, verified, calls) in enumerate(expected):
        spec = sv.registry.by_label(decoder)
        on_slider = spec.knob is not None and spec.knob.name != "block_size"  # Jacobi's knob is the block size
        buttons.nth(i).click()
        # the decode of this example, at its own knob value (the slider was left at another)
        page.wait_for_function(THIS_DECODE, arg=[prompt, float(value) if on_slider else None], timeout=timeout_ms)
        assert page.locator("#sbd-prompt textarea").input_value() == prompt
        assert _value(page, "#sbd-decoder") == decoder, i
        assert float(_value(page, "#sbd-gamma")) == float(value), i
        assert page.locator("#sbd-verify input").is_checked() == verified, i
        cards = page.locator(CARDS)
        if calls is not None:  # the label's numbers are this decode's
            assert int(cards.get_attribute("data-nfe")) == calls, i
        said = f"this decode: {cards.get_attribute('data-tokens')} tokens in {cards.get_attribute('data-nfe')} calls"
        page.locator("#sbd-gaps").get_by_text(said).wait_for(timeout=timeout_ms)  # the table of this decode
        assert page.locator("#sbd-texts td.text").count() >= 2  # the decoder's text and NTP's
        if cards.get_attribute("data-nfe") == "1":  # the shown call is this decode's: its one call reads the prompt
            page.locator("#sbd-call-info").get_by_text(prompt.rstrip()[-8:]).wait_for(timeout=timeout_ms)
        assert page.locator(".toast-body").count() == 0, page.locator(".toast-body").all_inner_texts()
    assert not page.errors, page.errors


@pytest.mark.slow
def test_every_example_decodes_and_fills_every_panel_on_the_character_model(shipped, page):
    from sbd_viz.app.page import DEFAULTS, EXAMPLES
    from sbd_viz.decoders.rules import COMMIT_RULES

    gamma = COMMIT_RULES[DEFAULTS["rule"]].default  # the γ its label was measured at
    with app_server(shipped, sweep=SWEEP_ROWS, map_sessions=0) as url:
        click_every_example(page, url, [(p, "SBD", gamma, False, None) for p in EXAMPLES], timeout_ms=120000)


@pytest.fixture(scope="module")
def smollm2():
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    return {name: sv.load_model(name) for name in ("smollm2-135m-sbd", "smollm2-135m")}


@pytest.mark.slow
def test_every_example_decodes_and_fills_every_panel_on_smollm2_with_the_adapter(smollm2, page):
    from sbd_viz.app import causal
    from sbd_viz.app.inputs import decoder_labels, knob_start

    model = smollm2["smollm2-135m-sbd"]
    picks = causal.example_choices(model, decoder_labels(model))
    rows = causal.measured(model)
    # each opens on verified SBD, labelled with the calls it was measured to take (and plain SBD's, NTP's)
    runs = [rows[p]["runs"][causal.VERIFIED] for p, *_ in picks]
    calls = [run["calls"] for run in runs]
    assert all(f"verified SBD: {run['tokens']} tokens in {run['calls']} calls" in label
               for (_, _, label, _, _), run in zip(picks, runs))
    expected = [(p, d, knob_start(sv.registry.by_label(d), "entropy_bounded"), v, c)
                for (p, _, _, d, v), c in zip(picks, calls)]
    assert all(d == "SBD" and v for _, d, _, v, _ in expected)
    with app_server(model, map_sessions=0) as url:
        click_every_example(page, url, expected, timeout_ms=600000)


@pytest.mark.slow
def test_smollm2s_first_screen_shows_the_decoder_that_drafts(smollm2, page):
    from sbd_viz.app import causal

    model = smollm2["smollm2-135m"]
    prompt, _, label = causal.examples(model)[0]
    assert "drafting pays" in label
    row = causal.measured(model)[prompt]
    run = row["runs"][row["decoder"]]
    assert run["calls"] < row["ntp_calls"]  # measured: the chosen decoder drafts here
    with app_server(model, map_sessions=0) as url:
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector(CARDS, timeout=600000)
        cards = page.locator(CARDS)
        assert _value(page, "#sbd-decoder") == row["decoder"] != "Jacobi"
        assert int(cards.get_attribute("data-nfe")) == run["calls"] < int(cards.get_attribute("data-ntp"))
        assert page.locator("#sbd-examples .gallery-item").first.inner_text().startswith(label)
        assert not page.errors, page.errors
