"""bertcore.circuits.pruned: a pruned circuit's feature nodes named by their labels, and the graph at a glance (its
most influential nodes and the edges among them)."""

import numpy as np
import pytest

from bertcore.circuits.pruned import Circuit, labelled, most_influential


def circuit() -> Circuit:
    kinds = ["embedding", "feature", "feature", "error", "feature", "logit"]
    return Circuit(tokens=["[CLS]", "a", "[MASK]"], mask_position=2, targets=["x"], target_probs=[1.0],
                   node_ids=[f"n{i}" for i in range(6)], kinds=kinds, layers=np.array([-1, 0, 1, 1, 0, 2]),
                   positions=np.array([1, 1, 2, 2, 0, 2]), features=np.array([-1, 7, 3, -1, 9, -1]),
                   activations=np.ones(6), influence=np.array([0.9, 0.5, 0.7, 0.2, 0.1, 1.0]),
                   logit_effect=np.zeros(6), labels=[f"node {i}" for i in range(6)],
                   edges=np.array([[0, 1, 0.5], [1, 2, 0.3], [2, 5, 0.8], [4, 2, 0.1], [3, 5, -0.2]]),
                   scores={}, n_nodes=40)


def test_feature_nodes_take_their_labels_and_keep_their_place():
    c = labelled(circuit(), {0: [f"zero-{i}" for i in range(10)]})  # block 1 has no labels
    assert c.labels[1] == "zero-7 (block 0 #7)" and c.labels[4] == "zero-9 (block 0 #9)"
    assert c.labels[2] == "node 2" and c.labels[0] == "node 0" and c.labels[3] == "node 3"


def test_the_graph_at_a_glance_is_the_most_influential_nodes_and_their_edges():
    c = most_influential(circuit(), 2)
    assert c.node_ids == ["n0", "n2", "n5"]  # influence 0.9 and 0.7, and the logit always
    assert c.edges.tolist() == [[1.0, 2.0, 0.8]]  # 2 -> 5 is the one edge between kept nodes, reindexed
    assert c.labels == ["node 0", "node 2", "node 5"] and c.influence.tolist() == [0.9, 0.7, 1.0]
    assert most_influential(circuit(), 10).node_ids == circuit().node_ids
    with pytest.raises(ValueError, match="at least one node"):
        most_influential(circuit(), 0)
