"""Shared fixtures: tiny random-init models of several architectures, with the char tokenizer; hand-made traces;
the shipped model; the app served on a free port; a page of headless Chromium. And the test tiers (see ``TIERS``)."""

import contextlib
import importlib
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

import sbd_viz as sv
from sbd_viz.training.data import build_char_tokenizer
from sbd_viz.trace import Commit, SlotView, Step, Trace

ROOT = Path(__file__).resolve().parent.parent

torch.set_num_threads(2)


def tiny_model(arch: str = "llama", seed: int = 0, attn: str = "sdpa"):
    """A random-init ~100k-parameter causal LM of ``arch`` with a mask token, wrapped as SBDModel."""
    import transformers as tf

    tok = build_char_tokenizer()
    common = dict(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    configs = {
        "llama": lambda: tf.LlamaConfig(**common),
        "qwen3": lambda: tf.Qwen3Config(**common, num_key_value_heads=2, head_dim=16),
        "qwen2": lambda: tf.Qwen2Config(**common, num_key_value_heads=2),
        "gpt_neox": lambda: tf.GPTNeoXConfig(**common),
        "mistral": lambda: tf.MistralConfig(**common, num_key_value_heads=2, sliding_window=None),
    }
    config = configs[arch]()
    config._attn_implementation = attn
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    model.config.mask_token_id = tok.mask_token_id
    return sv.SBDModel(model.eval(), tok, name=f"tiny-{arch}")


HAND_PROMPT = "go: "
# Three blocks: block 0 commits slot 5 with five slots open (gap 5), then slot 3 with slots 1, 2 open
# (gap 2); block 1 goes left to right (no gap); block 2 commits slot 1 (gap 1) and slot 3 (gap 2),
# and with ``stop_at=13`` the output ends at its newline, so slot 3's gap fill is discarded.
HAND = [("abcdef", [{5}, {0, 3}, {1, 2, 4}]),
        ("ghij", [{0}, {1}, {2, 3}]),
        ("kl\nm", [{1, 3}, {0}, {2}])]


def sharp_model(arch: str = "llama", seed: int = 1):
    """A tiny random model with a scaled-up head: its entropies span 0..2 nats, so the rules commit several
    slots per call and its drafts both agree and disagree with its own NTP choices (a plain random model is
    near-uniform, ~4.4 nats per slot: every rule commits one slot per call)."""
    import torch

    model = tiny_model(arch, seed=seed)
    with torch.no_grad():
        model.model.get_output_embeddings().weight *= 32
    return model


def hand_trace(blocks=HAND, stop_at=None) -> Trace:
    """A trace built by hand. ``blocks``: (block text, schedule) pairs, where the schedule lists the
    slots committed at each step; ``stop_at`` cuts the output after that many characters. Gaps are
    counted here, independently of the decoder."""
    tok = build_char_tokenizer()
    prompt_ids = tuple(tok(HAND_PROMPT).input_ids)
    steps, start, call = [], len(prompt_ids), 0
    for b, (text, schedule) in enumerate(blocks):
        masked = list(range(len(text)))
        for i, slots in enumerate(schedule):
            after = [s for s in masked if s not in slots]
            commits = tuple(Commit(s, tok.convert_tokens_to_ids(text[s]), text[s], 0.8, 0.5,
                                   gap=sum(1 for m in after if m < s)) for s in sorted(slots))
            views = tuple(SlotView(s, 0.5, ()) for s in masked)
            steps.append(Step(call=call, block=b, block_start=start, block_size=len(text), step=i,
                              masked=tuple(masked), slots=views, commits=commits, wall_time=0.001))
            masked, call = after, call + 1
        start += len(text)
    out = "".join(text for text, _ in blocks)[:stop_at]
    ids = tuple(tok.convert_tokens_to_ids(c) for c in out)
    return Trace(prompt=HAND_PROMPT, prompt_ids=prompt_ids, config={"decoder": "sbd"}, model_id="hand",
                 steps=tuple(steps), output_ids=ids, output_texts=tuple(out), text=out,
                 stop_reason="stop" if stop_at else "length")


def bench_script(name: str, folder: str = "bench"):
    """A script of the repository (``bench/x.py``, ``tools/x.py``) loaded as a module: those folders are not
    packages, and their scripts import their neighbours, so the folder goes on the path as when run."""
    import importlib.util
    import sys

    path = ROOT / folder / f"{name}.py"
    assert path.is_file(), f"{folder}/{name}.py is missing"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"sbd_viz_{folder}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny forwards: on a CPU shared with another job, two threads run them
    several times slower. A module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def free_port() -> int:
    """A free localhost TCP port (for the app's server, or Accelerate's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tiny():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def sharp():
    """``sharp_model()``: a tiny llama whose rules commit several slots per call; one per module."""
    return sharp_model()


@pytest.fixture(scope="session")
def shipped():
    """The shipped model (package data: a missing one is a failure, not a skip)."""
    return sv.load_model()


def reference_logits(model, final_ids, block_ids):
    """(len(block_ids), V): an uncached forward of [final ; block] with the paper's inference mask (Fig. 10): the
    final tokens causal, the block's slots seeing every final token and each other. Built from the model's plain
    forward, independently of the decoder's cache."""
    n, k = len(final_ids), len(block_ids)
    rows = torch.arange(n + k)[:, None]
    cols = torch.arange(n + k)[None, :]
    mask = ((cols <= rows) | (rows >= n))[None, None]
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([list(final_ids) + list(block_ids)]), attention_mask=mask,
                          position_ids=torch.arange(n + k)[None])
    return out.logits[0, -k:].float()


