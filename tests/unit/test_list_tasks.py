"""The list-task suite (``sbd_viz.tasks.lists``): fixed by its seed, every answer is what Python computes from the
assert prompt, the assert prompts fit the character model, and scoring is exact match."""

import ast

import pytest

from sbd_viz.tasks import lists as lt
from sbd_viz.training.data import build_char_tokenizer


def evaluate_assert(prompt: str):
    """The value of the assert's left-hand side, computed by Python from the prompt's own lines (literals only)."""
    *setup, last = prompt.split("\n")
    names = {}
    for line in setup:
        name, value = line.split(" = ", 1)
        names[name] = ast.literal_eval(value)
    expr = last.removeprefix("assert ").removesuffix(" == ")
    return eval(compile(ast.parse(expr, mode="eval"), "<item>", "eval"), {"__builtins__": {"sorted": sorted, "list": list}, **names})


def test_the_suite_is_fixed_by_its_seed_and_covers_every_task_and_length():
    suite = lt.list_suite()
    assert suite == lt.list_suite() and suite != lt.list_suite(seed=1)
    assert {(i.task, i.length) for i in suite} == {(t, n) for t in lt.LIST_TASKS for n in lt.LENGTHS}
    assert len(suite) == len(lt.LIST_TASKS) * len(lt.LENGTHS) * 4
    assert len({i.assert_prompt for i in suite}) == len(suite)
    assert lt.list_suite(tasks=("sort",), lengths=(5,)) == [i for i in suite if (i.task, i.length) == ("sort", 5)]


def test_every_answer_is_what_python_computes():
    for item in lt.list_suite(per_length=6):
        value = evaluate_assert(item.assert_prompt)
        if item.task == "repeat":
            assert f'"{value}"' == item.answer and len(value) % item.length == 0
            continue
        assert lt.render_list(value) == item.answer, item
        assert len(value) == item.length + (item.task == "insert")


def test_the_tasks_do_what_they_say():
    by_task = {i.task: i for i in lt.list_suite(lengths=(5,), per_length=1)}
    assert by_task["copy"].assert_prompt == f"assert list({by_task['copy'].answer}) == "
    shuffled = by_task["shuffle"].assert_prompt.split("\n")[0].removeprefix("ys = ")
    assert shuffled != by_task["shuffle"].answer and sorted(ast.literal_eval(shuffled)) == sorted(
        ast.literal_eval(by_task["shuffle"].answer))
    word = by_task["repeat"].assert_prompt.split('"')[1]
    assert by_task["repeat"].answer == '"' + word * 5 + '"'
    assert ast.literal_eval(by_task["copy"].answer) == [int(v) for v in by_task["copy"].answer[1:-1].split(", ")]


def test_assert_prompts_fit_the_character_model():
    vocab = build_char_tokenizer().get_vocab()
    for item in lt.list_suite(per_length=6):
        text = item.assert_prompt + item.answer + "\n"
        assert set(text) <= set(vocab), item
        assert len(text) + 1 < lt.CONTEXT_CHARS  # a BOS too


def test_chat_prompts_name_the_list_and_ask_for_a_list():
    for item in lt.list_suite(per_length=2):
        assert item.prompt("chat").endswith("square brackets." if item.task != "repeat" else "double quotes.")
        assert "assert" not in item.prompt("chat")
    with pytest.raises(ValueError, match="style"):
        item.prompt("yaml")


def test_scoring_is_exact_match_of_the_first_line():
    item = lt.list_suite(tasks=("sort",), lengths=(3,), per_length=1)[0]
    assert lt.score(item, item.answer + "\nassert 1 == 1")
    assert lt.score(item, " " + item.answer + " ")
    assert not lt.score(item, item.answer[:-1])
    assert not lt.score(item, item.answer.replace(", ", ","))


@pytest.mark.parametrize("kwargs, match", [(dict(tasks=("rotate",)), "tasks"), (dict(lengths=(1,)), "lengths"),
                                           (dict(per_length=0), "per_length")])
def test_errors_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lt.list_suite(**kwargs)
