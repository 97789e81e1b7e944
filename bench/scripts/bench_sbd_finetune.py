"""What a short CPU SBD fine-tune of a real LM reaches: SmolLM2-135M-Instruct before (its weights with a new, untrained
mask token) and after ``sbd-viz train --base smollm2-135m --code-frac 1``, on held-out code. Writes
``bench/SBD_FINETUNE.md`` and ``bench/results/sbd_finetune.json``.

The fine-tune trains on the Python standard library's source (``training.data.code_documents()``); the held-out text
is the source of the installed ``transformers`` package's ``generation/`` folder, which the fine-tune never saw. On
``--items`` windows of it (a prompt of whole lines, then ``--new`` tokens), each model decodes with:

- NTP (the reference: the ids every exact decoder must write) and prompt lookup (exact, needs no training);
- verified SBD over block sizes and γ: tokens per call, and its ids against the same model's NTP (must be equal);
- plain SBD: tokens per call, and how many tokens it writes before it first leaves NTP's text.

Then the masked slots on ``--windows`` held-out windows masked as in training: MATP and NTP argmax accuracy.
Counts only, no clock: the numbers do not depend on the machine's load.

    python bench/scripts/bench_sbd_finetune.py --tuned runs/smollm2-sbd-cpu/final
    python bench/scripts/bench_sbd_finetune.py --tuned DIR --items 2 --windows 2 --out /tmp/x.md   # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_info  # noqa: E402

import sbd_viz as sv  # noqa: E402
from sbd_viz.analysis.pieces import decode_at_gammas  # noqa: E402
from sbd_viz.models.sbd_model import SBDModel, add_mask_token  # noqa: E402
from sbd_viz.trace.labels import COUNT_LABELS, first_difference  # noqa: E402
from sbd_viz.training.data import code_documents  # noqa: E402
from sbd_viz.training.objective import masked_slot_hits  # noqa: E402

VERIFIED = [(4, 0.1), (8, 0.1), (8, 1.0), (16, 1.0)]  # (block size, γ) of the entropy-bounded rule
PLAIN = (8, 0.1)


def held_out_folder() -> Path:
    return Path(transformers.__file__).parent / "generation"


def held_out_prompts(docs: list[str], tokenizer, n: int, seed: int, prompt_tokens: int = 96) -> list[str]:
    """``n`` prompts of whole lines (at least ``prompt_tokens`` tokens, ending with a newline) from ``docs``."""
    rng = random.Random(seed)
    prompts = []
    while len(prompts) < n:
        lines = rng.choice(docs).splitlines(keepends=True)
        start = rng.randrange(len(lines) // 2)
        text = ""
        for line in lines[start:]:
            text += line
            if len(tokenizer.encode(text, add_special_tokens=False)) >= prompt_tokens:
                break
        if text.strip() and text not in prompts:
            prompts.append(text)
    return prompts


def held_out_windows(docs: list[str], tokenizer, n: int, length: int, seed: int) -> torch.Tensor:
    """(n, length) ids: windows at random offsets into ``docs``."""
    rng = random.Random(seed + 1)
    rows = []
    while len(rows) < n:
        ids = tokenizer.encode(rng.choice(docs), add_special_tokens=False)
        if len(ids) > length:
            start = rng.randrange(len(ids) - length)
            rows.append(ids[start:start + length])
    return torch.tensor(rows)


def agree_before_first_difference(a, b) -> int:
    """Tokens two id sequences share before they first differ (all of them if equal)."""
    at = first_difference(list(a), list(b))
    return len(a) if at is None else at


def measure(model, prompts, new) -> dict:
    rows = {}

    def add(name, trace, ntp_ids=None):
        row = rows.setdefault(name, {"tokens": 0, "calls": 0, "equal": 0, "agree": [], "accepted": 0, "checked": 0})
        row["tokens"] += trace.n_tokens
        row["calls"] += trace.nfe
        if ntp_ids is not None:
            row["equal"] += list(trace.output_ids) == ntp_ids
            row["agree"].append(agree_before_first_difference(trace.output_ids, ntp_ids))
        checks = trace.checks()
        row["accepted"] += sum(c.accepted for c in checks)
        row["checked"] += len(checks)

    ntps = []
    for i, prompt in enumerate(prompts):
        ntp = sv.decode(model, prompt, decoder="ntp", max_new_tokens=new)
        ntp_ids = list(ntp.output_ids)
        ntps.append(ntp_ids)
        add("NTP", ntp, ntp_ids)
        add("prompt lookup", sv.decode(model, prompt, decoder="prompt_lookup", max_new_tokens=new), ntp_ids)
        verified = {}  # one decode per γ piece of each block size (the γ of a piece read off it)
        for k in dict.fromkeys(k for k, _ in VERIFIED):
            gammas = [g for kk, g in VERIFIED if kk == k]
            verified[k] = decode_at_gammas(model, prompt, gammas, decoder="sbd", verify=True, block_size=k,
                                           max_new_tokens=new).traces
        for k, gamma in VERIFIED:
            add(f"verified SBD, block {k}, γ {gamma:g}", verified[k][gamma], ntp_ids)
        k, gamma = PLAIN
        add(f"plain SBD, block {k}, γ {gamma:g}",
            sv.decode(model, prompt, decoder="sbd", block_size=k, gamma=gamma, max_new_tokens=new), ntp_ids)
        print(f"  item {i + 1}/{len(prompts)}", file=sys.stderr, flush=True)
    for row in rows.values():
        row["tokens_per_call"] = row["tokens"] / row["calls"]
        row["mean_agree"] = statistics.mean(row.pop("agree"))
    return {"decoders": rows, "ntp_ids": ntps}


def probe(model, windows, block_size) -> dict:
    hits = masked_slot_hits(model, windows, block_size, seed=0)
    return {"matp_accuracy": hits["matp_hits"] / hits["n_slots"], "ntp_accuracy": hits["ntp_hits"] / hits["ntp_slots"],
            "n_slots": hits["n_slots"]}


def training_summary(folder: Path) -> dict:
    """The run's config, steps, tokens, minutes and first and last logged losses (``train_log.jsonl``)."""
    run = folder.parent if folder.name in ("final", "final_ema", "checkpoint") else folder
    logs = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if line.strip()]
    losses = [r for r in logs if "ntp" in r]
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    return {"config": state["config"], "steps": state["step"], "tokens": state["tokens"],
            "minutes": round(state["elapsed"] / 60, 1), "first": losses[0], "last": losses[-1]}


