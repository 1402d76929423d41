"""bertcore.analysis.grammar.agreement: verb -> subject attention per head on the generated agreement language."""

import numpy as np
import pytest

from bertcore.analysis.grammar import agreement
from bertcore.analysis.attention.activations import run
from bertcore.data import synthetic as S
from bertcore.modeling.model import BertModel
from bertcore.tokenization.tokenizer import load_tokenizer

from tests.conftest import tiny_bert

WORDS = sorted({w for t in (S.NOUNS, S.VERBS, S.TRANSITIVE, S.COPULAS, S.DETERMINERS) for p in t for w in p}
               | set(S.ADJECTIVES) | set(S.ADVERBS) | set(S.PREPOSITIONS) | {"that", "."})


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return load_tokenizer(folder)


def test_attention_from_the_main_verb_to_its_subject_and_attractor(word_tokenizer):
    model = tiny_bert(BertModel, 0, vocab_size=len(WORDS) + 5)
    sents = agreement.attractor_sentences(8, seed=3)
    assert all(s.attractor for s in sents)
    got = agreement.agreement_heads(model, word_tokenizer, sents)
    cfg = model.config
    assert got.to_subject.shape == got.to_attractor.shape == (cfg.num_hidden_layers, cfg.num_attention_heads)
    expected_subject, expected_attractor = [], []
    for s in sents:  # one token per word, after [CLS]: token index = word index + 1
        attn = run(model, word_tokenizer, s.text).attentions
        verb = s.agreements[-1][0] + 1
        attractor = (s.agreements[0][1] if s.kind == "rc" else 4) + 1
        assert s.words[attractor - 1] in {w for p in S.NOUNS for w in p}
        assert S.number_of(s.words[attractor - 1]) != S.number_of(s.words[1])
        expected_subject.append(attn[:, :, verb, 2])
        expected_attractor.append(attn[:, :, verb, attractor])
    np.testing.assert_allclose(got.to_subject, np.mean(expected_subject, 0), atol=1e-6)
    np.testing.assert_allclose(got.to_attractor, np.mean(expected_attractor, 0), atol=1e-6)
    layer, head = got.best
    assert got.to_subject[layer, head] == got.best_score  # (block, head), both 0-based
    with pytest.raises(ValueError):
        agreement.agreement_heads(model, word_tokenizer, [])
