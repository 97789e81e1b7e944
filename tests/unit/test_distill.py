"""The adapter's data (``sbd_viz.training.distill``): questions the base proposes, kept off the held-out subjects."""

import json

import pytest
import torch

from sbd_viz.training import distill
from sbd_viz.training.data import build_char_tokenizer

# What a scripted base writes after "5." in its list: the first line continues item 5, the next lines are items 6, 7
CONTINUATIONS = [
    " What is a unicorn?\n6. How do I bake a cake at home?\n7. Why do owls hoot at night?\n\nAnswers follow.",
    " How can I learn to draw faces?\n6. short\n7. What is the tallest tree in the world?\n8. x",
    " Which planet has the most moons?\nThe end.\n9. What is a comet made of?",
    " What is a unicorn?\n6. what is a UNICORN?\n7. How do trains stay on the tracks?",
    " Tell me about the weather in spring.\n6. What are the rules of chess?",
]


class ScriptedLM:
    """``generate`` draws each row's continuation from ``CONTINUATIONS`` with torch's generator, as sampling does:
    the same seed gives the same rows."""

    device = torch.device("cpu")

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    def generate(self, input_ids, attention_mask, do_sample, **kwargs):
        assert do_sample
        self.calls += 1
        rows = []
        for _ in range(len(input_ids)):
            text = CONTINUATIONS[int(torch.randint(len(CONTINUATIONS), ()))]
            rows.append(self.tokenizer(text, add_special_tokens=False).input_ids)
        width = max(map(len, rows))
        pad = self.tokenizer.pad_token_id
        return torch.cat([input_ids, torch.tensor([r + [pad] * (width - len(r)) for r in rows])], dim=1)


def test_parse_questions_reads_the_list_until_it_ends():
    assert distill.parse_questions(CONTINUATIONS[0]) == [
        "What is a unicorn?", "How do I bake a cake at home?", "Why do owls hoot at night?"]
    assert distill.parse_questions(CONTINUATIONS[1]) == [  # "short" and "x" are too short to be questions
        "How can I learn to draw faces?", "What is the tallest tree in the world?"]
    assert distill.parse_questions(CONTINUATIONS[2]) == ["Which planet has the most moons?"]  # the list ended


def test_every_held_out_question_names_a_held_out_subject_and_no_training_prompt_does():
    missed = [q for q in distill.HELDOUT_CHAT if distill.held_out_subject(q) is None]
    assert missed == []
    assert distill.held_out_subject("Why do owls hoot?") == "owl"  # a plural or singular, case aside
    assert distill.held_out_subject("How do I bowl a ball?") is None  # whole words only
    assert [q for q in distill.PROPOSE_EXAMPLES if distill.held_out_subject(q)] == []


def test_proposed_questions_drop_held_out_subjects_repeats_and_excluded_ones_and_resume(tmp_path):
    tok = build_char_tokenizer()
    lm = ScriptedLM(tok)
    out = tmp_path / "q.jsonl"
    questions = distill.proposed_questions(lm, tok, 6, out, seed=3, exclude=["How do I bake a cake at home?"],
                                           batch_size=2, log=lambda s: None)
    assert len(questions) == len({q.lower() for q in questions}) == 6
    assert not any(distill.held_out_subject(q) for q in questions)  # owls and weather dropped
    assert "How do I bake a cake at home?" not in questions
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["question"] for r in rows] == questions
    # stopped after its first batch: a new run resumes there and keeps the same questions
    first = [r for r in rows if r["batch"] == 0]
    assert 0 < len(first) < 6
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text("".join(json.dumps(r) + "\n" for r in first) + '{"batch": 1, "quest')  # cut mid-line
    again = distill.proposed_questions(lm, tok, 6, resumed, seed=3, exclude=["How do I bake a cake at home?"],
                                       batch_size=2, log=lambda s: None)
    assert again == questions
    calls = lm.calls
    assert distill.proposed_questions(lm, tok, 6, out, seed=3, log=lambda s: None) == questions
    assert lm.calls == calls  # all cached: no call
    other = distill.proposed_questions(lm, tok, 6, tmp_path / "other.jsonl", seed=4, batch_size=2,
                                       log=lambda s: None)
    assert other != questions  # the seed draws the questions


@pytest.mark.parametrize("bad", [0, -1])
def test_no_questions_asked_none_made(tmp_path, bad):
    tok = build_char_tokenizer()
    lm = ScriptedLM(tok)
    assert distill.proposed_questions(lm, tok, bad, tmp_path / "q.jsonl", log=lambda s: None) == []
    assert lm.calls == 0
