"""``sv.chat_prompt``: a user's text as its model's chat template writes the user's turn, or the text itself."""

from types import SimpleNamespace

import sbd_viz as sv
from sbd_viz.training.data import build_char_tokenizer

# a template of the ChatML shape SmolLM2's uses, written out so the expected prompt can be spelled by hand
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_the_text_becomes_the_users_turn_of_the_template():
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = TEMPLATE
    model = SimpleNamespace(tokenizer=tokenizer)
    assert sv.chat_prompt(model, "Why is the sky blue?") == "<|user|>Why is the sky blue?\n<|assistant|>"


def test_a_tokenizer_without_a_template_keeps_the_text():
    model = SimpleNamespace(tokenizer=build_char_tokenizer())
    assert not getattr(model.tokenizer, "chat_template", None)
    assert sv.chat_prompt(model, "assert 1 + 1 == ") == "assert 1 + 1 == "
