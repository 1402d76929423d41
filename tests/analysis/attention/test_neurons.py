"""bertcore.analysis.attention.neurons: the neuron view's probabilities are the model's attention row."""

import numpy as np
import pytest

from bertcore.analysis.attention import activations
from bertcore.analysis.attention import neurons


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
