"""The app's γ slider answers from the γ map: after a prompt's first decode one background worker builds its
slider-step map, and a release inside a decoded piece shows that piece's decode without calling the model.

What a user relies on: the answer is the decode a fresh ``sv.decode`` gives at that γ (text, calls, commits per
call); a release inside a known piece runs no model call; a prompt or setting change drops the map; decoders without
the commit rule's γ, and sampling, decode every release as before; the decode states its γ range; the strip under the
slider draws the map as it builds and a click on a piece moves the slider. The tests wait for the worker with
``GammaMaps.wait`` (or hold it back with its gate), never by time.
"""

import json
import re

import gradio as gr
import pytest
import torch

import sbd_viz as sv
from conftest import SWEEP_ROWS, free_port, handlers_of, load_app, sharp_model
from sbd_viz.analysis.gamma_map import walks_gamma
from sbd_viz.app.map_builder import MAP_SESSIONS, Gate, GammaMaps, map_key
from sbd_viz.app.state import Controls
from sbd_viz.decoders import registry

# heavy: the app served on a free port, driven over HTTP and through its handlers (seconds per test)
pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert 48 + 37 == "
MAX_NEW = 24
BLOCK = 8
# the handlers' raw values, in the /decode order: prompt, rule, gamma, gap_free, block_size, max_new_tokens,
# temperature, seed, stop_at_newline, verify, decoder
SETTINGS = dict(prompt=PROMPT, rule="entropy_bounded", gamma=0.5, gap_free=False, block_size=BLOCK,
                max_new_tokens=MAX_NEW, temperature=0.0, seed=0, stop_at_newline=False, verify=False, decoder="SBD")


@pytest.fixture(scope="module")
def app():
    """(url, model, handlers): the app on ``sharp_model()``, queued as ``main()`` queues it, on a free port."""
    page = load_app()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = sharp_model()
    demo = page.build_demo(model, sweep=SWEEP_ROWS)
    from sbd_viz.app.serving import queue

    queue(demo)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    handlers = handlers_of(demo)
    try:
        yield f"http://127.0.0.1:{port}/", model, handlers
    finally:
        handlers.close()
        demo.close()
        torch.set_num_threads(threads)


@pytest.fixture
def calls(app):
    """A list that gets one entry per forward of the model (hooked on the transformers module)."""
    seen = []
    hook = app[1].model.register_forward_pre_hook(lambda *_: seen.append(1))
    yield seen
    hook.remove()


def released(handlers, session=None, **changes):
    """One release through the decode handler (as the slider's event runs it): the session it leaves."""
    s = {**SETTINGS, **changes}
    out = list(handlers.decode(Controls(**s), session))
    return out[-1][0]


def expected(model, gamma, **changes):
    """``sv.decode`` at ``gamma`` with the settings a release sends (SETTINGS with ``changes``)."""
    s = {**SETTINGS, **changes}
    spec = registry.by_label(s["decoder"])
    own = dict(verify=s["verify"]) if s["verify"] else {}
    return sv.decode(model, s["prompt"], decoder=spec.name, rule=s["rule"], gamma=gamma, block_size=s["block_size"],
                     max_new_tokens=s["max_new_tokens"], gap_free=s["gap_free"], **own)


def commits(trace):
    return [[(c.slot, c.token_id) for c in s.commits] for s in trace.steps]


def same_decode(a, b) -> bool:
    return (a.text, a.output_ids, a.nfe, commits(a), a.gamma_range) == (b.text, b.output_ids, b.nfe, commits(b),
                                                                        b.gamma_range)


