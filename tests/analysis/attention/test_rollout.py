"""bertcore.analysis.attention.rollout: attention rollout and attention flow (Abnar & Zuidema 2020) against
independent computations (numpy, networkx max flow)."""

import networkx as nx
import numpy as np
import pytest

from bertcore.analysis.attention import rollout

from tests.conftest import random_attention


def numpy_rollout(att):
    """Independent reference: Abnar & Zuidema's compute_joint_attention on 0.5 A + 0.5 I."""
    mats = []
    for layer in att:
        a = 0.5 * layer.mean(0) + 0.5 * np.eye(layer.shape[-1])
        mats.append(a / a.sum(-1)[:, None])
    joint = [mats[0]]
    for a in mats[1:]:
        joint.append(np.matmul(a, joint[-1]))
    return np.stack(joint)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rollout_equals_an_independent_numpy_computation(seed):
    att = random_attention(np.random.default_rng(seed))
    got = rollout.rollout(att)
    np.testing.assert_allclose(got, numpy_rollout(att), atol=1e-12)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(rollout.contributions(att, 2, "rollout"), got[:, 2])
    np.testing.assert_allclose(rollout.contributions(att, 2, "raw"), att[:, :, 2].mean(1))


def test_flow_equals_networkx_max_flow_on_a_hand_made_graph():
    # 2 layers, 3 tokens, one head: A_hat = 0.5 A + 0.5 I (rows already sum to 1)
    a1 = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 1.0]])
    a2 = np.array([[0.2, 0.2, 0.6], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    att = np.stack([a1, a2])[:, None]  # (2, 1, 3, 3)
    graph = nx.DiGraph()  # built by hand: (level, token); edge (l, j) -> (l+1, i) carries A_hat_l[i, j]
    for level, a in enumerate((a1, a2)):
        a_hat = 0.5 * a + 0.5 * np.eye(3)
        for i in range(3):
            for j in range(3):
                if a_hat[i, j] > 0:
                    graph.add_edge((level, j), (level + 1, i), capacity=a_hat[i, j])
    query = 0
    expect = np.array([[nx.maximum_flow_value(graph, (0, j), (2, query)) if (0, j) in graph else 0.0
                        for j in range(3)]])
    expect /= expect.sum()
    got = rollout.flow(att, query)
    np.testing.assert_allclose(got[1], expect[0], atol=1e-6)
    np.testing.assert_allclose(rollout.flow_networkx(att, query)[1], expect[0], atol=1e-12)
    # hand check of the first layer: token 0 takes 0.5 from itself and 0.5 from token 1
    np.testing.assert_allclose(got[0], [0.5, 0.5, 0.0], atol=1e-6)


def test_flow_matches_networkx_on_random_attention_and_rows_sum_to_one():
    att = random_attention(np.random.default_rng(3), layers=3, heads=2, t=6)
    got = rollout.flow(att, 4)
    np.testing.assert_allclose(got, rollout.flow_networkx(att, 4), atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-12)


def test_flow_refuses_long_inputs_and_bad_queries():
    att = random_attention(np.random.default_rng(0), layers=1, heads=1, t=rollout.FLOW_MAX_TOKENS + 1)
    with pytest.raises(rollout.FlowTooLongError, match="up to"):
        rollout.flow(att, 0)
    with pytest.raises(ValueError, match="query"):
        rollout.contributions(att, 99, "rollout")
    with pytest.raises(ValueError, match="method"):
        rollout.contributions(att, 0, "saliency")
    with pytest.raises(ValueError, match="shape"):
        rollout.rollout(np.ones((3, 3)))
