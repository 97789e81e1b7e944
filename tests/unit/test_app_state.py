"""The app's typed state: Gradio's positional values reach a handler as one ``Controls`` plus named extras, and a
``Session`` says whether it holds a decode and whether that decode came from the γ map."""

import inspect
from dataclasses import FrozenInstanceError

import pytest

from sbd_viz.app.state import Controls, Session, decoded, reading_controls

NAMES = ["prompt", "rule", "gamma", "gap_free", "block_size", "max_new_tokens", "temperature", "seed",
         "stop_at_newline", "verify", "decoder", "session", "chat"]
VALUES = ["go: ", "top_k", 2, False, 8, 16, 0.0, 3, True, False, "Jacobi", "the session", True]


def test_a_streaming_handler_gets_the_controls_by_name_and_the_rest_as_keywords():
    seen = []

    def decode(controls, session=None):
        seen.append((controls, session))
        yield controls.prompt
        yield controls.decoder

    run = reading_controls(decode, NAMES)
    assert inspect.isgeneratorfunction(run) and run.__name__ == "decode" and run.handler is decode
    assert list(run(*VALUES)) == ["go: ", "Jacobi"]
    controls, session = seen[0]
    assert controls == Controls("go: ", "top_k", 2, False, 8, 16, 0.0, 3, True, False, "Jacobi", True)
    assert session == "the session"


def test_a_plain_handler_gets_its_extras_by_name_wherever_they_sit():
    def compare(controls, chosen):
        return controls.seed, controls.chat, chosen

    names = NAMES[:10] + ["chosen"]  # the compare tab's order: the settings, then the chosen decoders
    run = reading_controls(compare, names)
    assert not inspect.isgeneratorfunction(run)
    assert run(*VALUES[:10], ["SBD"]) == (3, False, ["SBD"])  # no chat switch sent: off


def test_a_session_says_what_it_holds_and_is_never_edited_in_place():
    assert not decoded(None) and not decoded(Session())
    assert Session().projection == Session().projection and Session().projection is not Session().projection
    done = Session(trace="a trace", seconds=0.1)
    assert decoded(done) and not done.from_map
    assert Session(trace="a trace", seconds=None).from_map and not Session(seconds=None).from_map
    with pytest.raises(FrozenInstanceError):
        done.trace = None
