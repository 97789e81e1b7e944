"""How fast the app answers a gamma-slider move: p50 / p95 latency, request to finished response.

    python bench/bench_app.py [--model DIR] [--n 30] [--max-new-tokens 64]
    python bench/bench_app.py --load 8 [--n 20]     # the slider while 8 heavy requests (ladders) run

``--load H``: H ladders of 128 tokens (each NTP and a decode per γ of the rule's ladder) are sent first, from
their own sessions; then ``/decode`` is sent one request at a time, and only the requests answered while at least one
ladder is still unfinished count. The app serves heavy jobs on their own line of the queue (``app.page.HEAVY_QUEUE``).

Starts the app (``sbd-viz app``) on a free localhost port in a subprocess, drives the slider's API
endpoint (``/decode``, what the slider's release event calls) with ``gradio_client``, one request
at a time with varied gammas, and prints latency percentiles. The response is the finished view:
the block-fill animation (every frame), the metrics and the texts. NTP on the same prompt is
decoded on the first request of a session only (it does not depend on gamma), so that request is
reported apart. ``server decode`` is the SBD decode time the app itself measured; the rest of the
latency is building and shipping the figure, and Gradio.

Every slider move is read twice in a row with the same gamma: by ``gradio_client`` as it ships (its
stream reader looks at its message queue every 50 ms, so each streamed message can wait that long),
and by the same client reading the stream as it arrives (every 2 ms), which is what a browser does.

After a prompt's first decode the app builds its γ map in the background, and a release inside a decoded piece is
answered from it without a decode. So the decode scenarios change the seed with every move (a setting of the map's
key; at temperature 0 it changes nothing else): each move decodes, as before a prompt's map is built. The map
scenario (``slider move -> full view, answered from the γ map``) starts a new session, decodes once, waits until the
strip under the slider says the map is complete (``/gamma_strip``), and reports the build time beside the moves.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(model: str | None, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sbd_viz", "app", "--port", str(port)] + (["--model", model] if model else [])
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with {proc.returncode}:\n{proc.stderr.read()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the app did not start within 180 s")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


class _Polling:
    """gradio_client's stream reader sleeps 50 ms whenever its queue of received messages is empty, so each
    streamed message can wait up to 50 ms before the caller sees it; a browser handles the stream as it
    arrives. ``prompt()`` makes the reader poll every 2 ms (the server and the app are untouched);
    ``shipped()`` restores gradio_client as it ships."""

    def __init__(self):
        import types

        import gradio_client.utils as gcu

        self.module = gcu
        self.fast = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
        self.fast.sleep = lambda seconds: time.sleep(min(seconds, 0.002))

    def prompt(self) -> None:
        self.module.time = self.fast

    def shipped(self) -> None:
        self.module.time = time


def run(client, prompt: str, gamma: float, max_new_tokens: int, stop: bool, seed: int = 0) -> dict:
    """One slider move: when the numbers arrived, when the animation arrived, what the server measured (no decode
    time when the move was answered from the γ map)."""
    t0 = time.perf_counter()
    job = client.submit(prompt, "entropy_bounded", gamma, False, 16, max_new_tokens, 0.0, seed, stop, False,
                        api_name="/decode")
    seen, t_numbers, t_figure = 0, None, None
    while True:
        done = job.done()
        outs = job.outputs()
        now = time.perf_counter() - t0
        for figure, metrics, _, _ in outs[seen:]:
            if t_numbers is None and "data-nfe" in metrics:
                t_numbers = now
            if t_figure is None and isinstance(figure, str) and figure:
                t_figure = now
        seen = len(outs)
        if done:
            break
        time.sleep(0.002)
    _, metrics, _, _ = job.result()
    from_map = "data-from-map='1'" in metrics
    return dict(numbers=t_numbers, figure=t_figure, total=time.perf_counter() - t0,
                nfe=int(re.search(r"data-nfe='(\d+)'", metrics).group(1)), from_map=from_map,
                decode_ms=None if from_map else decode_ms(metrics))


def decode_ms(metrics: str) -> float:
    """The server's decode time on the wall-clock card: "416 ms" over "SBD decode, one run · NTP ..." (one run each,
    timed apart), or "SBD 416 ms" in the note while NTP runs."""
    found = re.search(r"(\d+) ms</div><div class='sub'>SBD decode, one run", metrics) or \
        re.search(r"SBD (\d+) ms", metrics)
    return float(found.group(1))


def summary(name: str, xs: list[float]) -> str:
    ms = [1000 * x for x in xs]
    return (f"{name}: p50 {statistics.median(ms):.0f} ms  p95 {pct(ms, 0.95):.0f} ms  "
            f"(min {min(ms):.0f}, max {max(ms):.0f})")


def bench(client, polling: _Polling, label: str, prompt: str, n: int, max_new_tokens: int, stop: bool,
          seed: int = 0) -> None:
    """``n`` slider moves, each served twice in a row (the same gamma: the client as shipped, then reading the
    stream as it arrives), so both columns see the same decodes and the same machine."""
    rng = random.Random(seed)
    polling.shipped()
    first = run(client, prompt, 0.5, max_new_tokens, stop)  # this one also decodes NTP
    shipped, prompt_runs = [], []
    for i in range(n):
        gamma = round(rng.uniform(0.0, 2.0), 2)
        polling.shipped()  # a new seed each move: a new γ-map key, so the move decodes (see the docstring)
        shipped.append(run(client, prompt, gamma, max_new_tokens, stop, seed=2 * i + 1))
        polling.prompt()
        prompt_runs.append(run(client, prompt, gamma, max_new_tokens, stop, seed=2 * i + 2))
    assert not any(r["from_map"] for r in shipped + prompt_runs), "a decode scenario's move came from a γ map"
    polling.shipped()
    print(f"\n{label}: prompt {prompt!r}, max_new_tokens={max_new_tokens}, stop at newline={stop}, "
          f"{n} slider moves, gamma ~ U[0, 2]")
    print(f"  first request of the prompt (SBD + NTP): {1000 * first['total']:.0f} ms")
    for name, runs in (("gradio_client as shipped (reads every 50 ms)", shipped),
                       ("stream read as it arrives (every 2 ms)    ", prompt_runs)):
        print(f"  {name}:")
        print("    " + summary("slider move -> full view (animation + metrics)", [r["figure"] for r in runs]))
        print("    " + summary("slider move -> metrics and texts          ", [r["numbers"] for r in runs]))
        print("    " + summary("server SBD decode                         ", [r["decode_ms"] / 1000 for r in runs]))
        print("    " + summary("full view minus server decode             ",
                               [r["figure"] - r["decode_ms"] / 1000 for r in runs]))
    runs = shipped + prompt_runs
    print(f"  model calls per decode p50 {statistics.median(r['nfe'] for r in runs):.0f} "
          f"(min {min(r['nfe'] for r in runs)}, max {max(r['nfe'] for r in runs)})")


def strip_state(client) -> dict:
    """The session's γ strip (``/gamma_strip``, what its timer polls): complete?, pieces, decoded, seconds, calls."""
    out = client.predict(api_name="/gamma_strip")
    strip = out[0] if isinstance(out, (list, tuple)) else out
    found = {k: re.search(rf"data-{k}='([^']*)'", strip or "") for k in ("complete", "pieces", "decoded", "seconds")}
    calls = re.search(r"built in [0-9.]+ s, (\d+) calls", strip or "")
    return dict(complete=bool(found["complete"]) and found["complete"].group(1) == "true",
                **{k: float(v.group(1)) if v else None for k, v in found.items() if k != "complete"},
                calls=int(calls.group(1)) if calls else None)


