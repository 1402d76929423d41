"""Attribution graphs in chunks and under a feature budget (``max_feature_nodes``), as circuit-tracer's ``attribute``:
the chunks of targets and sources change nothing, and a budgeted graph keeps the features of largest influence,
each kept row exact (with what the features left out give it)."""

from __future__ import annotations

import pytest
import torch
from circuit_tracer.graph import compute_partial_influences

from bertcore.circuits import attribution as A
from bertcore.circuits.graph import compute_influence, normalize_matrix, prune_graph, square
from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.tokenization.tokenizer import load_tokenizer
from tests.circuits.test_attribution import TEXT, random_transcoders
from tests.conftest import tiny_bert


@pytest.fixture(scope="module")
def setup():
    model = tiny_bert(BertForMaskedLM, seed=3)
    tok = load_tokenizer(sources.packaged_model_dir())
    tcs = random_transcoders(model.config)
    return model, tok, tcs, A.build(model, tok, TEXT, tcs, batch=64)


def test_chunks_of_targets_change_nothing(setup):
    model, tok, tcs, whole = setup
    chunked = A.build(model, tok, TEXT, tcs, batch=3)
    torch.testing.assert_close(chunked.edges, whole.edges, atol=1e-12, rtol=0)
    torch.testing.assert_close(chunked.values, whole.values, atol=1e-12, rtol=0)
    assert torch.equal(chunked.features, whole.features)
    budget = A.build(model, tok, TEXT, tcs, batch=5, max_feature_nodes=whole.layout.features + 10)
    torch.testing.assert_close(budget.edges, whole.edges, atol=1e-12, rtol=0)  # a budget above the graph: all of it


def test_a_budgeted_graph_keeps_exact_rows_and_says_what_it_left_out(setup):
    model, tok, tcs, whole = setup
    keep = whole.layout.features // 3
    g = A.build(model, tok, TEXT, tcs, batch=4, max_feature_nodes=keep, update_interval=2)
    assert g.layout.features == keep and g.n_active == whole.layout.features
    assert g.layout.errors == whole.layout.errors and g.layout.logits == whole.layout.logits
    torch.testing.assert_close(g.edges.sum(1) + g.constants + g.dropped, g.values, atol=1e-8, rtol=0)
    assert g.dropped.abs().max() > 1e-6  # the features left out do feed the targets
    # each kept row is the whole graph's row, on the kept columns; what the rest give is the whole row's remainder
    at = {tuple(f): i for i, f in enumerate(whole.features.tolist())}
    kept = torch.tensor([at[tuple(f)] for f in g.features.tolist()])
    rows = torch.cat([kept, torch.arange(whole.layout.features, len(whole.edges))])
    columns = torch.cat([kept, torch.arange(whole.layout.features, whole.layout.size)])
    torch.testing.assert_close(g.edges, whole.edges[rows][:, columns], atol=1e-12, rtol=0)
    left = torch.ones(whole.layout.features, dtype=torch.bool)
    left[kept] = False
    torch.testing.assert_close(g.dropped, whole.edges[rows][:, :whole.layout.features][:, left].sum(1), atol=1e-12,
                               rtol=0)
    pruned = prune_graph(g.edges, g.layout, g.probabilities)
    assert pruned.nodes[g.layout.part("logits")].all()
    # the influence through a whole graph's rows, without the normalised copy, is the series on the square matrix
    square_hat = normalize_matrix(square(whole.edges, whole.layout))
    w = torch.zeros(whole.layout.size, dtype=torch.float64)
    w[whole.layout.part("logits")] = whole.probabilities
    term, series = w @ square_hat, torch.zeros_like(w)
    while term.any():
        series, term = series + term, term @ square_hat
    torch.testing.assert_close(compute_influence(whole.edges, w, whole.layout.rows(), chunk=999), series, rtol=1e-10,
                               atol=1e-15)


def test_the_first_features_kept_are_circuit_tracers_ranking_through_the_logit_rows(setup):
    """With a budget no larger than one queue, the features kept are the most influential through the logits' rows
    alone, ranked by circuit-tracer's own ``compute_partial_influences``."""
    model, tok, tcs, whole = setup
    lay, n_t = whole.layout, whole.layout.logits
    logit_rows = whole.edges[lay.features:]
    nodes = torch.arange(lay.part("logits").start, lay.size)
    theirs = compute_partial_influences(logit_rows.float(), whole.probabilities.float(), nodes.int(), device="cpu")
    weights = torch.zeros(lay.size, dtype=torch.float64)
    weights[lay.part("logits")] = whole.probabilities
    ours = compute_influence(logit_rows, weights, nodes, chunk=50)  # a few values at a time
    torch.testing.assert_close(ours.float(), theirs, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(compute_influence(normalize_matrix(logit_rows), weights, nodes), ours, rtol=1e-12,
                               atol=1e-15)  # raw or normalised rows alike
    keep = 6
    g = A.build(model, tok, TEXT, tcs, batch=keep, max_feature_nodes=keep, update_interval=1)
    top = torch.argsort(theirs[:lay.features].double(), descending=True)[:keep]
    assert sorted(map(tuple, g.features.tolist())) == sorted(map(tuple, whole.features[top].tolist()))
    assert n_t == g.layout.logits


@pytest.mark.parametrize("kwargs", [{"max_feature_nodes": -1}, {"batch": 0}, {"update_interval": 0},
                                    {"max_feature_nodes": 2.5}])
def test_bad_settings_get_a_sentence(setup, kwargs):
    model, tok, tcs, _ = setup
    with pytest.raises(A.CircuitError, match="must be an integer of at least"):
        A.build(model, tok, TEXT, tcs, **kwargs)
