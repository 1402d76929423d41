"""explorer.figures.similarity: cosine heatmap, similarity across layers, PCA scatter."""

import numpy as np
import pytest

from explorer.figures import similarity as fs


def test_cosine_heatmap_scale_starts_at_baseline():
    sim = np.array([[1.0, 0.8], [0.8, 1.0]])
    fig = fs.cosine_heatmap(sim, ["a", "b"], baseline=0.4)
    assert fig.data[0].zmin == pytest.approx(0.4) and fig.data[0].zmax == 1
    assert fs.cosine_heatmap(sim, ["a", "b"]).data[0].zmin == 0.0
    with pytest.raises(ValueError, match="one label per occurrence"):
        fs.cosine_heatmap(sim, ["a"])
    with pytest.raises(ValueError, match=r"\(N, N\)"):
        fs.cosine_heatmap(np.ones((2, 3)), ["a", "b"])


def test_similarity_by_layer_traces_and_missing_lines():
    same = np.array([0.9, 0.8, 0.7])
    diff = np.full(3, np.nan)
    fig = fs.similarity_by_layer(same, diff, np.array([0.1, 0.2, 0.3]), np.array([0.05] * 3))
    names = [d.name for d in fig.data]
    assert "same sense" in names and "different sense" not in names
    assert any("random" in n for n in names)
    with pytest.raises(ValueError, match="one value per layer"):
        fs.similarity_by_layer(same, np.ones(2))


def test_pca_scatter_one_trace_per_sense():
    pts = np.array([[0, 0], [1, 1], [2, 2]], dtype=float)
    fig = fs.pca_scatter(pts, ["s1", "s2", "s3"], ["snake", "language", "snake"], [0.6, 0.3])
    assert [d.name for d in fig.data] == ["snake", "language"]
    assert "60%" in fig.layout.xaxis.title.text
    with pytest.raises(ValueError, match=r"\(N, 2\)"):
        fs.pca_scatter(np.ones((3, 3)), ["a"] * 3)
    with pytest.raises(ValueError, match="one each"):
        fs.pca_scatter(pts, ["a"])
