"""List tasks (ParallelBench-style): PBx and AUP per task and decoder, from exact γ maps, on both shipped models.

The suite is ``sbd_viz.tasks.lists`` (copy, reverse, sort, shuffle, insert, replace, repeat at several lengths, one
fixed seed, exact match). The character model (``sv.load_model()``) gets each item as a Python assert, SmolLM2 with
the SBD adapter (``sv.load_model("smollm2-135m-sbd")``) as a chat message through its chat template. Every
registered decoder (``sv.decoders()``) runs; one a model does not serve is listed with the reason.

- A decoder whose knob is γ (SBD, verified SBD, remasking): the exact γ map of every item
  (``sv.gamma_map``, every distinct decode over the slider's range), scored; the task's accuracy-parallelism curve is
  exact (``sbd_viz.analysis.parallelism.curve``), and PBx and AUP come from its segments. The same numbers from a
  grid of γ values spread over the slider (``Knob.values``) are read off the same maps, and the page lists every
  number the grid gets differently, with the γ ranges it missed.
- A decoder with another knob (Jacobi's block size, prompt lookup's tokens): decoded at values spread over its
  range; PBx and AUP from those points only (a sampled curve: no map exists for that knob).
- NTP: one point.

Parallelism is tokens per call pooled over a task's items (the end token and the prefill call counted: the first of
``COUNT_LABELS``), accuracy is percent of items right. PBx takes an absolute accuracy level, as ParallelBench's
leaderboard does; "of NTP" columns take x percent of NTP's accuracy on the task. AUP's ``y_max`` is the task's
highest accuracy across the model's decoders.

    nice python bench/scripts/bench_list_tasks.py --threads 1 --out bench/LIST_TASKS.md \
        --json bench/results/list_tasks.json \
        --png bench/list_tasks.png --cache runs/list_tasks      # over an hour on 2 cores: stopped, it resumes
    nice python bench/scripts/bench_list_tasks.py --models char --tasks copy shuffle --lengths 3 --per-length 1 \
        --decoders sbd --grid-points 3 --png /tmp/list_tasks.png --out /tmp/LIST_TASKS.md   # a quick check
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz.tasks import lists as lt
from sbd_viz.analysis import parallelism as par
from sbd_viz.analysis.closed_forms import CLOSED_FORMS, closed_form_curve
from sbd_viz.analysis.gamma_map import gamma_map, walks_gamma
from sbd_viz.models import kinds as model_kinds
from sbd_viz.trace.labels import COUNT_LABELS
from sbd_viz.decoders.rules import DEFAULT_RULE

import run_info  # beside this file

STOP = "\n"
MODELS = {"char": (None, "assert"), "smollm2": ("smollm2-135m-sbd", "chat")}
ALL = "all tasks"
SHOWN_MISSES = 3  # γ ranges listed per differing number (the JSON keeps them all)


def pick(items: list, limit: int | None) -> list:
    """At most ``limit`` items of each task, taken in turn from its lengths (None: every item)."""
    if limit is None:
        return items
    out = []
    for task in dict.fromkeys(i.task for i in items):
        by_length: dict[int, list] = {}
        for i in items:
            if i.task == task:
                by_length.setdefault(i.length, []).append(i)
        turns = [i for group in zip(*by_length.values()) for i in group]
        out += turns[:limit]
    return out


def tokens_per_item(items, rooms) -> dict[str, dict[str, float]]:
    """Per task and list length, the answer's tokens per list item (``answer_room`` less its room for the end),
    averaged over the items: what turns the closed forms' items per step into tokens per call."""
    out: dict[str, dict[str, list[float]]] = {}
    for item, n in zip(items, rooms):
        out.setdefault(item.task, {}).setdefault(str(item.length), []).append((n - 4) / item.length)
    return {task: {length: sum(v) / len(v) for length, v in by.items()} for task, by in out.items()}


def settings_of(spec) -> list[tuple[str, dict]]:
    """The decoder's rows: itself, then each labelled variant (SBD's "verified SBD")."""
    return [(spec.label, {})] + [(label, dict(v)) for label, v in spec.variants.items()]


