"""The Gradio app, served for real and driven with gradio_client, on a tiny random model.

What a user relies on: the slider endpoint returns what ``sv.decode`` returns for the same
settings; a larger gamma never costs more calls; bad input comes back as an error naming the
field and the app keeps serving; concurrent sessions get their own, correct results.
"""

import concurrent.futures
import html
import json
import re
import urllib.request
from pathlib import Path

import pytest

import sbd_viz as sv

from conftest import SWEEP_ROWS, load_app, sharp_model, tiny_model
from sbd_viz.app import inputs
from sbd_viz.app.panels import KIND_NAMES
from sbd_viz.analysis.incoherence import incoherence_events

ROOT = Path(__file__).resolve().parents[2]
# Gradio's queue statistics trip pandas 3 deprecation warnings: not ours, and not news.
# heavy: the app served on a free port, driven over HTTP (seconds per test)
pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert 48 + 37 == "
MAX_NEW = 24  # short decodes keep the module fast


@pytest.fixture(scope="module")
def app_module():
    return load_app()


# ``served`` (conftest): (url, model), the app on ``sharp_model()`` with the hand-made curve ``SWEEP_ROWS``
@pytest.fixture(scope="module")
def client(served):
    from gradio_client import Client

    return Client(served[0], verbose=False)


def decode(client, prompt=PROMPT, rule="entropy_bounded", gamma=0.5, gap_free=False, block_size=16,
           max_new_tokens=MAX_NEW, temperature=0.0, seed=0, stop=False, verify=False):
    """The slider's endpoint: (animation figure JSON, metrics HTML, texts HTML, show-call slider)."""
    return client.predict(prompt, rule, gamma, gap_free, block_size, max_new_tokens, temperature, seed, stop, verify,
                          api_name="/decode")


def nfe_of(metrics_html: str) -> int:
    return int(re.search(r"data-nfe='(\d+)'", metrics_html).group(1))


def trace_of(client) -> sv.Trace:
    """The current session's trace, through the download the app offers."""
    out = client.predict(api_name="/details")
    return sv.load_trace(out[-1])


# -- results --------------------------------------------------------------------------------------
def test_slider_endpoint_returns_the_library_decode(client, served):
    _, model = served
    figure, metrics, texts, _ = decode(client, gamma=1.0, block_size=8)
    expected = sv.decode(model, PROMPT, gamma=1.0, block_size=8, max_new_tokens=MAX_NEW)
    trace = trace_of(client)
    assert trace.output_ids == expected.output_ids
    assert [s.committed_slots for s in trace.steps] == [s.committed_slots for s in expected.steps]
    assert nfe_of(metrics) == expected.nfe
    fig = json.loads(figure)
    assert [f["name"] for f in fig["frames"]] == [str(c) for c in range(expected.nfe)]  # one frame per call
    assert "NTP (greedy)" in texts and "SBD" in texts


def test_higher_gamma_never_needs_more_calls(client):
    calls = [nfe_of(decode(client, gamma=g)[1]) for g in (0.0, 0.5, 1.0, 2.0)]
    assert calls == sorted(calls, reverse=True), calls
    assert calls[0] == MAX_NEW  # gamma 0: one slot per call
    assert calls[-1] < calls[0]  # the two ends really differ


def projected_of(metrics_html: str) -> tuple[str, float]:
    hardware, value = re.search(r"projected · ([\w.-]+)</div><div class='value '>([\d.]+)×", metrics_html).groups()
    return hardware, float(value)


def test_projected_speedup_follows_gamma_and_the_chosen_hardware(client):
    """The roofline card: this decode's calls costed on a GPU; it moves with gamma and with the hardware."""
    from sbd_viz.analysis import roofline

    low = projected_of(decode(client, gamma=0.0)[1])
    metrics = decode(client, gamma=2.0)[1]
    high = projected_of(metrics)
    assert low[0] == high[0] == "h100-fp8" and high[1] > low[1]
    trace = trace_of(client)
    assert high[1] == pytest.approx(roofline.project(trace, "h100-fp8", "paper-8b", 1)["speedup"], abs=0.006)
    metrics = client.predict("a100-bf16", "qwen-3-8b", 64, api_name="/project")
    hardware, value = projected_of(metrics)
    assert hardware == "a100-bf16" and nfe_of(metrics) == trace.nfe  # re-costed, not re-decoded
    assert value == pytest.approx(roofline.project(trace, "a100-bf16", "qwen-3-8b", 64)["speedup"], abs=0.006)
    assert projected_of(decode(client, gamma=2.0)[1])[0] == "a100-bf16"  # the choice holds for the next decode


