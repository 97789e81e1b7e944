"""How fast the app answers a gamma-slider move: p50 / p95 latency, request to finished response.

    python bench/scripts/bench_app.py [--model DIR] [--n 30] [--max-new-tokens 64]
    python bench/scripts/bench_app.py --load 8 [--n 20]     # the slider while 8 heavy requests (ladders) run
    python bench/scripts/bench_app.py --from-json bench/results/app.json   # the page again, starting no app

Each run prints what it measures and saves it in ``bench/results/app.json`` (a run replaces its own part: the slider's,
or ``--load``'s), and writes ``bench/APP.md`` from both parts.

``--load H``: H ladders of 128 tokens (each NTP and a decode per γ of the rule's ladder) are sent first, from
their own sessions; then ``/decode`` is sent one request at a time, and only the requests answered while at least one
ladder is still unfinished count. The app serves heavy jobs on their own line of the queue (``app.page.HEAVY_QUEUE``).

Starts the app (``sbd-viz app``) on a free localhost port in a subprocess, drives the slider's API
endpoint (``/decode``, what the slider's release event calls) with ``gradio_client``, one request
at a time with varied gammas, and reports latency percentiles. The response is the finished view:
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
import json
import os
import random
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import run_info  # beside this file

ROOT = Path(__file__).resolve().parents[2]


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


TARGET_MS = 150  # a slider move's full view, at the median
LOAD_BAR_S = 2  # a control move while heavy jobs run


def stats(xs: list[float]) -> dict:
    """Seconds -> their p50, p95, min and max in milliseconds."""
    ms = [1000 * x for x in xs]
    return {"p50": statistics.median(ms), "p95": pct(ms, 0.95), "min": min(ms), "max": max(ms)}


def summary(name: str, s: dict) -> str:
    return f"{name}: p50 {s['p50']:.0f} ms  p95 {s['p95']:.0f} ms  (min {s['min']:.0f}, max {s['max']:.0f})"


def bench(client, polling: _Polling, label: str, prompt: str, n: int, max_new_tokens: int, stop: bool,
          seed: int = 0) -> dict:
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
    runs = shipped + prompt_runs
    out = {"kind": "decode", "label": label, "prompt": prompt, "max_new_tokens": max_new_tokens, "stop": stop, "n": n,
           "first_ms": 1000 * first["total"], "readers": {},
           "calls": {"p50": statistics.median(r["nfe"] for r in runs), "min": min(r["nfe"] for r in runs),
                     "max": max(r["nfe"] for r in runs)}}
    for reader, rs in (("shipped", shipped), ("arrives", prompt_runs)):
        out["readers"][reader] = {"figure": stats([r["figure"] for r in rs]),
                                  "numbers": stats([r["numbers"] for r in rs]),
                                  "decode": stats([r["decode_ms"] / 1000 for r in rs]),
                                  "rest": stats([r["figure"] - r["decode_ms"] / 1000 for r in rs])}
    print("\n".join(scenario_lines(out)), flush=True)
    return out


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
              seed: int = 0) -> dict:
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
    out = {"kind": "map", "label": label, "prompt": prompt, "max_new_tokens": max_new_tokens, "stop": stop, "n": n,
           "first_ms": 1000 * first["total"], "built_s": built, "own_s": state["seconds"], "calls": state["calls"],
           "decoded": int(state["decoded"]), "pieces": int(state["pieces"]), "load_start": load,
           "answered": len(answered), "figure": stats([r["figure"] for r in answered]),
           "numbers": stats([r["numbers"] for r in answered]), "load_after": os.getloadavg()[0]}
    print("\n".join(scenario_lines(out)), flush=True)
    return out


def under_load(client_factory, heavy: int, n: int, prompt: str, block_size: int) -> dict:
    """``heavy`` ladders of 128 tokens, then /decode one request at a time while they run: p50 / p95 latency."""
    load_start = os.getloadavg()[0]
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
    sampled = os.getloadavg()[0]
    done_at = time.perf_counter()
    for job in ladders:
        job.result(timeout=3600)
    return {"heavy": heavy, "prompt": prompt, "block_size": block_size, "requests": len(lat),
            "latency": stats(lat) if lat else None, "running": [max(running_at), min(running_at)] if lat else None,
            "load_start": load_start, "load_sampled": sampled, "all_finished_s": time.perf_counter() - t_start,
            "last_s": time.perf_counter() - done_at}


# -- the page ---------------------------------------------------------------------------------------------
def scenario_lines(s: dict) -> list[str]:
    """A scenario as the run prints it."""
    head = f"{s['label']}: prompt {s['prompt']!r}, max_new_tokens={s['max_new_tokens']}, stop at newline={s['stop']}"
    if s["kind"] == "decode":
        lines = ["", f"{head}, {s['n']} slider moves, gamma ~ U[0, 2]",
                 f"  first request of the prompt (SBD + NTP): {s['first_ms']:.0f} ms"]
        for name, reader in (("gradio_client as shipped (reads every 50 ms)", "shipped"),
                             ("stream read as it arrives (every 2 ms)    ", "arrives")):
            r = s["readers"][reader]
            lines += [f"  {name}:",
                      "    " + summary("slider move -> full view (animation + metrics)", r["figure"]),
                      "    " + summary("slider move -> metrics and texts          ", r["numbers"]),
                      "    " + summary("server SBD decode                         ", r["decode"]),
                      "    " + summary("full view minus server decode             ", r["rest"])]
        c = s["calls"]
        return lines + [f"  model calls per decode p50 {c['p50']:.0f} (min {c['min']}, max {c['max']})"]
    head = head.replace(": prompt", ", γ map: prompt", 1)
    return ["", f"{head}, {s['n']} slider moves, gamma ~ U[0, 2] on the slider's steps, stream read as it arrives",
            f"  first request of the prompt (SBD + NTP, then the map is queued): {s['first_ms']:.0f} ms",
            map_built(s) + f"; load average {s['load_start']:.1f} at the start",
            answered(s),
            "  " + summary("slider move -> metrics and texts, from the map", s["numbers"])]


def map_built(s: dict) -> str:
    return (f"  γ map built {s['built_s']:.1f} s after the first response (its own clock {s['own_s']:.1f} s, "
            f"{s['calls']} calls, {s['decoded']} of {s['pieces']} pieces decoded)")


def answered(s: dict) -> str:
    return ("  " + summary("slider move -> full view, answered from the γ map", s["figure"])
            + f"  ({s['answered']} of {s['n']} moves answered from the map; load average {s['load_after']:.1f})")


def run_log(d: dict) -> list[str]:
    """The whole run as it printed it."""
    lines = [f"app up on port {d['port']} in {d['up_s']:.1f} s (model: {d['model_arg'] or 'shipped'}, {d['cpus']} "
             f"CPUs, load average {d['load_up']:.1f}: other processes slow every number)"]
    for s in d["scenarios"]:
        lines += scenario_lines(s)
        if s["kind"] == "decode":
            lines.append(f"load average {s['load_after']:.1f}")
    return lines + ["", f"load average at the end: {d['load_end']:.1f}"]


def shown(d: dict) -> str:
    return "the shipped model" if d["model_arg"] is None else f"the model in `{d['model_arg']}`"


def render(data: dict) -> str:
    """The page from the runs' data: a run of the slider (``run``) and one under load (``under_load``)."""
    d, u = data["run"], data.get("under_load")
    ctx = d.get("context", {})
    by = {(s["kind"], s["stop"]): s for s in d["scenarios"]}
    full, short = by[("decode", False)], by[("decode", True)]
    full_map, short_map = by[("map", False)], by[("map", True)]
    fa, sa = full["readers"]["arrives"], short["readers"]["arrives"]
    lines = ["# The app's latency: gamma-slider move to response", "",
             "## A slider move answered from the γ map", "",
             f"Produced by `{d['command']}` on {d['date']} ({d['cpus']} CPU cores; load average {d['load_up']:.1f} at "
             f"the start, {d['load_end']:.1f} at the end" + (f": {d['beside']}" if d.get("beside") else "")
             + f"), on {shown(d)} (`{d['model']}`, fingerprint {d['fingerprint']}), torch {d['torch']}, "
             f"Gradio {d['gradio']}, at block {d['block_size']}. A new session releases the slider once (a decode, "
             "then NTP), waits until the strip under the slider says its γ map is complete (polling `/gamma_strip` as "
             f"the page's timer does), then moves the slider {full_map['n']} times to random slider positions (γ ~ "
             "U[0, 2] on the 0.01 steps), reading the stream as it arrives (as a browser does):", "",
             "```"]
    for s in (full_map, short_map):
        lines += [f"{s['label']}, γ map: prompt {s['prompt']!r}, max_new_tokens={s['max_new_tokens']}, stop at "
                  f"newline={s['stop']}", map_built(s), answered(s), ""]
    lines[-1] = "```"
    view = full_map["figure"]
    lines += ["",
              f"- **Answered from the map, the full {full_map['max_new_tokens']}-token view takes {view['p50']:.0f} ms "
              f"p50 / {view['p95']:.0f} ms p95**, {'under' if view['p50'] < TARGET_MS else 'over'} the {TARGET_MS} ms "
              f"target at the median (a decode of the same view: {fa['figure']['p50']:.0f} ms p50, below). No model "
              "call runs for it: the trace, its animation and its cards are those of the map's piece holding γ, which "
              "is the decode `sv.decode` gives at that γ (same text, calls and commits per call; "
              "`tests/integration/test_app_gamma_map.py` checks it). What remains is building the metrics, the texts "
              "and the figure (plain data: `block_fill_spec` and its JSON"
              + (f", {ctx['view_build_ms']} ms in process for this prompt's {ctx['view_frames']} frames at γ "
                 f"{ctx['view_gamma']:g}" if "view_build_ms" in ctx else "")
              + "), and Gradio's queue and streaming.",
              f"- **The map is there {full_map['built_s']:.1f} s after the first response** for "
              f"{full_map['max_new_tokens']} tokens: {full_map['calls']} model calls (prefix reuse replays the calls a "
              f"piece shares with the one below it), {full_map['decoded']} decodes; the "
              f"{full_map['pieces'] - full_map['decoded']} stretches left hold no slider position. For the answer only "
              f"(stop at the newline) it takes {short_map['built_s']:.1f} s: {short_map['calls']} calls, "
              f"{short_map['pieces']} pieces. Until then, and after any change of prompt or of a setting other than "
              "γ, a release inside a piece not yet decoded decodes, as in \"One slider move at a time\" below.",
              "- How (`sbd_viz/app/map_builder.py`): one worker thread for the whole app builds each session's "
              "slider-step map (`GammaMapWalk`), one piece at a time, of the most recently wanted unfinished map "
              "first. Each of its model calls waits while any interactive request runs and for 0.3 s after it "
              "(`QUIET`), so an interactive decode waits for at most the call in flight, and Gradio ships each "
              "response without the worker's Python holding the GIL against it"
              + (f" (in a run minutes before this one, without the quiet time, 'full view minus server decode' for a "
                 f"{full['max_new_tokens']}-token decode was {ctx['no_quiet_rest_p50_ms']} ms p50; "
                 f"{fa['rest']['p50']:.0f} ms with it)" if "no_quiet_rest_p50_ms" in ctx else "")
              + ". The app keeps at most 32 maps (one per session), the least recently used dropped first."]
    if u:
        lines += ["", f"## Under load: a slider move while {u['heavy']} heavy requests run", "",
                  f"Produced by `{u['command']}` on {u['date']} ({u['cpus']} CPU cores"
                  + (f" {u['beside']}" if u.get("beside") else "")
                  + f"; load average {u['load_start']:.1f} at the start, {u['load_sampled']:.1f} when the sampling "
                  f"ended, {u['load_end']:.1f} at the end), on {shown(u)} (block {u['block_size']}). "
                  f"First {u['heavy']} ladders of 128 tokens (\"This prompt across γ\": NTP, then a decode at each of "
                  f"the rule's {u['ladder_gammas']} γ) are sent, each from its own session; then `/decode` "
                  f"(`{u['prompt']}`, stop at the newline, γ ~ U[0, 2]) one request at a time, 0.3 s apart, counting "
                  "only answers that came while ladders were unfinished.", "", "```"]
        lat = u["latency"]
        lines += [summary(f"/decode while ladders run ({u['requests']} requests)", lat),
                  f"ladders still unfinished when each answer came: max {u['running'][0]}, min {u['running'][1]}; "
                  f"load average {u['load_sampled']:.1f}",
                  f"the {u['heavy']} ladders all finished {u['all_finished_s']:.0f} s after the first /decode"
                  + ("" if u.get("last_s") is None else f" (the last {u['last_s']:.0f} s after the sampling ended)"),
                  "```", ""]
        still = "all " + str(u["heavy"]) if u["running"][1] == u["heavy"] else f"at least {u['running'][1]}"
        lines += [(f"- **With one shared line** (two jobs at a time, first in first out), a plain "
                   f"{ctx['one_line_decode_s']:g} s `/decode` behind {u['heavy']} ladders of 128 tokens waits "
                   f"**{ctx['one_line_wait_s']:g} s**. With two lines it answers"
                   if "one_line_wait_s" in ctx else "- **With two lines** it answers")
                  + f" in {lat['p50']:.0f} ms p50 / {lat['p95']:.0f} ms p95 while {still} still wait or run, "
                  f"{'under' if lat['p95'] < 1000 * LOAD_BAR_S else 'over'} the {LOAD_BAR_S} s bar.",
                  "- Why: the app's events use two concurrency groups (`sbd_viz/app/serving.py`: `MODEL_QUEUE`, "
                  "`HEAVY_QUEUE`). Gradio keeps one line per group and takes the next event from any group with room, "
                  "so a control move (decode, details: two at a time) never waits behind the heavy jobs (ladder, "
                  "compare, GIF, Time it: one at a time). With one torch thread per job (`main`), one heavy job takes "
                  "one core and the decodes the other; two heavy jobs plus a decode would put three threads on two "
                  "cores.",
                  f"- The price: heavy jobs run one after another, so {u['heavy']} ladders of 128 tokens take "
                  f"{u['all_finished_s']:.0f} s here ({u['all_finished_s'] / u['heavy']:.0f} s each) instead of "
                  "finishing two at a time. Each button's `trigger_mode` (\"once\") keeps one pending job per session "
                  "and button; the queue holds at most 64 waiting events over both lines."]
        if u.get("note"):
            lines += ["", u["note"]]
    gain = [full["readers"]["shipped"]["figure"]["p50"] - fa["figure"]["p50"],
            short["readers"]["shipped"]["figure"]["p50"] - sa["figure"]["p50"]]
    c = full["calls"]
    rest = sorted(f"{r['rest']['p50']:.0f}" for r in (fa, sa))
    lines += ["", "## One slider move at a time: a release that decodes", "",
              "The same run (command, date and machine as above). Every move decodes: the bench changes the seed with "
              "each move, a setting of the γ map's key (at temperature 0 it changes nothing else), so no move is "
              "answered from a map, as before a prompt's map is built. Each move is read twice with the same γ: by "
              "`gradio_client` as it ships, whose stream reader looks at its queue of received messages every 50 ms, "
              "and by the same client polling every 2 ms, as a browser reads the stream when it arrives. 'full view' "
              "= the finished response with the block-fill animation (every frame); 'metrics and texts' = the first "
              "streamed update that carries the finished metrics.", "",
              "```", *run_log(d), "```", "",
              f"- **The client is part of the number**: reading the stream as it arrives takes "
              f"{min(gain):.0f}-{max(gain):.0f} ms off the p50 (full length "
              f"{full['readers']['shipped']['figure']['p50']:.0f} -> {fa['figure']['p50']:.0f} ms; answer only "
              f"{short['readers']['shipped']['figure']['p50']:.0f} -> {sa['figure']['p50']:.0f} ms).",
              f"- **A {full['max_new_tokens']}-token decode is the floor of its full view, and alone it "
              f"{'exceeds' if fa['decode']['p50'] > TARGET_MS else 'stays under'} the {TARGET_MS} ms target**: "
              f"{c['p50']:.0f} calls (p50; {c['min']}-{c['max']}) cost {fa['decode']['p50']:.0f} ms in the app in "
              f"this run, about {fa['decode']['p50'] / c['p50']:.0f} ms a call."
              + (f" At this machine's fastest seen (a server decode of {ctx['fastest_decode_p50_ms']} ms p50 for this "
                 f"prompt, {ctx['fastest_decode_date']}) the decode alone still exceeded {TARGET_MS} ms;"
                 if "fastest_decode_p50_ms" in ctx else "")
              + " the γ map answers instead once it is built (the first section).",
              f"- **Everything after the decode costs {rest[0]}-{rest[1]} ms p50** (stream read as it arrives): "
              "building the metrics, texts and figure, Gradio's queue and streaming diffs, and the progress views "
              "shown every 100 ms while a long decode runs.",
              f"- The answer-only view (the app's default, stop at the newline) "
              f"{'meets' if sa['figure']['p50'] < TARGET_MS else 'misses'} the target by decoding: "
              f"{sa['figure']['p50']:.0f} ms p50.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--n", type=int, default=30, help="slider moves per scenario")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--prompt", default="assert 48 + 37 == ")
    p.add_argument("--load", type=int, default=0, metavar="H",
                   help="measure /decode while H heavy requests (ladders of 128 tokens) run, instead")
    p.add_argument("--block-size", type=int, default=16)
    # a run replaces its own part of --json (the slider's, or --load's) and keeps the other
    run_info.add_page_arguments(p, run_info.BENCH / "APP.md", run_info.RESULTS / "app.json")
    args = p.parse_args(argv)
    if args.from_json:
        Path(args.out).write_text(render(json.loads(Path(args.from_json).read_text())))
        print(f"wrote {args.out}")
        return
    argv = list(sys.argv[1:] if argv is None else argv)

    import gradio
    import torch
    from gradio_client import Client

    import sbd_viz as sv
    from sbd_viz.analysis.gamma_ladder import ladder_gammas

    model = sv.load_model(args.model)
    header = {"command": shlex.join(["python", "bench/scripts/bench_app.py", *argv]), "date": run_info.utc_now(),
              "cpus": os.cpu_count(), "model": model.name, "fingerprint": model.fingerprint(),
              "model_arg": args.model, "torch": torch.__version__,
              "gradio": gradio.__version__, "block_size": args.block_size}
    del model
    port = free_port()
    t0 = time.perf_counter()
    proc = start_app(args.model, port)
    header.update(port=port, up_s=time.perf_counter() - t0, load_up=os.getloadavg()[0])
    print(f"app up on port {port} in {header['up_s']:.1f} s (model: {args.model or 'shipped'}, "
          f"{os.cpu_count()} CPUs, load average {header['load_up']:.1f}: other processes slow every number)")
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        polling = _Polling()
        run(client, args.prompt, 0.5, 8, True)  # warm up: first-call costs (imports, allocator) are not latency
        if args.load:
            loaded = under_load(lambda: Client(f"http://127.0.0.1:{port}/", verbose=False), args.load, args.n,
                                args.prompt, args.block_size)
            part, result = "under_load", {**header, "ladder_gammas": len(ladder_gammas("entropy_bounded")), **loaded}
            result["load_end"] = os.getloadavg()[0]
        else:
            scenarios = []
            for label, stop in (("full length", False), ("answer only (stops at the newline)", True)):
                scenarios.append(bench(client, polling, label, args.prompt, args.n, args.max_new_tokens, stop=stop))
                scenarios[-1]["load_after"] = os.getloadavg()[0]
                print(f"load average {scenarios[-1]['load_after']:.1f}")
                scenarios.append(map_bench(Client(f"http://127.0.0.1:{port}/", verbose=False), polling, label,
                                           args.prompt, args.n, args.max_new_tokens, stop=stop))
            part, result = "run", {**header, "scenarios": scenarios, "load_end": os.getloadavg()[0]}
            print(f"\nload average at the end: {result['load_end']:.1f}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    path = Path(args.json)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[part] = result
    path.write_text(json.dumps(data, indent=1))
    if "run" in data:
        Path(args.out).write_text(render(data))
        print(f"wrote {args.out} and {args.json}")
    else:
        print(f"wrote {args.json}; the page needs a run without --load too")


if __name__ == "__main__":
    main()
