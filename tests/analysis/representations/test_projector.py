"""The embedding projector: points are the encoder's hidden states, PCA is scikit-learn's up to
sign at every layer (signs matched between layers), the custom axis puts its two words at 0 and 1, neighbours equal
brute-force cosine, the disk cache follows the model files and the corpus, and the colours say what they should."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from bertcore.loading import sources
from bertcore.analysis import projector_view as PV
from bertcore.analysis.representations import projector as P
from bertcore.modeling.heads import BertForMaskedLM, BertForSequenceClassification

from ...conftest import save_tiny_bert
from ...test_shipped_file import changed_weight

TEXTS = ["The cat sat on the mat.", "A dog ran to the park and barked.", "Stocks fell sharply on Monday.",
         "She wrote a letter to her friend.", "The committee approved the new budget today."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = save_tiny_bert(tmp_path_factory.mktemp("proj") / "m", BertForMaskedLM)
    return sources.load(sources.ModelSource("local", str(folder)))


def test_token_points_are_the_hidden_states_of_the_ordinary_tokens(tiny):
    pts = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "token", batch_size=2)
    assert pts.vectors.shape[0] == tiny.config.num_hidden_layers + 1
    enc = tiny.tokenizer(TEXTS[1], return_tensors="pt")
    with torch.no_grad():
        hidden = tiny.encoder(**enc, output_hidden_states=True).hidden_states
    mine = pts.sentence == 1
    assert pts.tokens[np.flatnonzero(mine)[0]] == "a" and "[CLS]" not in pts.tokens and "[SEP]" not in pts.tokens
    proj = P.project(pts, 1)
    assert P.context(proj, int(np.flatnonzero(mine)[2]), window=2) == "a dog [ran] to the"
    for f in range(len(pts.layers)):  # padded in a batch of 2, alone here: the same vectors
        np.testing.assert_allclose(pts.vectors[f, mine], hidden[f][0, pts.position[mine]].numpy(), atol=1e-5)
    sent = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "cls", layers=[1])
    assert sent.vectors.shape == (1, len(TEXTS), tiny.config.hidden_size) and sent.tokens == TEXTS
    with torch.no_grad():
        cls = tiny.encoder(**enc, output_hidden_states=True).hidden_states[1][0, 0].numpy()
    np.testing.assert_allclose(sent.vectors[0, 1], cls, atol=1e-5)
    cut = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "mean", max_points=2)
    assert cut.vectors.shape[1] == 2
    with pytest.raises(ValueError, match="no text"):
        P.collect(tiny.encoder, tiny.tokenizer, ["", "  "], "token")


def test_pca_is_scikit_learns_up_to_sign_at_every_layer_and_signs_follow_the_chosen_layer(tiny):
    pts = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "token")
    anchor = 1
    proj = P.project(pts, pts.layers[anchor], "pca")
    for f in range(len(pts.layers)):
        ref = PCA(n_components=2).fit(pts.vectors[f].astype(np.float64))
        want = ref.transform(pts.vectors[f].astype(np.float64))
        got = proj.coords[f].astype(np.float64)
        signs = np.sign((got * want).sum(0))
        np.testing.assert_allclose(got, want * signs, atol=1e-4)
        if f == anchor:
            assert (signs == 1).all()  # the chosen layer keeps scikit-learn's signs
        else:
            prev = f - 1 if f > anchor else f + 1
            assert ((proj.coords[f] * proj.coords[prev]).sum(0) >= 0).all()  # matched to the layer before
        np.testing.assert_allclose(proj.explained[f], ref.explained_variance_ratio_, atol=1e-5)


def test_the_custom_axis_puts_its_words_at_0_and_1(tiny):
    pts = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "token")
    a = P.word_vectors(tiny.encoder, tiny.tokenizer, pts, "cat")
    b = P.word_vectors(tiny.encoder, tiny.tokenizer, pts, "dog")
    np.testing.assert_allclose(a, pts.vectors[:, pts.tokens.index("cat")], atol=1e-6)  # the corpus's own "cat"
    proj = P.project(pts, 2, "axis", axis_vectors=(a, b), axis_words=("cat", "dog"))
    assert proj.coords[:, pts.tokens.index("cat"), 0] == pytest.approx(0, abs=1e-5)
    assert proj.coords[:, pts.tokens.index("dog"), 0] == pytest.approx(1, abs=1e-5)
    with pytest.raises(ValueError, match="same vector"):
        P.project(pts, 2, "axis", axis_vectors=(a, a))


def test_nearest_neighbours_equal_brute_force_cosine():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 16)).astype(np.float32)
    x[7] = 0.0  # a zero vector: cosine 0 with everything
    ids, cos = P.neighbour_table(x, k=10, block=64)
    for i in (0, 7, 150, 299):
        brute = [(0.0 if not (np.linalg.norm(x[i]) and np.linalg.norm(x[j])) else
                  float(x[i] @ x[j] / np.linalg.norm(x[i]) / np.linalg.norm(x[j])), j) for j in range(300) if j != i]
        want = sorted(brute, key=lambda t: (-t[0], t[1]))[:10]
        got_ids, got_cos = P.nearest(x, i, 10)
        np.testing.assert_allclose(got_cos, [c for c, _ in want], atol=1e-5)
        if i != 7:  # (a zero vector ties with everything)
            assert got_ids.tolist() == [j for _, j in want]
        assert ids[i].tolist() == got_ids.tolist()


def test_the_cache_follows_the_model_files_and_the_corpus(tmp_path):
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM)
    corpus = PV.Corpus(TEXTS, None, "mine")

    def run(texts=corpus):
        lm = sources.load(sources.ModelSource("local", str(folder)))
        return PV.view(lm, "mine", 40, 1, "pca", "word", texts=texts, cache_root=tmp_path / "cache")

    first = run()
    assert not first.from_cache and len(list((tmp_path / "cache" / "projector").glob("*.npz"))) == 1
    again = run()
    assert again.from_cache
    np.testing.assert_array_equal(again.projection.coords, first.projection.coords)
    assert again.projection.tokens == first.projection.tokens and again.values == first.values
    changed_weight(folder)  # one weight changed: another key, computed again, other coordinates
    moved = run()
    assert not moved.from_cache and not np.array_equal(moved.projection.coords, first.projection.coords)
    other = run(PV.Corpus(TEXTS[:-1] + ["An entirely different last sentence."], None, "mine"))
    assert not other.from_cache
    assert len(list((tmp_path / "cache" / "projector").glob("*.npz"))) == 3


def test_colours_notes_and_bad_parameters(tiny, tmp_path):
    one_label = PV.own_corpus("pos | A fine day.\npos | A great day.\npos | The best day of all.")
    v = PV.view(tiny, "yours", 5000, 2, "pca", "label", texts=one_label)
    assert set(v.values) == {"pos"} and len(v.values) == len(v.projection.tokens)
    assert any("fewer than the 5,000 asked" in n for n in v.notes) and any("same label" in n for n in v.notes)
    assert PV.own_corpus("just a line\nanother").labels is None
    with pytest.raises(ValueError, match="no labels"):
        PV.view(tiny, "yours", 50, 1, "pca", "label", texts=PV.own_corpus("a b c d\ne f g h"))
    with pytest.raises(ValueError, match="classification head"):
        PV.view(tiny, "yours", 50, 1, "pca", "correct", texts=one_label)
    with pytest.raises(ValueError, match="1 to 50,000"):
        PV.view(tiny, "yours", 0, 1, "pca", "word", texts=one_label)
    with pytest.raises(ValueError, match="layer"):
        PV.view(tiny, "yours", 10, 9, "pca", "word", texts=one_label)
    with pytest.raises(ValueError, match="type some texts"):
        PV.own_corpus(" \n \t\n")
    with pytest.raises(ValueError, match="no ordinary token"):
        PV.view(tiny, "yours", 10, 1, "pca", "word", texts=PV.own_corpus("\u200b\n\u200c"))
    with pytest.raises(ValueError, match="at least 2 points"):
        PV.view(tiny, "yours", 10, 1, "pca", "word", unit="cls", texts=PV.own_corpus("only one"))
    odd = PV.own_corpus("😀🎉 emoji 👍🏽\nمرحبا بالعالم שלום\nzero\u200bwidth\u0000 ctrl\x07")
    assert len(PV.view(tiny, "yours", 100, 1, "pca", "word", texts=odd).projection.tokens) >= 2


def test_classifier_colours_are_its_answers(tmp_path):
    folder = save_tiny_bert(tmp_path / "c", BertForSequenceClassification, num_labels=2,
                            id2label={0: "neg", 1: "pos"})
    lm = sources.load(sources.ModelSource("local", str(folder)))
    data = PV.own_corpus("pos | A fine day.\nneg | A bad day.\npos | Lovely.\nneg | Awful weather today.")
    right = PV.view(lm, "yours", 100, 1, "pca", "correct", texts=data)
    conf = PV.view(lm, "yours", 100, 1, "pca", "confidence", texts=data)
    preds, probs = PV.classify(lm, data.texts)
    for i, s in enumerate(right.projection.sentence.tolist()):
        assert right.values[i] == ("right" if preds[s] == data.labels[s] else "wrong")
        assert conf.values[i] == pytest.approx(float(probs[s]))
    assert conf.numeric and 0.5 <= min(conf.values) <= max(conf.values) <= 1.0


def test_an_sae_feature_colours_each_point_by_its_activation(tiny, tmp_path):
    from bertcore.sae import io as sae_io
    from bertcore.sae.model import TopKSAE

    sae = TopKSAE(tiny.config.hidden_size, 16, 4, seed=1)
    folder = sae_io.save(sae, tmp_path / "sae", layer=1)  # block 1, the last: it reads hidden_states[2]
    v = PV.view(tiny, "yours", 100, 1, "pca", "sae", texts=PV.Corpus(TEXTS, None, "mine"), sae_folder=folder,
                feature=3)
    pts = P.collect(tiny.encoder, tiny.tokenizer, TEXTS, "token", [2])
    loaded, _ = sae_io.load(folder)
    with torch.no_grad():
        want = loaded.encode(torch.from_numpy(pts.vectors[0]))[:, 3].numpy()
    assert v.numeric and np.allclose(v.values, want, atol=1e-5) and (want > 0).any()
    with pytest.raises(ValueError, match="features 0..15"):
        PV.view(tiny, "yours", 100, 1, "pca", "sae", texts=PV.Corpus(TEXTS, None, "mine"), sae_folder=folder,
                feature=16)