def run(args, argv):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = sv.load_model("smollm2-135m")
    add_mask_token(base.model, base.tokenizer)  # what training starts from: the new row is the mean embedding
    before = SBDModel(base.model, base.tokenizer, name="smollm2-135m + untrained mask token")
    tuned = sv.load_model(args.tuned)
    docs = code_documents(held_out_folder(), min_chars=2000)
    prompts = held_out_prompts(docs, tuned.tokenizer, args.items, args.seed)
    windows = held_out_windows(docs, tuned.tokenizer, args.windows, 128, args.seed)
    header = {"date": run_info.utc_now(), "machine": run_info.machine(args.threads), "cpu": run_info.cpu_name(),
              "command": "python bench/scripts/bench_sbd_finetune.py " + shlex.join(argv), "tuned": str(args.tuned),
              "held_out": f"transformers {transformers.__version__} generation/*.py",
              "items": len(prompts), "new": args.new, "windows": args.windows, "training": training_summary(
                  Path(args.tuned))}
    results = {}
    for name, model in (("before", before), ("after", tuned)):
        print(f"{name}: decoding", file=sys.stderr, flush=True)
        results[name] = measure(model, prompts, args.new)
        results[name]["probe"] = {str(k): probe(model, windows, k) for k in (4, 16)}  # JSON's keys are text
    results["ntp_same_text"] = sum(a == b for a, b in zip(results["before"]["ntp_ids"], results["after"]["ntp_ids"]))
    results["ntp_agree"] = statistics.mean(agree_before_first_difference(a, b) for a, b in
                                           zip(results["before"]["ntp_ids"], results["after"]["ntp_ids"]))
    examples = {"prompt": prompts[0], "after_ntp": tuned.text(results["after"]["ntp_ids"][0])}
    return header, results, examples


