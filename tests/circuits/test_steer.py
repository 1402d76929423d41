"""Steering features in the real model (bertcore.circuits.steer) and the graph's prediction of it.

On a tiny random BERT with random transcoders: factor 1 changes nothing, exactly; in the frozen replacement model
(attention, LayerNorm scales and the head's GELU frozen, every active feature following its pre-activation with its
gate held open: everything linear) the graph's predicted change equals the measured one to 1e-6, for a node and
for a supernode across blocks; a steered feature lands at its own position; steering beside plain forwards on one
model in two threads leaves both exact; bad input gets a sentence."""

from __future__ import annotations

import threading

import pytest
import torch

from bertcore.circuits import attribution as A
from bertcore.circuits import steer as S
from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.tokenization.tokenizer import load_tokenizer
from tests.circuits.test_attribution import TEXT, random_transcoders
from tests.conftest import tiny_bert


@pytest.fixture(scope="module")
def case():
    model = tiny_bert(BertForMaskedLM, seed=3, num_hidden_layers=3).double()  # paths of up to three features
    tok = load_tokenizer(sources.packaged_model_dir())
    tcs = {layer: tc.double() for layer, tc in random_transcoders(model.config).items()}
    return model, tok, tcs, A.build(model, tok, TEXT, tcs, batch=64)


def _node(graph, block: int | None = None) -> tuple[int, int, int]:
    """The feature with the largest absolute effect on the first logit target (of ``block``, if given)."""
    lay = graph.layout
    effects = graph.edges[lay.features, :lay.features].abs()
    if block is not None:
        effects = effects.where(graph.features[:, 0] == block, torch.zeros(()))
    return tuple(int(v) for v in graph.features[int(effects.argmax())])


def _measured_in_replacement(rm: A.Replacement, graph, nodes, factor: float, target: int = 0) -> float:
    """The target's change in the frozen replacement model when each of ``nodes`` gets ``(factor - 1) a W_dec``
    added at its block's output and every active feature follows its pre-activation (gate held open; inactive
    features stay off). Run ``L + 1`` times, each pass setting every block's activations from the previous pass's
    inputs: exact, since block l reads only blocks below it."""
    t, h, m = len(graph.tokens), rm.cfg.hidden_size, graph.mask_position
    vector = graph.targets[target].vector
    deltas = {}
    for block, pos, latent in nodes:
        tc = rm.tcs[block]
        delta = deltas.setdefault(block, torch.zeros(1, t, h, dtype=torch.float64))
        delta[0, pos] += (factor - 1.0) * rm.codes[block][pos, latent] * tc.W_dec[latent] / tc.out_scale
    active = {layer: rm.codes[layer] > 0 for layer in range(rm.n)}
    scale = {layer: torch.ones(1, t, rm.tcs[layer].d_sae, dtype=torch.float64) for layer in range(rm.n)}
    with torch.no_grad():
        _, logits = rm.run(1)
        before = float(logits[0, m] @ vector)
        for _ in range(rm.n + 1):
            inputs, logits = rm.run(1, deltas=deltas, scale_features=scale)
            for layer in range(rm.n):
                tc, z = rm.tcs[layer], rm.codes[layer]
                pre = (inputs[layer] * tc.in_scale) @ tc.W_enc + tc.b_enc  # (1, T, d_sae)
                scale[layer] = torch.where(active[layer], pre / z.where(active[layer], 1.0), 1.0)
        return float(logits[0, m] @ vector) - before


def test_factor_one_changes_nothing_exactly(case):
    model, tok, tcs, graph = case
    for freeze in (True, False):
        got = S.steer(model, tok, TEXT, tcs, [_node(graph, 0), _node(graph, 1)], 1.0, graph=graph,
                      freeze_attention=freeze)
        assert got.after == got.before and got.change == 0.0
        assert got.top_after == got.top_before
        assert got.predicted == 0.0
    moved = S.steer(model, tok, TEXT, tcs, _node(graph, 0), 2.0, graph=graph)
    assert moved.after != moved.before  # the same node at factor 2 does move the target


@pytest.mark.parametrize("factor", [-1.0, 2.0])
def test_the_prediction_is_the_change_in_the_frozen_replacement(case, factor):
    """A node of block 0 (its effect runs through the features of blocks 1 and 2) and a supernode across blocks:
    predicted change == measured change to 1e-6; the indirect paths matter (the direct edge alone is off)."""
    model, tok, tcs, graph = case
    rm = A.Replacement(model, tcs, A.encode(tok, TEXT).tensors())
    node = _node(graph, 0)
    measured = _measured_in_replacement(rm, graph, [node], factor)
    predicted = S.predicted_change(graph, [node], factor)
    assert predicted == pytest.approx(measured, abs=1e-6)
    index = graph.features.tolist().index(list(node))
    direct = (factor - 1.0) * float(graph.edges[graph.layout.features, index])
    assert abs(measured - direct) > 1e-3 and abs(measured) > 1e-3
    supernode = [node, _node(graph, 1), _node(graph, 2)]
    measured = _measured_in_replacement(rm, graph, supernode, factor)
    assert S.predicted_change(graph, supernode, factor) == pytest.approx(measured, abs=1e-6)
    got = S.steer(model, tok, TEXT, tcs, supernode, factor, graph=graph)
    assert got.predicted == pytest.approx(measured, abs=1e-6)