# -- answers from the map -----------------------------------------------------------------------------------------
def test_a_release_inside_a_decoded_piece_answers_from_the_map_without_a_model_call(app, calls):
    """Over HTTP, as the slider sends it: the first release decodes (model calls), the map builds, then releases at
    other γ run no model call and return what ``sv.decode`` gives at that γ."""
    from gradio_client import Client

    url, model, handlers = app
    client = Client(url, verbose=False)

    def release(gamma):
        return client.predict(PROMPT, "entropy_bounded", gamma, False, BLOCK, MAX_NEW, 0.0, 0, False, False,
                              api_name="/decode")

    _, metrics, _, _ = release(0.5)
    assert calls and "data-from-map='0'" in metrics  # the first release decodes
    handlers.maps.wait()
    for gamma in (0.0, 0.13, 0.77, 1.5, 2.0):
        before = len(calls)
        figure, metrics, texts, _ = release(gamma)
        assert len(calls) == before, f"γ={gamma}: a release inside a decoded piece ran {len(calls) - before} calls"
        assert "data-from-map='1'" in metrics and "γ map" in metrics
        trace = sv.load_trace(client.predict(api_name="/details")[-1])  # the current decode, as the app offers it
        fresh = expected(model, gamma)
        assert same_decode(trace, fresh), gamma
        assert trace.config["gamma"] == gamma and trace.config == fresh.config
        assert int(re.search(r"data-nfe='(\d+)'", metrics).group(1)) == fresh.nfe
        assert len(json.loads(figure)["frames"]) == fresh.nfe  # the animation: one frame per call of this decode


@pytest.mark.parametrize("changes", [dict(verify=True), dict(decoder="SBD + remasking")], ids=["verified", "remask"])
def test_every_decoder_with_a_map_answers_with_the_fresh_decode_at_each_slider_position(app, changes):
    """Verified SBD and remasking have a map too; each slider position (a step of 0.01 over [0, 2]) answers with the
    decode ``sv.decode`` gives there (checked at every tenth position, so the test stays short)."""
    _, model, handlers = app
    session = released(handlers, max_new_tokens=12, **changes)
    handlers.maps.wait()
    for k in range(0, 201, 10):
        gamma = round(k * 0.01, 2)
        session = released(handlers, session, gamma=gamma, max_new_tokens=12, **changes)
        assert session.from_map, gamma
        assert same_decode(session.trace, expected(model, gamma, max_new_tokens=12, **changes)), gamma


def test_the_decode_states_its_gamma_range(app):
    _, model, handlers = app
    session = released(handlers, gamma=0.77)
    trace = session.trace
    from sbd_viz.app.views import metrics_html

    cards = metrics_html(session)
    assert trace.gamma_range is not None and 0.77 in trace.gamma_range
    assert f"this exact decode for every γ in {trace.gamma_range}" in cards
    jacobi = released(handlers, session, decoder="Jacobi")  # no commit rule's γ: no range to state
    assert jacobi.trace.gamma_range is None and "γ range" not in metrics_html(jacobi)


# -- when the map goes -----------------------------------------------------------------------------------------------
CHANGES = [dict(prompt="assert 17 + 25 == "), dict(block_size=4), dict(max_new_tokens=16), dict(gap_free=True),
           dict(stop_at_newline=True), dict(verify=True), dict(rule="entropy_threshold"), dict(seed=3)]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: next(iter(c)))
def test_a_prompt_or_setting_change_drops_the_map(app, change):
    """Each setting but γ is part of the map's key: changing it drops the session's map (the release decodes and a
    new map is queued); coming back decodes again. Moving γ alone keeps the map."""
    _, _, handlers = app
    session = released(handlers)
    handlers.maps.wait()
    first, _ = handlers.maps.current(session.map_id)
    session = released(handlers, session, gamma=1.3)
    assert session.from_map and handlers.maps.current(session.map_id)[0] is first  # γ alone: the same map
    session = released(handlers, session, gamma=1.3, **change)
    assert not session.from_map
    handlers.maps.wait()
    now, state = handlers.maps.current(session.map_id)
    assert now is not first and state == "done"
    assert now.prompt == change.get("prompt", PROMPT)
    back = released(handlers, session, gamma=1.3)  # the old settings again: the old map is gone, so it decodes
    assert not back.from_map


@pytest.mark.parametrize("changes", [dict(decoder="Jacobi"), dict(decoder="prompt lookup"), dict(temperature=0.7)],
                         ids=["jacobi", "prompt_lookup", "sampling"])
def test_decoders_without_a_map_and_sampling_decode_every_release(app, calls, changes):
    """No γ map for them: the session's map is dropped, nothing is queued, and every release calls the model."""
    _, _, handlers = app
    session = released(handlers)
    handlers.maps.wait()
    assert handlers.maps.current(session.map_id) is not None
    # the slider is prompt lookup's own knob, its draft length (whole numbers); Jacobi takes no γ
    for gamma in (3, 3, 7) if changes.get("decoder") == "prompt lookup" else (0.5, 0.5, 1.2):
        before = len(calls)
        session = released(handlers, session, gamma=gamma, **changes)
        assert not session.from_map and len(calls) > before
        assert handlers.maps.current(session.map_id) is None
    html, timer = handlers.strip(session)
    assert html == "" and timer.active is False


