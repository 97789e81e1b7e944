"""Shared fixtures: tiny random-init models of several architectures, with the char tokenizer; hand-made traces."""

from pathlib import Path

import pytest
import torch

import sbd_viz as sv
from sbd_viz.training.data import build_char_tokenizer
from sbd_viz.trace import Commit, SlotView, Step, Trace

ROOT = Path(__file__).resolve().parent.parent

torch.set_num_threads(2)


def tiny_model(arch: str = "llama", seed: int = 0, attn: str = "sdpa"):
    """A random-init ~100k-parameter causal LM of ``arch`` with a mask token, wrapped as SBDModel."""
    import transformers as tf

    tok = build_char_tokenizer()
    common = dict(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    configs = {
        "llama": lambda: tf.LlamaConfig(**common),
        "qwen3": lambda: tf.Qwen3Config(**common, num_key_value_heads=2, head_dim=16),
        "qwen2": lambda: tf.Qwen2Config(**common, num_key_value_heads=2),
        "gpt_neox": lambda: tf.GPTNeoXConfig(**common),
        "mistral": lambda: tf.MistralConfig(**common, num_key_value_heads=2, sliding_window=None),
    }
    config = configs[arch]()
    config._attn_implementation = attn
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    model.config.mask_token_id = tok.mask_token_id
    return sv.SBDModel(model.eval(), tok, name=f"tiny-{arch}")


HAND_PROMPT = "go: "
# Three blocks: block 0 commits slot 5 with five slots open (gap 5), then slot 3 with slots 1, 2 open
# (gap 2); block 1 goes left to right (no gap); block 2 commits slot 1 (gap 1) and slot 3 (gap 2),
# and with ``stop_at=13`` the output ends at its newline, so slot 3's gap fill is discarded.
HAND = [("abcdef", [{5}, {0, 3}, {1, 2, 4}]),
        ("ghij", [{0}, {1}, {2, 3}]),
        ("kl\nm", [{1, 3}, {0}, {2}])]


def sharp_model(arch: str = "llama", seed: int = 1):
    """A tiny random model with a scaled-up head: its entropies span 0..2 nats, so the rules commit several
    slots per call and its drafts both agree and disagree with its own NTP choices (a plain random model is
    near-uniform, ~4.4 nats per slot: every rule commits one slot per call)."""
    import torch

    model = tiny_model(arch, seed=seed)
    with torch.no_grad():
        model.model.get_output_embeddings().weight *= 32
    return model


def hand_trace(blocks=HAND, stop_at=None) -> Trace:
    """A trace built by hand. ``blocks``: (block text, schedule) pairs, where the schedule lists the
    slots committed at each step; ``stop_at`` cuts the output after that many characters. Gaps are
    counted here, independently of the decoder."""
    tok = build_char_tokenizer()
    prompt_ids = tuple(tok(HAND_PROMPT).input_ids)
    steps, start, call = [], len(prompt_ids), 0
    for b, (text, schedule) in enumerate(blocks):
        masked = list(range(len(text)))
        for i, slots in enumerate(schedule):
            after = [s for s in masked if s not in slots]
            commits = tuple(Commit(s, tok.convert_tokens_to_ids(text[s]), text[s], 0.8, 0.5,
                                   gap=sum(1 for m in after if m < s)) for s in sorted(slots))
            views = tuple(SlotView(s, 0.5, ()) for s in masked)
            steps.append(Step(call=call, block=b, block_start=start, block_size=len(text), step=i,
                              masked=tuple(masked), slots=views, commits=commits, wall_time=0.001))
            masked, call = after, call + 1
        start += len(text)
    out = "".join(text for text, _ in blocks)[:stop_at]
    ids = tuple(tok.convert_tokens_to_ids(c) for c in out)
    return Trace(prompt=HAND_PROMPT, prompt_ids=prompt_ids, config={"decoder": "sbd"}, model_id="hand",
                 steps=tuple(steps), output_ids=ids, output_texts=tuple(out), text=out,
                 stop_reason="stop" if stop_at else "length")


def bench_script(name: str, folder: str = "bench"):
    """A script of the repository (``bench/x.py``, ``tools/x.py``) loaded as a module: those folders are not
    packages, and their scripts import their neighbours, so the folder goes on the path as when run."""
    import importlib.util
    import sys

    path = ROOT / folder / f"{name}.py"
    assert path.is_file(), f"{folder}/{name}.py is missing"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"sbd_viz_{folder}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny forwards: on a CPU shared with another job, two threads run them
    several times slower. A module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def free_port() -> int:
    """A free localhost TCP port (for the app's server, or Accelerate's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tiny():
    return tiny_model("llama")