def map_bench(client, polling: _Polling, label: str, prompt: str, n: int, max_new_tokens: int, stop: bool,
              seed: int = 0) -> None:
    """A new session decodes once, its γ map builds in the background (polled as the page's strip polls it), then
    ``n`` slider moves at random slider positions, each read as the stream arrives: answered from the map."""
    rng = random.Random(seed)
    polling.prompt()
    first = run(client, prompt, 0.5, max_new_tokens, stop)
    t0, load = time.perf_counter(), os.getloadavg()[0]
    while not (state := strip_state(client))["complete"]:
        if time.perf_counter() - t0 > 600:
            raise SystemExit("the γ map was not complete 600 s after the first decode")
        time.sleep(0.1)
    built = time.perf_counter() - t0
    runs = [run(client, prompt, round(rng.uniform(0.0, 2.0), 2), max_new_tokens, stop) for _ in range(n)]
    polling.shipped()
    answered = [r for r in runs if r["from_map"]]
    print(f"\n{label}, γ map: prompt {prompt!r}, max_new_tokens={max_new_tokens}, stop at newline={stop}, "
          f"{n} slider moves, gamma ~ U[0, 2] on the slider's steps, stream read as it arrives")
    print(f"  first request of the prompt (SBD + NTP, then the map is queued): {1000 * first['total']:.0f} ms")
    print(f"  γ map built {built:.1f} s after the first response (its own clock {state['seconds']:.1f} s, "
          f"{state['calls']} calls, {state['decoded']:.0f} of {state['pieces']:.0f} pieces decoded); "
          f"load average {load:.1f} at the start")
    print("  " + summary("slider move -> full view, answered from the γ map", [r["figure"] for r in answered])
          + f"  ({len(answered)} of {n} moves answered from the map; load average {os.getloadavg()[0]:.1f})")
    print("  " + summary("slider move -> metrics and texts, from the map", [r["numbers"] for r in answered]))


