"""bertcore.analysis.attention.decompx: DecompX (Modarressi et al. 2023) sums to the model's own hidden states and
logits, through the MLM head and a classifier, on a tiny random model (every bias and LayerNorm random) and on the
shipped model."""

import copy

import numpy as np
import pytest
import torch

from bertcore import BertForPreTraining, BertForSequenceClassification, BertModel
from bertcore.loading import sources
from bertcore.analysis.attention import decompx
from bertcore.modeling.encoder import activation
from bertcore.tokenization.tokenizer import encode

from tests.analysis.attention.test_mixing import randomized, tiny_inputs
from tests.conftest import tiny_bert

AGREEMENT = "The keys to the cabinet [MASK] on the table."


@pytest.fixture(scope="module")
def shipped():
    return sources.load(sources.PACKAGED_MLM)


@pytest.fixture(scope="module")
def tiny():
    return randomized(tiny_bert(BertForPreTraining, intermediate_size=37))


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu", "silu"])
def test_every_layers_decomposition_sums_to_its_hidden_state(act):
    model = randomized(tiny_bert(BertForPreTraining, intermediate_size=37, hidden_act=act), seed=2)
    inputs = tiny_inputs(t=8, seed=1)
    with torch.no_grad():
        hidden = model.bert(**inputs, output_hidden_states=True).hidden_states
    for layer in range(2):
        d = decompx.hidden_decomposition(model, inputs, layer)
        assert d.shape == (8, 9, 32) and d.dtype == torch.float64
        torch.testing.assert_close(d.sum(1), hidden[layer + 1][0], atol=1e-9, rtol=0)
        assert float(d[:, -1].abs().max()) > 1e-2  # the bias term is a real part of the sum
    u = torch.linspace(-4, 4, 81, dtype=torch.float64)
    u = u[u != 0]
    torch.testing.assert_close(decompx.gate(act, u) * u, activation(act)(u), atol=1e-12, rtol=0)


def test_fill_mask_and_logit_difference_sum_to_the_real_logits(tiny):
    inputs = tiny_inputs(t=9, seed=2)
    with torch.no_grad():
        logits = tiny(**inputs).prediction_logits[0, 4]
    ids = [7, 2000, 2024, 2003]
    got = decompx.fill_mask(tiny, inputs, 4, ids)
    assert got.contributions.shape == (10, 4)
    np.testing.assert_allclose(got.contributions.sum(0), logits[ids].numpy(), atol=1e-9)
    np.testing.assert_allclose(got.value, logits[ids].numpy(), atol=1e-9)
    diff = decompx.logit_difference(tiny, inputs, 4, 2024, 2003)
    assert diff.contributions.shape == (10, 1)
    np.testing.assert_allclose(diff.value, [float(logits[2024] - logits[2003])], atol=1e-9)
    # dropping any one row (a token, or the bias term) misses the logit by far more than the tolerance
    assert (np.abs(got.contributions) > 1e-3).any(axis=1).all()


def test_classifier_sums_to_the_real_logits():
    model = randomized(tiny_bert(BertForSequenceClassification, intermediate_size=37, num_labels=3), seed=4)
    inputs = tiny_inputs(t=7, seed=3)
    with torch.no_grad():
        logits = model(**inputs).logits[0]
    got = decompx.classifier(model, inputs)
    assert got.contributions.shape == (8, 3) and got.columns == ["0", "1", "2"]
    np.testing.assert_allclose(got.contributions.sum(0), logits.numpy(), atol=1e-9)
    assert (np.abs(got.contributions) > 1e-3).any(axis=1).all()


def test_the_shipped_model_sums_to_its_logits_in_float64_and_float32(shipped):
    enc = encode(shipped.tokenizer, AGREEMENT)
    inputs, pos = enc.tensors(), enc.tokens.index("[MASK]")
    are, is_ = shipped.tokenizer.convert_tokens_to_ids(["are", "is"])
    model64 = copy.deepcopy(shipped.model).double().eval()
    with torch.no_grad():
        logits64 = model64(**inputs).prediction_logits[0, pos]
        logits32 = shipped.model(**inputs).prediction_logits[0, pos]
    got = decompx.logit_difference(model64, inputs, pos, are, is_)
    np.testing.assert_allclose(got.value, [float(logits64[are] - logits64[is_])], atol=1e-9)
    got32 = decompx.fill_mask(shipped.model, inputs, pos, [are, is_])
    np.testing.assert_allclose(got32.value, logits32[[are, is_]].numpy(), atol=1e-4)
    assert got.contributions.shape == (len(enc.tokens) + 1, 1)


def test_errors_and_the_model_is_left_alone(tiny):
    inputs = tiny_inputs()
    with pytest.raises(ValueError, match="pre-LN"):
        decompx.fill_mask(randomized(tiny_bert(BertForPreTraining, pre_layer_norm=True)), inputs, 1, [5])
    with pytest.raises(ValueError, match="MLM head"):
        decompx.fill_mask(tiny.bert, inputs, 1, [5])
    with pytest.raises(ValueError, match="classifier"):
        decompx.classifier(tiny, inputs)
    with pytest.raises(ValueError, match="position"):
        decompx.fill_mask(tiny, inputs, 9, [5])
    with pytest.raises(ValueError, match="tokens"):
        decompx.hidden_decomposition(tiny_bert(BertModel, max_position_embeddings=300),
                                     tiny_inputs(t=decompx.MAX_TOKENS + 1))
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    decompx.fill_mask(tiny, inputs, 3, [5, 6])
    assert not tiny.training and all(torch.equal(v, tiny.state_dict()[k]) for k, v in before.items())
