"""bertcore equals transformers on the same weights (DESIGN.md convention 8)."""

import pytest
import torch
import transformers

from bertcore import BertConfig, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertcore.modeling.config import preset
from bertcore.tokenization.tokenizer import encode, encode_batch

from .conftest import assert_parity, double, tiny_config


def assert_outputs_equal(ours, theirs):
    assert_parity(ours.last_hidden_state, theirs.last_hidden_state)
    if ours.pooler_output is not None:
        assert_parity(ours.pooler_output, theirs.pooler_output)
    assert len(ours.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(ours.hidden_states, theirs.hidden_states):
        assert_parity(a, b)
    assert len(ours.attentions) == len(theirs.attentions)
    for a, b in zip(ours.attentions, theirs.attentions):
        assert_parity(a, b)


@pytest.fixture(scope="module")
def hf_minilm(packaged):
    return transformers.BertModel.from_pretrained(str(packaged.path), attn_implementation="eager").double().eval()


def _inputs(packaged, kind):
    tok = packaged.tokenizer
    if kind == "single":
        return encode(tok, "The quick brown fox jumps over the lazy dog.").tensors()
    if kind == "pair":
        return encode(tok, "He went to the bank.", "He sat by the river all afternoon.").tensors()
    return encode_batch(tok, ["Short one.", "A much longer sentence that forces padding in the batch.",
                              "Mid size text here"],
                        ["pair b", "also b", "b again and more"])


@pytest.mark.parametrize("kind", ["single", "pair", "padded_batch"])
@torch.no_grad()
def test_packaged_minilm_matches_transformers(packaged, hf_minilm, kind):
    inputs = _inputs(packaged, kind)
    ours = double(packaged.model)(**inputs, output_attentions=True, output_hidden_states=True)
    theirs = hf_minilm(**inputs, output_attentions=True, output_hidden_states=True)
    assert_outputs_equal(ours, theirs)


@torch.no_grad()
def test_padded_keys_get_zero_probability_and_rows_sum_to_one(packaged):
    inputs = _inputs(packaged, "padded_batch")
    out = packaged.model(**inputs, output_attentions=True)
    pad = inputs["attention_mask"] == 0  # (B, T)
    assert pad.any()
    for probs in out.attentions:
        torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))
        assert (probs.masked_select(pad[:, None, None, :].expand_as(probs)) == 0).all()


@torch.no_grad()
def test_sdpa_path_matches_explicit_probabilities(packaged):
    inputs = _inputs(packaged, "padded_batch")
    model = double(packaged.model)
    with_probs = model(**inputs, output_attentions=True)
    fused = model(**inputs)
    keep = inputs["attention_mask"].bool()
    assert_parity(fused.last_hidden_state[keep], with_probs.last_hidden_state[keep])
    assert_parity(fused.pooler_output, with_probs.pooler_output)


def _hf_config(cfg: BertConfig, **kw):
    return transformers.BertConfig(**cfg.to_hf_dict(), attn_implementation="eager", **kw)


