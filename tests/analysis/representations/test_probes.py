"""Probing classifiers (bertcore.analysis.representations.probes) on constructed features with known answers, and on a
parse."""

import numpy as np
import pytest

from bertcore.analysis.representations import probes as PR


def _features(layers, labels, types=None, groups_of=10):
    n = len(labels)
    return PR.WordFeatures(np.asarray(layers, dtype=np.float32), {"pos": list(labels), "dep": list(labels)},
                           types or [f"w{i}" for i in range(n)], np.arange(n) // groups_of)


def test_a_label_in_one_coordinate_is_read_perfectly_random_vectors_give_the_majority():
    rng = np.random.default_rng(0)
    n, h = 600, 8
    y = rng.choice(["NOUN", "VERB", "DET"], n, p=[0.6, 0.25, 0.15])
    code = {"NOUN": 0.0, "VERB": 5.0, "DET": 10.0}
    informative = rng.normal(size=(n, h))
    informative[:, 3] = [code[v] for v in y]
    random_layer = rng.normal(size=(n, h))
    res = PR.probe(_features([random_layer, informative], y), "pos")
    assert res.accuracy[1] == 1.0
    assert abs(res.accuracy[0] - res.majority) < 0.08, (res.accuracy[0], res.majority)
    assert 0.45 < res.majority < 0.75
    assert res.expected_layer == pytest.approx(1.0)
    assert res.n_train + res.n_test == n and res.n_labels == 3


def test_control_task_and_selectivity():
    """Labels that are a function of the word type are memorisable: a probe on one-hot word identity learns the
    control task as well as the real one (selectivity near 0)."""
    rng = np.random.default_rng(1)
    types = [f"t{i}" for i in rng.integers(0, 12, 800)]
    label_of = {f"t{i}": ["NOUN", "VERB", "ADJ"][i % 3] for i in range(12)}
    y = [label_of[t] for t in types]
    onehot = np.zeros((800, 12))
    onehot[np.arange(800), [int(t[1:]) for t in types]] = 1
    ctrl = PR.control_labels(types, y, seed=0)
    assert all(ctrl[i] == ctrl[j] for i in range(50) for j in range(50) if types[i] == types[j])
    res = PR.probe(_features([onehot, onehot], y, types), "pos")
    assert res.accuracy[1] == 1.0 and res.control[1] == 1.0 and abs(res.selectivity[1]) < 1e-9


def test_expected_layer():
    assert PR.expected_layer([0.2, 0.2, 0.8, 0.8]) == pytest.approx(2.0)
    assert PR.expected_layer([0.2, 0.5, 0.8]) == pytest.approx(1.5)
    assert np.isnan(PR.expected_layer([0.5, 0.5, 0.4]))
    # a late decline is no negative gain (it once gave -0.05 for MiniLM-MLM's POS probe)
    assert PR.expected_layer([0.85, 0.89, 0.91, 0.91, 0.91, 0.90, 0.89]) == pytest.approx((1 * 0.04 + 2 * 0.02) / 0.06)


def test_word_features_of_a_parse(packaged):
    pytest.importorskip("spacy")
    from bertcore.analysis.representations import syntax as S

    segs = [S.parse_segment(packaged.tokenizer, t) for t in
            ("She didn't buy 3 apples in Zürich, did she?", "John Smith's café opened on 5 May 2024.")]
    f = PR.word_features(packaged.encoder, packaged.tokenizer, segs)
    n_words = sum(len({w for w in s.word_ids if w is not None}) for s in segs)
    assert f.vectors.shape == (packaged.config.num_hidden_layers + 1, n_words, packaged.config.hidden_size)
    assert "zürich" in f.types and "n't" in f.types and "café" in f.types
    assert f.labels["pos"][f.types.index("apples")] == "NOUN" and f.labels["pos"][f.types.index("3")] == "NUM"
    with pytest.raises(ValueError, match="at least 2 segments"):
        PR.probe(PR.WordFeatures(f.vectors, f.labels, f.types, np.zeros(n_words, int)), "pos")
    with pytest.raises(ValueError, match="task must be"):
        PR.probe(f, "ner")