@pytest.mark.parametrize("args, field", [(("tpu-v9", "paper-8b", 1), "hardware"), (("h100-fp8", "gpt-9", 1), "model"),
                                         (("h100-fp8", "paper-8b", 3), "batch")])
def test_bad_projection_choice_names_the_field(client, args, field):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=field):
        client.predict(*args, api_name="/project")


def test_verified_switch_gives_ntps_text_and_says_so(client, served):
    """The verified switch: the text is exactly NTP's, and the metrics say so, with what checking cost."""
    _, model = served
    prompt = "assert 93 + 8 == "
    _, metrics, _, _ = decode(client, prompt=prompt, gamma=2.0, verify=True)
    trace = trace_of(client)
    assert trace.verified
    assert trace.output_ids == sv.decode_ntp(model, prompt, max_new_tokens=MAX_NEW).output_ids
    assert "= NTP ✓" in metrics and re.search(rf"\b{len(trace.rollbacks())} rollbacks?\b", metrics)
    assert nfe_of(metrics) == trace.nfe


def test_details_views_and_show_call(client, served):
    decode(client, gamma=1.0)
    table, timeline, comparison, tradeoff, status, path = client.predict(api_name="/details")
    trace = sv.load_trace(path)
    rows = table["value"]["data"]  # a gr.update: the table and its label (with the count)
    fills = [row for row in rows if row[0] == "gap fill"]
    assert len(fills) == len(trace.gap_fills()) > 0  # every gap fill is listed; the label counts the kept ones
    assert f"gap fills ({len(trace.kept_gap_fills())})" in table["label"]
    assert [row[1] for row in fills] == [g.call for g in trace.gap_fills()]
    # the incoherent commits of the same decode, each labelled by its kind, in the same table
    events = incoherence_events(served[1], trace)
    assert sorted((row[0], row[1], row[3]) for row in rows if row[0] != "gap fill") == \
        sorted((KIND_NAMES[e["kind"]], e["call"], e["slot"]) for e in events)
    for plot in (timeline, comparison, tradeoff):
        assert plot["type"] == "plotly" and json.loads(plot["plot"])["data"]
    assert "γ = 1" in status  # the ring marks the measured point nearest to the current gamma
    heatmap, words = client.predict(trace.gap_fills()[0].call, api_name="/show_call")
    assert json.loads(heatmap["plot"])["data"] and f"call {trace.gap_fills()[0].call}" in words


def _values(array) -> list:
    """A plotted array as a list: plotly sends numpy arrays as {'dtype', 'bdata'} (base64 bytes)."""
    import base64

    import numpy as np

    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def _ring(tradeoff_plot) -> list[tuple[float, float]]:
    """The (x, y) of the 'current setting' ring in a /details trade-off plot."""
    data = json.loads(tradeoff_plot["plot"])["data"]
    ring = next(t for t in data if t.get("name") == "current setting")
    return list(zip(_values(ring["x"]), _values(ring["y"])))


def test_curve_has_a_verified_line_and_the_switch_rings_it(client):
    """The speed/quality tab: the verified line beside the lossy rule; the ring follows the verified switch."""
    decode(client, gamma=0.5, verify=True)
    *_, tradeoff, status, _ = client.predict(api_name="/details")
    data = json.loads(tradeoff["plot"])["data"]
    verified = [t for t in data if t.get("name") == "verified (lossless)"]
    assert len(verified) == 1 and _values(verified[0]["y"]) == [0.9] * 4  # at NTP's accuracy: its text is NTP's
    assert _ring(tradeoff) == [(1.5, 0.9)]  # the verified γ = 0.5 point
    assert "on the verified line" in status and "γ = 0.5" in status
    decode(client, gamma=0.5, verify=False)
    *_, tradeoff, status, _ = client.predict(api_name="/details")
    assert _ring(tradeoff) == [(2.0, 0.85)]  # the lossy γ = 0.5 point
    assert "verified" not in status


