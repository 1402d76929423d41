"""bertcore.analysis.attention.flows (row shares, the route graph) and value_zeroing.every_layer (a token's value
vectors zeroed in every layer at once) on hand-made matrices and a tiny random model."""

import copy

import numpy as np
import pytest
import torch

from bertcore import BertForPreTraining
from bertcore.analysis.attention import flows
from bertcore.analysis.attention.value_zeroing import every_layer

from tests.analysis.attention.test_mixing import randomized, tiny_inputs
from tests.conftest import tiny_bert

LABELS = ["[CLS]", "the", "cat", ".", "[SEP]"]


def test_row_shares_on_a_hand_made_matrix():
    m = np.array([[1, 0, 0, 0, 0], [2, 4, 1, 1, 2], [0, 1, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]], float)
    s = flows.row_shares(m, 1, LABELS)  # row 1 sums to 10
    assert (s.special, s.punctuation, s.itself) == pytest.approx((0.4, 0.1, 0.4))
    # mean row on [CLS] + [SEP]: rows 0..4 give 1, 0.4, 0, 0, 1
    assert s.mean_special == pytest.approx(2.4 / 5)
    with pytest.raises(ValueError, match="labels"):
        flows.row_shares(m, 1, LABELS[:4])
    with pytest.raises(ValueError, match="row"):
        flows.row_shares(m, 5, LABELS)


def test_routes_follow_the_contributions_above_the_threshold_down_to_the_inputs():
    eye = np.eye(3)
    top = np.array([[1, 0, 0], [0.5, 0.3, 0.2], [0, 0, 1]])  # layer 2: token 1 takes from 0, 1, 2
    bottom = np.array([[1, 0, 0], [0, 0.05, 0.95], [0, 0.6, 0.4]])  # layer 1
    route = flows.routes(np.stack([bottom, top]), 1, 0.25)
    assert route.nodes[0] == (2, 1)
    assert sorted(e[:3] for e in route.edges) == [(1, 0, 0), (1, 1, 2), (2, 1, 0), (2, 1, 1)]
    assert set(route.nodes) == {(2, 1), (1, 0), (1, 1), (0, 0), (0, 2)}  # token 2 is not reached at level 1
    weights = {e[:3]: e[3] for e in route.edges}
    assert weights[(2, 1, 0)] == pytest.approx(0.5) and weights[(1, 1, 2)] == pytest.approx(0.95)
    only = flows.routes(np.stack([eye, top]), 1, 0.9)  # nothing passes: the top node alone
    assert only.nodes == [(2, 1)] and only.edges == []
    capped = flows.routes(np.stack([bottom, top]), 1, 0.0, max_edges_per_node=1)
    assert [e[:3] for e in capped.edges] == [(2, 1, 0), (1, 0, 0)]
    few = flows.routes(np.stack([bottom, top]), 1, 0.0, max_nodes_per_level=1)  # the strongest token per level
    assert [e[:3] for e in few.edges] == [(2, 1, 0), (1, 0, 0)] and few.nodes == [(2, 1), (1, 0), (0, 0)]
    with pytest.raises(ValueError, match="threshold"):
        flows.routes(np.stack([bottom, top]), 1, 1.5)


@pytest.fixture(scope="module")
def tiny():
    return randomized(tiny_bert(BertForPreTraining, intermediate_size=37))


def test_every_layer_equals_reruns_of_a_copy_whose_values_are_zeroed(tiny):
    """Independent check: a private copy of the model with a hook on every value projection zeroing token j."""
    inputs = tiny_inputs(t=7, seed=3)
    position, token_id = 3, 2024
    got = every_layer(tiny, inputs, position, token_id, batch=3)
    assert got.shape == (7,)
    with torch.no_grad():
        real = float(tiny(**inputs).prediction_logits[0, position, token_id])
    for j in range(7):
        own = copy.deepcopy(tiny)
        for layer in own.bert.encoder.layer:
            def zero(module, args, out, j=j):
                out = out.clone()
                out[:, j] = 0
                return out
            layer.attention.self.value.register_forward_hook(zero)
        with torch.no_grad():
            zeroed = float(own(**inputs).prediction_logits[0, position, token_id])
        assert got[j] == pytest.approx(real - zeroed, abs=1e-9)
    assert np.abs(got).max() > 1e-3  # removing a token matters
    assert every_layer(tiny, inputs, position, token_id, tokens=[2, 5]) == pytest.approx(got[[2, 5]], abs=1e-9)


def test_every_layer_works_on_pre_ln_and_refuses_a_model_without_mlm_head():
    from bertcore import BertModel

    pre = tiny_bert(BertForPreTraining, pre_layer_norm=True)
    assert every_layer(pre, tiny_inputs(t=6), 2, 100).shape == (6,)
    with pytest.raises(ValueError, match="MLM head"):
        every_layer(tiny_bert(BertModel), tiny_inputs(t=6), 2, 100)
