"""Feature indexes (bertcore.sae.features): label purity, and the stored dashboards belong to the files they came
from (a changed SAE or model file ignores them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.sae import features
from bertcore.sae import io as sae_io
from bertcore.sae.model import TopKSAE

SENTENCES = ["The president spoke to Congress in Washington.", "Farmers grow wheat and corn in Kansas.",
             "We will build new roads and bridges.", "The army and the navy defended the nation.",
             "Taxes fell while wages rose across America."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("spacy")
    from bertcore.loading import sources
    from bertcore.modeling import heads
    from tests.conftest import save_tiny_bert

    folder = save_tiny_bert(tmp_path_factory.mktemp("feat") / "mlm", heads.BertForPreTraining)
    return sources.load(sources.ModelSource("local", str(folder), "tiny"))


def test_purity_counts_one_label_value_on_80_percent():
    labels = {"pos": np.array([0] * 16 + [1] * 4 + [1] * 20), "dep": np.zeros(40, int),
              "ent": np.full(40, -1), "lemma": np.arange(40)}
    labels["dep"][:] = np.arange(40) % 5  # no dependency value dominates
    text = features.LabelledText(np.arange(40, dtype=np.int32), np.array([0, 40]), labels,
                                 {"pos": ["NOUN", "VERB"], "dep": list("abcde"), "ent": [], "lemma": [str(i) for i in
                                                                                                        range(40)]},
                                 np.zeros(40, bool))
    rows = np.array([np.arange(20), np.arange(10, 30), np.r_[np.arange(19), -1]])
    result = features.purity(rows, text)
    assert result["alive"] == 2  # the third has fewer than 20 tokens
    assert result["pure"] == 1  # 16 of 20 NOUN: pure; 6 NOUN + 14 VERB: 70%, not pure
    assert features.pure_labels(rows[:1], text)[0]["pos"] == ("NOUN", 0.8)
    assert result["one_word"] == 0 and result["pure_varied"] == 1  # every token id differs: the purity is varied


def test_a_direction_of_one_word_is_pure_but_not_varied():
    ids = np.array([7] * 17 + [1, 2, 3] + list(range(10, 30)), np.int32)  # 17 copies of one word, then 23 others
    labels = {"pos": np.zeros(40, int), "dep": np.arange(40) % 5, "ent": np.full(40, -1), "lemma": np.arange(40)}
    vocab = {"pos": ["DET"], "dep": list("abcde"), "ent": [], "lemma": [str(i) for i in range(40)]}
    text = features.LabelledText(ids, np.array([0, 40]), labels, vocab, np.zeros(40, bool))
    rows = np.array([np.arange(20), np.arange(20, 40), np.r_[np.arange(10), np.arange(20, 30)]])
    result = features.purity(rows, text)
    assert result["pure"] == 3  # every token is DET
    assert result["one_word"] == 1  # 17 of 20 are token 7
    assert result["pure_varied"] == 2  # 20 different words; 7 x 10 + 10 others is half, still varied
    assert result["pure_varied_share"] == pytest.approx(2 / 3)


def test_stored_dashboards_follow_the_model_and_sae_files(tiny, tmp_path):
    model, tok = tiny.model, tiny.tokenizer
    text = features.labelled_text(tok, SENTENCES)
    assert text.labels["pos"][~text.special].min() >= 0 and (text.labels["pos"][text.special] == -1).all()
    sae = TopKSAE(tiny.config.hidden_size, 48, 4, seed=2)
    folder = sae_io.save(sae, tmp_path / "sae", layer=1)
    index = features.collect(model, tok, sae, 1, text, n_random=64)
    assert int(index.hist.sum()) == int(index.fired.sum()) <= 4 * len(text.token_ids)  # every activation in a bin
    assert set(index.purity) == {"sae", "random", "neurons"}
    params = {"sentences": len(SENTENCES)}
    features.write(folder, tiny.path, index, params)
    again = features.read(folder, tiny.path, params)
    assert again is not None and np.array_equal(again.top_rows, index.top_rows)
    assert features.read(folder, tiny.path, {"sentences": 4}) is None  # other parameters
    with torch.no_grad():
        sae.W_dec[0] *= -1  # a retrained SAE: same shapes, other weights
    sae_io.save(sae, folder, layer=1)
    assert features.read(folder, tiny.path, params) is None
    features.write(folder, tiny.path, index, params)
    weights = tiny.path / "model.safetensors"
    original = weights.read_bytes()
    try:
        weights.write_bytes(original[:-4] + bytes(4))  # the model's file changed
        assert features.read(folder, tiny.path, params) is None
    finally:
        weights.write_bytes(original)
    assert features.read(folder, tiny.path, params) is not None