def test_an_old_sweep_file_without_verify_still_loads(app_module, tmp_path):
    """A sweep.json from before verified decoding: its rows are unverified; the switch finds no verified point."""
    old = [{k: v for k, v in row.items() if k not in ("verify", "same_as_ntp")} for row in SWEEP_ROWS
           if not row.get("verify")]
    (tmp_path / app_module.SWEEP_FILE).write_text(json.dumps({"rows": old}))
    curve = app_module.SpeedQualityCurve(model_dir=tmp_path, compute=False)
    assert curve.df is not None and not curve.df["verify"].any()
    fig, status = curve.figure("entropy_bounded", 1.0, False)
    assert "γ = 1" in status and not [t for t in fig.data if t.meta and t.meta["role"] == "verified"]
    fig, status = curve.figure("entropy_bounded", 1.0, False, verify=True)
    assert "no measured points for entropy_bounded verified" in status and fig is not None


def test_the_shipped_sweep_has_the_verified_line(app_module):
    """sbd_viz/weights/sbd-char-5m/sweep.json: the verified entropy-bounded rule over the lossy rule's γ values, every
    one at 100% NTP agreement."""
    path = sv.default_model_path() / app_module.SWEEP_FILE
    assert path.is_file(), f"no {path}: the shipped model carries its sweep"
    rows = json.loads(path.read_text())["rows"]
    rule = app_module.SWEEP_VERIFIED
    verified = [r for r in rows if r.get("verify")]
    assert sorted(r["gamma"] for r in verified) == sorted(app_module.SWEEP_GRID[rule])
    assert all(r["rule"] == rule and r["same_as_ntp"] == 1.0 for r in verified)
    ntp = next(r for r in rows if r["rule"] == "ntp")
    assert all(r["accuracy"] == ntp["accuracy"] for r in verified)


def test_suite_prompt_is_scored_and_other_prompts_are_not(client):
    item = sv.tasks.load_suite("pyasserts", "test", per_family=1, families=("reverse",))[0]
    _, metrics, texts, _ = decode(client, prompt=item.prompt, stop=True)
    assert f"expected {html.escape(item.answer)}" in metrics
    _, metrics, _, _ = decode(client, prompt="def f(x):", stop=True)
    assert "unscored" in metrics


# -- bad input --------------------------------------------------------------------------------------
BAD = [
    (dict(prompt=""), "prompt"),
    (dict(prompt="   "), "prompt"),
    (dict(prompt="x" * 511), "prompt"),  # past the model's context of 512 (its BOS and one new token aside)
    (dict(prompt="x" * 495), "max_new_tokens"),  # within it, but not with the 24 new tokens asked
    (dict(prompt="x" * 20000), "prompt"),
    (dict(gamma="nan"), "gamma"),
    (dict(gamma=-0.1), "gamma"),
    (dict(gamma=2.5), "gamma"),
    (dict(gamma=None), "gamma"),
    (dict(rule="confidence_threshold", gamma=1.5), "gamma"),
    (dict(rule="top_k", gamma=2.5), "gamma"),
    (dict(block_size=0), "block size"),
    (dict(block_size=65), "block size"),
    (dict(block_size=8.5), "block size"),
    (dict(rule="no_such_rule"), "rule"),
    (dict(max_new_tokens=0), "max new tokens"),
    (dict(max_new_tokens=129), "max new tokens"),
    (dict(temperature=-1), "temperature"),
    (dict(seed=-3), "seed"),
    (dict(verify=True, temperature=0.5), "verify"),  # verified decoding is greedy: the library says why
]


@pytest.mark.parametrize("change, field", BAD, ids=[f"{f}={str(c)[:30]}" for c, f in BAD])
def test_bad_input_is_an_error_naming_the_field(client, change, field):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=re.escape(field)):
        decode(client, **change)


def test_the_largest_allowed_request_is_served(client, app_module):
    figure, metrics, _, _ = decode(client, prompt="x" * inputs.MAX_PROMPT_CHARS, gamma=2.0, block_size=64,
                                   max_new_tokens=app_module.MAX_NEW_TOKENS)
    assert f"data-tokens='{app_module.MAX_NEW_TOKENS}'" in metrics and json.loads(figure)["frames"]


