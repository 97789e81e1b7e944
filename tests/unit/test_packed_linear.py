"""Packed linear layers (``sbd_viz.models.packed_linear``): the same products as ``nn.Linear``, through oneDNN's packed op.

References are written as a torch user writes them: ``torch.nn.functional.linear`` on the layer's weight and bias,
an ``nn.Linear`` trained beside the packed one. Which kernel ran is read from torch's profiler, not assumed.
"""

import pytest
import torch
from torch import nn
from torch.profiler import profile

import sbd_viz as sv
from sbd_viz.models import packed_linear

pytestmark = pytest.mark.skipif(not packed_linear.available(), reason="this torch has no oneDNN packed linear")


def layer(n_in=24, n_out=40, bias=True, seed=0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(n_in, n_out, bias=bias)


def ops_run(fn) -> set[str]:
    with profile() as prof:
        fn()
    return {event.name for event in prof.events()}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 24), (5, 24), (20, 24), (2, 7, 24)])
def test_a_packed_layer_computes_what_f_linear_computes(shape, bias):
    lin = layer(bias=bias)
    x = torch.randn(*shape)
    expected = torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert packed_linear.pack(lin, min_weights=0) == 1 and type(lin) is packed_linear.PackedLinear
    with torch.inference_mode():
        got = lin(x)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_packing_switches_the_kernel_and_unpacking_switches_it_back():
    lin, x = layer(), torch.randn(5, 24)
    with torch.no_grad():
        assert "mkldnn::_linear_pointwise" not in ops_run(lambda: lin(x))
        packed_linear.pack(lin, min_weights=0)
        assert "mkldnn::_linear_pointwise" in ops_run(lambda: lin(x))
        assert packed_linear.unpack(lin) == 1 and type(lin) is nn.Linear
        assert "mkldnn::_linear_pointwise" not in ops_run(lambda: lin(x))


def test_a_layer_that_wants_a_gradient_trains_as_nn_linear_does():
    packed, plain = layer(seed=1), layer(seed=1)
    packed_linear.pack(packed, min_weights=0)
    x = torch.randn(3, 24, requires_grad=True)
    x_plain = x.detach().clone().requires_grad_(True)
    packed(x).square().sum().backward()
    plain(x_plain).square().sum().backward()
    torch.testing.assert_close(packed.weight.grad, plain.weight.grad)
    torch.testing.assert_close(x.grad, x_plain.grad)


def test_a_weight_changed_in_place_is_packed_again():
    lin, x = layer(), torch.randn(4, 24)
    packed_linear.pack(lin, min_weights=0)
    optimizer = torch.optim.SGD(lin.parameters(), lr=0.5)
    lin(torch.randn(2, 24)).sum().backward()
    optimizer.step()  # an optimizer's in-place update
    with torch.no_grad():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)
        lin.weight.mul_(-2.0)
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)
        lin.weight = nn.Parameter(torch.randn(40, 24))  # a new tensor altogether
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)


def test_a_layer_in_another_dtype_runs_torch_own_kernel():
    lin = layer()
    packed_linear.pack(lin, min_weights=0)
    lin.to(torch.bfloat16)
    x = torch.randn(3, 24, dtype=torch.bfloat16)
    with torch.no_grad():
        assert "mkldnn::_linear_pointwise" not in ops_run(lambda: lin(x))
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))


def test_a_call_that_keeps_gradients_runs_torch_own_kernel():
    lin, x = layer(), torch.randn(5, 24)
    packed_linear.pack(lin, min_weights=0)
    assert "mkldnn::_linear_pointwise" not in ops_run(lambda: lin(x))  # grad mode on, though nothing asks for one
    with torch.inference_mode():
        assert "mkldnn::_linear_pointwise" in ops_run(lambda: lin(x))


def test_small_layers_are_left_to_torch():
    small, big = layer(16, 16), layer(512, 512)
    model = nn.Sequential(small, big)
    assert packed_linear.pack(model) == 1
    assert type(small) is nn.Linear and type(big) is packed_linear.PackedLinear
    assert packed_linear.pack(nn.Sequential(layer(16, 16)), min_weights=256) == 1
    assert packed_linear.pack(nn.Sequential(layer(16, 16)), min_weights=257) == 0


def test_pack_refuses_bad_input():
    with pytest.raises(TypeError, match="module"):
        packed_linear.pack("a model")
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="min_weights"):
            packed_linear.pack(layer(), min_weights=bad)


def test_load_model_packs_unless_asked_not_to(monkeypatch):
    monkeypatch.setattr(packed_linear, "MIN_WEIGHTS", 0)  # the character model's layers are all small
    packed, plain = sv.load_model(), sv.load_model(packed=False)
    linears = sum(isinstance(m, nn.Linear) for m in plain.model.modules())
    assert packed_linear.count(packed.model) == linears > 0 and packed_linear.count(plain.model) == 0
    with pytest.raises(ValueError, match="packed"):
        sv.load_model(packed="yes")
    # the same decode either way, to the last bits oneDNN and MKL sum differently in
    prompt = "assert add(2, 3) == "
    a, b = sv.decode(packed, prompt, max_new_tokens=24), sv.decode(plain, prompt, max_new_tokens=24)
    assert a.output_ids == b.output_ids
