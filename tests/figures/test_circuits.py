"""explorer.figures.circuits: the attribution graph's figure draws every node and the strongest edges."""

import numpy as np

from explorer.figures.circuits import graph_figure


def test_every_node_and_the_strongest_edges_are_drawn():
    rng = np.random.default_rng(0)
    n = 40
    kinds = ["embedding"] * 5 + ["feature"] * 30 + ["error"] * 4 + ["logit"]
    layers = np.array([-1] * 5 + list(rng.integers(0, 6, 30)) + [0, 1, 2, 3] + [6])
    positions = np.array(list(range(5)) + list(rng.integers(0, 5, 30)) + [0, 1, 2, 3] + [4])
    edges = np.column_stack([rng.integers(0, n - 1, 500), rng.integers(5, n, 500), rng.normal(size=500)])
    tokens = ["[CLS]", "a", "[MASK]", "b", "[SEP]"]
    args = (tokens, kinds, layers, positions, rng.random(n), [f"n{i}" for i in range(n)], rng.random(n),
            rng.normal(size=n), edges, [f"id{i}" for i in range(n)])
    fig = graph_figure(*args, max_edges=100)
    lines = [t for t in fig.data if t.mode == "lines"]
    drawn = sum(sum(v is None for v in t.x) for t in lines)  # one None after each segment
    assert drawn == 100
    top = edges[np.argsort(-np.abs(edges[:, 2]))[:100]]
    excites = sum(sum(v is None for v in t.x) for t in lines if t.legendgroup == "excites")
    assert excites == int((top[:, 2] > 0).sum())  # the 100 strongest, not any 100
    markers = [t for t in fig.data if t.mode == "markers"]
    assert sum(len(t.x) for t in markers) == n  # every node
    assert sum(sum(v is None for v in t.x) for t in graph_figure(*args).data if t.mode == "lines") == 500
