"""The app's list-task failures (``app.gallery``), served for real on the shipped model and driven with
gradio_client: the rows are the items a plain ``sv.decode`` gets wrong (scored by hand, as a user scores a list
task), NTP's verdict is a plain ``sv.decode_ntp``'s, and the task menu and the main view's settings change what is
decoded."""

import gradio as gr
import pytest

import sbd_viz as sv
from sbd_viz.tasks import lists as lt
from sbd_viz.app.gallery import GALLERY_HEADERS, PER_LENGTH, Gallery

from conftest import SWEEP_ROWS, app_server

pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
SETTINGS = dict(rule="entropy_bounded", gamma=0.5, gap_free=False, block_size=8, max_new_tokens=24,
                temperature=0.0, seed=0, stop_at_newline=True, verify=False)


@pytest.fixture(scope="module")
def served():
    """(url, model): the app on the shipped character model, which gets some list-task items right."""
    model = sv.load_model()
    with app_server(model, sweep=SWEEP_ROWS, map_sessions=0) as url:  # reads no γ map: none builds beside it
        yield url, model


@pytest.fixture(scope="module")
def client(served):
    from gradio_client import Client

    return Client(served[0], verbose=False)


def failures(client, task="copy", prompt="", **changes):
    """The endpoint's (rows as dicts, status) for ``task`` at ``SETTINGS`` with ``changes``; the decoder: SBD."""
    s = {**SETTINGS, **changes}
    table, status = client.predict(prompt, s["rule"], s["gamma"], s["gap_free"], s["block_size"], s["max_new_tokens"],
                                   s["temperature"], s["seed"], s["stop_at_newline"], s["verify"], "SBD", task,
                                   api_name="/list_failures")
    assert table["headers"] == GALLERY_HEADERS
    return [dict(zip(GALLERY_HEADERS, row)) for row in table["data"]], status


def by_hand(model, task, gamma):
    """(task, length, answer) of each item a plain decode gets wrong, and whether NTP gets each right."""
    wrong, ntp_right = set(), {}
    for item in lt.list_suite(tasks=lt.LIST_TASKS if task == "all tasks" else (task,), per_length=PER_LENGTH):
        room = len(item.answer) + 4  # the answer's characters and a few for its end
        out = sv.decode(model, item.assert_prompt, gamma=gamma, block_size=8, rule="entropy_bounded",
                        max_new_tokens=room, stop="\n").text
        if out.split("\n")[0].strip() != item.answer:
            key = (item.task, item.length, item.answer)
            wrong.add(key)
            ntp = sv.decode_ntp(model, item.assert_prompt, max_new_tokens=room, stop="\n").text
            ntp_right[key] = ntp.split("\n")[0].strip() == item.answer
    return wrong, ntp_right


def test_the_rows_are_the_items_a_plain_decode_gets_wrong_ranked(client, served):
    _, model = served
    rows, status = failures(client, "all tasks", gamma=0.5)
    wrong, ntp_right = by_hand(model, "all tasks", 0.5)
    assert {(r["task"], r["length"], r["answer"]) for r in rows} == wrong
    assert all(ntp_right[(r["task"], r["length"], r["answer"])] == (r["NTP right"] == "yes") for r in rows)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    scores = [r["suspicion"] for r in rows if r["suspicion"] is not None]
    assert scores == sorted(scores, reverse=True)  # most suspicious first, unblamed failures last
    n = len(lt.LIST_TASKS) * len(lt.LENGTHS) * PER_LENGTH
    assert 0 < len(rows) < n  # some right, some wrong: the rows are chosen
    assert f"{n} of {n} items decoded: **{len(rows)} wrong**" in status and "(SBD, assert prompts)" in status


def test_the_task_menu_and_gamma_change_what_is_decoded(client):
    copy, _ = failures(client, "copy", gamma=0.0)
    reverse, status = failures(client, "reverse", gamma=0.0)
    assert {r["task"] for r in copy} <= {"copy"} and {r["task"] for r in reverse} <= {"reverse"}
    assert "3 of 3 items decoded" in status
    high, _ = failures(client, "copy", gamma=2.0)
    assert [r["output"] for r in copy] != [r["output"] for r in high]  # the slider reaches the gallery's decodes


def test_bad_input_is_refused_by_name(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="task"):
        failures(client, "sort twice")
    with pytest.raises(AppError, match="gamma"):
        failures(client, "copy", gamma=99.0)


def test_a_row_click_sends_its_item_to_the_main_view():
    picks = [{"prompt": "assert [1, 2] == ", "chat": False, "max_new_tokens": 10, "call": 3},
             {"prompt": "Reverse [1, 2]", "chat": True, "max_new_tokens": 12, "call": None}]
    second = gr.SelectData(None, {"index": [1, 4], "value": "x", "row_value": []})
    assert Gallery.pick(picks, second) == ("Reverse [1, 2]", True, 12, True, None)
    first = gr.SelectData(None, {"index": [0, 0], "value": "x", "row_value": []})
    assert Gallery.pick(picks, first) == ("assert [1, 2] == ", False, 10, True, 3)
    missing = Gallery.pick(picks, gr.SelectData(None, {"index": [5, 0], "value": "x"}))
    assert missing[-1] is None  # a row that is not there moves nothing
