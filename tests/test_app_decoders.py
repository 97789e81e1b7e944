"""The app's "compare decoders" tab: the /compare endpoint returns what sv.decode returns for each decoder, refuses
bad choices by name, and the tab renders its figure in a real headless Chromium (slow)."""

import os
import shutil
from pathlib import Path

import pytest
import torch

import sbd_viz as sv
from conftest import free_port
from test_app import SWEEP_ROWS, load_app, sharp_tiny_model

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")
PROMPT = "assert 48 + 37 == "
MAX_NEW = 16
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def served():
    app = load_app()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = sharp_tiny_model()
    demo = app.build_demo(model, sweep=SWEEP_ROWS)
    demo.queue(default_concurrency_limit=2, max_size=64)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, css=app.CSS)
    yield f"http://127.0.0.1:{port}/", model
    demo.close()
    torch.set_num_threads(threads)


def test_compare_endpoint_matches_the_library(served):
    from gradio_client import Client

    url, model = served
    client = Client(url, verbose=False)
    chosen = ["SBD", "SBD + remasking", "Jacobi", "prompt lookup"]
    figure, table = client.predict(PROMPT, "entropy_bounded", 1.0, False, 8, MAX_NEW, 0.0, 0, False, False, chosen,
                                   api_name="/compare")
    rows = {r[0]: r for r in table["data"]}
    assert list(rows) == ["NTP"] + chosen
    ntp = sv.decode_ntp(model, PROMPT, max_new_tokens=MAX_NEW)
    expected = {"NTP": ntp, "SBD": sv.decode(model, PROMPT, gamma=1.0, block_size=8, max_new_tokens=MAX_NEW),
                "SBD + remasking": sv.decode(model, PROMPT, decoder="remask", gamma=1.0, block_size=8,
                                             max_new_tokens=MAX_NEW),
                "Jacobi": sv.decode(model, PROMPT, decoder="jacobi", block_size=8, max_new_tokens=MAX_NEW),
                "prompt lookup": sv.decode(model, PROMPT, decoder="prompt_lookup", max_new_tokens=MAX_NEW)}
    for label, trace in expected.items():
        assert rows[label][1:3] == [trace.nfe, trace.n_tokens], label
        assert rows[label][4] == ("yes" if trace.text == ntp.text else "no"), label
    assert rows["Jacobi"][4] == rows["prompt lookup"][4] == "yes"
    with pytest.raises(Exception, match="decoders"):
        client.predict(PROMPT, "entropy_bounded", 1.0, False, 8, MAX_NEW, 0.0, 0, False, False, ["beam search"],
                       api_name="/compare")


@pytest.mark.slow
def test_compare_tab_renders_in_a_browser(served):
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        pytest.skip(f"no Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        try:
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(served[0], wait_until="domcontentloaded")
            page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)
            page.get_by_role("tab", name="Compare decoders").click()
            page.get_by_role("button", name="Run this prompt through each decoder").click()
            page.wait_for_selector("#sbd-compare .main-svg", timeout=60000)
            table = page.locator("#sbd-compare-table")
            table.get_by_text("prompt lookup").first.wait_for(timeout=30000)
            for label in ("NTP", "verified SBD", "SBD + remasking", "Jacobi"):
                assert table.get_by_text(label, exact=True).count() >= 1, label
            # one heatmap panel per decoder (NTP and the five chosen) and the bar of calls
            assert page.locator("#sbd-compare .heatmaplayer").count() == 6
            page.screenshot(path=str(ARTIFACTS / "app-compare.png"), full_page=True)
            assert not errors, errors
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "app-compare-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
