"""explorer.figures.positions: learned beside sinusoidal position tables; inputs validated."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import positions as fp


def test_position_comparisons():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 6)), rng.normal(size=(10, 6))
    fig = fp.compare_tables(a, b, start=100)
    assert len(fig.data) == 2 and list(fig.data[0].y) == list(range(100, 110))
    fig = fp.compare_cosine(np.eye(10), np.eye(10), start=5)
    assert fig.data[0].zmin == -1 and fig.data[0].zmax == 1 and fig.data[0].x[0] == 5
    fig = fp.compare_pca(a[:, :2], b[:, :2], start=3, explained=[[0.5, 0.2], [0.3, 0.3]])
    markers = [t for t in fig.data if t.mode == "markers"]
    assert len(markers) == 2 and list(markers[0].customdata) == list(range(3, 13))
    assert "50%" in fig.layout.xaxis.title.text
    fig = fp.offset_similarity([0.9, 0.8], [0.95, 0.7])
    assert list(fig.data[0].x) == [1, 2]


@pytest.mark.parametrize("fn,args,match", [
    (fp.compare_tables, (np.zeros((3, 4)), np.zeros((4, 4))), "same positions"),
    (fp.compare_tables, (np.zeros(3), np.zeros((3, 4))), "2-D"),
    (fp.compare_cosine, (np.zeros((3, 4)), np.zeros((3, 4))), "square"),
    (fp.compare_pca, (np.zeros((3, 3)), np.zeros((3, 2))), "2 columns"),
    (fp.offset_similarity, ([], []), "same non-zero length"),
])
def test_position_figures_validate(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)