def test_a_steered_feature_lands_at_its_position(case):
    """A feature of the last block at another position than the [MASK] reaches it through nothing: neither the
    real model nor the graph moves the target; at the [MASK] itself both do."""
    model, tok, tcs, graph = case
    last, m = model.config.num_hidden_layers - 1, graph.mask_position
    feats = graph.features.tolist()
    elsewhere = next(tuple(f) for f in feats if f[0] == last and f[1] != m)
    at_mask = next(tuple(f) for f in feats if f[0] == last and f[1] == m)
    for freeze in (True, False):
        got = S.steer(model, tok, TEXT, tcs, elsewhere, -1.0, graph=graph, freeze_attention=freeze)
        assert got.change == 0.0 and got.predicted == 0.0
        got = S.steer(model, tok, TEXT, tcs, at_mask, -1.0, graph=graph, freeze_attention=freeze)
        assert got.change != 0.0 and got.predicted != 0.0


def test_frozen_attention_writes_the_clean_patterns(case):
    """With attention frozen, steering is the model run with the clean run's patterns written at every block and
    ``(f - 1) a W_dec`` added to the feed-forward output; recomputed attention gives another change."""
    from bertcore.modeling.interventions import Interventions

    model, tok, tcs, graph = case
    block, pos, latent = node = _node(graph, 0)
    ids = A.encode(tok, TEXT).tensors()
    n, m = model.config.num_hidden_layers, graph.mask_position
    clean = Interventions(record=[f"blocks.{i}.attn.hook_pattern" for i in range(n)])
    with torch.no_grad():
        model(**ids, interventions=clean)
    frozen = S.steer(model, tok, TEXT, tcs, node, -1.0, graph=graph)
    tc = tcs[block]
    delta = torch.zeros(1, len(graph.tokens), model.config.hidden_size, dtype=torch.float64)
    delta[0, pos] = -2.0 * frozen.activations[0] * tc.W_dec[latent] / tc.out_scale
    edits = {name: (lambda x, v=v: v.clone()) for name, v in clean.recorded.items()}
    edits[f"blocks.{block}.hook_mlp_out"] = lambda y: y + delta
    with torch.no_grad():
        logits = model(**ids, interventions=Interventions(edits)).logits[0, m]
    assert float(logits.double() @ graph.targets[0].vector) == pytest.approx(frozen.after, abs=1e-12)
    recomputed = S.steer(model, tok, TEXT, tcs, node, -1.0, graph=graph, freeze_attention=False)
    assert abs(recomputed.after - frozen.after) > 1e-9  # float64 rounding is 1e-15; a random tiny model attends evenly


def _linear_case():
    """A tiny BERT with every feed-forward and head activation the identity, and transcoders that hold each block's
    feed-forward map exactly in their skip path, with decoders zero outside block 0: with attention and every
    LayerNorm scale frozen, the real model is then the graph's replacement model (nothing non-linear is left)."""
    model = tiny_bert(BertForMaskedLM, seed=3, num_hidden_layers=3).double()
    for block in model.bert.encoder.layer:
        block.intermediate.intermediate_act_fn = torch.nn.Identity()
    model.cls.predictions.transform.transform_act_fn = torch.nn.Identity()
    tcs = {layer: tc.double() for layer, tc in random_transcoders(model.config).items()}
    with torch.no_grad():
        for layer, tc in tcs.items():
            ff = model.bert.encoder.layer[layer]
            w_in, b_in = ff.intermediate.dense.weight, ff.intermediate.dense.bias
            w_out, b_out = ff.output.dense.weight, ff.output.dense.bias
            tc.W_skip.copy_(w_out @ w_in * (tc.out_scale / tc.in_scale))
            tc.b_dec.copy_((w_out @ b_in + b_out) * tc.out_scale)
            if layer > 0:
                tc.W_dec.zero_()
    return model, tcs


