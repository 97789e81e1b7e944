"""The one call a decoder makes on a model (``sbd_viz.models.call``): every model class meets the ``Model`` protocol,
a causal LM is the base and an SBD model a causal model that can also fill blocks, a reply's fields each have one
shape, and a bad request is refused by the field it names."""

import pytest
import torch

import sbd_viz as sv
from sbd_viz.models.base import CausalModel
from sbd_viz.models.call import Model, ModelCall

from conftest import sharp_model, tiny_model
from test_adapter import adapted

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here


def test_a_causal_lm_is_not_an_sbd_model_and_every_model_is_a_causal_model():
    assert not issubclass(sv.CausalLM, sv.SBDModel)
    for cls in (sv.SBDModel, sv.CausalLM, sv.AdaptedLM):
        assert issubclass(cls, CausalModel)
    assert issubclass(sv.AdaptedLM, sv.CausalLM) and not issubclass(sv.AdaptedLM, sv.SBDModel)


@pytest.mark.parametrize("make", [lambda: tiny_model("llama"), adapted, lambda: sv.load_model()])
def test_every_model_meets_the_protocol_decoders_read(make):
    model = make()
    assert isinstance(model, Model)
    assert model.dtype == torch.float32 and model.block_size >= 1


def test_a_reply_has_one_shape_per_field_whatever_the_request():
    """Causal rows only, one block, a block after each of three roots, a pick with and without a block after it:
    ``causal`` is (rows, V) and ``blocks`` (n, k, V) every time, and ``tree`` a tuple."""
    model = sharp_model()
    ids, mask = model.encode("assert 1 + 2 == "), model.mask_token_id
    vocab = model.model.get_output_embeddings().weight.shape[0]
    shapes = {}
    requests = {
        "causal only": ModelCall.fused(ids, [], 2),
        "one block": ModelCall.fused(ids, [mask] * 4, 1),
        "three blocks": ModelCall(ids[:3], [mask] * 2, logits_at=[0, 1, 2], blocks_after=[0, 1, 2]),
        "picked": ModelCall(ids[:3], [mask] * 2, logits_at=[0, 1, 2], blocks_after=[0, 2], pick=lambda r: 2,
                            widths=(2,)),
        "picked, no block": ModelCall(ids[:3], [mask] * 2, logits_at=[0, 1, 2], blocks_after=[0, 2],
                                      pick=lambda r: 1),
    }
    for name, request in requests.items():
        reply = model.call(model.new_cache(), request)
        shapes[name] = (tuple(reply.causal.shape), tuple(reply.blocks.shape), len(reply.tree))
        assert isinstance(reply.tree, tuple)
    assert shapes == {"causal only": ((2, vocab), (0, 0, vocab), 0), "one block": ((1, vocab), (1, 4, vocab), 0),
                      "three blocks": ((3, vocab), (3, 2, vocab), 0), "picked": ((3, vocab), (1, 2, vocab), 2),
                      "picked, no block": ((3, vocab), (0, 2, vocab), 0)}


@pytest.mark.parametrize("request_, field", [
    (dict(new_ids=[5, 6], logits_at=[2]), "logits_at"),
    (dict(new_ids=[5, 6], logits_at=[1, 0]), "logits_at"),
    (dict(new_ids=[5, 6], block_ids=[0, 0], blocks_after=[]), "blocks_after"),
    (dict(new_ids=[5, 6], block_ids=[0], logits_at=[0], blocks_after=[1], chained=True), "blocks_after"),
    (dict(new_ids=[5, 6], parents=[-1, 1], logits_at=[1]), "parents"),
    (dict(new_ids=[5, 6]), "request"),
    (dict(new_ids=[5, 6], block_ids=[0] * 65), "block_ids"),
])
def test_a_bad_request_is_refused_by_the_field_it_names(request_, field):
    model = sharp_model()
    cache = model.new_cache()
    with pytest.raises(ValueError, match=f"^{field}:"):
        model.call(cache, ModelCall(**request_))
    assert cache.get_seq_length() == 0  # refused before the forward: nothing cached


def test_a_pick_that_names_no_row_is_refused_by_name():
    model = sharp_model()
    with pytest.raises(ValueError, match="^pick:"):
        model.call(model.new_cache(), ModelCall([5, 6], [model.mask_token_id], logits_at=[0, 1], blocks_after=[1],
                                                pick=lambda r: 5))
