"""plots.attention_mask shows, cell for cell, the masks training and decoding build."""

import json

import pytest
import torch

from sbd_viz.plots import masks as plot_masks
from sbd_viz.models import token_tree
from sbd_viz.training import objective


def allowed(fig) -> torch.Tensor:
    return torch.tensor(fig.data[0].z) > 0


@pytest.mark.parametrize("n, k", [(8, 4), (8, 3), (5, 5), (12, 2)])
def test_training_figure_is_the_objectives_mask(n, k):
    fig = plot_masks.attention_mask("training", n=n, block_size=k)
    assert torch.equal(allowed(fig), objective.sbd_attention_mask(n, k))
    z = torch.tensor(fig.data[0].z)
    assert (z[:n, n:] == 0).all(), "the clean copy never sees the masked copy"
    assert set(z[:n, :n].unique().tolist()) == {0, 1} and set(z[n:, n:].unique().tolist()) <= {0, 2}
    assert fig.layout.meta["kind"] == "training" and len(fig.layout.meta["keys"]) == 2 * n


@pytest.mark.parametrize("past, n_causal, k", [(4, 4, 4), (0, 6, 8), (7, 0, 3)])
def test_inference_figure_is_the_block_calls_mask(past, n_causal, k):
    fig = plot_masks.attention_mask("inference", past=past, n_causal=n_causal, block_size=k)
    assert torch.equal(allowed(fig), token_tree.block_call_mask(past, n_causal, k))
    z = torch.tensor(fig.data[0].z)
    assert (z[n_causal:, past + n_causal:] == 2).all(), "a block's slots see each other"
    assert (z[n_causal:, :past + n_causal] == 3).all(), "and all the text before the block"


def test_the_decoder_uses_the_mask_the_figure_draws():
    """A block call's mask is the token-tree mask of a chain with its block after the last fed token (or after the
    cache when nothing is fed): the figure's."""
    assert torch.equal(token_tree.token_tree_mask(5, [-1, 0, 1], [2], 4), token_tree.block_call_mask(5, 3, 4))
    assert torch.equal(token_tree.token_tree_mask(5, [], [-1], 4), token_tree.block_call_mask(5, 0, 4))


def test_labels_and_bad_input():
    fig = plot_masks.attention_mask("training", n=4, block_size=2, labels=list("a b\n"))
    assert fig.layout.meta["keys"] == ["a", "␣", "b", "⏎", "a'", "␣'", "b'", "⏎'"]
    fig = plot_masks.attention_mask("inference", past=2, n_causal=1, block_size=2, labels="xyz")
    m = plot_masks.MASK_GLYPH
    assert fig.layout.meta["keys"] == ["x", "y", "z", m, m] and fig.layout.meta["queries"] == ["z", m, m]
    with pytest.raises(ValueError, match="kind"):
        plot_masks.attention_mask("decode")


def test_a_start_of_text_mark_is_drawn_by_name_not_as_a_box():
    """Notebook 01 labels the start-of-text token ␂, a glyph the default fonts lack (it showed as a box): every
    control picture is drawn by its name, marked as a special token is."""
    fig = plot_masks.attention_mask("inference", past=2, n_causal=1, block_size=2, labels=["␂", "a", "␛"])
    assert fig.layout.meta["keys"][:3] == ["⟨start⟩", "a", "⟨ESC⟩"]
    shown = json.dumps(json.loads(fig.to_json()), ensure_ascii=False)
    assert not any(chr(c) in shown for c in range(0x2400, 0x2427) if chr(c) != "␣")  # no control picture left
    with pytest.raises(ValueError, match="block_size"):
        plot_masks.attention_mask("training", n=4, block_size=0)
    with pytest.raises(ValueError, match="labels"):
        plot_masks.attention_mask("training", n=4, block_size=2, labels="abc")
    with pytest.raises(ValueError, match="n_causal"):
        plot_masks.attention_mask("inference", n_causal=-1)


def test_plots_reexports_it():
    from sbd_viz import plots

    assert plots.attention_mask is plot_masks.attention_mask
