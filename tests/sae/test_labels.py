"""Feature labels (bertcore.sae.labels): each part is what its statistic says, the stored labels are what the index
and the weights give when recomputed, and the detector score counts what its name says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.sae import features, labels
from bertcore.sae import io as sae_io
from bertcore.sae.model import TopKSAE
from tests.sae.test_features import SENTENCES, tiny  # noqa: F401 - a fixture

VOCAB = {"pos": ["NOUN", "VERB"], "dep": ["nsubj", "obj"], "ent": ["GPE"], "lemma": [str(i) for i in range(40)]}


class Words:
    """A stand-in tokenizer: token id i is the word ``w{i}``."""

    def convert_ids_to_tokens(self, ids):
        return [f"w{int(i)}" for i in ids]


def text_of(ids, pos, dep, ent):
    n = len(ids)
    return features.LabelledText(np.asarray(ids, np.int32), np.array([0, n]),
                                 {"pos": np.asarray(pos), "dep": np.asarray(dep), "ent": np.asarray(ent),
                                  "lemma": np.arange(n) % 40}, VOCAB, np.zeros(n, bool))


def index_of(text, rows, values=None):
    rows = np.asarray(rows)
    values = np.linspace(2, 1, rows.shape[1])[None].repeat(len(rows), 0) if values is None else values
    return features.FeatureIndex(rows, values.astype(np.float32), np.zeros((len(rows), 30)), np.zeros(len(rows)),
                                 np.zeros(4), {}, text)


def test_each_part_of_a_label_is_its_statistic():
    """Tokens: the most frequent of the top 20, ties to the stronger activation; spaCy: the kind covering the most
    of the 20, named only at half or more; promoted: the given ids; a feature with fewer than 20 is rare, none
    silent."""
    ids = [5] * 8 + [6] * 4 + [7] * 4 + [8] * 2 + [9] * 2  # the top 20 of feature 0, strongest first
    pos = [0] * 14 + [1] * 6  # 70% NOUN
    dep = [0] * 9 + [1] * 11  # 55% obj: less than NOUN's 70%
    text = text_of(ids + list(range(20, 40)), pos + [1] * 20, dep + [0] * 20, [-1] * 40)
    rows = [list(range(20)), list(range(20, 40)), list(range(20, 30)) + [-1] * 10, [-1] * 20]
    found = labels.build(index_of(text, rows), Words(), np.array([[11, 12, 13, 14]] * 4))
    first = found[0]
    assert first.tokens == ["w5", "w6", "w7"]  # 8, then 4 and 4: w6 came first among the ties
    assert first.token_share == pytest.approx(16 / 20)
    assert first.spacy == ("pos", "NOUN", 0.7)
    assert first.text == "nouns: w5, w6, w7 → w11, w12, w13"
    assert found[1].spacy == ("pos", "VERB", 1.0)  # every one of 20 distinct words a VERB
    assert found[2].text.startswith("rare: ") and found[2].spacy is None  # 10 top tokens: no spaCy part
    assert found[3].text == "silent on held-out text" and found[3].promoted == []
    nothing = labels.build(index_of(text, rows[:1]), Words(), None)[0]
    assert nothing.promoted == [] and "→" not in nothing.text


def test_a_spacy_value_under_half_is_not_named():
    ids = list(range(20))
    text = text_of(ids, [0] * 9 + [1] * 11, [0] * 10 + [1] * 10, [0] * 9 + [-1] * 11)  # 55% VERB is the most
    assert labels.build(index_of(text, [ids]), Words(), None)[0].spacy == ("pos", "VERB", 0.55)
    text = text_of(ids, [0] * 9 + [1] * 9 + [-1] * 2, [0] * 9 + [1] * 11, [-1] * 20)
    assert labels.build(index_of(text, [ids]), Words(), None)[0].spacy == ("dep", "obj", 0.55)
    text = text_of(ids, [0] * 9 + [1] * 9 + [-1] * 2, [0] * 9 + [1] * 9 + [-1] * 2, [-1] * 20)
    assert labels.build(index_of(text, [ids]), Words(), None)[0].spacy is None  # 45% at most


def test_stored_labels_are_what_the_index_and_the_weights_give(tiny, tmp_path):  # noqa: F811
    """index_features stores every feature's label in features.npz; read back, they equal labels recomputed from
    the stored index and the weights; the promoted part is the single-feature logit effect's top words; with the
    MLM head's weights changed the recomputed promoted words follow them."""
    from bertcore.sae.explore import logit_effect
    from bertcore.sae.report import index_features, stored_index

    model, tok = tiny.model, tiny.tokenizer
    sae = TopKSAE(tiny.config.hidden_size, 48, 4, seed=2)
    folder = sae_io.save(sae, tmp_path / "sae", layer=1)
    text = features.labelled_text(tok, SENTENCES)
    index_features(folder, model, tok, tiny.path, sentences=400, text=text)
    stored = stored_index(folder, str(tiny.path), 1)
    kept = labels.of_index(stored)
    assert kept is not None and len(kept) == 48
    assert labels.label_of(stored, 7) == kept[7]  # one label, as the dashboard reads it
    loaded, _ = sae_io.load(folder)
    assert labels.feature_labels(model, tok, loaded, 1, stored) == kept
    from bertcore.sae.report import label_texts
    assert label_texts(folder, str(tiny.path), 1) == [lb.text for lb in kept]  # the texts alone, read fast
    assert label_texts(folder, str(tiny.path), 0) is None  # another layer's key
    live = [f for f, lb in enumerate(kept) if lb.tokens]
    assert live
    f = live[0]
    up, _ = logit_effect(model, tok, loaded, 1, f, stored.mean, float(stored.top_values[f, 0]), n=3)
    assert kept[f].promoted == [w for w, _ in up]
    dense = model.cls.predictions.transform.dense.weight
    try:
        with torch.no_grad():
            dense.mul_(-1)
        assert [lb.promoted for lb in labels.feature_labels(model, tok, loaded, 1, stored)] != \
            [lb.promoted for lb in kept]
    finally:
        with torch.no_grad():
            dense.mul_(-1)


