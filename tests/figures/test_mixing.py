"""explorer.figures.mixing: side-by-side maps share one colour scale and show rows as shares, the route graph draws
one line per edge (width = contribution) and clickable nodes, the DecompX bars sum to the value in the title, and
bad shapes raise with a message."""

import re

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import mixing as M

TOKENS = ["[CLS]", "the", "<b>cat</b>", "[SEP]"]


def test_side_by_side_rows_as_shares_one_colour_scale_and_the_query_outlined():
    rng = np.random.default_rng(0)
    raw = rng.random((4, 4)) * 7  # raw norms: rows do not sum to 1
    fig = M.side_by_side({"A": raw, "B": np.eye(4)}, TOKENS, query=2)
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    np.testing.assert_allclose(np.asarray(heat[0].z), raw / raw.sum(-1, keepdims=True))
    assert {(t.zmin, t.zmax) for t in heat} == {(0, 1.0)}
    assert [t.showscale for t in heat] == [False, True]
    assert len(fig.layout.shapes) == 2 and fig.layout.shapes[0].y0 == 1.5
    assert "<b>" not in str(fig.to_dict()["data"])  # user text escaped
    with pytest.raises(ValueError, match="same T"):
        M.side_by_side({"A": np.eye(3), "B": np.eye(4)}, TOKENS)
    with pytest.raises(ValueError, match="query"):
        M.side_by_side({"A": np.eye(4)}, TOKENS, query=4)


def test_route_graph_one_line_per_edge_width_by_weight_and_clickable_nodes():
    nodes = [(2, 1), (1, 0), (1, 1), (0, 0)]
    edges = [(2, 1, 0, 0.6), (2, 1, 1, 0.3), (1, 0, 0, 0.9)]
    fig = M.route_graph(nodes, edges, TOKENS, 2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 3
    widths = [t.line.width for t in lines]
    assert widths[2] > widths[0] > widths[1]
    markers = fig.data[-1]
    assert [list(c) for c in markers.customdata] == [list(n) for n in nodes]
    with pytest.raises(ValueError, match="outside"):
        M.route_graph([(3, 0)], [], TOKENS, 2)


def test_contribution_bars_sum_to_the_value_in_the_title():
    fig = M.contribution_bars(TOKENS, [1.0, -0.5, 2.0, 0.25], 3.0, 5.75, title="DecompX")
    assert list(fig.data[0].y)[-1] == "rest (biases)"
    shown = float(re.search(r"sum to logit (-?[\d.]+)", fig.layout.title.text).group(1))
    assert sum(fig.data[0].x) == pytest.approx(shown)
    with pytest.raises(ValueError, match="labels"):
        M.contribution_bars(TOKENS[:3], [1, 2, 3, 4], 0, 10)


def test_rankings_and_the_faithfulness_figure():
    fig = M.rankings(TOKENS, {"IG": [0, 2, -4, 1], "Occlusion": [0, 1, 1, 0]})
    np.testing.assert_allclose(fig.data[0].x, [0, 0.5, -1, 0.25])
    np.testing.assert_allclose(fig.data[0].customdata, [0, 2, -4, 1])
    np.testing.assert_allclose(M.rankings(TOKENS, {"share": [0.1, 0.6, 0.2, 0.1]}, scaled=False).data[0].x,
                               [0.1, 0.6, 0.2, 0.1])  # shares as they are
    with pytest.raises(ValueError, match="tokens"):
        M.rankings(TOKENS, {"IG": [1, 2]})
    means = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, np.nan]])
    fig = M.faithfulness_figure(["a", "b", "c"], means, ["occ", "vz"], {"ALTI": 0.4}, n=200)
    assert len(fig.data) == 3 and "200 sentences" in fig.layout.title.text
    with pytest.raises(ValueError, match="shape"):
        M.faithfulness_figure(["a"], means, ["occ", "vz"])
