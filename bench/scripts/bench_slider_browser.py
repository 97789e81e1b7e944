"""Release-to-redraw of the γ slider in a real browser (headless Chromium, driven by Playwright), on both models.

    nice -n 10 python bench/scripts/bench_slider_browser.py [--moves 15] [--models char,smollm2-135m-sbd]

For each model: starts the app (``sbd-viz app``) in a subprocess on a free localhost port, opens the page, waits until
the first example's γ map is built (the scrubber says so), then drags the scrubber's thumb ``--moves`` times, each
time from where it is to the middle of another decoded piece (mouse down, 12 moves, mouse up, as a user's drag), and
does the same with the page's own γ slider. Writes ``bench/SLIDER.md``.

What it reads, on the page's own clock (``performance.now()``; ``HARNESS`` below):
- **release to redraw**: from the ``pointerup`` event to the first frame after the scrubber shows the released γ
  (its block fill, numbers and strip): the picture a user sees when letting go.
- **input to redraw**: from each ``input`` event of a drag to the first frame after the scrubber shows that γ.
- **release to the full views**: from the ``pointerup`` to the first frame after the block-fill animation (Plotly) has
  redrawn with the server's answer: the round trip the scrubber no longer waits for.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import run_info  # beside this file

ROOT = Path(__file__).resolve().parents[2]
SCRUBBER = "#sbd-scrubber"
SCRUB_RANGE = f"{SCRUBBER} input[type=range]"
PAGE_RANGE = "#sbd-gamma input[type=range]"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

# Installed in the page once: it records each drag's timings in window.__sbdTimes. "After the frame": a task queued
# from the frame's requestAnimationFrame callback runs once that frame is painted.
HARNESS = """() => {
  if (window.__sbdTimes) return;
  const times = window.__sbdTimes = {release: [], input: [], views: []};
  const root = () => document.querySelector('#sbd-scrubber .sbd-scrub');
  const anim = () => document.querySelector('#sbd-anim .sbd-anim-plot');
  const afterFrame = (f) => requestAnimationFrame(() => setTimeout(f, 0));
  const shows = (g) => root() && root().dataset.gamma === String(g);
  const isSlider = (t) => t && t.type === 'range' && t.closest && t.closest('#sbd-scrubber, #sbd-gamma');
  // on window, in the capture phase: before any listener of the page (the scrubber delays the slider's own release)
  window.addEventListener('input', (e) => {
    if (!isSlider(e.target)) return;
    const t0 = e.timeStamp, g = Number(e.target.value);
    afterFrame(() => { if (shows(g)) times.input.push(performance.now() - t0); });
  }, true);
  window.addEventListener('pointerup', (e) => {
    const slider = isSlider(e.target) ? e.target : null;
    if (!slider || e.sbdLater) return;
    const t0 = e.timeStamp, drawn = anim() && anim().dataset.drawn;
    const redrawn = () => {
      if (shows(Number(slider.value))) afterFrame(() => times.release.push(performance.now() - t0));
      else if (performance.now() - t0 < 5000) requestAnimationFrame(redrawn);
      else times.release.push(null);  // never shown: counted as a failure
    };
    redrawn();
    const full = () => {
      if (anim() && anim().dataset.drawn !== drawn) afterFrame(() => times.views.push(performance.now() - t0));
      else if (performance.now() - t0 < 60000) setTimeout(full, 5);
      else times.views.push(null);
    };
    full();
  }, true);
}"""

def pieces(page) -> list[dict]:
    """The scrubber's pieces as the page holds them (read from its drawn strip: ends and decoded or not)."""
    return page.evaluate("""() => [...document.querySelectorAll('#sbd-scrubber .track > div')].map((d) => ({
        i: Number(d.dataset.i), lo: Number(d.dataset.lo), hi: Number(d.dataset.hi),
        decoded: d.dataset.decoded === '1'}))""")


