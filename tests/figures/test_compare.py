"""explorer.figures.compare: shapes in, the right traces out, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import compare as cmp_figures


def test_by_layer_draws_cka_and_js():
    fig = cmp_figures.by_layer([1.0, 0.99, 0.8], [0.05, 0.3])
    assert len(fig.data) == 2
    np.testing.assert_allclose(fig.data[0].y, [1.0, 0.99, 0.8])
    np.testing.assert_allclose(fig.data[1].x, [1, 2])  # JS starts at layer 1 (no attention in the embeddings)
    assert len(cmp_figures.by_layer([1.0, 0.5]).data) == 1
    with pytest.raises(ValueError, match="layers 1..2"):
        cmp_figures.by_layer([1.0, 0.9, 0.8], [0.1])
    with pytest.raises(ValueError, match="layers \\+ 1"):
        cmp_figures.by_layer(np.zeros((2, 2)))


def test_cka_heatmap_axes():
    m = np.random.default_rng(0).uniform(size=(4, 3))
    fig = cmp_figures.cka_heatmap(m, "A <b>", "B")
    assert list(fig.data[0].y) == ["emb", "1", "2", "3"] and list(fig.data[0].x) == ["emb", "1", "2"]
    assert "&lt;b&gt;" in fig.layout.yaxis.title.text  # names are escaped
    with pytest.raises(ValueError, match="layers of A"):
        cmp_figures.cka_heatmap(np.zeros(3))


def test_side_by_side_shares_one_scale():
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(5), size=5), rng.dirichlet(np.ones(5), size=5)
    fig = cmp_figures.side_by_side(a, b, list("abcde"))
    assert len(fig.data) == 2 and fig.data[0].coloraxis == fig.data[1].coloraxis
    assert fig.layout.coloraxis.cmax == pytest.approx(max(a.max(), b.max()))
    with pytest.raises(ValueError, match="same tokens"):
        cmp_figures.side_by_side(a, b[:4, :4], list("abcde"))
    with pytest.raises(ValueError, match="label"):
        cmp_figures.side_by_side(a, b, list("abc"))
