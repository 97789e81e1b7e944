"""The app's controls do what they say, driven over HTTP with gradio_client.

- Heavy jobs (ladder, compare, GIF) wait in their own line of the queue: a /decode sent after several of them is
  answered before they have all finished (an ordering, never a wall-clock bound: the tests run on a busy machine).
- Every refused input names its field, also where Gradio's own checks used to answer; the server log gets one
  line per refusal, no traceback.
- Names an API client reads are short; `sbd-viz app --help` says what each option is; a card says why the
  decode ended in words.
"""

import argparse
import logging
import re

import pytest
import torch

from conftest import SWEEP_ROWS, free_port, hand_trace, handlers_of, load_app, sharp_model
from sbd_viz.app import serving

# heavy: the app served on a free port, driven over HTTP (seconds per test)
pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert 48 + 37 == "
MAX_NEW = 24
SETTINGS = [PROMPT, "entropy_bounded", 0.5, False, 16, MAX_NEW, 0.0, 0, False, False]  # the /decode order


@pytest.fixture(scope="module")
def app():
    """(demo, url): the app on ``sharp_model()``, queued as ``main()`` queues it, on a free port."""
    page = load_app()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    demo = page.build_demo(sharp_model(), sweep=SWEEP_ROWS)
    from sbd_viz.app.serving import queue

    queue(demo)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        yield demo, f"http://127.0.0.1:{port}/"
    finally:
        handlers_of(demo).close()  # its background γ maps stop with it
        demo.close()
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app[1], verbose=False)


def _fns(demo) -> dict[str, object]:
    return {fn.api_name: fn for fn in demo.fns.values() if fn.api_name}