def ready(page, url: str, timeout_ms: int = 600000) -> str:
    """The page loaded, its first decode shown with SBD and its γ map built (the scrubber holds every piece). A first
    example that opens with another decoder (a text model's examples open with the one that drafted best, e.g. prompt
    lookup, which has no γ) is decoded again with SBD picked in the decoder menu. Returns the decoder it opened with."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=timeout_ms)
    opened = page.locator("#sbd-decoder input").first.input_value()
    if opened != "SBD":
        page.locator("#sbd-decoder input").click()
        page.locator("ul[role=listbox] li", has_text="SBD").first.click()  # the menu lists SBD before its variants
        page.wait_for_function("() => document.querySelector('#sbd-decoder input').value === 'SBD'", timeout=30000)
    page.wait_for_selector(f"{SCRUBBER} .sbd-scrub[data-complete='true']", timeout=timeout_ms)
    page.wait_for_selector("#sbd-anim .sbd-anim-plot[data-drawn]", timeout=timeout_ms)
    page.evaluate(HARNESS)
    return opened


def x_of(page, selector: str, gamma: float) -> tuple[float, float]:
    """Where on the screen a range input's thumb sits at ``gamma`` (Chromium's thumb: 16 px wide by default)."""
    page.locator(selector).scroll_into_view_if_needed()
    box = page.locator(selector).bounding_box()
    lo, hi = (float(page.locator(selector).get_attribute(a) or d) for a, d in (("min", 0), ("max", 1)))
    thumb = 16
    return box["x"] + thumb / 2 + (box["width"] - thumb) * (gamma - lo) / (hi - lo), box["y"] + box["height"] / 2


def drag(page, selector: str, start: float, end: float, steps: int = 12, during=None) -> None:
    """Press the thumb at ``start``, move to ``end`` in ``steps`` moves, call ``during()`` (still pressed), release."""
    page.mouse.move(*x_of(page, selector, start))
    page.mouse.down()
    page.mouse.move(*x_of(page, selector, end), steps=steps)
    if during is not None:
        during()
    page.mouse.up()


def targets(page, width: float = 0.02) -> list[float]:
    """The middles of the decoded pieces at least ``width`` of the range wide."""
    ps = [p for p in pieces(page) if p["decoded"]]
    span = max(p["hi"] for p in ps) - min(p["lo"] for p in ps)
    return [(p["lo"] + p["hi"]) / 2 for p in ps if p["hi"] - p["lo"] >= width * span]


def moves(page, selector: str, n: int) -> dict:
    """``n`` drags of the slider at ``selector``, each to the middle of the next wide decoded piece (never the one it
    is in); returns the timings recorded for them (ms lists: release, input, views)."""
    page.evaluate("() => { for (const k in window.__sbdTimes) window.__sbdTimes[k].length = 0; }")
    aims = targets(page)
    if len(aims) < 2:
        raise RuntimeError(f"the map has {len(aims)} wide decoded piece(s): nothing to scrub between")
    here = float(page.locator(selector).input_value())
    for k in range(n):
        aim = aims[k % len(aims)]
        if abs(aim - here) < 1e-9:
            aim = aims[(k + 1) % len(aims)]
        views = page.evaluate("() => window.__sbdTimes.views.length")
        drag(page, selector, here, aim)
        page.wait_for_function(f"() => window.__sbdTimes.views.length > {views}", timeout=120000)
        here = float(page.locator(selector).input_value())
        page.wait_for_timeout(300)  # the server's follow-up views (strip, details) settle before the next drag
    return page.evaluate("() => window.__sbdTimes")


def _start(model: str, port: int, log) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sbd_viz", "app", "--port", str(port)]
    cmd += [] if model == "char" else ["--model", model]
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with {proc.returncode}; its log: {log.name}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"the app did not start within 600 s; its log: {log.name}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(ms: list) -> dict | None:
    """A timing list's summary (ms; ``None`` marks a release never shown): median, nearest-rank p95, min, max, n and
    how many were never shown; ``None`` when nothing was recorded."""
    done = [x for x in ms if x is not None]
    if not done:
        return None
    p95 = sorted(done)[min(len(done) - 1, math.ceil(0.95 * len(done)) - 1)]  # nearest rank: a measured value
    return {"median": statistics.median(done), "p95": p95, "min": min(done), "max": max(done), "n": len(done),
            "failed": len(ms) - len(done)}


def _summary(s: dict | None) -> str:
    if s is None:
        return "none recorded"
    return (f"median {s['median']:.1f} ms, p95 {s['p95']:.1f} ms (min {s['min']:.1f}, max {s['max']:.1f}, "
            f"n = {s['n']})" + (f", {s['failed']} never shown" if s["failed"] else ""))


def bench_model(model: str, n: int, shots: str | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    with tempfile.NamedTemporaryFile("w", prefix="sbd_slider_app_", suffix=".log", delete=False) as log:
        proc = _start(model, port, log)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                t0 = time.perf_counter()
                opened = ready(page, f"http://127.0.0.1:{port}/")
                built = time.perf_counter() - t0
                info = page.evaluate("""() => { const r = document.querySelector('#sbd-scrubber .sbd-scrub');
                    return {pieces: r.dataset.pieces, decoded: r.dataset.decoded, bytes: r.dataset.bytes}; }""")
                prompt = page.locator("#sbd-prompt textarea").input_value()
                result = {"model": model, "prompt": prompt, "opened": opened, "built_s": round(built),
                          "pieces": int(info["pieces"]), "decoded": int(info["decoded"]),
                          "json_kib": round(int(info["bytes"]) / 1024), "sliders": []}
                for name, selector in (("the scrubber's own range", SCRUB_RANGE), ("the page's γ slider", PAGE_RANGE)):
                    load0 = os.getloadavg()[0]
                    times = moves(page, selector, n)
                    result["sliders"].append({"name": name, "drags": n, "load": [round(load0, 1),
                                                                                 round(os.getloadavg()[0], 1)],
                                              **{k: stats(times[k]) for k in ("release", "input", "views")}})
                if shots:
                    page.locator(SCRUBBER).screenshot(path=str(Path(shots) / f"scrubber_{model}.png"))
                browser.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return result


def model_lines(r: dict) -> list[str]:
    """One model's section of the page."""
    lines = [f"### {r['model']}", "",
             f"First example {r['prompt']!r}"
             + (f" (it opens with {r['opened']}; SBD picked in the decoder menu)" if r["opened"] != "SBD" else "")
             + f": page loaded, decoded and its γ map built in {r['built_s']:.0f} s; {r['pieces']} pieces "
             f"({r['decoded']} decoded), {r['json_kib']:.0f} KiB of JSON on the page.", "", "```"]
    for s in r["sliders"]:
        lines += [f"{s['name']}, {s['drags']} drags (load average {s['load'][0]:.1f} -> {s['load'][1]:.1f}):",
                  f"  release -> redraw (scrubber)      {_summary(s['release'])}",
                  f"  input -> redraw (while dragging)  {_summary(s['input'])}",
                  f"  release -> full views (Plotly)    {_summary(s['views'])}"]
    return lines + ["```", ""]


