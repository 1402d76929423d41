"""explorer.figures.findings on constructed inputs: one trace per series, shapes checked."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.analysis.papers import findings as F
from explorer.figures import findings as figs


def test_figures_have_one_trace_per_series_and_check_shapes():
    a = np.random.default_rng(0).random((3, 4))
    fig = figs.token_attention_figure({"[CLS]": a, "[SEP]": a, ". and ,": a})
    assert len(fig.data) == 6 and fig.data[1].y.tolist() == pytest.approx(a.mean(1).tolist())
    with pytest.raises(ValueError, match="same"):
        figs.token_attention_figure({"[CLS]": a, "[SEP]": a[:2]})
    with pytest.raises(ValueError, match="layers, heads"):
        figs.entropy_figure(np.zeros(3))
    grid = figs.head_grid_figure({"previous": a, "next": a}, threshold=0.5)
    assert len(grid.data) == 2 and grid.data[0].text[0][0] == (f"{a[0, 0]:.2f}" if a[0, 0] > 0.5 else "")
    shares = np.full((3, 5), 0.2)
    assert len(figs.pattern_figure(shares, F.PATTERNS).data) == 5
    with pytest.raises(ValueError, match="shares"):
        figs.pattern_figure(shares[:, :4], F.PATTERNS)
    assert len(figs.contextuality_figure(np.zeros(4), np.ones(4), np.ones(4)).data) == 3
    with pytest.raises(ValueError, match="one length"):
        figs.contextuality_figure(np.zeros(4), np.ones(3), np.ones(4))
    fig = figs.emergence_figure({"loss": ([0, 1, 2], [3.0, 2.0, 1.0]), "sep": ([0, 2], [0.1, 0.5])}, {"sep": 2})
    assert len(fig.data) == 2 and list(fig.data[1].x) == [0, 2]
    with pytest.raises(ValueError, match="2 values for 3 steps"):
        figs.emergence_figure({"loss": ([0, 1, 2], [3.0, 2.0])})
    fig = figs.position_regression_figure({"learned": np.arange(5.0)}, {"learned": 0.0})
    assert "MAE 0.0" in fig.data[0].name