@pytest.mark.parametrize("factor", [-1.0, 2.0])
def test_with_layer_norms_frozen_the_steered_model_is_the_graph(factor):
    """In :func:`_linear_case`, steering a block-0 node with attention and the LayerNorm scales frozen changes the
    target by exactly the graph's prediction (1e-9); with the scales recomputed, or attention recomputed, it does
    not: the LayerNorm denominators are what the graph holds fixed."""
    model, tcs = _linear_case()
    tok = load_tokenizer(sources.packaged_model_dir())
    graph = A.build(model, tok, TEXT, tcs, batch=64)
    node = _node(graph, 0)
    frozen = S.steer(model, tok, TEXT, tcs, node, factor, graph=graph, freeze_layer_norms=True)
    assert frozen.freeze_layer_norms and frozen.freeze_attention
    assert abs(frozen.predicted) > 1e-3
    assert frozen.change == pytest.approx(frozen.predicted, abs=1e-9)
    scales_free = S.steer(model, tok, TEXT, tcs, node, factor, graph=graph)
    assert not scales_free.freeze_layer_norms
    assert abs(scales_free.change - frozen.predicted) > 1e-6
    attention_free = S.steer(model, tok, TEXT, tcs, node, factor, graph=graph, freeze_attention=False,
                             freeze_layer_norms=True)
    assert abs(attention_free.change - frozen.predicted) > 1e-6


def test_steering_beside_plain_forwards_on_one_model_leaves_both_exact():
    """One thread steers (attention frozen and not) while another runs plain forwards on the same model object:
    each gets what it gets alone, and the model keeps its mode, its requires_grad and no hooks."""
    model = tiny_bert(BertForMaskedLM, seed=3)
    tok = load_tokenizer(sources.packaged_model_dir())
    tcs = random_transcoders(model.config)
    ids = A.encode(tok, TEXT).tensors()
    codes = A.Replacement(model, tcs, ids).codes
    nodes = [tuple([layer, *map(int, codes[layer].nonzero()[0])]) for layer in (0, 1)]  # two active features
    with torch.no_grad():
        plain_alone = model(**ids).logits
    modes = [(True, False), (False, False), (True, True)]  # (attention frozen, LayerNorm scales frozen)
    alone = [S.steer(model, tok, TEXT, tcs, nodes, f, freeze_attention=fr, freeze_layer_norms=ln)
             for f in (-1.0, 2.0) for fr, ln in modes]
    grads = [p.requires_grad for p in model.parameters()]
    got, errors = [], []

    def steering():
        for _ in range(5):
            got.append([S.steer(model, tok, TEXT, tcs, nodes, f, freeze_attention=fr, freeze_layer_norms=ln)
                        for f in (-1.0, 2.0) for fr, ln in modes])

    def plain():
        for _ in range(40):
            with torch.no_grad():
                if not torch.equal(model(**ids).logits, plain_alone):
                    errors.append("plain")

    threads = [threading.Thread(target=steering), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 5 and all(g == alone for g in got)
    assert alone[0].change != 0.0
    assert not model.training and [p.requires_grad for p in model.parameters()] == grads
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_bad_input_gets_a_sentence(case):
    model, tok, tcs, graph = case
    node = _node(graph)
    d_sae, t = tcs[0].d_sae, len(graph.tokens)
    with pytest.raises(A.CircuitError, match=f"latent {d_sae} is outside block 0's transcoder, which has {d_sae}"):
        S.steer(model, tok, TEXT, tcs, (0, 1, d_sae), 2.0)
    with pytest.raises(A.CircuitError, match="latent -1 is outside"):
        S.steer(model, tok, TEXT, tcs, (0, 1, -1), 2.0)
    with pytest.raises(A.CircuitError, match=r"block 1 has no transcoder \(blocks with one: \[0\]\)"):
        S.steer(model, tok, TEXT, {0: tcs[0]}, [(1, 1, 0)], 2.0)
    with pytest.raises(A.CircuitError, match=f"position {t} is outside the input's {t} tokens"):
        S.steer(model, tok, TEXT, tcs, (0, t, 0), 2.0)
    with pytest.raises(A.CircuitError, match="three integers"):
        S.steer(model, tok, TEXT, tcs, [(0, 1)], 2.0)
    with pytest.raises(A.CircuitError, match="no node to steer"):
        S.steer(model, tok, TEXT, tcs, [], 2.0)
    with pytest.raises(A.CircuitError, match="finite number"):
        S.steer(model, tok, TEXT, tcs, node, float("nan"))
    with pytest.raises(A.CircuitError, match="exactly one \\[MASK\\]"):
        S.steer(model, tok, "No mask here.", tcs, node, 2.0)
    with pytest.raises(A.CircuitError, match="built from another text"):
        S.steer(model, tok, "The key to the cabinet [MASK] here.", tcs, (0, 1, 0), 2.0, graph=graph)
    with pytest.raises(A.CircuitError, match="logit targets"):
        S.predicted_change(graph, node, 2.0, target=len(graph.targets))
