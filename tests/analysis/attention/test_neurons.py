"""bertcore.analysis.attention.neurons: the neuron view's probabilities are the model's attention row."""

import numpy as np
import pytest

from bertcore.analysis.attention import activations
from bertcore.analysis.attention import neurons


def test_neuron_view_probabilities_equal_the_models_attention(packaged):
    act = activations.run(packaged.encoder, packaged.tokenizer, "The animal was too tired to cross the street.")
    for layer, head, query in ((1, 1, 0), (3, 7, 4), (6, 12, 9)):
        view = neurons.neuron_view(packaged.encoder, act.hidden_states[layer - 1], layer, head, query)
        np.testing.assert_allclose(view.probs, act.attentions[layer - 1, head - 1, query], atol=1e-5)
        np.testing.assert_allclose(view.product.sum(-1) / np.sqrt(view.query_vector.size), view.scores, rtol=1e-5)
        assert view.key_vectors.shape == (len(act.tokens), packaged.config.head_size)
    with pytest.raises(ValueError, match="head"):
        neurons.neuron_view(packaged.encoder, act.hidden_states[0], 1, 13, 0)