# -- the app, served --------------------------------------------------------------------------------------------
# A small hand-made curve: the trade-off tab needs no sweep to be tested.
SWEEP_ROWS = [dict(rule="entropy_bounded", gamma=g, block_size=16, gap_free=False, accuracy=a, tokens_per_call=t,
                   calls_per_token=1 / t, speedup_calls=t, speedup_wall=0.8 * t)
              for g, a, t in ((0.0, 0.9, 1.0), (0.5, 0.85, 2.0), (1.0, 0.8, 3.0), (2.0, 0.6, 4.0))] + [
    dict(rule="entropy_bounded", gamma=g, block_size=16, gap_free=False, verify=True, accuracy=0.9,
         tokens_per_call=t, calls_per_token=1 / t, speedup_calls=t, speedup_wall=0.7 * t, same_as_ntp=1.0)
    for g, t in ((0.0, 0.95), (0.5, 1.5), (1.0, 2.5), (2.0, 3.0))] + [
    dict(rule="ntp", gamma=float("nan"), block_size=1, gap_free=False, accuracy=0.9, tokens_per_call=1.0,
         calls_per_token=1.0, speedup_calls=1.0, speedup_wall=1.0)]


def load_app():
    """The app's page module (its handlers, ``build_demo`` and constants)."""
    return importlib.import_module("sbd_viz.app.page")


@contextlib.contextmanager
def app_server(model, **kwargs):
    """The app on ``model`` (``build_demo(model, **kwargs)``) at a free localhost port, with its queue; yields its
    URL. One torch thread meanwhile, as ``main()`` does: two decodes at once on two cores."""
    app = load_app()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    demo = app.build_demo(model, **kwargs)
    app.queue(demo)  # as main() serves it: its own line for the heavy jobs
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, css=app.CSS)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        handlers_of(demo).maps.close()  # its background γ maps stop with it
        demo.close()
        torch.set_num_threads(threads)


def handlers_of(demo):
    """A built page's ``Handlers`` (its decode event's owner): the tests reach the γ maps' worker through it."""
    return next(getattr(fn.fn, "handler", fn.fn).__self__ for fn in demo.fns.values()
                if getattr(fn.fn, "__name__", "") == "decode")


@pytest.fixture(scope="module")
def served():
    """(url, model): the app on ``sharp_model()`` with the hand-made curve ``SWEEP_ROWS``; one per module."""
    model = sharp_model()
    with app_server(model, sweep=SWEEP_ROWS) as url:
        yield url, model


# -- a page of headless Chromium ------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"  # Debian's; .ci/run installs it
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts"  # screenshots for a human to look at


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test (``item.report_call``), so a fixture knows whether its test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(request):
    """A fresh 1440 x 1000 page of headless Chromium (Debian's, driven by playwright), its JavaScript errors
    collected in ``page.errors``. No Chromium is a failure (``.ci/run`` installs it), and so is a missing playwright.
    A failing test leaves a screenshot of the page in ``test-artifacts/<test>-failure.png``."""
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    assert executable, f"no Chromium at {CHROMIUM} nor on PATH: apt-get install chromium (.ci/run installs it)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            view = browser.new_page(viewport={"width": 1440, "height": 1000})
            view.errors = []
            view.on("pageerror", lambda e: view.errors.append(str(e)))
            yield view
            report = getattr(request.node, "report_call", None)
            if report is not None and report.failed:
                ARTIFACTS.mkdir(exist_ok=True)
                view.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failure.png"), full_page=True)
        finally:
            browser.close()


# -- the tiers --------------------------------------------------------------------------------------------------
TIERS = ("slow", "heavy")  # marked by hand; every other test is marked ``unit`` here (make test-unit: -m unit)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)


def pytest_ignore_collect(collection_path, config):
    """Under ``-m unit`` alone, a module whose own ``pytestmark`` is heavy or slow holds no unit test, so it is not
    imported at all (the app's imports alone take seconds)."""
    if config.getoption("markexpr") != "unit" or not collection_path.name.startswith("test_") \
            or collection_path.suffix != ".py":
        return None
    text = collection_path.read_text(encoding="utf-8")
    return True if re.search(r"^pytestmark = .*pytest\.mark\.(heavy|slow)\b", text, re.M) else None
