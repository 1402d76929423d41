"""Activation patching (bertcore.analysis.causal.patching): the properties any correct implementation has."""

import numpy as np
import pytest
import torch

from bertcore.analysis.causal import patching as P
from bertcore.modeling.heads import BertForPreTraining, BertForSequenceClassification

from tests.conftest import tiny_bert


@pytest.fixture
def model():
    return tiny_bert(BertForPreTraining, num_hidden_layers=3)


def _inputs(ids):
    ids = torch.tensor([ids])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}


CLEAN = _inputs([2, 10, 11, 12, 4, 13, 3])    # position 4: the "[MASK]"
CORRUPT = _inputs([2, 20, 11, 12, 4, 13, 3])  # one token differs (position 1)
LOGIT_DIFF = P.logit_diff(4, 30, 31)


def METRIC(model, inputs, metric=LOGIT_DIFF, interventions=None) -> float:  # noqa: N802 - a batch of one
    return float(P.measure(model, inputs, metric, interventions)[0])


def test_patching_a_whole_layer_restores_the_clean_run(model):
    out, cache = P.record(model.bert, CLEAN)
    clean = float(LOGIT_DIFF(model, out.last_hidden_state)[0])
    for layer in range(len(model.bert.encoder.layer) + 1):
        iv = P.patch(model, "resid", layer, cache[("resid", layer)])
        assert METRIC(model, CORRUPT, interventions=iv) == pytest.approx(clean, abs=1e-5), layer


def test_an_empty_patch_is_the_corrupted_run(model):
    corrupted = METRIC(model, CORRUPT)
    _, cache = P.record(model, CLEAN)
    for kind, layer in (("resid", 1), ("attn", 1), ("mlp", 2)):
        iv = P.patch(model, kind, layer, cache[(kind, layer)], positions=[])
        assert METRIC(model, CORRUPT, interventions=iv) == corrupted


def test_a_head_with_the_same_output_in_both_runs_changes_nothing(model):
    """Head 2 of block 0 with zero value weights outputs zeros on any input: patching it is a no-op."""
    size = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        v = model.bert.encoder.layer[0].attention.self.value
        v.weight[2 * size:3 * size] = 0
        v.bias[2 * size:3 * size] = 0
    corrupted = METRIC(model, CORRUPT)
    _, cache = P.record(model, CLEAN)
    assert METRIC(model, CORRUPT, interventions=P.patch(model, "head", 0, cache[("head", 0)], head=2)) == corrupted
    # a working head does change it
    assert METRIC(model, CORRUPT, interventions=P.patch(model, "head", 0, cache[("head", 0)], head=1)) != corrupted


def test_patching_leaves_the_model_unchanged(model):
    before = model(**CORRUPT).prediction_logits.clone()
    result = P.scan(model, CLEAN, CORRUPT, LOGIT_DIFF)
    after = model(**CORRUPT).prediction_logits
    assert torch.equal(before, after)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert result.effects["resid"].shape == (4, 7)
    assert result.effects["head"].shape == (3, model.config.num_attention_heads)
    assert result.effects["attn"].shape == result.effects["mlp"].shape == (3, 7)
    tol = 1e-5 / abs(result.clean - result.corrupted)  # 1e-5 in metric units (see the batched test)
    # the last layer's residual stream at the predicted position carries everything the head reads
    assert result.effects["resid"][3, 4] == pytest.approx(1.0, abs=tol)
    # the embeddings differ only at the changed token: patching it restores the clean run, others nothing
    assert result.effects["resid"][0, 1] == pytest.approx(1.0, abs=tol)
    np.testing.assert_allclose(np.delete(result.effects["resid"][0], 1), 0, atol=tol)


def test_errors(model):
    with pytest.raises(P.PatchingError, match="same length"):
        P.scan(model, CLEAN, _inputs([2, 10, 3]), LOGIT_DIFF)
    with pytest.raises(P.PatchingError, match="nothing to restore"):
        P.scan(model, CLEAN, CLEAN, LOGIT_DIFF)
    with pytest.raises(P.PatchingError, match="kinds must be among"):
        P.scan(model, CLEAN, CORRUPT, LOGIT_DIFF, kinds=("resid", "ffn"))
    _, cache = P.record(model, CLEAN)
    with pytest.raises(P.PatchingError, match="blocks are 0..2"):
        P.patch(model, "mlp", 3, cache[("mlp", 2)])
    with pytest.raises(P.PatchingError, match="indices are 0..3"):
        P.patch(model, "resid", 4, cache[("resid", 3)])
    with pytest.raises(P.PatchingError, match="kind must be"):
        P.patch(model, "ffn", 1, cache[("mlp", 1)])
    with pytest.raises(P.PatchingError, match="shape"):
        P.measure(model, _inputs([2, 10, 3]), LOGIT_DIFF, P.patch(model, "mlp", 1, cache[("mlp", 1)]))


@pytest.mark.parametrize("model_cls, metric, config", [
    (BertForPreTraining, LOGIT_DIFF, {}),
    (BertForPreTraining, LOGIT_DIFF, {"pre_layer_norm": True}),  # the final LayerNorm after the last layer
    (BertForPreTraining, P.p_is_next(), {}),
    (BertForSequenceClassification, P.class_logit(1), {"num_labels": 3}),
], ids=["logit_diff", "logit_diff_pre_ln", "p_is_next", "class_logit"])
def test_the_batched_scan_equals_one_patch_at_a_time(model_cls, metric, config):
    """scan() resumes each layer's sites from the corrupted residual stream, all in one batch, and reads one
    head position; each row must equal that site patched alone in a whole forward pass."""
    model = tiny_bert(model_cls, num_hidden_layers=3, **config)
    res = P.scan(model, CLEAN, CORRUPT, metric)
    _, cache = P.record(model, CLEAN)
    clean, corrupted = res.clean, res.corrupted
    assert clean == pytest.approx(METRIC(model, CLEAN, metric)) and corrupted == METRIC(model, CORRUPT, metric)
    for kind, layer, j in (("resid", 0, 1), ("resid", 2, 4), ("resid", 3, 0), ("resid", 3, 4), ("attn", 0, 1),
                           ("attn", 2, 4), ("mlp", 1, 1), ("mlp", 2, 4), ("head", 0, 0), ("head", 2, 3)):
        kw = {"head": j} if kind == "head" else {"positions": [j]}
        iv = P.patch(model, kind, layer, cache[(kind, layer)], **kw)
        alone = (METRIC(model, CORRUPT, metric, iv) - corrupted) / (clean - corrupted)
        # compared in metric units: batching rounds fp32 matmuls differently (~1e-7 of a logit), which the
        # normalisation divides by the clean - corrupted gap
        assert abs(res.effects[kind][layer, j] - alone) * abs(clean - corrupted) < 1e-5, (kind, layer, j)


def test_the_encoder_resumes_from_a_recorded_layer(model):
    """BertEncoder.forward(start_layer=k) on hidden_states[k] gives the full run's last hidden state."""
    out = model.bert(**CLEAN, output_hidden_states=True)
    mask = (1.0 - CLEAN["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    for k in range(3):
        last = model.bert.encoder(out.hidden_states[k], mask, start_layer=k)[0]
        torch.testing.assert_close(last, out.last_hidden_state, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="start_layer"):
        model.bert.encoder(out.hidden_states[0], mask, start_layer=3)
