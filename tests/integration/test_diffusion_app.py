"""The app with a tiny random-init DiffusionGemma folder: its handlers (fast) and, marked slow, a real
headless Chromium rendering a decode (Playwright + /usr/bin/chromium, as tests/browser/test_app_browser.py)."""

import pytest
import torch

import sbd_viz as sv
from conftest import ARTIFACTS, app_server, load_app
from diffusion_folders import tiny_folder

pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is faster than two on a shared machine
    # a context of 1024 positions: the app's longest example and 64 new tokens fit
    yield sv.load_model(tiny_folder(tmp_path_factory.mktemp("dg") / "tiny-dg", canvas_length=8, sharpen=30.0,
                                    context=1024))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def app():
    return load_app()


def test_handlers_decode_draw_and_refuse_what_means_nothing(app, model):
    from dataclasses import replace

    import gradio as gr

    from sbd_viz.app.state import Controls

    h = app.Handlers(model, app.SpeedQualityCurve(compute=False))
    controls = Controls("assert 1 + 1 == ", "entropy_bounded", 0.5, False, 8, 16, 0.0, 0, True, False, None)
    session, figure, metrics, texts, _ = list(h.decode(controls))[-1]
    trace = session.trace
    assert trace.has_canvas and f"data-nfe='{trace.nfe}'" in metrics and "data-ntp='none'" in metrics
    assert "no NTP decode for this model" in texts and '"frames"' in figure
    table, timeline, comparison, tradeoff, _, path = h.details(session)
    assert timeline is not None and comparison is None and tradeoff is None
    assert sv.load_trace(path) == trace
    heatmap, words = h.show_call(session, 1)
    assert heatmap is not None and "call 1" in words
    for name in ("gap_free", "verify"):
        with pytest.raises(gr.Error, match=f"{name}:"):
            list(h.decode(replace(controls, **{name: True})))


@pytest.mark.browser
def test_app_renders_a_diffusion_decode_in_a_real_browser(model, page):
    with app_server(model, map_sessions=0) as url:  # reads no γ map: none builds beside it
        page.goto(url, wait_until="domcontentloaded")
        # the page decodes its first example on load: the block fill is drawn, one frame per call
        page.wait_for_function("() => Number(document.querySelector('#sbd-anim .sbd-anim-plot')"
                               "?.dataset.frames) > 0", timeout=90000)
        page.wait_for_selector("#sbd-anim .sbd-anim-plot .main-svg", timeout=10000)
        page.wait_for_selector("#sbd-metrics .cards[data-ntp='none']", timeout=30000)
        nfe = page.locator("#sbd-metrics .cards").get_attribute("data-nfe")
        assert page.locator("#sbd-anim .sbd-anim-plot").get_attribute("data-frames") == nfe
        # the text row names the decoder by its registered label
        label = next(d.label for d in sv.decoders() if d.name == "diffusion_gemma")
        assert page.locator("#sbd-texts table").inner_text().startswith(label)
        assert "block-diffusion model" in page.locator("#sbd-title").inner_text()
        # verified and gap-free are hidden for this model
        assert page.get_by_label("verified (lossless)").count() == 0
        assert page.get_by_label("gap-free").count() == 0
        # the legend names the renoised state
        assert "renoised" in page.locator("#sbd-anim").inner_text()
        assert not page.errors, page.errors
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#sbd-anim").screenshot(path=str(ARTIFACTS / "app_diffusion.png"))  # for a human to look at


def test_the_explorer_decodes_a_diffusion_model_and_hides_what_means_nothing(model):
    explorer = sv.explore(model, "def f(x):\n", gamma=0.5, max_new_tokens=8, max_denoising_steps=4)
    trace = explorer.trace
    assert trace.has_canvas and trace.config["max_denoising_steps"] == 4 and explorer.ntp_trace is None
    assert explorer.verify.layout.display == "none" and explorer.gap_free.layout.display == "none"
    assert explorer.rule.disabled and explorer.block_size.disabled and explorer.block_size.value == 8
    assert "diffusion_gemma" in explorer.metrics.value and "error" not in explorer.metrics.value
    explorer.gamma.value = 2.0  # re-decodes
    assert explorer.trace is not trace and explorer.trace.config["gamma"] == 2.0
    explorer.call.value = 0
    assert "call 0" in explorer.step_info.value


def test_the_gamma_slider_spans_what_the_sampler_accepts(app, model):
    """The sampler refuses an entropy bound of 0, so the slider starts above it, and both ends decode."""
    demo = app.build_demo(model, sweep=None)
    slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "sbd-gamma")
    assert slider.minimum > 0 and (slider.minimum, slider.maximum) == model.gamma_slider[:2]
    ends = [sv.decode(model, "def f(x):\n", gamma=g, max_new_tokens=8, max_denoising_steps=4)
            for g in (slider.minimum, slider.maximum)]
    assert all(t.config["gamma"] in (slider.minimum, slider.maximum) for t in ends)
