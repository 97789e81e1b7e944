"""Tiny random-init DiffusionGemma model folders (about 1M parameters) with a character tokenizer whose
specials match DiffusionGemma's defaults: pad 0, eos 1, bos 2. Nothing is downloaded."""

from pathlib import Path

import torch

CHARS = ["\n", "\t"] + [chr(c) for c in range(32, 127)]
SPECIALS = ["<pad>", "<eos>", "<bos>"]


def char_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                                   clean_up_tokenization_spaces=False)


def tiny_folder(path, canvas_length: int = 8, seed: int = 0, context: int = 96, sharpen: float = 1.0) -> Path:
    """Save a tiny DiffusionGemma (2 layers, 4 experts of which 2 active) and the tokenizer in ``path``.
    ``sharpen`` scales the (tied) embeddings, so the logits are less flat and the sampler accepts more."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    tok = char_tokenizer()
    text = dict(hidden_size=64, num_hidden_layers=2, vocab_size=len(tok), num_attention_heads=2,
                num_key_value_heads=1, intermediate_size=128, head_dim=32,
                layer_types=["sliding_attention", "full_attention"], num_experts=4, top_k_experts=2,
                moe_intermediate_size=64, max_position_embeddings=context)
    vision = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(DiffusionGemmaConfig(text_config=text, vision_config=vision,
                                                                 canvas_length=canvas_length)).eval()
    if sharpen != 1.0:
        with torch.no_grad():
            model.lm_head.weight *= sharpen
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
