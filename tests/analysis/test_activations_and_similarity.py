"""bertcore.analysis: forward pass outputs, attention statistics, word pooling, similarities, PCA."""


import numpy as np
import pytest
import torch

from bertcore import vectors
from bertcore.analysis.attention import activations
from bertcore.analysis.representations import similarity
from bertcore.tokenization.tokenizer import TextError, encode

PYTHON_SENTENCES = [
    "The python swallowed the rabbit whole.",
    "A python coiled around the branch of the tree.",
    "The zoo keeper fed the python a dead mouse.",
    "I wrote the script in Python last night.",
    "Python code is easy to read.",
    "She installed the latest version of Python on her laptop.",
]
PYTHON_SENSES = ["snake"] * 3 + ["language"] * 3


def test_run_shapes_and_attention_rows_sum_to_one(packaged):
    act = activations.run(packaged.encoder, packaged.tokenizer, "The cat sat on the mat.", "It was tired.")
    cfg = packaged.config
    t = len(act.encoding)
    assert act.attentions.shape == (cfg.num_hidden_layers, cfg.num_attention_heads, t, t)
    assert act.hidden_states.shape == (cfg.num_hidden_layers + 1, t, cfg.hidden_size)
    assert act.attentions.dtype == np.float32
    np.testing.assert_allclose(act.attentions.sum(-1), 1.0, atol=1e-4)
    # the same numbers as calling the model directly
    with torch.no_grad():
        out = packaged.encoder(**act.encoding.tensors(), output_hidden_states=True)
    np.testing.assert_allclose(act.hidden_states[-1], out.last_hidden_state[0].numpy(), atol=1e-5)


def test_run_truncates_to_max_positions(packaged):
    act = activations.run(packaged.encoder, packaged.tokenizer, "word " * 700)
    assert len(act.encoding) == packaged.config.max_position_embeddings
    assert act.encoding.num_truncated == 700 + 2 - packaged.config.max_position_embeddings
    assert act.attentions.shape[-1] == packaged.config.max_position_embeddings


@pytest.mark.parametrize("text", ["", "   \n\t ", "\u200b\u200b", "\x00\x07"])
def test_run_refuses_text_without_tokens(packaged, text):
    with pytest.raises(TextError):
        activations.run(packaged.encoder, packaged.tokenizer, text)


def test_hide_tokens_zeroes_columns_and_renormalizes():
    rng = np.random.default_rng(0)
    attn = rng.random((2, 3, 5, 5)).astype(np.float32)
    attn /= attn.sum(-1, keepdims=True)
    hidden = np.array([True, False, False, False, True])
    out = activations.hide_tokens(attn, hidden)
    assert np.all(out[..., hidden] == 0)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-6)  # input untouched
    with pytest.raises(ValueError, match="one flag per token"):
        activations.hide_tokens(attn, hidden[:3])


def test_hide_tokens_row_entirely_on_hidden_becomes_zero():
    attn = np.zeros((3, 3), np.float32)
    attn[:, 0] = 1.0
    out = activations.hide_tokens(attn, [True, False, False])
    assert np.all(out == 0) and np.all(np.isfinite(out))


def test_head_stats_on_known_patterns():
    tokens = ["[CLS]", "hello", ",", "world", "[SEP]"]
    t = len(tokens)
    attn = np.zeros((1, 3, t, t), np.float32)
    attn[0, 0, :, 0] = 1.0  # head 1: everyone looks at [CLS]
    attn[0, 1] = 1.0 / t  # head 2: uniform
    attn[0, 2] = np.eye(t)  # head 3: look at yourself
    s = activations.head_stats(attn, tokens)
    assert s.entropy.shape == (1, 3)
    np.testing.assert_allclose(s.entropy[0], [0.0, np.log2(t), 0.0], atol=1e-5)
    np.testing.assert_allclose(s.to_cls[0], [1.0, 0.2, 0.2], atol=1e-6)
    np.testing.assert_allclose(s.to_sep[0], [0.0, 0.2, 0.2], atol=1e-6)
    np.testing.assert_allclose(s.to_punct[0], [0.0, 0.2, 0.2], atol=1e-6)
    # head 1: query i is at distance i from position 0 -> mean of 0..4 = 2
    np.testing.assert_allclose(s.distance[0], [2.0, np.mean(np.abs(np.subtract.outer(range(t), range(t)))), 0.0],
                               atol=1e-5)
    with pytest.raises(ValueError, match="tokens"):
        activations.head_stats(attn, tokens[:-1])


@pytest.mark.parametrize("token, expected", [(".", True), (",", True), ("##!", True), ("'", True), ("a", False),
                                              ("[SEP]", False), ("", False), ("5", False)])
def test_is_punctuation(token, expected):
    assert activations.is_punctuation(token) is expected


def test_find_word_matches_whole_words_only(packaged):
    tok = packaged.tokenizer
    enc = encode(tok, "The bank near the banking district and the river bank, bankrupt.")
    hits = similarity.find_word(enc, similarity.word_pieces(tok, "bank"))
    assert [enc.tokens[h[0]] for h in hits] == ["bank", "bank"]
    assert len(hits) == 2
    # a word split into pieces is found as its piece sequence, case-insensitively
    pieces = similarity.word_pieces(tok, "Hyperparameterization")
    assert len(pieces) > 1
    enc2 = encode(tok, "hyperparameterization is tedious", "We love HYPERPARAMETERIZATION.")
    hits2 = similarity.find_word(enc2, pieces)
    assert len(hits2) == 2 and all(len(h) == len(pieces) for h in hits2)
    assert enc2.sequence_ids[hits2[1][0]] == 1