def test_the_detector_score_counts_firing_on_the_label_tokens(tiny):  # noqa: F811
    """A dictionary whose feature 0 fires exactly on one token id and feature 1 on none: with the label [that id],
    precision and recall are 1 and 1; feature 1 never fires (NaN precision); a label of another id scores 0."""
    model, tok = tiny.model, tiny.tokenizer
    text = features.labelled_text(tok, SENTENCES)
    target = int(text.token_ids[~text.special][3])

    class Exact:
        kind, d_sae, d_in = "sae", 2, tiny.config.hidden_size
        W_dec = torch.zeros(2, tiny.config.hidden_size)

        def encode(self, x):
            return torch.zeros(x.shape[0], 2)

    sae = Exact()
    counted = ~text.special
    hits = (text.token_ids == target) & counted

    def read(model_, batch, layers):  # the token ids themselves, so the fake dictionary can see them
        return {layers[0]: batch["input_ids"][..., None].float().expand(-1, -1, sae.d_in)}

    def encode(x):
        z = torch.zeros(x.shape[0], 2)
        z[:, 0] = (x[:, 0] == target).float() * 3.0
        return z

    sae.encode = encode
    from bertcore.sae import stream
    saved = stream.READERS["sae"]
    stream.READERS["sae"] = read
    try:
        found = [labels.FeatureLabel([target], ["x"], 1.0, None, [], [], 20, "x"),
                 labels.FeatureLabel([target + 1], ["y"], 1.0, None, [], [], 20, "y")]
        result = labels.score(model, tok, sae, 0, found, text, np.array([3.0, 1.0]))
        other = labels.score(model, tok, sae, 0, [labels.FeatureLabel([target + 1], ["y"], 1.0, None, [], [], 20,
                                                                      "y"), found[1]], text, np.array([3.0, 1.0]))
    finally:
        stream.READERS["sae"] = saved
    assert result.fired["fires"][0] == hits.sum() and result.occurred[0] == hits.sum() > 0
    assert result.precision["fires"][0] == 1.0 and result.recall["fires"][0] == 1.0
    assert result.precision["strong"][0] == 1.0  # 3.0 is at least half of its strongest, 3.0
    assert np.isnan(result.precision["fires"][1])
    assert result.tokens == int(counted.sum())
    assert other.precision["fires"][0] == 0.0
    summary = result.summary(min_count=1)
    assert summary["fires"]["features_precision"] == 1 and summary["fires"]["median_precision"] == 1.0
