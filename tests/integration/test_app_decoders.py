"""The app's "compare decoders" tab: the /compare endpoint returns what sv.decode returns for each decoder, refuses
bad choices by name, and the tab renders its figure in a real headless Chromium (slow)."""

import pytest

import sbd_viz as sv
from conftest import ARTIFACTS

pytestmark = [pytest.mark.heavy, pytest.mark.no_gamma_maps,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:gradio.queueing")]
PROMPT = "assert 48 + 37 == "
MAX_NEW = 16
# ``served`` (conftest): (url, model), the app on ``sharp_model()`` without γ maps (this module reads none);
# ``page``: a page of headless Chromium


def test_compare_endpoint_matches_the_library(served):
    from gradio_client import Client

    url, model = served
    client = Client(url, verbose=False)
    chosen = ["SBD", "SBD + remasking", "Jacobi", "prompt lookup"]
    figure, table, order = client.predict(PROMPT, "entropy_bounded", 1.0, False, 8, MAX_NEW, 0.0, 0, False, False,
                                          chosen, api_name="/compare")
    rows = {r[0]: r for r in table["data"]}
    assert list(rows) == ["NTP"] + chosen
    ntp = sv.decode_ntp(model, PROMPT, max_new_tokens=MAX_NEW)
    expected = {"NTP": ntp, "SBD": sv.decode(model, PROMPT, gamma=1.0, block_size=8, max_new_tokens=MAX_NEW),
                "SBD + remasking": sv.decode(model, PROMPT, decoder="remask", gamma=1.0, block_size=8,
                                             max_new_tokens=MAX_NEW),
                "Jacobi": sv.decode(model, PROMPT, decoder="jacobi", block_size=8, max_new_tokens=MAX_NEW),
                "prompt lookup": sv.decode(model, PROMPT, decoder="prompt_lookup", max_new_tokens=MAX_NEW)}
    for label, trace in expected.items():
        assert rows[label][1:3] == [trace.nfe, trace.n_tokens], label
        assert rows[label][4] == ("yes" if trace.text == ntp.text else "no"), label
    assert rows["Jacobi"][4] == rows["prompt lookup"][4] == "yes"
    # each decode's order: Kendall τ and the out-of-order rate, as sv.decode_order measures the same decode
    for label, trace in expected.items():
        measured = sv.decode_order(trace)
        tau, rate = rows[label][7:9]
        assert (tau is None) if measured.kendall_tau != measured.kendall_tau else tau == round(measured.kendall_tau, 3)
        assert rate == round(measured.out_of_order_rate, 3), label
    assert rows["NTP"][8] == 0 and rows["Jacobi"][8] == 0  # left to right, never right of a masked slot
    # the decode-order picture: one series per decode on one step axis, each named with its τ
    import json
    drawn = json.loads(order["plot"])["data"]
    named = [d["name"] for d in drawn if d["name"].split(":")[0] in rows]
    assert [n.split(":")[0] for n in named] == list(rows) and all("τ = " in n for n in named)
    calls = {n.split(":")[0]: max(d["y"]) for d, n in zip(drawn, [d["name"] for d in drawn]) if n in named}
    assert calls == {label: trace.nfe - 1 for label, trace in expected.items()}
    with pytest.raises(Exception, match="decoders"):
        client.predict(PROMPT, "entropy_bounded", 1.0, False, 8, MAX_NEW, 0.0, 0, False, False, ["beam search"],
                       api_name="/compare")


@pytest.mark.browser
def test_compare_tab_renders_in_a_browser(served, page):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(served[0], wait_until="domcontentloaded")
    page.wait_for_selector("#sbd-metrics .cards[data-ntp]:not([data-ntp='pending'])", timeout=60000)
    page.get_by_role("tab", name="Compare decoders").click()
    page.get_by_role("button", name="Run this prompt through each decoder").click()
    page.wait_for_selector("#sbd-compare .main-svg", timeout=60000)
    table = page.locator("#sbd-compare-table")
    table.get_by_text("prompt lookup").first.wait_for(timeout=30000)
    for label in ("NTP", "verified SBD", "SBD + remasking", "Jacobi"):
        assert table.get_by_text(label, exact=True).count() >= 1, label
    # one heatmap per decoder (NTP and the five chosen) and the bar of calls
    assert page.locator("#sbd-compare .heatmaplayer .hm").count() == 6  # one row of tokens each, in one grid
    # the decode-order picture below it: a series per decoder and the diagonal, τ in the legend
    page.wait_for_selector("#sbd-compare-order .main-svg", timeout=30000)
    assert page.locator("#sbd-compare-order .scatterlayer .trace").count() == 7
    assert page.locator("#sbd-compare-order .legendtext", has_text="τ = ").count() == 6
    assert table.get_by_text("Kendall τ").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "app-compare.png"), full_page=True)
    assert not page.errors, page.errors