@pytest.mark.parametrize("prompt_chars, max_new_tokens, field", [(70, 8, "prompt"), (40, 30, "max_new_tokens")])
def test_a_request_past_the_models_context_is_an_error_naming_the_field(app_module, prompt_chars, max_new_tokens,
                                                                        field):
    import gradio as gr

    from sbd_viz.app.state import Controls

    model = tiny_model()
    model.model.config.sbd_context_length = 64  # as `sbd-viz train` records it
    handlers = app_module.Handlers(model, app_module.SpeedQualityCurve(results=SWEEP_ROWS, compute=False))
    with pytest.raises(gr.Error, match=f"{field}.*64"):
        next(handlers.decode(Controls("x" * prompt_chars, "entropy_bounded", 0.5, False, 16, max_new_tokens, 0, 0,
                                      False, False), session=None))


def test_nan_gamma_over_raw_http_is_an_error_and_the_app_keeps_serving(served, client):
    # JSON has no NaN, so gradio_client cannot send one; a raw request can (Python's parser accepts it).
    url, _ = served
    body = json.dumps({"data": [PROMPT, "entropy_bounded", float("nan"), False, 16, MAX_NEW, 0, 0, False, False, "SBD", None]})
    req = urllib.request.Request(url + "gradio_api/call/decode", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    event_id = json.loads(urllib.request.urlopen(req, timeout=30).read())["event_id"]
    stream = urllib.request.urlopen(f"{url}gradio_api/call/decode/{event_id}", timeout=60).read().decode()
    assert "event: error" in stream and "gamma" in stream
    _, metrics, _, _ = decode(client)  # still serving
    assert nfe_of(metrics) > 0


def test_examples_are_test_suite_items(app_module):
    """Examples are scored in the app only if they are suite prompts, alone or at the end of a document;
    each fits the app's prompt box."""
    suite = {item.prompt: item for item in sv.tasks.load_suite("pyasserts", "test")}
    assert all(sv.tasks.item_in_prompt(prompt, suite) for prompt in app_module.EXAMPLES)
    assert all(len(prompt) <= inputs.MAX_PROMPT_CHARS for prompt in app_module.EXAMPLES)


def test_example_labels_say_what_a_decode_at_the_defaults_does(app_module):
    """Labels are measured when the page is built: here, against a decode of each example done here."""
    model = sharp_model()
    suite = {item.prompt: item for item in sv.tasks.load_suite("pyasserts", "test")}
    for prompt in app_module.EXAMPLES:
        trace = sv.decode(model, prompt, stop="\n")  # the library's defaults are the app's
        label = app_module.example_label(model, suite, prompt)
        item = sv.tasks.item_in_prompt(prompt, suite)
        before = f" after {prompt.count(chr(10)) - item.prompt.count(chr(10))} lines" if prompt != item.prompt else ""
        assert label.startswith(f"{item.family}{before}: {trace.n_tokens} tokens in {trace.nfe} calls"), label
        assert ("gap fill" in label) == bool(trace.kept_gap_fills()), label
        assert ("wrong" in label) == (not sv.tasks.score(item, trace.text)), label


def test_every_rule_default_knob_is_valid(app_module):
    """Each rule's slider range and default (from the library's registry) pass the app's checks and the
    library's; past the slider is refused, naming gamma."""
    import gradio as gr

    for rule, knob in sv.COMMIT_RULES.items():
        lo, hi, _ = knob.slider
        for value in (lo, knob.default, hi):
            settings = app_module.read_settings(PROMPT, rule, value, False, 16, 8, 0, 0, True)
            settings.pop("prompt")
            sv.DecodeConfig(**{**settings, "stop": settings["stop"] or ()})
        with pytest.raises(gr.Error, match="gamma"):
            app_module.read_settings(PROMPT, rule, hi + 1, False, 16, 8, 0, 0, True)


# -- sessions -------------------------------------------------------------------------------------------
def test_concurrent_sessions_get_their_own_correct_results(served):
    """32 clients at once, each its own session, prompt and settings: each gets exactly its own decode."""
    from gradio_client import Client

    url, model = served
    jobs = [(f"assert {10 + i} + {3 * i} == ", round(0.0625 * i, 4), (4, 8, 16)[i % 3]) for i in range(32)]

    def one(job):
        prompt, gamma, block = job
        client = Client(url, verbose=False)
        _, metrics, texts, _ = decode(client, prompt=prompt, gamma=gamma, block_size=block)
        return metrics, texts, trace_of(client)

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(one, jobs))
    for (prompt, gamma, block), (metrics, texts, trace) in zip(jobs, results):
        expected = sv.decode(model, prompt, gamma=gamma, block_size=block, max_new_tokens=MAX_NEW)
        assert trace.prompt == prompt and trace.config["gamma"] == gamma and trace.config["block_size"] == block
        assert trace.output_ids == expected.output_ids
        assert nfe_of(metrics) == expected.nfe
        assert html.escape(prompt) in texts  # the texts panel names this session's prompt


