"""bertcore.analysis.attention.neurons: the neuron view's probabilities are the model's attention row (BERT and a
rotary model with a local block)."""

import numpy as np
import pytest
import torch

from bertcore import BertModel
from bertcore.analysis.attention import activations
from bertcore.analysis.attention import neurons

from tests.conftest import tiny_bert


def test_neuron_view_probabilities_equal_the_models_attention(packaged):
    act = activations.run(packaged.encoder, packaged.tokenizer, "The animal was too tired to cross the street.")
    for layer, head, query in ((0, 0, 0), (2, 6, 4), (5, 11, 9)):  # blocks and heads from 0
        view = neurons.neuron_view(packaged.encoder, act.hidden_states[layer], layer, head, query)
        np.testing.assert_allclose(view.probs, act.attentions[layer, head, query], atol=1e-5)
        np.testing.assert_allclose(view.product.sum(-1) / np.sqrt(view.query_vector.size), view.scores, rtol=1e-5)
        assert view.key_vectors.shape == (len(act.tokens), packaged.config.head_size)
    with pytest.raises(ValueError, match=r"head must lie in 0\.\.11"):
        neurons.neuron_view(packaged.encoder, act.hidden_states[0], 0, 12, 0)
    with pytest.raises(ValueError, match=r"layer must lie in 0\.\.5"):
        neurons.neuron_view(packaged.encoder, act.hidden_states[0], 6, 0, 0)


def test_neuron_view_of_a_rotary_model_reads_the_rotated_queries_and_keys():
    """ModernBERT-style (rotary positions, a local sliding-window block, no biases, GeGLU): q and k are the rotated
    ones (their products give the scores), the probabilities are the model's attention (0 outside the window), and
    a key the window hides still shows its q.k/sqrt(d)."""
    model = tiny_bert(BertModel, family="modernbert", type_vocab_size=0, pre_layer_norm=True,
                      position_embedding_type="rotary", local_attention=4, global_attn_every_n_layers=2,
                      attention_bias=False, mlp_bias=False, norm_bias=False, gated_ffn=True,
                      first_attention_norm=False)
    ids = torch.randint(5, 1000, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(ids, output_attentions=True, output_hidden_states=True)
    for layer in (0, 1):  # block 0 global, block 1 local (2 keys each side)
        view = neurons.neuron_view(model, out.hidden_states[layer][0].numpy(), layer, 3, 5)
        np.testing.assert_allclose(view.probs, out.attentions[layer][0, 3, 5].numpy(), atol=1e-6)
        np.testing.assert_allclose(view.product.sum(-1) / np.sqrt(view.query_vector.size), view.scores, rtol=1e-5,
                                   atol=1e-6)
    assert (view.probs[[0, 1, 2, 8]] == 0).all() and (view.probs[3:8] > 0).all()
