"""Syntax-head figures (explorer.figures.syntax): the data drawn is the data given; bad shapes raise."""

import numpy as np
import pytest

from explorer.figures import syntax as F


def test_relation_head_heatmap_rows_are_relations_columns_heads():
    grids = [np.arange(6).reshape(2, 3) / 10, np.ones((2, 3))]
    fig = F.relation_head_heatmap(["det", "nsubj"], grids, [40, 25])
    trace = fig.data[0]
    assert list(trace.y) == ["det (40)", "nsubj (25)"] and list(trace.x) == ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]
    np.testing.assert_allclose(np.asarray(trace.z)[0], np.arange(6) / 10)
    with pytest.raises(ValueError, match="alike"):
        F.relation_head_heatmap(["a", "b"], [np.ones((2, 3)), np.ones((3, 2))], [1, 1])
    with pytest.raises(ValueError, match="one grid"):
        F.relation_head_heatmap(["a"], [], [1])


def test_arc_figure_colours_hits_and_misses():
    words = ["the", "dog", "sleeps"]
    hit = F.arc_figure(words, [(0, 1, "det")], [(0, 1)])
    miss = F.arc_figure(words, [(0, 1, "det")], [(0, 2)])
    colour = [t.line.color for t in hit.data if t.mode == "lines"]
    assert colour == ["#888888", "#2ca02c"]
    assert [t.line.color for t in miss.data if t.mode == "lines"][-1] == "#d62728"
    many = F.arc_figure(["w"] * 12, [(i, i + 1, "dep") for i in range(11)], [(0, 1), (2, 5)])
    assert len(many.data) <= 8  # arcs of one colour share a trace: cheap to draw however many there are
    labels = next(t for t in many.data if t.mode == "text" and list(t.text)[0] == "dep")
    assert len(labels.text) == 11
    with pytest.raises(ValueError, match="outside"):
        F.arc_figure(words, [(0, 3, "det")], [])


def test_probe_weights_figure_draws_both_directions():
    w = np.stack([np.full((2, 3), 0.5), -np.ones((2, 3))])
    w[0, 1, 2] = 4.0
    fig = F.probe_weights_figure(w)
    assert len(fig.data) == 2
    np.testing.assert_allclose(np.asarray(fig.data[0].z), w[0])
    np.testing.assert_allclose(np.asarray(fig.data[1].z), w[1])
    assert fig.data[0].zmin == -4.0 and fig.data[0].zmax == 4.0  # one symmetric scale for both
    with pytest.raises(ValueError, match="layers, heads"):
        F.probe_weights_figure(np.ones((3, 2, 2)))
