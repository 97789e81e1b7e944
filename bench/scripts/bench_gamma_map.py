"""The γ map against the slider: what it costs to know every distinct decode of a prompt, and every slider position.

For held-out suite prompts, answer-only (stop at the newline) and 64 tokens (no stop), side by side per prompt:

- the **exact map** (``sv.gamma_map(model, prompt)``: every piece over the slider's range, γ 0 to 2), with and
  without prefix reuse (``reuse_prefix=True``: the calls a piece shares with the piece below it are replayed from a
  snapshot of the previous decode, not run);
- the **slider-step map** (``step=0.01``: only the pieces holding one of the slider's 201 positions), with and
  without prefix reuse;
- **201 slider decodes** (``sv.decode`` at each slider position, what a slider that decodes on every release runs),
  each checked against the step map's trace at that position (the page counts disagreements: 0 expected).

Calls are model forwards run (deterministic); seconds are wall-clock on a shared CPU, so the page reports ratios
measured on the same prompt back to back, and the load average at the start and end.

    nice python bench/scripts/bench_gamma_map.py --answer-only 6 --long 3 --threads 1 \
        --out bench/GAMMA_MAP.md --json bench/results/gamma_map.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import sbd_viz as sv
from sbd_viz import tasks
from sbd_viz.analysis.gamma_map import _slider_positions, gamma_map
from sbd_viz.decoders.rules import COMMIT_RULES, DEFAULT_RULE

import run_info  # beside this file

LONG_TOKENS = 64
STOP = "\n"


def spread(items: list, n: int, offset: int = 0) -> list:
    """``n`` items spread evenly over ``items`` (different families), starting ``offset`` in."""
    return [items[(offset + i * len(items) // n) % len(items)] for i in range(n)]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def measure(model, prompt: str, setting: str, settings: dict, step: float, flip: bool) -> dict:
    lo, hi, _ = COMMIT_RULES[DEFAULT_RULE].slider
    row = {"prompt": prompt, "setting": setting}
    builds = {}  # each pair runs back to back, in alternating order from prompt to prompt (load drifts)
    for name, kw in (("exact", {}), ("step", dict(step=step))):
        order = (False, True) if flip else (True, False)
        for reuse in order:
            key = f"{name}{'_reuse' if reuse else ''}"
            builds[key], row[f"{key}_s"] = timed(lambda: gamma_map(model, prompt, reuse_prefix=reuse, **kw,
                                                                   **settings))
    exact, reused, steps, steps_reused = builds["exact"], builds["exact_reuse"], builds["step"], builds["step_reuse"]
    positions = _slider_positions(lo, hi, step, False)
    calls, wrong = 0, 0
    t0 = time.perf_counter()
    for g in positions:
        trace = sv.decode(model, prompt, gamma=g, **settings)
        calls += trace.nfe
        wrong += trace.output_ids != steps.trace_at(g).output_ids or trace.nfe != steps.trace_at(g).nfe
    row["slider_s"] = time.perf_counter() - t0
    ntp = sv.decode_ntp(model, prompt, **settings)
    runs = exact.text_runs(ntp)
    row.update(
        pieces=len(exact.pieces), step_pieces=len(steps.decoded()), texts=len({r["text"] for r in runs}),
        ntp_pieces=sum(1 for p in exact.pieces if p.trace.text == ntp.text),
        exact_calls=exact.calls, exact_reuse_calls=reused.calls, exact_replayed=reused.replayed,
        step_calls=steps.calls, step_reuse_calls=steps_reused.calls, slider_calls=calls, slider_decodes=len(positions),
        slider_wrong=wrong, same_with_reuse=[str(p) for p in exact.pieces] == [str(p) for p in reused.pieces],
        safe=[dict(lo=r["lo"], hi=r["hi"], lo_closed=r["lo_closed"], hi_closed=r["hi_closed"])
              for r in runs if r["same_as_ntp"]])
    for k in ("exact_s", "exact_reuse_s", "step_s", "step_reuse_s", "slider_s"):
        row[k] = round(row[k], 3)
    return row


def run(args, argv) -> tuple[dict, list[dict], list[dict]]:
    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    suite = tasks.load_suite(split="test", per_family=args.per_family, seed=args.suite_seed)
    argv = list(sys.argv[1:] if argv is None else argv)
    header = {"command": " ".join(["python bench/scripts/bench_gamma_map.py", *argv]),
              "date": run_info.utc_now(), "machine": run_info.machine(args.threads), "load_start": run_info.load(),
              "model": model.name, "block_size": model.block_size, "rule": DEFAULT_RULE,
              "slider": list(COMMIT_RULES[DEFAULT_RULE].slider), "step": args.step}
    sv.decode(model, suite[0].prompt, stop=STOP)  # warm up: the first forward pays for allocations
    t0 = time.perf_counter()
    results = []
    for item in spread(suite, args.answer_only):
        results.append(measure(model, item.prompt, "answer only", dict(stop=STOP), args.step, len(results) % 2 == 0))
        print(results[-1], file=sys.stderr, flush=True)
    for item in spread(suite, args.long, offset=1):
        results.append(measure(model, item.prompt, f"{LONG_TOKENS} tokens",
                               dict(max_new_tokens=LONG_TOKENS), args.step, len(results) % 2 == 0))
        print(results[-1], file=sys.stderr, flush=True)
    header["seconds"] = round(time.perf_counter() - t0, 1)
    header["load_end"] = run_info.load()
    return header, results, []


def _shown(prompt: str) -> str:
    """A prompt in a table cell: newlines as ⏎, pipes escaped."""
    from sbd_viz.trace.labels import visible

    return visible(prompt).replace("|", "\\|")


def _range(r: dict) -> str:
    from sbd_viz.analysis.gamma_map import format_range

    return format_range(r["lo"], r["hi"], r["lo_closed"], r["hi_closed"])


def markdown(header: dict, results: list[dict], examples: list[dict]) -> str:
    lo, hi, step = header["slider"]
    n_pos = results[0]["slider_decodes"] if results else 0
    lines = [
        "# The γ map: every distinct decode of a prompt, against decoding at every slider position", "",
        f"Command: `{header['command']}`  ",
        f"Run {header['date']} on {header['machine']}; load average {header['load_start']} at the start, "
        f"{header['load_end']} at the end; {header['seconds']} s.  ",
        f"Model `{header['model']}`, block {header['block_size']}, rule {header['rule']}, γ from {lo:g} to {hi:g} "
        f"(the app's slider: {n_pos} positions, step {header['step']:g}); held-out suite prompts.", "",
        "- **exact map**: `sv.gamma_map(model, prompt)`, every piece (every distinct decode) over the range;",
        f"- **step map**: `sv.gamma_map(..., step={header['step']:g})`, only the pieces holding a slider position;",
        f"- **slider**: `sv.decode` at each of the {n_pos} slider positions, what a slider that decodes on every "
        "release runs;",
        "- **reuse**: `reuse_prefix=True`, the calls a piece shares with the piece below it replayed from the previous "
        "decode's replies and KV-cache snapshots instead of run.", "",
        "Calls are model forwards run. Seconds are wall-clock on a shared 2-core CPU, each prompt's five builds run "
        "back to back (each pair with and without reuse in alternating order from prompt to prompt); read the ratios, "
        "not the absolute times.", "",
        "| prompt | setting | pieces (exact) | pieces holding a slider position | texts | pieces with NTP's text "
        "| calls: exact / with reuse | calls: step map / with reuse | calls: slider | s: exact / with reuse "
        "| s: step map / with reuse | s: slider | slider ÷ step map (s) | slider ÷ exact (s) | slider decodes ≠ map |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| `{_shown(r['prompt'])}` | {r['setting']} | {r['pieces']} | {r['step_pieces']} | {r['texts']} "
            f"| {r['ntp_pieces']} | {r['exact_calls']:,} / {r['exact_reuse_calls']:,} "
            f"| {r['step_calls']:,} / {r['step_reuse_calls']:,} | {r['slider_calls']:,} "
            f"| {r['exact_s']:.1f} / {r['exact_reuse_s']:.1f} | {r['step_s']:.1f} / {r['step_reuse_s']:.1f} "
            f"| {r['slider_s']:.1f} | {r['slider_s'] / r['step_s']:.1f}x | {r['slider_s'] / r['exact_s']:.2f}x "
            f"| {r['slider_wrong']} |")
    lines += ["", "## Per setting (medians of the per-prompt ratios)", "",
              "| setting | prompts | calls: slider ÷ step map | s: slider ÷ step map | calls: slider ÷ exact "
              "| s: slider ÷ exact | calls saved by reuse, exact (run ÷ run with reuse) | s: exact ÷ exact with reuse "
              "| calls saved by reuse, step map | s: step map ÷ with reuse |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for setting in dict.fromkeys(r["setting"] for r in results):
        rs = [r for r in results if r["setting"] == setting]

        def med(f):
            return statistics.median(f(r) for r in rs)

        lines.append(
            f"| {setting} | {len(rs)} | {med(lambda r: r['slider_calls'] / r['step_calls']):.1f}x "
            f"| {med(lambda r: r['slider_s'] / r['step_s']):.1f}x "
            f"| {med(lambda r: r['slider_calls'] / r['exact_calls']):.2f}x "
            f"| {med(lambda r: r['slider_s'] / r['exact_s']):.2f}x "
            f"| {med(lambda r: r['exact_calls'] / r['exact_reuse_calls']):.2f}x "
            f"| {med(lambda r: r['exact_s'] / r['exact_reuse_s']):.2f}x "
            f"| {med(lambda r: r['step_calls'] / r['step_reuse_calls']):.2f}x "
            f"| {med(lambda r: r['step_s'] / r['step_reuse_s']):.2f}x |")
    if results:
        def span(f):
            vals = [f(r) for r in results]
            return f"{min(vals):.2f}x to {max(vals):.2f}x"

        lines += ["", "Reading it:", "",
                  f"- **Prefix reuse** (`reuse_prefix=True`, the default) runs "
                  f"{span(lambda r: r['exact_calls'] / r['exact_reuse_calls'])} fewer calls for the exact map and "
                  f"is {span(lambda r: r['exact_s'] / r['exact_reuse_s'])} faster; for the step map "
                  f"{span(lambda r: r['step_calls'] / r['step_reuse_calls'])} fewer calls, "
                  f"{span(lambda r: r['step_s'] / r['step_reuse_s'])} faster. The same pieces with and "
                  f"without it: {'yes' if all(r['same_with_reuse'] for r in results) else 'NO'}.",
                  f"- **Slider against the step map**: decoding at every slider position ran "
                  f"{span(lambda r: r['slider_calls'] / r['step_reuse_calls'])} the calls of the step map with reuse "
                  f"and took {span(lambda r: r['slider_s'] / r['step_reuse_s'])} its time; every slider decode "
                  f"{'equals' if not any(r['slider_wrong'] for r in results) else 'does NOT always equal'} the step "
                  "map's trace at its position.",
                  f"- **The exact map** holds {min(r['pieces'] for r in results)} to "
                  f"{max(r['pieces'] for r in results)} pieces; only {min(r['step_pieces'] for r in results)} to "
                  f"{max(r['step_pieces'] for r in results)} of them hold a slider position, and the pieces carry "
                  f"{min(r['texts'] for r in results)} to {max(r['texts'] for r in results)} distinct texts."]
    lines += ["", "The sweeps read the same pieces: `sv.sweep` and `sv.sweep_decoders` decode each item once per piece "
              "holding one of their γ values, and the calls that saves on the bench suite, with rows equal to "
              "decoding every γ, are measured in [SWEEP_PIECES.md](SWEEP_PIECES.md) "
              "(`bench/scripts/bench_sweep_pieces.py`).", ""]
    lines += ["## Where the text is NTP's (exact map)", "",
              "Exact ends (`GammaMap.text_runs`; `sv.gamma_ladder` states the same in `attrs[\"safe\"]`). A 64-token "
              "decode runs past the answer into lines the model makes up, where SBD and NTP part at every γ.", "",
              "| prompt | setting | γ ranges whose text equals NTP's |", "|---|---|---|"]
    for r in results:
        lines.append(f"| `{_shown(r['prompt'])}` | {r['setting']} | {', '.join(_range(s) for s in r['safe']) or 'none'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model folder (default: the shipped model)")
    p.add_argument("--answer-only", type=int, default=6, help="prompts decoded to the end of the line")
    p.add_argument("--long", type=int, default=3, help=f"prompts decoded to {LONG_TOKENS} tokens, no stop")
    p.add_argument("--step", type=float, default=COMMIT_RULES[DEFAULT_RULE].slider[2])
    p.add_argument("--per-family", type=int, default=1, help="held-out items drawn per family to pick from")
    p.add_argument("--suite-seed", type=int, default=tasks.SUITE_SEED, help="which held-out draw (the card's)")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, None, None)
    run_info.write_page(p, p.parse_args(argv), argv, run, markdown)


if __name__ == "__main__":
    main()
