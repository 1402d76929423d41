"""Rollout, flow, word merge, neuron view and head ablation (bertcore.analysis, issue 9)."""

import networkx as nx
import numpy as np
import pytest
import torch

from bertcore import analysis
from bertcore.analysis import ablation, neurons, rollout, words
from bertcore.tokenizer import encode


def random_attention(rng, layers=4, heads=3, t=7):
    a = rng.random((layers, heads, t, t)) ** 3
    return a / a.sum(-1, keepdims=True)


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


def test_word_merge_preserves_row_sums_and_groups_pieces(packaged):
    enc = encode(packaged.tokenizer, "Tokenization of unbelievably long words", "Snuffleupagus agreed.")
    groups = words.word_groups(enc.tokens, enc.word_ids)
    assert groups.labels[0] == "[CLS]" and "tokenization" in groups.labels and "snuffleupagus" in groups.labels
    assert groups.num_units < len(enc.tokens)
    att = random_attention(np.random.default_rng(0), layers=2, heads=3, t=len(enc.tokens))
    merged = words.merge_attention(att, groups)
    assert merged.shape == (2, 3, groups.num_units, groups.num_units)
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-6)
    # to a word = sum over its pieces; from a word = mean over its pieces
    w = groups.labels.index("tokenization")
    rows = groups.members[w]
    np.testing.assert_allclose(merged[0, 0, 0, w], att[0, 0, 0, rows].sum(), atol=1e-6)
    np.testing.assert_allclose(merged[0, 0, w, 0], att[0, 0, rows, 0].mean(), atol=1e-6)
    np.testing.assert_allclose(words.merge_vector(att[0, 0, 0], groups).sum(), 1.0)
    with pytest.raises(ValueError, match="merge"):
        words.merge_attention(att[..., :-1, :-1], groups)
    # the contiguous fast path equals the general one-hot product (pieces given out of order)
    shuffled = words.WordGroups(groups.labels[::-1], groups.members[::-1], groups.assign[:, ::-1],
                                [groups.num_units - 1 - u for u in groups.token_to_unit])
    np.testing.assert_allclose(words.merge_attention(att, shuffled)[..., ::-1, ::-1], merged, atol=1e-6)


def test_neuron_view_probabilities_equal_the_models_attention(packaged):
    act = analysis.run(packaged.encoder, packaged.tokenizer, "The animal was too tired to cross the street.")
    for layer, head, query in ((1, 1, 0), (3, 7, 4), (6, 12, 9)):
        view = neurons.neuron_view(packaged.encoder, act.hidden_states[layer - 1], layer, head, query)
        np.testing.assert_allclose(view.probs, act.attentions[layer - 1, head - 1, query], atol=1e-5)
        np.testing.assert_allclose(view.product.sum(-1) / np.sqrt(view.query_vector.size), view.scores, rtol=1e-5)
        assert view.key_vectors.shape == (len(act.tokens), packaged.config.head_size)
    with pytest.raises(ValueError, match="head"):
        neurons.neuron_view(packaged.encoder, act.hidden_states[0], 1, 13, 0)


def test_make_head_mask():
    mask = ablation.make_head_mask(3, 4, heads=[(1, 2)], layers=[3])
    assert mask.tolist() == [[1, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match="does not exist"):
        ablation.make_head_mask(3, 4, heads=[(4, 1)])


def test_ablation_readout_and_movement_on_the_minilm(packaged):
    enc = encode(packaged.tokenizer, "The bank raised interest rates again.")
    cfg = packaged.config
    before = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc, None)
    same = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc,
                            torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads))
    np.testing.assert_array_equal(before.hidden_states, same.hidden_states)
    mv = ablation.movement(before, same)
    np.testing.assert_allclose(mv.per_layer, 1.0, atol=1e-6)
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, layers=[2])
    for mode in ablation.MODES:
        after = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc, mask, mode)
        mv = ablation.movement(before, after)
        np.testing.assert_allclose(mv.per_layer[:2], 1.0, atol=1e-6)  # embeddings and layer 1 untouched
        assert mv.per_layer[2] < 0.999 and mv.cls < 1.0 and mv.mean_pooled < 1.0


def test_heldout_mlm_loss_rises_when_layers_are_switched_off(tmp_path):
    from bertcore import BertConfig, BertForPreTraining
    from bertcore.sources import packaged_model_dir
    from bertcore.tokenizer import load_tokenizer

    tok = load_tokenizer(packaged_model_dir())
    texts = ablation.heldout_texts(4)
    assert len(texts) == 4 and all(len(t) > 20 for t in texts)
    batch = ablation.heldout_batch(tok, texts, max_length=32)
    again = ablation.heldout_batch(tok, texts, max_length=32)
    assert torch.equal(batch["input_ids"], again["input_ids"])  # fixed seed: the same masks every time
    assert (batch["labels"] != -100).any()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64)
    model = BertForPreTraining(cfg).eval()
    plain = ablation.mlm_loss(model, batch)
    assert plain == ablation.mlm_loss(model, batch, torch.ones(2, 4))
    assert plain != ablation.mlm_loss(model, batch, torch.zeros(2, 4))