def render(d: dict) -> str:
    """The page from a run's data."""
    h = d["header"]
    return "\n".join([
        "# The γ slider in a real browser: release to redraw", "",
        f"Produced by `{h['command']}` on {h['date']} ({h['machine']}, Gradio {h['gradio']}, headless Chromium through "
        f"Playwright); load average (1, 5, 15 min) {h['load_start']} at the start, {h['load_end']} at the end. The "
        "machine is shared: other jobs ran beside it.", "",
        "Each drag presses the thumb where it is, moves to the middle of another decoded piece of the prompt's γ "
        "map in 12 mouse moves, and releases. Timed on the page's clock: **release -> redraw** from the `pointerup` "
        "to the first frame after the scrubber (`sbd_viz/app/scrubber.py`) shows the released γ's block fill, "
        "numbers and strip; **input -> redraw** from each `input` event of the drag to the frame showing it; "
        "**release -> full views** from the `pointerup` to the frame after the Plotly animation redrew with the "
        "server's answer (from the γ map, no model call), which the scrubber does not wait for. \"Never shown\": no "
        "redraw within 5 s (the scrubber) or 60 s (the full views) of that release.", "",
        *[line for r in d["models"] for line in model_lines(r)]]) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=15, help="drags per slider and model")
    ap.add_argument("--models", default="char,smollm2-135m-sbd",
                    help="comma-separated: char (the shipped character model) and/or smollm2-135m-sbd")
    run_info.add_page_arguments(ap, run_info.BENCH / "SLIDER.md", run_info.RESULTS / "slider.json")
    ap.add_argument("--shots", default=None, metavar="DIR", help="save a screenshot of each model's scrubber there")
    args = ap.parse_args(argv)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        argv = list(sys.argv[1:] if argv is None else argv)
        header = {"command": " ".join(["nice -n 10 python bench/scripts/bench_slider_browser.py",
                                       *map(shlex.quote, argv)]),
                  "date": run_info.utc_now(), "machine": run_info.machine(), "load_start": run_info.load()}
        models = []
        for model in args.models.split(","):
            models.append(bench_model(model.strip(), args.moves, args.shots))
            print("\n".join(model_lines(models[-1])), flush=True)
        import gradio

        header.update(gradio=gradio.__version__, load_end=run_info.load())
        data = {"header": header, "models": models}
        Path(args.json).write_text(json.dumps(data, indent=1))
    Path(args.out).write_text(render(data))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