def test_pool_is_mean_of_positions():
    hidden = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    np.testing.assert_allclose(similarity.pool(hidden, [1, 2]), hidden[:, 1:3].mean(1))
    with pytest.raises(ValueError):
        similarity.pool(hidden, [])
    with pytest.raises(ValueError):
        similarity.pool(hidden, [4])


def test_word_occurrences_reports_missing_and_bad_sentences(packaged):
    sentences = ["The python slept.", "No snake here.", "   ", "Python is a language."]
    occ = similarity.word_occurrences(packaged.encoder, packaged.tokenizer, "Python", sentences)
    cfg = packaged.config
    assert occ.vectors.shape == (2, cfg.num_hidden_layers + 1, cfg.hidden_size)
    assert occ.sentence_index.tolist() == [0, 3]
    assert occ.missing == [1]
    assert list(occ.errors) == [2]
    assert "python" not in occ.other_words
    assert occ.others.shape[0] == len(occ.other_words) > 0
    # the occurrence vector is the encoder's vector of that token
    act = activations.run(packaged.encoder, packaged.tokenizer, sentences[0])
    np.testing.assert_allclose(occ.vectors[0], act.hidden_states[:, 2], atol=1e-5)


@pytest.mark.parametrize("target", ["", "   "])
def test_word_occurrences_refuses_empty_target(packaged, target):
    with pytest.raises(TextError):
        similarity.word_occurrences(packaged.encoder, packaged.tokenizer, target, ["A sentence."])


def test_word_occurrences_target_beyond_truncation_is_missing(packaged):
    sentence = "word " * 600 + "python"
    occ = similarity.word_occurrences(packaged.encoder, packaged.tokenizer, "python", [sentence, "a python"])
    assert occ.missing == [0] and occ.truncated == [0]


def test_same_sense_more_similar_than_different_sense_in_upper_layers(packaged):
    occ = similarity.word_occurrences(packaged.encoder, packaged.tokenizer, "python", PYTHON_SENTENCES)
    same, diff = similarity.similarity_by_layer(occ.vectors, PYTHON_SENSES)
    assert same[-1] > diff[-1] + 0.05
    base, _ = similarity.random_pair_baseline(occ.others, occ.other_words)
    assert np.all(base[1:] < diff[1:])  # even different senses of one word beat random word pairs


def test_cosine_matrix_matches_definition():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 6))
    x[3] = 0
    sim = vectors.cosine_matrix(x)
    u = x[:3] / np.linalg.norm(x[:3], axis=1, keepdims=True)
    np.testing.assert_allclose(sim[:3, :3], u @ u.T, atol=1e-6)
    assert np.all(sim[3] == 0)
    with pytest.raises(ValueError):
        vectors.cosine_matrix(x[0])


def test_similarity_by_layer_groups_pairs_by_label():
    # layer 0: all identical; layer 1: senses orthogonal
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vectors = np.stack([np.stack([a, a]), np.stack([a, a]), np.stack([a, b]), np.stack([a, b])])  # (4, 2, 2)
    same, diff = similarity.similarity_by_layer(vectors, ["x", "x", "y", "y"])
    np.testing.assert_allclose(same, [1.0, 1.0])
    np.testing.assert_allclose(diff, [1.0, 0.0])
    same, diff = similarity.similarity_by_layer(vectors, ["", "", "", ""])
    assert np.all(np.isnan(same)) and np.all(np.isnan(diff))
    with pytest.raises(ValueError):
        similarity.similarity_by_layer(vectors, ["x"])


def test_random_pair_baseline_skips_pairs_of_the_same_word():
    e = np.eye(3, dtype=np.float32)
    vectors = np.stack([e[0], e[0], e[1], e[2]])[:, None, :]  # (4, 1, 3), same word -> same vector
    mean, std = similarity.random_pair_baseline(vectors, ["a", "a", "b", "c"], n_pairs=200)
    np.testing.assert_allclose(mean, [0.0], atol=1e-6)  # pairs of different words are orthogonal
    mean, _ = similarity.random_pair_baseline(vectors[:2], ["a", "a"])
    assert np.all(np.isnan(mean))


def test_pca_2d_shapes_and_small_inputs():
    rng = np.random.default_rng(0)
    pts, ratio = vectors.pca_2d(rng.normal(size=(6, 10)))
    assert pts.shape == (6, 2) and ratio.shape == (2,) and ratio[0] >= ratio[1]
    pts, ratio = vectors.pca_2d(np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]))
    assert pts.shape == (2, 2) and np.all(pts[:, 1] == 0)
    with pytest.raises(ValueError):
        vectors.pca_2d(np.ones((1, 3)))
    pts, ratio = vectors.pca_2d(np.ones((4, 3)))  # identical vectors (same word and position at layer 0)
    assert np.all(pts == 0) and np.all(ratio == 0)


def test_word_rows_show_normalization_and_unknowns(packaged):
    tok = packaged.tokenizer
    enc = encode(tok, "Café a\u200bb 😀 hyperparameterization", "Naïve")
    rows = activations.word_rows(enc, tok)
    by_typed = {r["typed"]: r for r in rows}
    assert by_typed["Café"]["normalized"] == "cafe"
    assert by_typed["a⟨U+200B⟩b"]["pieces"] == "ab"
    assert by_typed["😀"]["unknown"] and by_typed["😀"]["pieces"] == tok.unk_token
    assert by_typed["hyperparameterization"]["n_pieces"] > 1
    assert by_typed["Naïve"]["segment"] == "B" and by_typed["Naïve"]["normalized"] == "naive"


def test_show_invisible():
    assert activations.show_invisible("a\u200bb\tc\x07") == "a⟨U+200B⟩b⟨TAB⟩c⟨U+0007⟩"
    assert activations.show_invisible("plain text") == "plain text"
