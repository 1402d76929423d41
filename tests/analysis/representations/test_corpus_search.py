"""Corpus search (bertcore.analysis.representations.corpus_search): the index holds the model's vectors, a corpus
token finds
itself, the on-disk index is keyed on what it depends on."""

import numpy as np
import pytest
import torch

from bertcore.analysis.representations import corpus_search as CS

from ...test_families import save_family, tokenizers  # noqa: F401 - the fixture

TEXTS = ["She sat on the river bank and watched the water.", "The bank raised its interest rates again.",
         "He paid the money into his bank account."]


@pytest.fixture(scope="module")
def index(packaged):
    return CS.build_index(packaged.encoder, packaged.tokenizer, TEXTS, layer=4)


def test_index_holds_the_models_unit_vectors(packaged, index):
    enc = packaged.tokenizer(TEXTS[1], return_tensors="pt")
    with torch.no_grad():
        h = packaged.encoder(**enc, output_hidden_states=True).hidden_states[4][0].numpy()
    rows = np.flatnonzero(index.segment == 1)
    assert [index.tokens[r] for r in rows] == packaged.tokenizer.tokenize(TEXTS[1])  # no [CLS] / [SEP]
    np.testing.assert_allclose(index.vectors[rows], h[1:-1] / np.linalg.norm(h[1:-1], axis=1, keepdims=True),
                               atol=1e-5)


def test_a_corpus_token_finds_itself_first(index):
    i = next(j for j, t in enumerate(index.tokens) if t == "bank" and index.segment[j] == 2)
    hits = CS.search(index, index.vectors[i] * 3.0, k=5)  # scale does not matter
    assert hits[0].segment == 2 and hits[0].token == "bank" and hits[0].cosine == pytest.approx(1.0, abs=1e-5)
    assert [h.cosine for h in hits] == sorted((h.cosine for h in hits), reverse=True)
    assert "[bank]" in hits[0].context and "account" in hits[0].context
    assert CS.summary(hits)[0][1] >= 1


def test_disk_index_is_keyed_and_round_trips(tmp_path, index):
    p = CS.index_path(tmp_path, "model-a", TEXTS, 4)
    assert p != CS.index_path(tmp_path, "model-b", TEXTS, 4)  # other weights
    assert p != CS.index_path(tmp_path, "model-a", TEXTS[:2], 4)  # other corpus
    assert p != CS.index_path(tmp_path, "model-a", TEXTS, 3)  # other layer
    CS.save_index(index, p)
    again = CS.load_index(p)
    np.testing.assert_array_equal(again.vectors, index.vectors)
    assert again.tokens == index.tokens and again.texts == index.texts and again.layer == 4
    p.write_bytes(b"garbage")
    assert CS.load_index(p) is None
    assert CS.load_index(tmp_path / "missing.npz") is None


def test_errors(packaged):
    with pytest.raises(ValueError, match="no text"):
        CS.build_index(packaged.encoder, packaged.tokenizer, [], 1)
    with pytest.raises(ValueError, match="layer must be"):
        CS.build_index(packaged.encoder, packaged.tokenizer, ["a"], 99)


def test_results_equal_a_direct_computation(packaged, index):
    """Brute force by hand: every token's hidden state at layer 4, cosine with the query, sorted."""
    vecs, toks = [], []
    for text in TEXTS:
        enc = packaged.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            h = packaged.encoder(**enc, output_hidden_states=True).hidden_states[4][0, 1:-1].numpy()
        vecs.append(h)
        toks += packaged.tokenizer.tokenize(text)
    vecs = np.concatenate(vecs)
    query = vecs[3] + 0.5 * vecs[10]
    cos = vecs @ query / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(query))
    order = np.argsort(-cos)[:8]
    hits = CS.search(index, query, k=8)
    assert [h.token for h in hits] == [toks[i] for i in order]
    np.testing.assert_allclose([h.cosine for h in hits], cos[order], atol=1e-5)


def test_hit_labels(packaged, index):
    pytest.importorskip("spacy")
    i = next(j for j, t in enumerate(index.tokens) if t == "bank" and index.segment[j] == 1)
    hits = CS.search(index, index.vectors[i], k=3)
    labels = CS.hit_labels(index, hits, packaged.tokenizer)
    assert labels[0] == ("NOUN", "nsubj")  # "The bank raised its interest rates again."


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "modernbert"])
def test_texts_indexed_in_one_padded_batch_get_their_own_vectors(family, tmp_path, tokenizers):  # noqa: F811
    """``build_index`` runs several texts of different lengths as one padded batch: every text's vectors equal
    those of the text run alone (batch_size=1, no padding), whichever family's tokenizer and attention."""
    from bertcore.loading import sources

    folder, _ = save_family(tmp_path / family, family, "mlm" if family != "electra" else "rtd", tokenizers)
    lm = sources.load(sources.ModelSource("local", str(folder)))
    texts = TEXTS + ["Short.", "A much longer text about the river bank, the money bank and the bank of clouds."]
    alone = CS.build_index(lm.encoder, lm.tokenizer, texts, layer=2, batch_size=1)
    batched = CS.build_index(lm.encoder, lm.tokenizer, texts, layer=2)
    assert batched.tokens == alone.tokens and len(set(batched.segment.tolist())) == len(texts)
    np.testing.assert_array_equal(batched.segment, alone.segment)
    np.testing.assert_array_equal(batched.position, alone.position)
    np.testing.assert_allclose(batched.vectors, alone.vectors, atol=1e-5)
