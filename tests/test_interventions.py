"""bertcore.modeling.interventions: edits and recordings passed to one forward pass (no hooks on the model)."""

import pytest
import torch

from bertcore.modeling.heads import BertForMaskedLM
from bertcore.modeling.interventions import Interventions, eval_mode
from tests.conftest import tiny_bert

IDS = torch.tensor([[2, 10, 11, 12, 4, 13, 3]])


@pytest.fixture(params=[False, True], ids=["post_ln", "pre_ln"])
def model(request):
    return tiny_bert(BertForMaskedLM, num_hidden_layers=3, pre_layer_norm=request.param).eval()


@torch.no_grad()
def test_recorded_sites_are_the_activations_the_model_computes(model):
    n = model.config.num_hidden_layers
    iv = Interventions(record=[("resid", k) for k in range(n + 1)] + [("query", 2), ("key", 2), ("value", 2),
                                                                     ("head", 2), ("attn", 2), ("mlp", 2)])
    out = model.bert(IDS, output_hidden_states=True, interventions=iv)
    for k in range(n):  # the last one is before the final LayerNorm in a pre-LN stack
        assert torch.equal(iv.recorded[("resid", k)], out.hidden_states[k]), k
    last = iv.recorded[("resid", n)]
    if model.config.pre_layer_norm:
        last = model.bert.encoder.LayerNorm(last)
    torch.testing.assert_close(last, out.hidden_states[n])
    layer = model.bert.encoder.layer[1]
    x = out.hidden_states[1]
    x_in = layer.attention.output.LayerNorm(x) if model.config.pre_layer_norm else x
    heads, d = model.config.num_attention_heads, model.config.hidden_size // model.config.num_attention_heads
    q = layer.attention.self.query(x_in).view(1, -1, heads, d).transpose(1, 2)
    torch.testing.assert_close(iv.recorded[("query", 2)], q)
    assert iv.recorded[("head", 2)].shape == (1, 7, model.config.hidden_size)
    torch.testing.assert_close(layer.attention.output.dense(iv.recorded[("head", 2)]), iv.recorded[("attn", 2)])


@torch.no_grad()
def test_an_edit_changes_only_its_own_call(model):
    plain = model(IDS).logits
    iv = Interventions({("mlp", 2): torch.zeros_like})
    edited = model(IDS, interventions=iv).logits
    assert not torch.allclose(edited, plain)
    assert torch.equal(model(IDS).logits, plain)  # the next call, without it, is the plain path
    identity = model(IDS, interventions=Interventions({("resid", 1): lambda x: x.clone()})).logits
    assert torch.equal(identity, plain)


def test_bad_sites_and_edits_are_refused(model):
    with pytest.raises(ValueError, match="kind must be one of"):
        Interventions(record=[("ffn", 1)])
    with pytest.raises(ValueError, match="numbered from 1"):
        Interventions(record=[("attn", 0)])
    with pytest.raises(ValueError, match="has 3 layers"):
        model(IDS, interventions=Interventions(record=[("mlp", 4)]))
    with pytest.raises(ValueError, match="returned shape"):
        model(IDS, interventions=Interventions({("attn", 1): lambda x: x[:, :2]}))


@torch.no_grad()
def test_inputs_embeds_is_the_input_ids_path(model):
    embeds = model.bert.embeddings.word_embeddings(IDS)
    torch.testing.assert_close(model(None, inputs_embeds=embeds).logits, model(IDS).logits, rtol=0, atol=0)
    from bertcore.modeling.embeddings import InputError

    with pytest.raises(InputError, match="exactly one"):
        model(IDS, inputs_embeds=embeds)
    with pytest.raises(InputError, match="exactly one"):
        model(None)


def test_eval_mode_leaves_an_eval_model_alone_and_restores_a_training_one(model):
    model.eval()
    with eval_mode(model):
        assert not model.training
    assert not model.training
    model.train()
    with eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert all(m.training for m in model.modules())
