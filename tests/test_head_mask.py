"""head_mask (HF semantics, Michel et al. 2019) and uniform-attention ablation (Kovaleva et al. 2019).

transformers 5 dropped ``head_mask``; the reference here is its eager attention with the head mask
multiplied into the probabilities after dropout, exactly as transformers 4.x ``BertSelfAttention``
did, registered through ``transformers.AttentionInterface`` and ``AttentionMaskInterface`` (the
documented way to plug in an attention function).
"""

import pytest
import torch
import transformers
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
from transformers.models.bert import modeling_bert

from bertcore import BertForPreTraining, BertForSequenceClassification
from bertcore.modeling.attention import get_head_mask
from bertcore.tokenization.tokenizer import encode_batch

from .conftest import assert_parity, double, tiny_config
_REF = {"mask": None, "mode": "zero", "layer_of": {}}  # what the reference attention applies, per module


def _masked_eager(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers 4.x eager attention: probs = dropout(softmax(...)) * head_mask[layer]; in "uniform"
    mode, switched-off heads get 1/n on each of the n unpadded keys instead (Kovaleva et al. 2019)."""
    out, weights = modeling_bert.eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout)
    mask = _REF["mask"]
    if mask is None:
        return out, weights
    m = mask[_REF["layer_of"][id(module)]].to(weights.dtype).view(1, -1, 1, 1)  # (1, heads, 1, 1)
    if _REF["mode"] == "uniform":
        t = key.shape[-2]
        keep = torch.ones_like(weights[:, :1]) if attention_mask is None else (attention_mask == 0).to(weights.dtype)
        uniform = (keep / keep.sum(-1, keepdim=True)).expand_as(weights)  # (B, heads, T, T)
        weights = torch.where(m == 0, uniform, weights)
        assert uniform.shape[-1] == t
    else:
        weights = weights * m
    out = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, T, heads, d)
    return out, weights


transformers.AttentionInterface.register("head_mask_eager", _masked_eager)
ALL_MASK_ATTENTION_FUNCTIONS.register("head_mask_eager", eager_mask)  # the padding mask eager attention gets


@pytest.fixture(scope="module")
def hf_masked(packaged):
    model = transformers.BertModel.from_pretrained(str(packaged.path), attn_implementation="head_mask_eager")
    model = model.double().eval()
    _REF["layer_of"] = {id(layer.attention.self): i for i, layer in enumerate(model.encoder.layer)}
    return model


@pytest.fixture(scope="module")
def inputs(packaged):
    return encode_batch(packaged.tokenizer, ["The cat sat on the mat.", "A much longer sentence that pads the batch."],
                        ["It was tired.", "b"])


def _masks(layers, heads):
    some = torch.ones(layers, heads)
    some[0, [0, 3]] = 0
    some[2, 5] = 0
    some[5, :4] = 0
    whole = torch.ones(layers, heads)
    whole[1] = 0
    whole[4] = 0
    per_head = torch.ones(heads)
    per_head[[1, 7, 11]] = 0
    return {"heads": some, "layers": whole, "1d": per_head}


@pytest.mark.parametrize("which", ["heads", "layers", "1d"])
@pytest.mark.parametrize("output_attentions", [True, False])
@torch.no_grad()
def test_head_mask_matches_transformers_on_minilm(packaged, hf_masked, inputs, which, output_attentions):
    cfg = packaged.config
    mask = _masks(cfg.num_hidden_layers, cfg.num_attention_heads)[which]
    _REF["mask"] = mask if mask.dim() == 2 else mask.expand(cfg.num_hidden_layers, -1)
    theirs = hf_masked(**inputs, output_attentions=True, output_hidden_states=True)
    ours = double(packaged.model)(**inputs, output_attentions=output_attentions, output_hidden_states=True,
                                  head_mask=mask)
    _REF["mask"] = None
    keep = inputs["attention_mask"].bool()
    assert_parity(ours.last_hidden_state[keep], theirs.last_hidden_state[keep])
    assert_parity(ours.pooler_output, theirs.pooler_output)
    if output_attentions:
        for a, b in zip(ours.attentions, theirs.attentions, strict=True):
            assert_parity(a, b)
    plain = double(packaged.model)(**inputs)
    assert (plain.last_hidden_state - ours.last_hidden_state).abs().max() > 1e-2  # the mask did something


@pytest.mark.parametrize("output_attentions", [True, False])
@pytest.mark.parametrize("mode", ["zero", "uniform"])
@torch.no_grad()
def test_ablating_nothing_changes_nothing_exactly(packaged, inputs, output_attentions, mode):
    cfg = packaged.config
    plain = packaged.model(**inputs, output_attentions=output_attentions, output_hidden_states=True)
    ones = torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads)
    kept = packaged.model(**inputs, output_attentions=output_attentions, output_hidden_states=True,
                          head_mask=ones, head_ablation=mode)
    assert torch.equal(plain.last_hidden_state, kept.last_hidden_state)
    assert torch.equal(plain.pooler_output, kept.pooler_output)
    for a, b in zip(plain.hidden_states, kept.hidden_states, strict=True):
        assert torch.equal(a, b)
    if output_attentions:
        for a, b in zip(plain.attentions, kept.attentions, strict=True):
            assert torch.equal(a, b)


@torch.no_grad()
def test_uniform_ablation_spreads_attention_evenly_over_unpadded_keys(packaged, hf_masked, inputs):
    cfg = packaged.config
    mask = torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads)
    mask[2, [0, 4]] = 0
    model = double(packaged.model)
    out = model(**inputs, output_attentions=True, head_mask=mask, head_ablation="uniform")
    n = inputs["attention_mask"].sum(-1)  # (B,)
    probs = out.attentions[2]  # (B, heads, T, T)
    for b in range(probs.shape[0]):
        expect = inputs["attention_mask"][b].float() / n[b]  # (T,)
        for h in (0, 4):
            torch.testing.assert_close(probs[b, h], expect.double().expand_as(probs[b, h]))
    _REF["mask"], _REF["mode"] = mask, "uniform"
    theirs = hf_masked(**inputs)
    _REF["mask"], _REF["mode"] = None, "zero"
    keep = inputs["attention_mask"].bool()
    assert_parity(out.last_hidden_state[keep], theirs.last_hidden_state[keep])
    zeroed = model(**inputs, output_attentions=True, head_mask=mask)
    assert torch.equal(out.attentions[1], zeroed.attentions[1])  # layers before the ablation agree
    assert not torch.allclose(out.last_hidden_state, zeroed.last_hidden_state, atol=1e-3)
    # uniform on the fast path (no probabilities) agrees with the explicit path
    fast = model(**inputs, head_mask=mask, head_ablation="uniform")
    assert_parity(fast.last_hidden_state[keep], out.last_hidden_state[keep])


def test_head_mask_shape_and_mode_errors(packaged, inputs):
    with pytest.raises(ValueError, match="head_mask must have shape"):
        packaged.model(**inputs, head_mask=torch.ones(3, 12))
    with pytest.raises(ValueError, match="head_ablation"):
        packaged.model(**inputs, head_mask=torch.ones(12), head_ablation="mean")
    assert get_head_mask(None, 6, 12) == [None] * 6
    assert [m.shape for m in get_head_mask(torch.ones(12), 6, 12)] == [(12,)] * 6


@torch.no_grad()
def test_head_models_pass_the_head_mask_to_the_encoder():
    cfg = tiny_config(num_labels=3)
    ids = torch.randint(5, cfg.vocab_size, (2, 9))
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    for cls, field in ((BertForPreTraining, "seq_relationship_logits"), (BertForSequenceClassification, "logits")):
        model = cls(cfg).eval()
        plain = getattr(model(ids), field)
        assert torch.equal(plain, getattr(model(ids, head_mask=torch.ones(2, 4)), field))
        assert not torch.allclose(plain, getattr(model(ids, head_mask=mask), field))
        direct = model.bert(ids, head_mask=mask).pooler_output
        assert torch.allclose(getattr(model(ids, head_mask=mask), field),
                              (model.cls.seq_relationship if field != "logits" else model.classifier)(direct))
