"""Figures of the issue-9 views: pure functions that check their inputs (rollout, neuron view, ablation)."""

import numpy as np
import pytest

from explorer.figures import ablation as abl_figures
from explorer.figures import rollout as rollout_figures


def test_contributions_figure_one_panel_per_method_and_an_empty_one_for_flow():
    m = np.full((3, 4), 0.25)
    fig = rollout_figures.contributions_figure({"raw": m, "rollout": m, "flow": None}, list("abcd"), "b")
    assert [a.text for a in fig.layout.annotations] == ["raw", "rollout", "flow (not offered)"]
    assert np.isnan(np.asarray(fig.data[2].z, dtype=float)).all()
    with pytest.raises(ValueError, match="same shape"):
        rollout_figures.contributions_figure({"raw": m, "rollout": m[:2]}, list("abcd"), "b")
    with pytest.raises(ValueError, match="at least one"):
        rollout_figures.contributions_figure({"flow": None}, list("abcd"), "b")
    with pytest.raises(ValueError, match="label"):
        rollout_figures.contributions_figure({"raw": m}, list("abc"), "b")


def test_neuron_figure_panels_and_shape_checks():
    t, d = 5, 8
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=d), rng.normal(size=(t, d))
    scores = (q * k).sum(-1) / np.sqrt(d)
    probs = np.exp(scores) / np.exp(scores).sum()
    fig = rollout_figures.neuron_figure(q, k, q * k, scores, probs, list("abcde"), "a")
    assert len(fig.data) == 5
    np.testing.assert_allclose(np.asarray(fig.data[4].z, dtype=float).ravel(), probs)
    with pytest.raises(ValueError, match="neuron_figure"):
        rollout_figures.neuron_figure(q, k[:, :3], q * k, scores, probs, list("abcde"), "a")


def test_ablation_figures_check_their_inputs():
    mask = np.ones((2, 3))
    mask[1, 2] = 0
    fig = abl_figures.head_mask_figure(mask)
    assert "1 of 6" in fig.layout.title.text
    with pytest.raises(ValueError, match="layers, heads"):
        abl_figures.head_mask_figure(np.ones(3))
    with pytest.raises(ValueError, match="layer names"):
        abl_figures.movement_figure([1.0, 0.9], ["a"], 0.9, 0.9)
    with pytest.raises(ValueError, match="labels"):
        abl_figures.before_after_bars(["x", "y"], [0.5, 0.5], [1.0], "t")