class Cache:
    """Each finished curve of a run as one JSON file in ``folder``, read back by a later run with the same suite and
    grid: a stopped run resumes at the curve it was decoding (the whole run takes over an hour on 2 cores)."""

    def __init__(self, folder: str | None, key: str, args, model):
        self.folder = Path(folder) if folder else None
        self.key = key
        # the weights' fingerprint, not only the name: a model trained further keeps its name
        self.config = {"model": model.name, "fingerprint": model.fingerprint(), "tasks": list(args.tasks),
                       "lengths": list(args.lengths), "per_length": args.per_length, "limit": args.limit,
                       "seed": args.seed, "grid_points": args.grid_points, "rule": DEFAULT_RULE}

    def _path(self, label: str) -> Path:
        return self.folder / f"{self.key}-{re.sub(r'[^a-z0-9]+', '-', label.lower()).strip('-')}.json"

    def get(self, label: str) -> dict | None:
        if self.folder is None or not self._path(label).is_file():
            return None
        saved = json.loads(self._path(label).read_text())
        return saved["entry"] if saved["config"] == self.config else None

    def put(self, label: str, entry: dict) -> None:
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path(label).write_text(json.dumps({"config": self.config, "entry": entry}))


def decode_model(key: str, args) -> dict:
    source, style = MODELS[key]
    model = sv.load_model(source)
    cache = Cache(args.cache, key, args, model)
    items = pick(lt.list_suite(tasks=tuple(args.tasks), lengths=tuple(args.lengths), per_length=args.per_length,
                               seed=args.seed), args.limit)
    prompts = [lt.model_prompt(model, i, style) for i in items]
    rooms = [lt.answer_room(model, i, style) for i in items]
    out = {"model": key, "name": model.name, "style": style, "block_size": model.block_size, "items": len(items),
           "tasks": list(dict.fromkeys(i.task for i in items)), "skipped": [], "curves": [], "calls": 0,
           "tokens_per_item": tokens_per_item(items, rooms)}
    ntp = cache.get("NTP")
    if ntp is None:
        t0 = time.perf_counter()
        traces = [sv.decode_ntp(model, p, max_new_tokens=n, stop=STOP) for p, n in zip(prompts, rooms)]
        ntp = {"decoder": "ntp", "label": "NTP", "how": "one setting", "knob": None, "texts": [t.text for t in traces],
               "calls": sum(t.nfe for t in traces),
               "samples": [{"value": None, "outcomes": [[lt.score(i, t.text), t.n_tokens, t.nfe]
                                                        for i, t in zip(items, traces)]}],
               "seconds": round(time.perf_counter() - t0, 1)}
        cache.put("NTP", ntp)
    out["calls"] += ntp["calls"]
    out["curves"].append(ntp)
    out["examples"] = [{"task": i.task, "prompt": i.prompt(style), "answer": i.answer, "ntp": text}
                       for i, text in zip(items, ntp["texts"]) if i is next(j for j in items if j.task == i.task)]
    for spec in sv.decoders():
        if spec.name == "ntp" or (args.decoders and spec.name not in args.decoders):
            continue
        if not spec.serves(model):
            out["skipped"].append({"decoder": spec.name, "reason": f"serves {model_kinds.get(spec.model).description}"})
            continue
        for label, variant in settings_of(spec):
            cached = cache.get(label)
            if cached is not None:
                out["calls"] += cached["calls"]
                out["curves"].append(cached)
                print(f"{key} {label}: from {args.cache}", file=sys.stderr, flush=True)
                continue
            entry = {"decoder": spec.name, "label": label, "settings": variant,
                     "knob": spec.knob.name if spec.knob else None, "calls": 0}
            t0 = time.perf_counter()
            if walks_gamma(spec):
                entry.update(how="exact γ map", rule=DEFAULT_RULE,
                             grid=spec.knob.values(DEFAULT_RULE, points=args.grid_points), items=[])
                for item, prompt, n in zip(items, prompts, rooms):
                    m = gamma_map(model, prompt, rule=DEFAULT_RULE, decoder=spec.name, max_new_tokens=n, stop=STOP,
                                  **variant)
                    entry["calls"] += m.calls
                    entry["items"].append([[o.lo, o.hi, o.lo_closed, o.hi_closed, o.correct, o.tokens, o.calls]
                                           for o in par.outcomes(m, lambda text, item=item: lt.score(item, text))])
            else:
                entry.update(how=f"sampled {spec.knob.name}", samples=[])
                for value in spec.knob.values(points=args.grid_points):
                    traces = [sv.decode(model, p, decoder=spec.name, max_new_tokens=n, stop=STOP,
                                        **{spec.knob.name: value}, **variant) for p, n in zip(prompts, rooms)]
                    entry["calls"] += sum(t.nfe for t in traces)
                    entry["samples"].append({"value": value, "outcomes": [[lt.score(i, t.text), t.n_tokens, t.nfe]
                                                                          for i, t in zip(items, traces)]})
            entry["seconds"] = round(time.perf_counter() - t0, 1)
            out["calls"] += entry["calls"]
            out["curves"].append(entry)
            cache.put(label, entry)
            print(f"{key} {label}: {entry['seconds']} s", file=sys.stderr, flush=True)
    out["item_tasks"] = [i.task for i in items]
    return out


