"""explorer.figures.embeddings: one panel per component with its own robust range, norms, token vectors;
inputs validated, user text never rendered as HTML."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import embeddings as fe

from .conftest import HOSTILE, all_text


def test_component_heatmaps_one_panel_per_component_with_own_range():
    rng = np.random.default_rng(0)
    comps = {"token": rng.normal(size=(3, 8)) * 0.05, "output": rng.normal(size=(3, 8))}
    fig = fe.component_heatmaps(comps, ["[CLS]", HOSTILE, "[SEP]"], first_dim=16)
    assert len(fig.data) == 2
    assert fig.data[0].zmax == pytest.approx(np.percentile(np.abs(comps["token"]), 99))
    assert fig.data[1].zmax == pytest.approx(np.percentile(np.abs(comps["output"]), 99))
    assert fig.data[0].zmin == -fig.data[0].zmax
    assert list(fig.data[0].x) == list(range(16, 24))
    assert len(set(fig.data[0].y)) == 3  # unique labels even for repeated tokens
    assert "<script>" not in all_text(fig)


def test_robust_limit_ignores_a_single_outlier_dimension():
    m = np.full((10, 100), 0.1)
    m[:5, 7] = 50.0  # 0.5% of the cells
    assert fe.robust_limit(m) == pytest.approx(0.1)
    assert fe.robust_limit(np.zeros((2, 2))) == 1.0
    spikes = np.zeros((10, 100))
    spikes[0, 0] = 3.0
    assert fe.robust_limit(spikes) == 3.0


@pytest.mark.parametrize("comps,tokens,match", [
    ({}, ["a"], "no components"),
    ({"token": np.zeros((2, 4))}, ["a"], "expected \\(tokens=1"),
    ({"token": np.zeros((1, 4)), "sum": np.zeros((1, 5))}, ["a"], "slice them alike"),
    ({"token": np.zeros((0, 4))}, [], "no tokens"),
])
def test_component_heatmaps_validate(comps, tokens, match):
    with pytest.raises(ValueError, match=match):
        fe.component_heatmaps(comps, tokens)


def test_norms_and_token_vectors():
    fig = fe.norms_figure({"token": [1.0, 2.0], "output": [19.0, 20.0]}, ["a", "a"])
    assert [t.name for t in fig.data] == ["token", "output"] and len(set(fig.data[0].x)) == 2
    with pytest.raises(ValueError, match="2 tokens"):
        fe.norms_figure({"token": [1.0]}, ["a", "b"])
    fig = fe.token_vectors_figure({"token": np.ones(8), "position": np.zeros(8)}, title=HOSTILE)
    assert len(fig.data) == 2 and "<script>" not in all_text(fig)
    with pytest.raises(ValueError, match="same non-zero length"):
        fe.token_vectors_figure({"token": np.ones(8), "position": np.zeros(7)})