def test_only_decoders_with_the_commit_rules_gamma_have_a_map():
    """``map_key`` follows ``walks_gamma`` for every registered decoder (the causal LM's, DiffusionGemma's, Jacobi,
    prompt lookup and NTP have none); sampling and a rule that ignores its knob have none either."""
    own = dict(rule="entropy_bounded", gamma=0.5, block_size=8, max_new_tokens=8, temperature=0.0, seed=0)
    for spec in registry.decoders():
        assert (map_key(PROMPT, spec, own) is not None) == walks_gamma(spec), spec.name
    assert {s.name for s in registry.decoders() if walks_gamma(s)} >= {"sbd", "remask"}
    sbd = registry.get_decoder("sbd")
    assert map_key(PROMPT, sbd, {**own, "temperature": 0.5}) is None
    assert map_key(PROMPT, sbd, {**own, "rule": "left_to_right"}) is None
    assert map_key(PROMPT, sbd, own) == map_key(PROMPT, sbd, {**own, "gamma": 1.7})  # γ is not in the key
    assert map_key(PROMPT, sbd, own) != map_key(PROMPT, sbd, {**own, "block_size": 4})


def test_at_most_capacity_maps_are_kept_the_least_recently_used_dropped_first(app):
    _, model, _ = app
    maps = GammaMaps(model, capacity=2)
    sbd = registry.get_decoder("sbd")
    own = dict(rule="entropy_bounded", gamma=0.5, block_size=8, max_new_tokens=8, temperature=0.0, seed=0)
    try:
        with maps.gate.interactive():  # the worker waits: nothing is built while the maps are queued
            for i, session in enumerate("abc"):
                prompt = f"assert {i} + 1 == "
                maps.want(session, map_key(prompt, sbd, own), prompt, sbd, own)
                if session == "b":
                    maps.answer("a", map_key("assert 0 + 1 == ", sbd, own), 0.5)  # a is used: b is the oldest now
            assert maps.current("a") is not None and maps.current("b") is None and maps.current("c") is not None
        maps.wait()
        assert maps.current("a")[1] == maps.current("c")[1] == "done"
    finally:
        maps.close()


def test_a_capacity_of_zero_keeps_no_map_and_the_page_passes_its_count_on(app):
    """``GammaMaps(capacity=0)`` (``build_demo(map_sessions=0)``): a decode queues no map, so a release decodes."""
    _, model, _ = app
    sbd = registry.get_decoder("sbd")
    own = dict(rule="entropy_bounded", gamma=0.5, block_size=8, max_new_tokens=8, temperature=0.0, seed=0)
    key = map_key(PROMPT, sbd, own)
    for capacity, kept in ((1, True), (0, False)):
        maps = GammaMaps(model, capacity=capacity)
        try:
            maps.want("a", key, PROMPT, sbd, own)
            maps.wait()
            assert (maps.current("a") is not None) == kept, capacity
            assert (maps.answer("a", key, 0.5) is not None) == kept, capacity
        finally:
            maps.close()
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="capacity"):
            GammaMaps(model, capacity=bad)
    for given, capacity in (({"map_sessions": 0}, 0), ({}, MAP_SESSIONS)):
        handlers = handlers_of(load_app().build_demo(model, sweep=None, **given))
        handlers.close()
        assert handlers.maps.capacity == capacity, given