def _outcome_lists(entry, keep) -> list[list[par.Outcome]]:
    return [[par.Outcome(lo, hi, ok, tok, calls, lo_c, hi_c) for lo, hi, lo_c, hi_c, ok, tok, calls in item]
            for item, k in zip(entry["items"], keep) if k]


def _sample_points(entry, keep) -> list[tuple[float, float]]:
    points = []
    for s in entry["samples"]:
        chosen = [o for o, k in zip(s["outcomes"], keep) if k]
        points.append((sum(o[1] for o in chosen) / sum(o[2] for o in chosen),
                       100.0 * sum(o[0] for o in chosen) / len(chosen)))
    return points


def metrics(decoded: dict) -> list[dict]:
    """Every (task, decoder) row of one model's page: its points, PBx, AUP, and for a γ map the grid's numbers."""
    tasks = decoded["item_tasks"]
    rows = []
    for task in decoded["tasks"] + [ALL]:
        keep = [task in (t, ALL) for t in tasks]
        per_decoder = []
        for entry in decoded["curves"]:
            if entry["how"] == "exact γ map":
                items = _outcome_lists(entry, keep)
                segments = par.curve(items)
                points = [s.point for s in segments]
                extra = {"segments": segments, "items": items}
            else:
                points, extra = _sample_points(entry, keep), {}
            per_decoder.append((entry, points, extra))
        ntp_acc = next(p for e, p, _ in per_decoder if e["decoder"] == "ntp")[0][1]
        y_max = max(y for _, points, _ in per_decoder for _, y in points)
        for entry, points, extra in per_decoder:
            row = {"task": task, "decoder": entry["decoder"], "label": entry["label"], "how": entry["how"],
                   "ntp_accuracy": ntp_acc, "best_accuracy": max(y for _, y in points),
                   "points": [[round(r, 6), round(y, 6)] for r, y in points],
                   **par.summary(points, y_max=y_max)}
            for x in (90, 80):  # x% of NTP's accuracy; none when NTP gets nothing right
                row[f"PB{x} of NTP"] = par.pbx(points, x, relative_to=ntp_acc) if ntp_acc > 0 else None
            if "items" in extra:
                row["segments"] = len(extra["segments"])
                row["ranges"] = [[s.lo, s.hi, s.lo_closed, s.hi_closed] for s in extra["segments"]]
                row["grid"] = par.compare_grid(extra["items"], entry["grid"], y_max=y_max)
                row["grid_size"] = len(entry["grid"])
            rows.append(row)
    return rows


def run(args, argv) -> tuple[dict, dict, list[dict]]:
    torch.set_num_threads(args.threads)
    argv = list(sys.argv[1:] if argv is None else argv)
    header = {"command": " ".join(["python bench/scripts/bench_list_tasks.py", *argv]),
              "date": run_info.utc_now(), "machine": run_info.machine(args.threads), "load_start": run_info.load(),
              "lengths": list(args.lengths), "per_length": args.per_length, "limit": args.limit, "seed": args.seed,
              "grid_points": args.grid_points, "rule": DEFAULT_RULE}
    results, examples = {"models": []}, []
    for key in args.models:
        decoded = decode_model(key, args)
        results["models"].append({k: decoded[k] for k in ("model", "name", "style", "block_size", "items", "skipped",
                                                           "calls", "tokens_per_item")}
                                 | {"seconds": round(sum(c.get("seconds", 0) for c in decoded["curves"]), 1),
                                    "rows": metrics(decoded)})
        examples += [{"model": key, **e} for e in decoded["examples"]]
    # the curves' own decode seconds, summed: a run resumed from --cache adds the sittings that decoded them
    header["seconds"] = round(sum(m["seconds"] for m in results["models"]), 1)
    header["load_end"] = run_info.load()
    return header, results, examples


def figure_panels(model: dict) -> list[dict]:
    """The closed-form figure's panels of one model's page: each task a closed form covers (``CLOSED_FORMS``), its
    decoders' measured points beside the closed form at each list length."""
    panels = []
    for task in [t for t in CLOSED_FORMS if t in model.get("tokens_per_item", {})]:
        measured = [{"label": r["label"], "points": r["points"]} for r in model["rows"] if r["task"] == task]
        closed = [{"label": f"closed form, {n} items" + (" (any order right)" if task == "shuffle" else ""),
                   "points": closed_form_curve(task, int(n), per_item)}
                  for n, per_item in sorted(model["tokens_per_item"][task].items(), key=lambda kv: int(kv[0]))]
        panels.append({"task": task, "measured": measured, "closed": closed})
    return panels


