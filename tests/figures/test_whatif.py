"""explorer.figures.whatif: shapes in, the right traces out, user text escaped, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import whatif as wi_figures

from .conftest import HOSTILE, all_text


def test_cosine_by_layer_heatmap_and_mean_of_unchanged_tokens():
    cos = np.array([[1.0, 0.5, 1.0], [0.9, 0.4, 0.8], [0.7, 0.3, 0.9]])
    fig = wi_figures.cosine_by_layer(cos, ["[CLS]", "keys→key", HOSTILE], [False, True, False])
    heat, line = fig.data
    np.testing.assert_allclose(np.asarray(heat.z), cos)
    assert list(heat.y) == ["emb", "L1", "L2"] and heat.zmax == 1.0
    np.testing.assert_allclose(line.x, [1.0, 0.85, 0.8])  # the replaced token is left out of the mean
    assert "<script>" not in all_text(fig) and "&lt;b&gt;" in all_text(fig)
    assert wi_figures.cosine_by_layer(np.ones((2, 2)), ["a", "b"]).data[0].zmin == 0.0
    with pytest.raises(ValueError, match="layers \\+ 1"):
        wi_figures.cosine_by_layer(np.ones(3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="label"):
        wi_figures.cosine_by_layer(np.ones((2, 3)), ["a"])
    with pytest.raises(ValueError, match="replaced flags"):
        wi_figures.cosine_by_layer(np.ones((2, 2)), ["a", "b"], [True])


def test_mask_delta_orders_by_change_and_colours_by_sign():
    fig = wi_figures.mask_delta(["were", "are", HOSTILE], [0.4, 0.3, 0.0], [0.0, 0.35, 0.1], "Δ")
    (bar,) = fig.data
    np.testing.assert_allclose(bar.x, [-0.4, 0.1, 0.05])  # largest change first
    assert list(bar.y)[0] == "were" and bar.marker.color == (wi_figures.DOWN, wi_figures.UP, wi_figures.UP)
    assert "<script>" not in all_text(fig)
    zero = wi_figures.mask_delta(["a"], [0.5], [0.5])  # identical inputs: a zero bar, a valid axis
    assert list(zero.data[0].x) == [0.0] and zero.layout.xaxis.range[1] > 0
    with pytest.raises(ValueError, match="per candidate"):
        wi_figures.mask_delta(["a", "b"], [0.1], [0.2])
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        wi_figures.mask_delta(["a"], [1.5], [0.2])


def test_pair_heatmaps_each_with_its_own_tokens():
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(3), size=3), rng.dirichlet(np.ones(4), size=4)
    fig = wi_figures.pair_heatmaps(a, ["x", "y", "z"], b, ["x", "y", HOSTILE, "z"], "A", "B <i>")
    assert len(fig.data) == 2 and np.asarray(fig.data[1].z).shape == (4, 4)
    assert fig.data[0].coloraxis == fig.data[1].coloraxis
    assert fig.layout.coloraxis.cmax == pytest.approx(max(a.max(), b.max()))
    assert "<script>" not in all_text(fig) and "&lt;i&gt;" in all_text(fig)
    with pytest.raises(ValueError, match="label"):
        wi_figures.pair_heatmaps(a, ["x"], b, ["x", "y", "z", "w"])
    with pytest.raises(ValueError, match="\\(T, T\\)"):
        wi_figures.pair_heatmaps(np.ones(3), ["x"], b, ["x", "y", "z", "w"])
