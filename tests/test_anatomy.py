"""bertcore.readouts.anatomy: parameter tables and counts equal transformers', presets counted on `meta`,
pooler and embedding layer taken apart."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertcore.readouts import anatomy
from bertcore.modeling.config import PRESETS, preset
from bertcore.modeling.embeddings import InputError
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.tokenization.tokenizer import encode

HF_CLASSES = {"base": "BertModel", "mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining",
              "classification": "BertForSequenceClassification"}


def hf_on_meta(name: str, head: str):
    cfg = transformers.BertConfig(**preset(name).to_hf_dict())
    with torch.device("meta"):
        return getattr(transformers, HF_CLASSES[head])(cfg)


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("head", ["base", "pretraining"])
def test_preset_counts_and_names_equal_transformers(name, head):
    ours = anatomy.build_on_meta(preset(name), head)
    hf = hf_on_meta(name, head)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in hf.named_parameters()]
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in hf.parameters()]
    n_ours = sum(r.count for r in anatomy.parameter_table(ours))
    assert n_ours == sum(p.numel() for p in hf.parameters()) == anatomy.count_from_shapes(preset(name), head)
    assert len(list(hf.named_parameters())) == anatomy.named_tensor_count(preset(name), head)


@pytest.mark.parametrize("head", ["mlm", "classification"])
def test_other_heads_equal_transformers_for_base(head):
    ours = anatomy.build_on_meta(preset("base"), head)
    hf = hf_on_meta("base", head)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())
    assert anatomy.count_from_shapes(preset("base"), head) == sum(p.numel() for p in hf.parameters())
    assert anatomy.named_tensor_count(preset("base"), head) == len(list(hf.named_parameters()))


def test_published_sizes():
    counts = {c.name: c for c in anatomy.preset_counts()}
    assert counts["base"].base == 109_482_240 and counts["base"].named_tensors == 199
    assert counts["large"].base == 335_141_888
    assert counts["base"].pretraining == 110_106_428
    assert list(counts) == list(PRESETS)


def test_large_is_counted_without_allocating():
    model = anatomy.build_on_meta(preset("large"), "pretraining")
    assert all(p.device.type == "meta" for p in model.parameters())


def test_groups_cover_every_parameter_in_order(packaged):
    rows = anatomy.parameter_table(packaged.model)
    totals = anatomy.group_totals(rows)
    layers = packaged.config.num_hidden_layers
    assert list(totals) == ["embeddings"] + [f"encoder layer {i}" for i in range(layers)] + ["pooler"]
    assert (sum(totals.values()) == packaged.model.num_parameters()
            == sum(p.numel() for p in packaged.model.parameters()))
    assert len(set(totals[f"encoder layer {i}"] for i in range(layers))) == 1
    assert totals["pooler"] == 384 * 384 + 384
    parts = {r.part for r in rows if r.group == "encoder layer 0"}
    assert parts == {"self-attention Q, K, V", "attention output projection", "attention LayerNorm",
                     "feed-forward in (H -> I)", "feed-forward out (I -> H)", "feed-forward LayerNorm"}


def test_head_groups_and_tied_decoder():
    model = anatomy.build_on_meta(preset("tiny"), "pretraining")
    totals = anatomy.group_totals(anatomy.parameter_table(model))
    h, v = 128, 30522
    assert totals["MLM head"] == h * h + h + 2 * h + v
    assert totals["NSP head"] == 2 * h + 2
    tied = dict(anatomy.tied_parameters(model))
    assert tied["cls.predictions.decoder.weight"] == "bert.embeddings.word_embeddings.weight"
    assert "cls.predictions.decoder.weight" not in {r.name for r in anatomy.parameter_table(model)}


def test_unknown_head_is_refused():
    with pytest.raises(ValueError, match="unknown head"):
        anatomy.build_on_meta(preset("tiny"), "nope")
    with pytest.raises(ValueError, match="unknown head"):
        anatomy.count_from_shapes(preset("tiny"), "nope")
    with pytest.raises(ValueError, match="unknown head"):
        anatomy.named_tensor_count(preset("tiny"), "nope")


def test_pooler_is_dense_then_tanh_on_cls(packaged):
    t = encode(packaged.tokenizer, "The pooler reads only the first token.").tensors()
    steps = anatomy.pooler_steps(packaged.model, t["input_ids"], t["attention_mask"], t["token_type_ids"])
    assert steps.matches_model
    out = packaged.encoder(**t)
    torch.testing.assert_close(steps.cls_vector, out.last_hidden_state[0, 0])
    torch.testing.assert_close(steps.pooled, torch.tanh(steps.dense))
    assert steps.pooled.abs().max() < 1
    assert anatomy.pooler_steps(BertForMaskedLM(preset("tiny", num_hidden_layers=1)), t["input_ids"]) is None


@pytest.mark.parametrize("pair", [False, True])
def test_embedding_breakdown_recomposes_the_model_output(packaged, pair):
    enc = encode(packaged.tokenizer, "Embeddings are a sum.", "Then LayerNorm." if pair else None)
    t = enc.tensors()
    b = anatomy.embedding_breakdown(packaged.model, t["input_ids"], t["token_type_ids"])
    assert b.matches(), b.max_abs_diff
    T, H = len(enc), packaged.config.hidden_size
    assert b.word.shape == b.position.shape == b.segment.shape == b.output.shape == (T, H)
    assert set(b.norms) == {"token", "position", "segment", "sum", "normalised", "output"}
    torch.testing.assert_close(b.normalised.mean(-1), torch.zeros(T), atol=1e-5, rtol=0)
    torch.testing.assert_close(b.position, packaged.encoder.embeddings.position_embeddings.weight[:T])
    seg = packaged.encoder.embeddings.token_type_embeddings.weight
    torch.testing.assert_close(b.segment, seg[t["token_type_ids"][0]])


def test_embedding_breakdown_would_notice_a_difference(packaged):
    """Control: when the model's own embedding forward differs from its parts (a bug there), the check fails."""
    import copy

    model = copy.deepcopy(packaged.model)
    emb = model.base_model.embeddings
    real_forward = emb.forward
    emb.forward = lambda *a, **k: real_forward(*a, **k) + 1e-3  # the forward the encoder runs, off by 1e-3
    t = encode(packaged.tokenizer, "a check that can fail").tensors()
    b = anatomy.embedding_breakdown(model, t["input_ids"])
    assert not b.matches()
    assert b.max_abs_diff["model"] == pytest.approx(1e-3, rel=1e-2)


def test_embedding_breakdown_too_long_is_an_input_error(packaged):
    ids = torch.full((1, packaged.config.max_position_embeddings + 1), 1000)
    with pytest.raises(InputError, match="truncate"):
        anatomy.embedding_breakdown(packaged.model, ids)


@pytest.mark.parametrize("head", ["base", "pretraining", "classification"])
def test_transformers_count_is_the_reference(head):
    cfg = preset("mini", num_labels=3)
    params, tensors = anatomy.transformers_count(cfg, head)
    ours = anatomy.build_on_meta(cfg, head)
    assert params == sum(p.numel() for p in ours.parameters()) == anatomy.count_from_shapes(cfg, head)
    assert tensors == len(list(ours.named_parameters()))
    with pytest.raises(ValueError, match="post-LayerNorm"):
        anatomy.transformers_count(cfg.replace(pre_layer_norm=True))
