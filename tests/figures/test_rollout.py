"""explorer.figures.rollout: raw attention, rollout and flow side by side, and the neuron view; inputs checked."""

import numpy as np
import pytest

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