def test_ladder_streams_every_gamma_and_matches_independent_decodes(client, served):
    """This prompt across γ: one row per γ of the rule's ladder, each the decode the library gives at that γ."""
    from sbd_viz.analysis.gamma_ladder import ladder_gammas

    _, model = served
    rows, figure, status = client.predict(PROMPT, "entropy_bounded", 0.5, False, 16, MAX_NEW, 0.0, 0, True, False,
                                          api_name="/ladder")
    data = rows["data"]
    assert [row[0] for row in data] == ladder_gammas("entropy_bounded")
    ntp = sv.decode_ntp(model, PROMPT, max_new_tokens=MAX_NEW, stop="\n")
    for gamma, calls, _, same, where, _ in data:
        trace = sv.decode(model, PROMPT, gamma=gamma, block_size=16, max_new_tokens=MAX_NEW, stop="\n")
        assert calls == trace.nfe and (same == "yes") == (trace.text == ntp.text) and bool(where) == (same == "NO")
    safe = [row[0] for row in data]
    # from the first γ that keeps NTP's text, the run that keeps it (the exact map may end the climb sooner, at a γ
    # between two rows that leaves NTP's text); the status also states the exact safe ranges
    same = [row[3] == "yes" for row in data]
    first = next((i for i, ok in enumerate(same) if ok), None)
    if first is None:
        assert "no safe γ" in status
    else:
        end = next((i for i in range(first, len(same)) if not same[i]), len(same))
        assert any(f"largest safe γ: {g:g}" in status for g in safe[first:end])
    assert "NTP's text at every γ in" in status or "writes NTP's text" in status
    assert json.loads(figure["plot"])["data"]


def test_ladder_and_gif_refuse_bad_input(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="gamma"):
        client.predict(PROMPT, "entropy_bounded", 99.0, False, 16, MAX_NEW, 0.0, 0, True, False,
                       api_name="/ladder")
    with pytest.raises(AppError, match="prompt"):
        client.predict("", "entropy_bounded", 0.5, False, 16, MAX_NEW, 0.0, 0, True, False, api_name="/ladder")


def test_gif_download_has_one_frame_per_call(client):
    from PIL import Image

    decode(client, gamma=1.0)
    path = client.predict(api_name="/gif")
    trace = trace_of(client)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == trace.nfe


@pytest.mark.parametrize("decoder", ["Jacobi", "prompt lookup", "SBD + remasking"])
def test_the_decoder_selector_decodes_with_that_decoder(client, served, decoder):
    """The main view's decoder: the slider's endpoint returns the library's decode with that decoder, and the
    details (failure table, curve, trace file) follow it."""
    _, model = served
    _, metrics, _, _ = client.predict(PROMPT, "entropy_bounded", 1.0, False, 16, MAX_NEW, 0.0, 0, False, False,
                                      decoder, api_name="/decode")
    trace = trace_of(client)
    name = sv.registry.by_label(decoder).name  # the app's choices are the registry's labels
    # the slider (1.0 here) is the decoder's knob: remasking's γ, prompt lookup's own draft length
    own = dict(rule="entropy_bounded", gamma=1.0, block_size=16) if name == "remask" else \
        dict(block_size=16) if name == "jacobi" else dict(prompt_lookup_num_tokens=1) if name == "prompt_lookup" \
        else {}
    expected = sv.decode(model, PROMPT, decoder=name, max_new_tokens=MAX_NEW, **own)
    assert trace.config["decoder"] == name and trace.output_ids == expected.output_ids
    assert nfe_of(metrics) == trace.nfe == expected.nfe


