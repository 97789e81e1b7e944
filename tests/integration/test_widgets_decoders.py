"""The explorer's decoder selector: each choice re-decodes with that decoder, greys out the controls it does not take,
and keeps its own knobs."""

import pytest

import sbd_viz as sv

pytestmark = pytest.mark.heavy  # each choice re-decodes: seconds per test
PROMPT = "abc abc abc "
SMALL = dict(max_new_tokens=12)


def test_the_decoder_selector_redecodes_with_each_decoder(tiny):
    explorer = sv.explore(tiny, PROMPT, **SMALL)
    assert explorer.decoder.value == "sbd" and explorer.trace.config["decoder"] == "sbd"
    for name in ("remask", "jacobi", "prompt_lookup"):
        explorer.decoder.value = name
        assert explorer.trace.config["decoder"] == name
        expected = sv.decode(tiny, PROMPT, **explorer.settings())
        assert explorer.trace.output_ids == expected.output_ids and explorer.trace.nfe == expected.nfe
        assert f"{sv.registry.get_decoder(name).label} text" in explorer.metrics.value  # the spec's label
    assert explorer.rule.disabled and explorer.gamma.disabled and explorer.block_size.disabled  # prompt lookup
    explorer.decoder.value = "jacobi"
    assert explorer.rule.disabled and not explorer.block_size.disabled and explorer.verify.disabled
    assert explorer.trace.text == sv.decode_ntp(tiny, PROMPT, **SMALL).text  # Jacobi writes NTP's text
    explorer.decoder.value = "sbd"
    assert not (explorer.rule.disabled or explorer.gamma.disabled or explorer.verify.disabled)


def test_a_decoder_and_its_knob_can_be_given_up_front(tiny):
    explorer = sv.explore(tiny, PROMPT, decoder="remask", remask_threshold=1.0, gamma=2.0, **SMALL)
    assert explorer.trace.config["decoder"] == "remask" and explorer.trace.config["remask_threshold"] == 1.0
    explorer.decoder.value = "sbd"  # SBD does not take the threshold: it is kept for remask, not passed on
    assert explorer.trace.config["decoder"] == "sbd"
    with pytest.raises(ValueError, match="decoder"):
        sv.explore(tiny, PROMPT, decoder="beam")