def test_heavy_jobs_have_their_own_line_of_the_queue(app):
    page = load_app()
    demo, _ = app
    fns = _fns(demo)
    for name in ("ladder", "compare", "gif", "time_it", "list_failures"):
        assert (fns[name].concurrency_id, fns[name].concurrency_limit) == ("heavy", serving.HEAVY_LIMIT), name
    for name in ("decode", "details"):
        assert (fns[name].concurrency_id, fns[name].concurrency_limit) == ("model", serving.MODEL_LIMIT), name
    # every event that decodes from a control (its chains included) is on the model line, none on the heavy one
    lines = {fn.concurrency_id for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") in ("decode", "details")}
    assert lines == {"model"}
    heavy = {getattr(fn.fn, "__name__", "") for fn in demo.fns.values() if fn.concurrency_id == "heavy"}
    assert heavy == {"ladder", "compare", "gif", "time_it", "list_failures"}
    assert demo._queue.max_size == serving.QUEUE_SIZE


def test_a_decode_sent_after_heavy_jobs_is_answered_before_they_all_finish(client):
    """Four ladders (each NTP and a decode per γ), then a /decode. Heavy jobs run one at a time on their own line,
    so the decode runs beside the first ladder and is answered before the second finishes. (On one shared line of
    two, as before, it started only after three ladders had: two had finished.)"""
    page = load_app()
    heavy = [client.submit(*SETTINGS, api_name="/ladder") for _ in range(4)]
    decode = client.submit(*SETTINGS, api_name="/decode")
    decode.result(timeout=600)
    finished = sum(job.done() for job in heavy)
    assert finished <= serving.HEAVY_LIMIT, f"the decode waited for {finished} heavy jobs"
    for job in heavy:  # they all still finish
        job.result(timeout=600)


BAD = [
    (0, 123, "prompt: must be text"),
    (0, "assert 1 + 1 ==\x00 ", "prompt: holds the control character"),
    (0, "\x1b[31m", "prompt: holds the control character"),
    (3, "false", "gap-free: must be true or false"),
    (3, 5, "gap-free: must be true or false"),
    (8, "false", "stop at the end of the line: must be true or false"),
    (8, 5, "stop at the end of the line: must be true or false"),
]


@pytest.mark.parametrize("index, value, message", BAD, ids=[f"{i}={v!r}" for i, v, _ in BAD])
def test_a_bad_input_is_refused_by_name(client, index, value, message):
    from gradio_client.exceptions import AppError

    settings = list(SETTINGS)
    settings[index] = value
    with pytest.raises(AppError, match=re.escape(message)):
        client.predict(*settings, api_name="/decode")


def test_a_prompt_with_tabs_and_line_breaks_is_taken(client):
    _, metrics, _, _ = client.predict("x = 1\r\n\tassert 2 + 2 == ", *SETTINGS[1:], api_name="/decode")
    assert "data-nfe" in metrics


@pytest.mark.parametrize("call", ["x", None, 2.5, -1])
def test_show_call_checks_its_input_as_every_control_does(client, call):
    from gradio_client.exceptions import AppError

    client.predict(*SETTINGS, api_name="/decode")
    with pytest.raises(AppError, match="show call: must be"):
        client.predict(call, api_name="/show_call")
    _, words = client.predict(1, api_name="/show_call")  # and it still answers
    assert words.startswith("**call 1 ")


def test_a_show_call_past_the_decodes_last_call_shows_its_last(client):
    """The value an earlier, longer decode left on the slider (the browser can send it while the new range
    arrives) is no error: it shows the new decode's last call."""
    _, metrics, _, _ = client.predict(*SETTINGS, api_name="/decode")
    nfe = int(re.search(r"data-nfe='(\d+)'", metrics).group(1))
    for past in (nfe, nfe + 45, 10**6):
        _, words = client.predict(past, api_name="/show_call")
        assert words.startswith(f"**call {nfe - 1} "), past
    _, words = client.predict(nfe - 2, api_name="/show_call")  # the control: a call in range is that call
    assert words.startswith(f"**call {nfe - 2} ")


def test_a_refused_input_logs_one_line_and_no_traceback(client, caplog, capfd):
    from gradio_client.exceptions import AppError

    capfd.readouterr()
    with caplog.at_level(logging.WARNING, logger="sbd_viz.app"), pytest.raises(AppError):
        client.predict("", *SETTINGS[1:], api_name="/decode")
    _, err = capfd.readouterr()
    assert "Traceback" not in err
    refusals = [r for r in caplog.records if r.name == "sbd_viz.app"]
    assert len(refusals) == 1 and refusals[0].getMessage().startswith("refused: prompt: is empty")
    assert "\n" not in refusals[0].getMessage()


def test_api_output_names_are_short(client):
    api = client.view_api(print_info=False, return_format="dict")
    for name, endpoint in api["named_endpoints"].items():
        for part in endpoint["parameters"] + endpoint["returns"]:
            assert len(part["label"]) <= 80, (name, part["label"])


def test_app_help_says_what_each_option_is():
    from sbd_viz import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["app"]
    helps = {a.option_strings[0]: a.help for a in sub._actions if a.option_strings}
    for option in ("--model", "--port", "--host"):
        assert helps[option] and len(helps[option]) > 10, option


def test_the_card_says_why_the_decode_ended_in_words():
    from sbd_viz.trace.words import measures

    for stop_at, words in ((13, "ended at a stop string"), (None, "ended at max new tokens")):
        note = next(m.note for m in measures(hand_trace(stop_at=stop_at)) if m.label == "tokens per call")
        assert words in note and "stop: " not in note


def test_time_it_gives_a_speedup_in_seconds_from_side_by_side_rounds(app):
    from gradio_client import Client

    page = load_app()
    client = Client(app[1], verbose=False)  # a new session, so this release decodes (none is answered from its map)
    _, metrics, _, _ = client.predict(*SETTINGS, api_name="/decode")
    assert "speedup · wall clock" not in metrics and "timed apart" in metrics  # one run each: seconds, no ratio
    fns = _fns(app[0])
    assert fns["time_it"].concurrency_id == "heavy"
    metrics = client.predict(api_name="/time_it")
    assert "speedup · wall clock" in metrics
    assert f"median of {page.TIMING_ROUNDS} side-by-side runs" in metrics


@pytest.mark.parametrize("decoder", ["jacobi", "prompt_lookup"])
def test_a_draft_checking_call_is_described_by_its_drafts_not_masks(decoder):
    import sbd_viz as sv
    from sbd_viz.trace.words import step_text

    trace = sv.decode(sharp_model(), "ab ab ab ", decoder=decoder, max_new_tokens=12)
    for step in trace.steps:
        words = step_text(trace, step)
        assert "masked" not in words and "<m>" not in words, words
        assert "kept " in words and ("drafts against NTP" in words or "no draft to check" in words)


def test_a_decode_asked_for_while_one_runs_is_kept_not_dropped():
    """Gradio drops a click that comes while its event is pending ("once", its default for a click and a .then);
    every event that decodes uses "always_last", so the newest request is decoded once the running one ends, and so
    does every view run after a decode (the failure table, the shown call, the γ strip, the scrubber's map): a
    decode that ends while the last one's views are pending gets its own."""
    from conftest import handlers_of, load_app, sharp_model

    demo = load_app().build_demo(sharp_model(), sweep=None)
    try:
        def events(name):
            return [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == name]

        decodes = events("decode")
        assert len(decodes) > 5  # the button, the slider, the examples, the page load, ...
        assert {fn.trigger_mode for fn in decodes} == {"always_last"}
        for view in ("details", "show_call", "strip", "scrubber"):
            assert len(events(view)) >= len(decodes), view  # one after each decode
            assert {fn.trigger_mode for fn in events(view)} == {"always_last"}, view
    finally:
        handlers_of(demo).close()  # the page's γ-map worker stops with it