def test_the_most_recently_wanted_map_is_built_first_and_an_earlier_one_resumes_after(app):
    """The worker takes one piece at a time from the most recently wanted unfinished map: a map wanted while another
    is being built is built next (after the piece in progress), then the first one resumes."""
    _, model, _ = app
    maps, order = GammaMaps(model), []
    sbd = registry.get_decoder("sbd")
    own = dict(rule="entropy_bounded", gamma=0.5, block_size=8, max_new_tokens=12, temperature=0.0, seed=0)
    first, second = "assert 5 + 6 == ", "assert 7 + 8 == "
    call = maps._call

    def recording(entry):  # each model call of the worker, by prompt; the second map is wanted at the third call
        order.append(entry.map.prompt)
        if len(order) == 3:
            maps.want("b", map_key(second, sbd, own), second, sbd, own)
        return call(entry)

    maps._call = recording
    try:
        maps.want("a", map_key(first, sbd, own), first, sbd, own)
        maps.wait()
        assert maps.current("a")[1] == maps.current("b")[1] == "done"
    finally:
        maps.close()
    seconds = [i for i, p in enumerate(order) if p == second]
    assert seconds == list(range(seconds[0], seconds[-1] + 1))  # the second map's calls in one run
    assert order[:3] == [first] * 3 and first in order[seconds[-1]:]  # the first map resumed after it


def test_the_gate_lets_an_interactive_decode_wait_for_one_background_call_only():
    """While an interactive decode runs no background call starts; an interactive decode that comes during a
    background call waits for that call, and the next background call waits for the decode."""
    import threading

    gate, order = Gate(), []
    in_call, end_call, decoded = threading.Event(), threading.Event(), threading.Event()

    def worker():
        with gate.background():
            order.append("call 1")
            in_call.set()
            end_call.wait()
        with gate.background():
            order.append("call 2")

    def decode():
        with gate.interactive():
            order.append("decode")
        decoded.set()

    t = threading.Thread(target=worker)
    t.start()
    in_call.wait()
    d = threading.Thread(target=decode)
    d.start()
    assert not decoded.wait(0.2)  # it waits for the call in flight
    end_call.set()
    d.join()
    t.join()
    assert order == ["call 1", "decode", "call 2"]


# -- the strip -------------------------------------------------------------------------------------------------------
def _pieces(strip: str) -> list[dict]:
    return [dict(re.findall(r"data-([a-z-]+)='([^']*)'", m)) for m in re.findall(r"<div class='piece' ([^>]*)>", strip)]


def test_the_strip_draws_the_map_as_it_builds(app):
    """Held back by an interactive decode, the map has nothing yet: the strip is all 'building' and its timer polls;
    once built, every piece is drawn, the current one marked, and the timer stops."""
    _, _, handlers = app
    with handlers.maps.gate.interactive():
        session = released(handlers, prompt="assert 33 + 44 == ")
        strip, timer = handlers.strip(session)
        assert "data-complete='false'" in strip and timer.active is True
        assert [p["kind"] for p in _pieces(strip)] == ["pending"]
    handlers.maps.wait()
    strip, timer = handlers.strip(session)
    gamma_map, _ = handlers.maps.current(session.map_id)
    assert "data-complete='true'" in strip and timer.active is False
    pieces = _pieces(strip)
    assert len(pieces) == len(gamma_map.pieces) > 1
    assert [p["current"] for p in pieces].count("1") == 1
    current = next(p for p, q in zip(gamma_map.pieces, pieces) if q["current"] == "1")
    assert 0.5 in current
    assert {p["ntp"] for p in pieces if p["kind"] == "decoded"} <= {"same", "differs"}  # NTP known: marked


def test_a_click_on_a_piece_moves_the_slider_there_and_shows_that_piece(app, calls):
    """The strip's click sends a piece's slider position; the handler moves the slider to it, and the release that
    follows shows that piece's decode from the map."""
    _, model, handlers = app
    session = released(handlers)
    handlers.maps.wait()
    pieces = _pieces(handlers.strip(session)[0])
    target = next(p for p in pieces if p["kind"] == "decoded" and p["current"] == "0")
    moved = handlers.strip_pick(gr.EventData(None, {"gamma": float(target["gamma"])}))
    assert moved["value"] == float(target["gamma"]) != 0.5
    before = len(calls)
    session = released(handlers, session, gamma=moved["value"])
    assert session.from_map and len(calls) == before
    assert float(target["lo"]) <= moved["value"] <= float(target["hi"])
    assert same_decode(session.trace, expected(model, moved["value"]))
    for junk in (None, {}, {"gamma": "x"}, {"gamma": float("nan")}):  # a raw call can send anything: no move
        assert "value" not in handlers.strip_pick(gr.EventData(None, junk))
