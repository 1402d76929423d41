"""bertcore.analysis.causal.attribution: integrated gradients (Captum LayerIntegratedGradients) satisfy
completeness at the page's step count, explain the right output, and refuse models without a head."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from bertcore.analysis.causal import attribution
from bertcore.loading.sources import ModelSource, load
from bertcore.tokenization.tokenizer import TextError

from tests.conftest import save_tiny_bert

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 128, "initializer_range": 0.2}  # larger weights: f moves
TEXT = "The striker scored twice as the home side won the cup final."


def tiny(tmp_path_factory, cls, name: str, **changes):
    folder = save_tiny_bert(tmp_path_factory.mktemp(name), cls, **{**TINY, **changes})
    return load(ModelSource("local", str(folder)))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return tiny(tmp_path_factory, transformers.BertForSequenceClassification, "cls", num_labels=3,
                id2label={0: "business", 1: "sport", 2: "tech"}, label2id={"business": 0, "sport": 1, "tech": 2})


@pytest.fixture(scope="module")
def mlm(tmp_path_factory):
    return tiny(tmp_path_factory, transformers.BertForMaskedLM, "mlm")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tiny(tmp_path_factory, transformers.BertModel, "base")


def check_completeness(res: attribution.Attribution) -> None:
    change = res.f_input - res.f_baseline
    # the test model must move f (by 5% of its value at least), or completeness says nothing
    assert abs(change) > 0.05 * max(abs(res.f_input), abs(res.f_baseline)) > 0
    assert abs(res.scores.sum() - change) <= 0.05 * abs(change)
    assert res.scores.sum() - change == pytest.approx(res.delta, abs=1e-5)  # Captum's delta is that gap


def test_classifier_completeness_and_target(classifier):
    lm = classifier
    res = attribution.explain_class(lm.model, lm.tokenizer, TEXT)
    assert res.n_steps == attribution.DEFAULT_STEPS
    assert len(res.scores) == len(res.tokens)
    check_completeness(res)
    enc = res.encoding.tensors()
    with torch.no_grad():
        probs = lm.model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).logits.softmax(-1)[0]
    predicted = int(probs.argmax())
    assert res.f_input == pytest.approx(float(probs[predicted]), abs=1e-6)
    assert res.target == f"P(class = {['business', 'sport', 'tech'][predicted]})"
    other = (predicted + 1) % 3
    res2 = attribution.explain_class(lm.model, lm.tokenizer, TEXT, target=other)
    assert res2.f_input == pytest.approx(float(probs[other]), abs=1e-6)
    check_completeness(res2)


def test_baseline_is_pad_with_special_tokens_kept(classifier):
    lm = classifier
    res = attribution.explain_class(lm.model, lm.tokenizer, TEXT)
    ids = torch.tensor([res.encoding.input_ids])
    keep = torch.tensor([res.encoding.special_tokens_mask], dtype=torch.bool)
    base = attribution.baseline_ids(ids, lm.tokenizer.pad_token_id, keep)[0].tolist()
    assert base[0] == lm.tokenizer.cls_token_id and base[-1] == lm.tokenizer.sep_token_id
    assert set(base[1:-1]) == {lm.tokenizer.pad_token_id}
    with torch.no_grad():  # f(baseline) is the model's probability of the explained class on that input
        t = len(base)
        ones, zeros = torch.ones(1, t, dtype=torch.long), torch.zeros(1, t, dtype=torch.long)
        predicted = int(lm.model(ids, ones, zeros).logits.argmax())
        p_base = lm.model(torch.tensor([base]), ones, zeros).logits.softmax(-1)[0]
    assert res.f_baseline == pytest.approx(float(p_base[predicted]), abs=1e-6)


def test_fill_mask_completeness(mlm):
    lm = mlm
    res = attribution.explain_fill_mask(lm.model, lm.tokenizer, "The capital of France is [mask].")
    position = res.encoding.tokens.index("[MASK]")
    assert f"at position {position}" in res.target
    check_completeness(res)
    # a chosen (not top-1) token
    res2 = attribution.explain_fill_mask(lm.model, lm.tokenizer, "The capital of France is [MASK].", position=position,
                                         token_id=lm.tokenizer.convert_tokens_to_ids("paris"))
    assert '"paris"' in res2.target
    assert res2.f_input < res.f_input  # not the top guess


def test_word_scores_sum_pieces(mlm):
    lm = mlm
    res = attribution.explain_fill_mask(lm.model, lm.tokenizer, "Tokenization of [MASK] embeddings is unbelievable.")
    words, scores = res.word_scores()
    enc = res.encoding
    assert len(words) == len(enc.words) and "tokenization" in words
    i = words.index("tokenization")
    assert scores[i] == pytest.approx(res.scores[enc.words[i]].sum())
    non_special = [p for p, w in enumerate(enc.word_ids) if w is not None]
    assert scores.sum() == pytest.approx(res.scores[non_special].sum())


def test_similarity_any_encoder(base):
    res = attribution.explain_similarity(base.model, base.tokenizer, "A man plays the guitar.", "Music on a stage.")
    check_completeness(res)
    assert res.target.startswith("cosine")


def test_similarity_packaged_minilm(packaged):
    res = attribution.explain_similarity(packaged.model, packaged.tokenizer, "A man is playing a guitar.",
                                         "Someone performs music.", n_steps=attribution.DEFAULT_STEPS)
    check_completeness(res)
    words, scores = res.word_scores()
    assert words[int(np.argmax(scores))] in ("guitar", "playing")  # the words that carry the meaning


def test_errors(base, classifier, mlm):
    with pytest.raises(attribution.AttributionError, match="no classification head"):
        attribution.explain_class(base.model, base.tokenizer, TEXT)
    with pytest.raises(attribution.AttributionError, match="no MLM head"):
        attribution.explain_fill_mask(classifier.model, classifier.tokenizer, "a [MASK] b")
    with pytest.raises(attribution.AttributionError, match="no \\[MASK\\]"):
        attribution.explain_fill_mask(mlm.model, mlm.tokenizer, "no mask here")
    with pytest.raises(attribution.AttributionError, match="3 classes"):
        attribution.explain_class(classifier.model, classifier.tokenizer, TEXT, target=3)
    with pytest.raises(attribution.AttributionError, match="at least 2 steps"):
        attribution.explain_class(classifier.model, classifier.tokenizer, TEXT, n_steps=1)
    with pytest.raises(TextError):
        attribution.explain_similarity(base.model, base.tokenizer, "  ", "x")