def under_load(client_factory, heavy: int, n: int, prompt: str, block_size: int) -> None:
    """``heavy`` ladders of 128 tokens, then /decode one request at a time while they run: p50 / p95 latency."""
    ladders = []
    for _ in range(heavy):  # each from its own session, as 8 users would
        ladders.append(client_factory().submit(prompt, "entropy_bounded", 0.1, False, block_size, 128, 0.0, 0, False,
                                               False, api_name="/ladder"))
    time.sleep(1.0)  # let the queue take them
    client = client_factory()
    lat, running_at = [], []
    rng = random.Random(0)
    t_start = time.perf_counter()
    while len(lat) < n:
        running = sum(not job.done() for job in ladders)
        if running == 0:
            break
        t0 = time.perf_counter()
        client.predict(prompt, "entropy_bounded", round(rng.uniform(0.0, 2.0), 2), False, block_size, 64, 0.0,
                       len(lat) + 1, True, False, api_name="/decode")  # a new seed: each move decodes
        lat.append(time.perf_counter() - t0)
        running_at.append(sum(not job.done() for job in ladders))
        time.sleep(0.3)  # a user's pace between slider moves
    print(f"\nunder load: {heavy} ladders of 128 tokens sent first ({prompt!r}, block {block_size}), then /decode "
          f"(stop at the newline, max 64 tokens, gamma ~ U[0, 2]) one at a time while they run")
    if lat:
        print("  " + summary(f"/decode while ladders run ({len(lat)} requests)", lat))
        print(f"  ladders still unfinished when each answer came: max {max(running_at)}, min {min(running_at)}; "
              f"load average {os.getloadavg()[0]:.1f}")
    done_at = time.perf_counter()
    for job in ladders:
        job.result(timeout=3600)
    print(f"  the {heavy} ladders all finished {time.perf_counter() - t_start:.0f} s after the first /decode "
          f"(the last {time.perf_counter() - done_at:.0f} s after the sampling ended)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--n", type=int, default=30, help="slider moves per scenario")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--prompt", default="assert 48 + 37 == ")
    p.add_argument("--load", type=int, default=0, metavar="H",
                   help="measure /decode while H heavy requests (ladders of 128 tokens) run, instead")
    p.add_argument("--block-size", type=int, default=16)
    args = p.parse_args(argv)

    from gradio_client import Client

    port = free_port()
    t0 = time.perf_counter()
    proc = start_app(args.model, port)
    print(f"app up on port {port} in {time.perf_counter() - t0:.1f} s (model: {args.model or 'shipped'}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}: other processes slow every number)")
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        polling = _Polling()
        run(client, args.prompt, 0.5, 8, True)  # warm up: first-call costs (imports, allocator) are not latency
        if args.load:
            under_load(lambda: Client(f"http://127.0.0.1:{port}/", verbose=False), args.load, args.n, args.prompt,
                       args.block_size)
            print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
            return
        bench(client, polling, "full length", args.prompt, args.n, args.max_new_tokens, stop=False)
        print(f"load average {os.getloadavg()[0]:.1f}")
        map_bench(Client(f"http://127.0.0.1:{port}/", verbose=False), polling, "full length", args.prompt, args.n,
                  args.max_new_tokens, stop=False)
        bench(client, polling, "answer only (stops at the newline)", args.prompt, args.n, args.max_new_tokens,
              stop=True)
        print(f"load average {os.getloadavg()[0]:.1f}")
        map_bench(Client(f"http://127.0.0.1:{port}/", verbose=False), polling, "answer only (stops at the newline)",
                  args.prompt, args.n, args.max_new_tokens, stop=True)
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