def test_the_decoder_selector_refuses_controls_the_decoder_does_not_take(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="verify"):
        client.predict(PROMPT, "entropy_bounded", 1.0, False, 16, MAX_NEW, 0.0, 0, False, True, "Jacobi",
                       api_name="/decode")
    with pytest.raises(AppError, match="decoder"):
        client.predict(PROMPT, "entropy_bounded", 1.0, False, 16, MAX_NEW, 0.0, 0, False, False, "beam",
                       api_name="/decode")


def test_closing_the_handlers_stops_their_map_worker_and_removes_their_files(app_module):
    from sbd_viz.app.state import Controls

    handlers = app_module.Handlers(sharp_model(), app_module.SpeedQualityCurve(compute=False))
    list(handlers.decode(Controls("assert 1 + 1 == ", "entropy_bounded", 0.5, False, 8, 8, 0, 0, True, False)))
    worker = handlers.maps._thread
    assert worker is not None and worker.is_alive()  # this decode's γ map builds in the background
    session, *_ = list(handlers.decode(Controls("assert 2 + 2 == ", "entropy_bounded", 0.5, False, 8, 8, 0, 0,
                                                True, False)))[-1]
    assert Path(handlers.gif(session)).is_file() and any(handlers.files.iterdir())  # a download written
    handlers.close()
    assert not worker.is_alive() and not handlers.files.exists()


def test_closing_the_handlers_stops_the_curves_background_sweep(app_module, tmp_path, monkeypatch):
    """A model without ``sweep.json`` gets its curve computed in a background thread; closing the page's handlers
    stops it (at the end of the setting it is on) instead of leaving it to decode the whole suite."""
    from sbd_viz.app import curve as curve_module

    monkeypatch.chdir(tmp_path)  # the sweep's cache (.sbd_cache in the working folder) starts empty: nothing is read
    monkeypatch.setattr(curve_module, "SWEEP_PER_FAMILY", 1)  # a short first setting to wait for (of 29)
    curve = app_module.SpeedQualityCurve(sharp_model())  # no model_dir: nothing precomputed, so it computes
    worker = curve._thread
    assert worker is not None and worker.is_alive() and "computing" in curve.status
    app_module.Handlers(curve.model, curve).close()
    assert not worker.is_alive()
    assert curve.df is None and "stopped" in curve.status  # it did not run to the end


# -- a trace file opened --------------------------------------------------------------------------
def test_a_trace_file_opens_as_a_decode_of_the_page(served, tmp_path):
    """A trace this page's model wrote (here by the library, as ``sbd-viz trace --out`` and lm-eval's samples write
    them) opens with every view: its own calls on the cards, its prompt, and the download gives the same decode."""
    from gradio_client import Client, handle_file

    url, model = served
    client = Client(url, verbose=False)  # a session of its own
    written = sv.decode(model, "assert 12 + 30 == ", gamma=1.5, max_new_tokens=MAX_NEW, stop="\n")
    path = written.save(tmp_path / "sample.json")
    _, metrics, texts, _ = client.predict(handle_file(str(path)), api_name="/open_trace")
    assert nfe_of(metrics) == written.nfe and "data-prompt='assert 12 + 30 == '" in metrics
    assert "NTP" in texts
    shown = trace_of(client)
    assert shown.output_ids == written.output_ids and [s.n_input for s in shown.steps] == [
        s.n_input for s in written.steps]
    other = decode(client, prompt="assert 1 + 1 == ")[1]  # the page decodes as before after it
    assert "data-prompt='assert 1 + 1 == '" in other


def test_a_trace_another_model_wrote_is_refused_by_name(served, tmp_path):
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    url, model = served
    client = Client(url, verbose=False)
    data = json.loads(sv.decode(model, PROMPT, max_new_tokens=6).to_json())
    data["model_id"] = "someone-elses-model"
    (tmp_path / "other.json").write_text(json.dumps(data))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(AppError, match="trace: written by the model 'someone-elses-model'"):
        client.predict(handle_file(str(tmp_path / "other.json")), api_name="/open_trace")
    with pytest.raises(AppError, match="^trace: "):
        client.predict(handle_file(str(tmp_path / "broken.json")), api_name="/open_trace")
