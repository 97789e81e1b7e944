"""A plugin decoder in the app, over HTTP: docs/own_decoder.md's "fixed blocks" (its own knob ``slots``, no γ)
registered as a notebook would, then the page built. The main view's slider moves its ``slots``, its card shows no γ
range, the ladder climbs its knob, and the compare tab runs it at the slider's value; the bigram decoder's ladder
climbs ``max_drafts``."""

import pytest

import sbd_viz as sv
from sbd_viz.decoders import registry
from conftest import app_server, sharp_model
from test_registry import doc_files

pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert 48 + 37 == "
N = 12


def plugin_specs() -> dict:
    """The page's two decoders, built from its files (its package imports nothing but sbd_viz)."""
    files = doc_files()
    specs = {}
    for path in ("my_decoders/__init__.py", "my_decoders/bigram.py"):
        scope = {"__name__": path.replace("/", ".")[:-3]}
        exec(compile(files[path], path, "exec"), scope)
        specs[scope["SPEC"].name] = scope["SPEC"]
    return specs


@pytest.fixture(scope="module")
def plugged():
    from gradio_client import Client

    specs = plugin_specs()
    for spec in specs.values():
        sv.register_decoder(spec)
    model = sharp_model()
    try:
        # no speed/quality curve and no γ maps: these tests read neither, so no sweep or map runs behind them
        with app_server(model, sweep=None, map_sessions=0) as url:
            yield Client(url, verbose=False), model, url
    finally:
        for name in specs:
            registry.REGISTRY.unregister(name)


def decode(client, decoder, knob, rule="entropy_bounded"):
    """The main view's /decode with the slider at ``knob``; the decode's trace (the /details trace file)."""
    _, metrics, _, _ = client.predict(PROMPT, rule, knob, False, 8, N, 0.0, 0, False, False, decoder,
                                      api_name="/decode")
    return metrics, sv.load_trace(client.predict(api_name="/details")[-1])


def test_the_slider_moves_a_plugins_own_knob(plugged):
    client, model, _ = plugged
    seen = {}
    for slots in (1, 3, 5):
        metrics, trace = decode(client, "fixed blocks", slots)
        fresh = sv.decode(model, PROMPT, decoder="fixed_blocks", slots=slots, max_new_tokens=N)
        assert trace.config["decoder"] == "fixed_blocks" and trace.output_ids == fresh.output_ids, slots
        assert trace.nfe == fresh.nfe
        seen[slots] = trace.nfe
        # its card shows no γ range: no γ moves it (its block loop is SBD's top_k at γ = slots)
        assert "γ range" not in metrics
    assert seen[1] > seen[3] > seen[5]  # more slots per call, fewer calls: the slider did something
    with pytest.raises(Exception, match="slots"):  # out of its spec's range (1 to 8), refused by name
        decode(client, "fixed blocks", 9)
    metrics, _ = decode(client, "SBD", 0.5)
    assert "γ range" in metrics  # SBD's card keeps it


def test_the_controls_follow_the_chosen_decoders_spec(plugged):
    from sbd_viz.app.inputs import CONTROLS
    from sbd_viz.app.page import Handlers, SpeedQualityCurve

    _, model, _ = plugged
    h = Handlers(model, SpeedQualityCurve(compute=False))
    try:
        gamma = h.decoder_changed("fixed blocks", "entropy_bounded")[CONTROLS.index("gamma")]
        assert gamma["interactive"] is True and (gamma["minimum"], gamma["maximum"], gamma["step"]) == (1, 8, 1)
        assert gamma["label"].startswith("slots") and gamma["value"] == 2  # its own default
        back = h.decoder_changed("SBD", "entropy_bounded")[CONTROLS.index("gamma")]
        assert back["label"] == sv.COMMIT_RULES["entropy_bounded"].label and back["maximum"] == 2
    finally:
        h.close()


@pytest.mark.parametrize("label, name, knob", [("fixed blocks", "fixed_blocks", "slots"),
                                               ("bigram drafts", "bigram_drafts", "max_drafts")])
def test_the_ladder_climbs_the_chosen_decoders_knob(plugged, label, name, knob):
    client, model, _ = plugged
    table, _figure, status = client.predict(PROMPT, "entropy_bounded", 2, False, 8, N, 0.0, 0, False, False, label,
                                            api_name="/ladder")
    expected = sv.gamma_ladder(model, PROMPT, decoder=name, max_new_tokens=N)
    assert table["headers"][0] == knob
    assert [row[0] for row in table["data"]] == list(expected[knob])
    assert [row[1] for row in table["data"]] == list(expected["calls"])
    assert status.startswith(f"**{label}:") and knob in status


def test_the_ladder_says_why_a_decoder_cannot_climb(plugged):
    client, _, _ = plugged
    spec = sv.DecoderSpec(name="no_knob", label="no knob", decoding=sv.NTPDecoding, exact=True, model="causal")
    # registered after the page was built (the API takes any decoder that serves the model): no knob to climb
    sv.register_decoder(spec)
    try:
        with pytest.raises(Exception, match="decoder"):
            client.predict(PROMPT, "entropy_bounded", 0.5, False, 8, N, 0.0, 0, False, False, "no knob",
                           api_name="/ladder")
    finally:
        registry.REGISTRY.unregister("no_knob")


def test_the_compare_tab_runs_the_plugin_at_the_sliders_value(plugged):
    client, model, _ = plugged
    _figure, table, _order = client.predict(PROMPT, "entropy_bounded", 4, False, 8, N, 0.0, 0, False, False,
                                            ["fixed blocks"], "fixed blocks", api_name="/compare")
    rows = {r[0]: r for r in table["data"]}
    fresh = sv.decode(model, PROMPT, decoder="fixed_blocks", slots=4, max_new_tokens=N)
    assert rows["fixed blocks"][1:3] == [fresh.nfe, fresh.n_tokens]