@pytest.mark.parametrize("ours_cls,hf_name", [
    (BertForPreTraining, "BertForPreTraining"),
    (BertForMaskedLM, "BertForMaskedLM"),
    (BertForSequenceClassification, "BertForSequenceClassification"),
    (BertModel, "BertModel"),
])
@torch.no_grad()
def test_heads_match_transformers_on_tiny_random_config(ours_cls, hf_name, tmp_path):
    cfg = tiny_config(num_labels=3)
    torch.manual_seed(1)
    hf = getattr(transformers, hf_name)(_hf_config(cfg, num_labels=3)).eval()
    hf.save_pretrained(tmp_path)
    ours = ours_cls.from_pretrained(tmp_path)
    hf, ours = double(hf), double(ours)
    assert ours.load_report.missing == [] and ours.load_report.unexpected == []
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (2, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    kw = dict(attention_mask=mask, token_type_ids=types, output_attentions=True, output_hidden_states=True)
    a, b = ours(ids, **kw), hf(ids, **kw)
    pairs = {"BertForPreTraining": [("prediction_logits", "prediction_logits"),
                                    ("seq_relationship_logits", "seq_relationship_logits")],
             "BertForMaskedLM": [("logits", "logits")],
             "BertForSequenceClassification": [("logits", "logits")],
             "BertModel": [("last_hidden_state", "last_hidden_state"), ("pooler_output", "pooler_output")]}[hf_name]
    for x, y in pairs:
        assert_parity(getattr(a, x), getattr(b, y))
    for x, y in zip(a.attentions, b.attentions):
        assert_parity(x, y)


@torch.no_grad()
def test_pretraining_losses_match_transformers(tmp_path):
    cfg = tiny_config()
    torch.manual_seed(2)
    hf = transformers.BertForPreTraining(_hf_config(cfg)).eval()
    hf.save_pretrained(tmp_path)
    ours = BertForPreTraining.from_pretrained(tmp_path)
    hf, ours = double(hf), double(ours)
    ids = torch.randint(5, cfg.vocab_size, (3, 9))
    labels = torch.full_like(ids, -100)
    labels[:, 2] = ids[:, 2]
    labels[0, 5] = ids[0, 5]
    nsp = torch.tensor([0, 1, 0])
    a = ours(ids, labels=labels, next_sentence_label=nsp)
    b = hf(ids, labels=labels, next_sentence_label=nsp)
    assert_parity(a.loss, b.loss)
    sparse = ours(ids, labels=labels, next_sentence_label=nsp, masked_only=True)
    assert_parity(sparse.loss, b.loss)
    assert sparse.prediction_logits.shape == (4, cfg.vocab_size)


def test_saved_checkpoint_loads_in_transformers(tmp_path):
    cfg = tiny_config()
    ours = BertForPreTraining(cfg).eval()
    ours.save_pretrained(tmp_path)
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = torch.randint(5, cfg.vocab_size, (2, 7))
    with torch.no_grad():
        assert_parity(double(ours)(ids).prediction_logits, double(hf)(ids).prediction_logits)


def test_mlm_head_reads_the_encoder_output_not_the_embeddings():
    """The classic tutorial bug: an MLM head on the input embeddings plateaus near loss 7.3."""
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny_config()).eval()
    ids = torch.randint(5, 99, (1, 8))
    before = model(ids).logits
    weight = model.bert.encoder.layer[-1].output.dense.weight
    with torch.no_grad():  # a random change: adding one constant to every weight moves every unit alike, and the
        # LayerNorm after it takes that shift away again (all close then, depending on the seed's rounding)
        weight.add_(torch.randn(weight.shape, generator=torch.Generator().manual_seed(0)) * 0.5)
    assert not torch.allclose(before, model(ids).logits)


def test_decoder_is_tied_to_word_embeddings():
    model = BertForPreTraining(tiny_config())
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias


@pytest.mark.parametrize("name,count,tensors", [("base", 109_482_240, 199)])
def test_bert_base_preset_has_hf_parameter_names_and_count(name, count, tensors):
    ours = BertModel(preset(name))
    hf = transformers.BertModel(transformers.BertConfig(**preset(name).to_hf_dict()))
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in hf.named_parameters()]
    assert len(list(ours.named_parameters())) == tensors
    assert ours.num_parameters() == count == sum(p.numel() for p in hf.parameters())


def test_pre_layer_norm_variant_runs_and_differs():
    torch.manual_seed(0)
    post = BertModel(tiny_config(hidden_dropout_prob=0.0)).eval()
    pre = BertModel(tiny_config(pre_layer_norm=True, hidden_dropout_prob=0.0)).eval()
    pre.load_state_dict({**post.state_dict(),
                         **{k: v for k, v in pre.state_dict().items() if k.startswith("encoder.LayerNorm")}})
    ids = torch.randint(5, 99, (1, 6))
    a, b = post(ids, output_hidden_states=True), pre(ids, output_hidden_states=True)
    assert b.last_hidden_state.shape == a.last_hidden_state.shape
    assert not torch.allclose(a.last_hidden_state, b.last_hidden_state)


@torch.no_grad()
def test_pytorch_model_bin_checkpoint_loads_and_matches(tmp_path):
    """Older HF folders carry ``pytorch_model.bin`` (read with ``torch.load(weights_only=True)``)."""
    cfg = tiny_config()
    hf = transformers.BertModel(_hf_config(cfg)).eval()
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    cfg.save_json(tmp_path / "config.json")
    ours = BertModel.from_pretrained(tmp_path)
    ids = torch.randint(5, cfg.vocab_size, (2, 9))
    assert_parity(double(ours)(ids).last_hidden_state, double(hf)(ids).last_hidden_state)
