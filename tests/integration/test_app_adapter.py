"""The app on a model with an SBD adapter (``AdaptedLM``): free text and every SBD control, verified SBD writes the
base's text, the card says which weights ran, and the ladder decodes the prompt as the main view sends it."""

import time

import pytest

import sbd_viz as sv
from conftest import app_server
from test_adapter import adapted

pytestmark = [pytest.mark.heavy, pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert sorted([3, 1, 2]) == "


@pytest.fixture(scope="module")
def client_model():
    from gradio_client import Client

    model = adapted(head=32)  # sharp enough that γ in the slider's range commits several slots per call
    with app_server(model) as url:
        yield Client(url, verbose=False), model


def decode(client, decoder="SBD", verify=False, gamma=1.0, block_size=4, n=12, chat=False):
    return client.predict(PROMPT, "entropy_bounded", gamma, False, block_size, n, 0.0, 0, False, verify, decoder,
                          chat, api_name="/decode")


def test_the_page_offers_sbd_and_says_what_the_model_is(client_model):
    from sbd_viz.app.inputs import decoder_labels

    client, model = client_model
    assert {"SBD", "Jacobi", "prompt lookup"} <= set(decoder_labels(model))
    _, metrics, _, _ = decode(client)
    trace = sv.load_trace(client.predict(api_name="/details")[-1])
    assert trace.output_ids == sv.decode(model, PROMPT, decoder="sbd", gamma=1.0, block_size=4,
                                         max_new_tokens=12).output_ids
    assert "tiny + adapter" in metrics and "the adapter on the block's rows only" in metrics


def test_verified_sbd_in_the_app_writes_the_bases_text_and_the_card_says_the_base_checked(client_model):
    from test_adapter import generate_reference

    client, model = client_model
    _, metrics, _, _ = decode(client, verify=True, gamma=2.0)
    trace = sv.load_trace(client.predict(api_name="/details")[-1])
    assert list(trace.output_ids) == generate_reference(0, model.encode(PROMPT), 12, head=32)
    assert "the base checked every draft" in metrics
    _, metrics, _, _ = decode(client, decoder="prompt lookup")
    assert "the base alone: the adapter is off on causal rows" in metrics


def test_moving_gamma_in_the_app_changes_what_sbd_writes(client_model):
    client, model = client_model
    seen = set()
    for gamma in (0.0, 0.5, 2.0):
        decode(client, gamma=gamma, block_size=8)
        trace = sv.load_trace(client.predict(api_name="/details")[-1])
        seen.add((trace.nfe, tuple(trace.output_ids)))
    assert len(seen) > 1


def test_the_slider_answers_from_the_gamma_map_with_the_fresh_decode(client_model):
    """After a first release, the prompt's γ map builds; a release at another γ is then answered from it with what
    ``sv.decode`` gives at that γ on the adapted model (verified SBD's map is tested on the character model)."""
    client, model = client_model
    decode(client, gamma=0.5, block_size=8)
    # the map builds in the background; its strip endpoint says when it is whole (no time limit decides: a busy
    # machine builds it later, and a map that never completes hangs here until pytest's own timeout, if any)
    while "data-complete='true'" not in client.predict(api_name="/gamma_strip")[0]:
        time.sleep(0.5)
    for gamma in (0.0, 1.3, 2.0):
        _, metrics, _, _ = decode(client, gamma=gamma, block_size=8)
        trace = sv.load_trace(client.predict(api_name="/details")[-1])
        fresh = sv.decode(model, PROMPT, decoder="sbd", gamma=gamma, block_size=8, max_new_tokens=12)
        assert trace.output_ids == fresh.output_ids and trace.nfe == fresh.nfe, gamma
        assert "data-from-map='1'" in metrics, gamma