def draw_figure(results: dict, png: str) -> None:
    """The closed-form figure of every model as one PNG (headless Chromium, as the README's pictures)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs"))
    from make_figures import screenshot
    from sbd_viz.plots.list_accuracy import closed_form_figure

    figures = [closed_form_figure(figure_panels(m), title=f"{m['name']} ({m['style']} prompts)")
               for m in results["models"] if figure_panels(m)]
    if not figures:
        return
    if len(figures) == 1:
        screenshot(figures[0], Path(png))
        return
    from PIL import Image  # one picture, the models one above the other

    parts = []
    for i, fig in enumerate(figures):
        part = Path(png).with_suffix(f".{i}.png")
        screenshot(fig, part)
        parts.append(Image.open(part))
    width = max(p.width for p in parts)
    sheet = Image.new("RGB", (width, sum(p.height for p in parts)), "white")
    y = 0
    for part in parts:
        sheet.paste(part, (0, y))
        y += part.height
    sheet.save(png)
    for i in range(len(parts)):
        Path(png).with_suffix(f".{i}.png").unlink()


def _num(x: float | None) -> str:
    return "–" if x is None else "0" if x == 0 else f"{x:.2f}"


def _code(text: str) -> str:
    return "`" + text.replace("\n", "⏎").replace("`", "'").replace("|", "\\|") + "`"


def markdown(header: dict, results: dict, examples: list[dict]) -> str:
    lengths = ", ".join(str(n) for n in header["lengths"])
    limit = f", at most {header['limit']} per task" if header.get("limit") else ""
    lines = [
        "# List tasks: PBx and AUP per task and decoder, from exact γ maps", "",
        f"Command: `{header['command']}`  ",
        f"Run {header['date']} on {header['machine']}; load average {header['load_start']} at the start, "
        f"{header['load_end']} at the end; {header['seconds']} s.  ",
        f"Suite: `sbd_viz.tasks.lists`, seed {header['seed']}, lengths {lengths}, {header['per_length']} items per "
        f"task and length{limit}; exact match of the answer's line. Rule {header['rule']}.", "",
        "- **PBx** (ParallelBench): the largest tokens per call at which the task's accuracy is at least x% "
        "(an absolute level, as ParallelBench's leaderboard reads it; 0: never reached). **of NTP**: at least x% "
        "of NTP's accuracy on the task.",
        "- **AUP** (d3LLM): the area under accuracy (percent) against tokens per call, points below the "
        "lowest-parallelism point's accuracy minus 5 left out, each weighted by min(exp(-3 (1 - y / y_max)), 1), "
        "y_max the task's highest accuracy across this model's decoders.",
        "- **from**: *exact γ map*: every distinct decode of every item over γ, so the curve holds every operating "
        "point the decoder reaches; *sampled*: the knob's values spread over its range; *one setting*: NTP.",
        f"- **grid**: for a γ map, how many of its numbers a {header['grid_points']}-point γ grid (the same maps "
        "read at those γ) gets differently; the list below says which and where.",
        f"- Tokens per call are *{COUNT_LABELS[(True, True)]}*, pooled over a task's items: their tokens over "
        "their calls.", ""]
    misses = []
    for m in results["models"]:
        lines += [f"## `{m['name']}` ({m['style']} prompts)", "",
                  f"{m['items']} items; block {m['block_size']}; {m['calls']:,} model calls; {m['seconds']} s.", ""]
        if m["skipped"]:
            lines += ["Not run: " + "; ".join(f"{s['decoder']} ({s['reason']})" for s in m["skipped"]) + ".", ""]
        lines += ["| task | decoder | from | NTP acc. | best acc. | PB90 | PB80 | PB70 | PB60 | PB90 of NTP | "
                  "PB80 of NTP | AUP | grid: numbers that differ |", "|" + "---|" * 13]
        for r in m["rows"]:
            grid = "" if "grid" not in r else f"{sum(g['differs'] for g in r['grid'])} of {len(r['grid'])}"
            how = f"{r['how']} ({r['segments']} segments)" if "segments" in r else r["how"]
            lines.append(f"| {r['task']} | {r['label']} | {how} | {r['ntp_accuracy']:.0f}% | {r['best_accuracy']:.0f}% "
                         f"| {_num(r['PB90'])} | {_num(r['PB80'])} | {_num(r['PB70'])} | {_num(r['PB60'])} "
                         f"| {_num(r['PB90 of NTP'])} | {_num(r['PB80 of NTP'])} | {r['AUP']:.1f} | {grid} |")
            for g in r.get("grid", []):
                if g["differs"]:
                    misses.append((m["name"], r, g))
        lines.append("")
    if header.get("figure"):
        lines += ["## Closed form beside the measured curve", "",
                  "ParallelBench's closed-form accuracy of an ideal model that commits k list items per step, each "
                  "sampled independently (`sbd_viz.analysis.closed_forms`), dashed, beside each decoder's measured "
                  "accuracy against tokens per call. Copy and replace (at a given position) are right at every k "
                  "(Table 1). The dashed shuffle line is ParallelBench's shuffle, where any order of the items is "
                  "right (Eq. 5); this suite's shuffle gives the order, so an ideal model gets it at every k, as "
                  "copy. k items per step are drawn at k × the answer's tokens per item, its prefill call and end "
                  "token not counted.", "", f"![Closed forms beside the measured curves]({header['figure']})", ""]
    lines += ["## Where the sampled γ grid gives another number", ""]
    if not misses:
        lines += ["Nowhere: every PBx and AUP from the grid equals the exact map's.", ""]
    else:
        lines += ["| model | task | decoder | number | exact | grid | grid, interpolated | γ ranges the grid missed |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r, g in misses:
            shown = ", ".join(g["missed"][:SHOWN_MISSES]) + (f" and {len(g['missed']) - SHOWN_MISSES} more"
                                                             if len(g["missed"]) > SHOWN_MISSES else "")
            interp = "" if g["grid_interpolated"] is None else _num(g["grid_interpolated"])
            lines.append(f"| `{name}` | {r['task']} | {r['label']} | {g['metric']} | {_num(g['exact'])} "
                         f"| {_num(g['grid'])} | {interp} | {shown} |")
        lines.append("")
    if examples:
        lines += ["## One item per task, and NTP's answer", "", "| model | task | prompt | answer | NTP wrote |",
                  "|---|---|---|---|---|"]
        lines += [f"| {e['model']} | {e['task']} | {_code(e['prompt'])} | {_code(e['answer'])} | {_code(e['ntp'])} |"
                  for e in examples]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    p.add_argument("--tasks", nargs="+", choices=list(lt.LIST_TASKS), default=list(lt.LIST_TASKS),
                   help="list tasks to run (a quick check: a few)")
    p.add_argument("--decoders", nargs="+", default=None,
                   help="registered decoders to run besides NTP (default: every one; a quick check: sbd)")
    p.add_argument("--png", default=None, help="also draw the closed forms beside the measured curves (headless "
                                               "Chromium) and show it on the page, e.g. bench/list_tasks.png")
    p.add_argument("--lengths", nargs="+", type=int, default=list(lt.LENGTHS), help="list lengths")
    p.add_argument("--per-length", type=int, default=4, help="items per task and length")
    p.add_argument("--limit", type=int, default=None, help="at most this many items per task (a quick check)")
    p.add_argument("--seed", type=int, default=lt.LIST_SEED, help="the suite's draw")
    p.add_argument("--grid-points", type=int, default=9, help="γ (or knob) values spread over the slider")
    p.add_argument("--threads", type=int, default=1)
    run_info.add_page_arguments(p, None, None)
    p.add_argument("--cache", default=None, help="save each finished curve in this folder, and read back the ones "
                                                 "a run with the same model and suite saved there (a stopped run "
                                                 "resumes), e.g. runs/list_tasks")
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit: need at least one item a task, got {args.limit}")
    if args.grid_points < 2:
        p.error(f"--grid-points: need at least 2, got {args.grid_points}")
    if args.decoders:
        unknown = [d for d in args.decoders if d not in {s.name for s in sv.decoders()}]
        if unknown:
            p.error(f"--decoders: unknown decoder {unknown[0]!r}; choose from "
                    f"{', '.join(s.name for s in sv.decoders())}")

    def page(header, results, examples):
        if args.png:
            draw_figure(results, args.png)
            where = Path(args.out).resolve().parent if args.out else Path.cwd()
            header["figure"] = os.path.relpath(Path(args.png).resolve(), where)  # saved with the run: the page shows it
        return markdown(header, results, examples)

    run_info.write_page(p, args, argv, run, page)


if __name__ == "__main__":
    main()
