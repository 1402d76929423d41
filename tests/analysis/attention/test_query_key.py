"""The query-key map (bertcore.analysis.attention.query_key): the recorded vectors are the head's, the normalisation
changes no attention weight, the projection keeps a known 2-D structure."""

import numpy as np
import pytest
import torch

from bertcore.analysis.attention import query_key as QK

SENTENCES = ["The keys to the cabinet are on the table.", "A dog barked.", "Bees make honey from nectar."]


@pytest.fixture(scope="module")
def recorded(packaged):
    return QK.query_keys(packaged.model, packaged.tokenizer, SENTENCES, layer=2, head=5)


def test_recorded_vectors_give_the_models_attention(packaged, recorded):
    for s, text in enumerate(SENTENCES):
        enc = packaged.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            att = packaged.model(**enc, output_attentions=True).attentions[2][0, 5].numpy()
        np.testing.assert_allclose(QK.attention_from(recorded.queries, recorded.keys, recorded, s), att, atol=1e-5)
    assert recorded.lengths == [len(packaged.tokenizer(t)["input_ids"]) for t in SENTENCES]
    assert recorded.tokens[0] == "[CLS]" and recorded.position[recorded.lengths[0]] == 0


def test_normalisation_changes_no_attention_weight(recorded):
    q, k, c = QK.normalize(recorded.queries, recorded.keys)
    np.testing.assert_allclose(q.mean(0), k.mean(0), atol=1e-4)  # translated
    spread = lambda x: np.linalg.norm(x - x.mean(0), axis=1).mean()  # noqa: E731
    assert spread(q) == pytest.approx(spread(k), rel=1e-5)  # scaled alike
    assert c != 1.0
    for s in range(len(SENTENCES)):
        np.testing.assert_allclose(QK.attention_from(q, k, recorded, s),
                                   QK.attention_from(recorded.queries, recorded.keys, recorded, s), atol=1e-6)


def test_pca_keeps_a_planar_structure():
    """Queries on a circle and keys on a smaller circle in a random 2-D plane of a 16-D space: the projection is
    the same picture up to a rotation (all pairwise distances kept)."""
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(16, 2)))[0].T  # (2, 16) orthonormal
    angle = np.linspace(0, 2 * np.pi, 20, endpoint=False)
    q2 = np.stack([np.cos(angle), np.sin(angle)], 1) * 3
    k2 = np.stack([np.cos(angle), np.sin(angle)], 1)
    pq, pk = QK.project(q2 @ basis, k2 @ basis, "pca")
    both, orig = np.concatenate([pq, pk]), np.concatenate([q2, k2])
    dist = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(dist(both), dist(orig), atol=1e-6)
    tq, tk = QK.project(q2 @ basis, k2 @ basis, "tsne")
    assert tq.shape == tk.shape == (20, 2)


def test_errors(packaged):
    with pytest.raises(ValueError, match="at least one sentence"):
        QK.query_keys(packaged.model, packaged.tokenizer, [], 1, 0)
    with pytest.raises(ValueError, match="layer must be"):
        QK.query_keys(packaged.model, packaged.tokenizer, ["a"], 6, 0)
    with pytest.raises(ValueError, match="method must be"):
        QK.project(np.zeros((3, 4)), np.zeros((3, 4)), "umap")