def markdown(header, results, examples) -> str:
    t = header["training"]
    cfg, first, last = t["config"], t["first"], t["last"]
    n, new = header["items"], header["new"]
    lines = [
        "# SBD fine-tune of a real LM on CPU: what a short run reaches",
        "",
        "SmolLM2-135M-Instruct fine-tuned for SBD by `sbd-viz train` (the paper's objective, NTP + MATP, on the "
        "Python standard library's source), against its weights before the run (the mask token added, its row the "
        "mean embedding, nothing trained). This page records what a short CPU run reaches; it does not chase "
        "quality: a real fine-tune is GPU work (README).",
        "",
        f"- Run: {header['date']}, {header['machine']}, {header['cpu']}. `{header['command']}`",
        f"- Training: `{train_command(cfg)}`: {t['steps']} steps of {cfg['batch_size']} × {cfg['seq_len']} tokens ({t['tokens']:,} tokens) "
        f"in {t['minutes']} min, lr {cfg['lr']:g} (warmup {cfg['warmup']}, cosine), blocks {cfg['min_block']}-"
        f"{cfg['max_block']}, bf16 {cfg['bf16']}. Logged losses (mean over {cfg['log_every']} steps): NTP "
        f"{first['ntp']:.2f} → {last['ntp']:.2f}, MATP {first['matp']:.2f} → {last['matp']:.2f} "
        f"(steps {first['step']} and {last['step']}).",
        f"- Held-out text: {header['held_out']} (never in training). {n} prompts of whole lines (at least 96 "
        f"tokens), {new} new tokens each; {header['windows']} windows of 128 tokens for the masked-slot probe.",
        "- Counts only (no clock), so the numbers do not depend on the machine's load.",
        "",
        "## Decoding held-out code",
        "",
        f"*{COUNT_LABELS[(True, True)]}*: over all items, output tokens / model calls; *= NTP*: items whose "
        "ids equal the same model's NTP ids; *agree*: mean tokens written before the first difference from NTP; "
        "*accepted*: share of checked drafts that NTP accepted.",
        "",
        f"| decoder | before: {COUNT_LABELS[(True, True)]} | before: = NTP | after: {COUNT_LABELS[(True, True)]} "
        "| after: = NTP | after: agree "
        "| after: accepted |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, after in results["after"]["decoders"].items():
        bef = results["before"]["decoders"][name]
        acc = f"{after['accepted'] / after['checked']:.0%}" if after["checked"] else "–"
        lines.append(f"| {name} | {bef['tokens_per_call']:.2f} | {bef['equal']}/{n} | {after['tokens_per_call']:.2f} "
                     f"| {after['equal']}/{n} | {after['mean_agree']:.1f} | {acc} |")
    lines += [
        "",
        "## The masked slots, masked as in training",
        "",
        "Argmax accuracy at the masked slots (MATP) and, for the same tokens, the causal half's next-token argmax "
        "(NTP), on held-out windows.",
        "",
        "| block size | slots | before: MATP | after: MATP | before: NTP | after: NTP |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k, after in results["after"]["probe"].items():
        bef = results["before"]["probe"][k]
        lines.append(f"| {k} | {after['n_slots']} | {bef['matp_accuracy']:.1%} | {after['matp_accuracy']:.1%} "
                     f"| {bef['ntp_accuracy']:.1%} | {after['ntp_accuracy']:.1%} |")
    lines += [
        "",
        f"NTP after the run writes the same {new} tokens as before on {results['ntp_same_text']}/{n} prompts "
        f"(mean {results['ntp_agree']:.1f} tokens before the first difference)"
        + (": the fine-tune moves the model's own greedy text, " if results["ntp_same_text"] < n else ", ")
        + "and verified SBD writes the tuned model's NTP text.",
        "",
        "## Reading it",
        "",
    ]
    lines += reading(results)
    lines += ["", "First prompt (held-out) and the tuned model's NTP continuation:", "", "```python",
              examples["prompt"] + examples["after_ntp"], "```", ""]
    return "\n".join(lines)


def train_command(cfg: dict) -> str:
    """The ``sbd-viz train`` command line of a run's config (the flags this page's run set)."""
    flags = ("base", "code_frac", "seq_len", "batch_size", "lr", "warmup", "max_steps", "time_budget_min",
             "min_block", "max_block", "out")
    return "sbd-viz train " + " ".join(f"--{f.replace('_', '-')} {cfg[f]:g}" if isinstance(cfg[f], float)
                                       else f"--{f.replace('_', '-')} {cfg[f]}" for f in flags)


def reading(results) -> list[str]:
    """Sentences whose numbers come from this run."""
    bef, aft = results["before"]["decoders"], results["after"]["decoders"]
    verified = [name for name in aft if name.startswith("verified")]
    best = max(verified, key=lambda name: aft[name]["tokens_per_call"])
    plain = next(name for name in aft if name.startswith("plain"))
    n = len(results["after"]["ntp_ids"])
    lookup = aft["prompt lookup"]["tokens_per_call"]
    exact = all(aft[name]["equal"] == n and bef[name]["equal"] == n for name in verified)
    probe = {side: results[side]["probe"]["4"] for side in ("before", "after")}
    return [
        f"- The masked slots: at block 4, MATP's argmax is right on "
        f"{probe['before']['matp_accuracy']:.1%} of held-out masked slots before the run and "
        f"{probe['after']['matp_accuracy']:.1%} after (NTP's on the same tokens: {probe['before']['ntp_accuracy']:.1%} "
        f"and {probe['after']['ntp_accuracy']:.1%}).",
        f"- Verified SBD's best setting here ({best.removeprefix('verified SBD, ')}) reaches "
        f"{aft[best]['tokens_per_call']:.2f} {COUNT_LABELS[(True, True)]} after the run, against "
        f"{bef[best]['tokens_per_call']:.2f} before it; prompt lookup, which needs no training, "
        f"reaches {lookup:.2f} on the same items.",
        f"- Verified SBD's ids {'equal' if exact else 'do NOT all equal'} the same model's NTP ids on every item, "
        "before and after: it stays exact whatever its drafts are worth.",
        f"- Plain (unverified) SBD, {plain.removeprefix('plain SBD, ')}, writes {bef[plain]['mean_agree']:.1f} tokens on average before it first "
        f"leaves NTP's text before the run, {aft[plain]['mean_agree']:.1f} after it, and equals NTP on "
        f"{bef[plain]['equal']} and {aft[plain]['equal']} of {n} items: untrained drafts are noise, which is why the "
        "SBD decoders refuse a model that was not fine-tuned.",
    ]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tuned", default="runs/smollm2-sbd-cpu/final", help="the fine-tuned model folder")
    p.add_argument("--items", type=int, default=16, help="held-out prompts")
    p.add_argument("--new", type=int, default=40, help="new tokens a prompt")
    p.add_argument("--windows", type=int, default=24, help="held-out windows for the masked-slot probe")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    run_info.add_page_arguments(p, run_info.BENCH / "SBD_FINETUNE.md", run_info.RESULTS / "sbd_finetune.json")
    args = p.parse_args(argv)
    for name in ("items", "new", "windows"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: need at least 1, got {getattr(args, name)}")
    run_info.write_page(p, args, argv, run, markdown)


if __name__ == "__main__":
    main()
