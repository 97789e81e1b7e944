"""Shared fixtures: tiny random-init models of several architectures, with the char tokenizer."""

import pytest
import torch

import sbd_viz as sv
from sbd_viz.data import build_char_tokenizer

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


def free_port() -> int:
    """A free localhost TCP port (for the app's server, or Accelerate's rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tiny():
    return tiny_model("llama")
