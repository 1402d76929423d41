"""bertcore.analysis.papers.findings / evalset / published and positional.position_regression: the published
measures on constructed inputs whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bertcore.readouts import positional
from bertcore.analysis.papers import evalset, published
from bertcore.analysis.papers import findings as F

from tests.conftest import TINY_CORPUS


def stack(*maps: np.ndarray) -> np.ndarray:
    """(T, T) maps -> (1, n, T, T): one layer, one head per map."""
    return np.stack(maps)[None].astype(np.float32)


def previous_token_map(t: int) -> np.ndarray:
    a = np.zeros((t, t))
    a[0, 0] = 1.0
    a[np.arange(1, t), np.arange(t - 1)] = 1.0
    return a


def tokens_of_pair(n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[CLS] a.. [SEP] b.. [SEP]: (special, segment, sep) flags."""
    t = n_a + n_b + 3
    special = np.zeros(t, bool)
    sep = np.zeros(t, bool)
    special[[0, n_a + 1, t - 1]] = True
    sep[[n_a + 1, t - 1]] = True
    segment = np.array([0] * (n_a + 2) + [1] * (n_b + 1))
    return special, segment, sep


# ----------------------------------------------------------------------------- Clark et al.
def test_all_diagonal_offset_1_map_is_100_percent_previous_token():
    attn = stack(previous_token_map(10), np.full((10, 10), 0.1))
    prev = F.offset_share(attn, -1)
    assert prev[0, 0] == pytest.approx(1.0) and prev[0, 1] == pytest.approx(0.1)
    assert F.offset_share(attn, 1)[0, 0] == pytest.approx(0.0)
    assert F.positional_heads(prev) == [(0, 0)]  # (block, head), 0-based
    assert F.positional_heads(F.offset_share(attn, 1)) == []


def test_every_row_on_sep_gives_share_1():
    _, _, sep = tokens_of_pair(3, 4)
    t = len(sep)
    a = np.zeros((t, t))
    a[:, np.flatnonzero(sep)] = 0.5  # two [SEP]s, half each
    share = F.share_to(stack(a), sep)
    assert share.shape == (1, 1) and share[0, 0] == pytest.approx(1.0)
    cls = np.zeros(t, bool)
    cls[0] = True
    assert F.share_to(stack(a), cls)[0, 0] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="one flag per token"):
        F.share_to(stack(a), sep[:-1])


def test_entropy_in_nats_uniform_and_one_hot_and_broad_heads():
    t = 16
    attn = stack(np.full((t, t), 1 / t), np.eye(t))
    ent = F.entropy(attn)
    assert ent.shape == (1, 2, t)
    np.testing.assert_allclose(ent[0, 0], math.log(t), rtol=1e-6)
    np.testing.assert_allclose(ent[0, 1], 0.0, atol=1e-9)
    mean_max = F.max_weight(attn).mean(-1)
    assert F.broad_heads(mean_max).tolist() == [[True, False]]  # 1/16 < 10%, one-hot is 100%


# ----------------------------------------------------------------------------- Kovaleva et al.
def test_pattern_classifier_on_constructed_maps():
    special, segment, sep = tokens_of_pair(6, 6)
    t = len(special)
    vertical = np.zeros((t, t))
    vertical[:, np.flatnonzero(sep)] = 0.5
    diagonal = previous_token_map(t)
    mixed = 0.5 * vertical + 0.5 * diagonal
    block = np.zeros((t, t))
    for s in (0, 1):
        inside = (segment == s) & ~special
        block[np.ix_(segment == s, inside)] = 1 / inside.sum()
    rng = np.random.default_rng(0)
    hetero = rng.dirichlet(np.ones(t) * 0.3, size=t)
    hetero[:, special] = 0  # no special tokens, spread everywhere: no rule applies
    hetero /= hetero.sum(-1, keepdims=True)
    counts = F.pattern_counts(stack(vertical, diagonal, mixed, block, hetero), special, segment)
    assert counts.tolist() == [[1, 1, 1, 1, 1]]  # one head of each type, in PATTERNS order
    scores = F.pattern_scores(stack(block), special, segment)
    assert scores["block"][0, 0] == pytest.approx(1.0) and scores["vertical"][0, 0] == 0
    single = F.pattern_scores(stack(block), special, np.zeros(t, int))
    assert np.isnan(single["block"][0, 0])  # one segment: no block score
    assert F.pattern_type(0.1, 0.1, float("nan")) == "heterogeneous"


# ----------------------------------------------------------------------------- Ethayarajh
def test_identical_vectors_have_self_similarity_1_and_intra_similarity_1():
    v = np.tile(np.random.default_rng(0).normal(size=(1, 3, 8)), (5, 1, 1))  # (5 contexts, 3 layers, 8)
    np.testing.assert_allclose(F.self_similarity(v, ["bank"] * 5), 1.0, atol=1e-6)
    np.testing.assert_allclose(F.intra_similarity(v), 1.0, atol=1e-9)


def test_anisotropy_baseline_correction_on_a_known_case():
    """Word a is always e1, word b always (e1 + e2)/sqrt 2: a random pair of different words has cosine 1/sqrt 2,
    each word's self-similarity is 1, so the adjusted self-similarity is 1 - 1/sqrt 2."""
    e1, e2 = np.eye(4)[0], np.eye(4)[1]
    a, b = e1, (e1 + e2) / math.sqrt(2)
    vectors = np.stack([a, b, a, b, a, b])[:, None, :]  # (6 occurrences, 1 layer, 4)
    words = ["a", "b"] * 3
    base = F.anisotropy(vectors, words, n_pairs=200)
    np.testing.assert_allclose(base, [1 / math.sqrt(2)], atol=1e-9)
    raw = F.self_similarity(vectors, words)
    np.testing.assert_allclose(raw, [1.0], atol=1e-6)
    np.testing.assert_allclose(F.adjust(raw, base), [1 - 1 / math.sqrt(2)], atol=1e-6)
    assert np.isnan(F.anisotropy(vectors[:2], ["a", "a"])).all()  # one distinct word: no pair


def test_intra_similarity_of_two_orthogonal_words():
    v = np.eye(2)[:, None, :]  # two words, one layer: each has cosine 1/sqrt 2 with the mean
    np.testing.assert_allclose(F.intra_similarity(v), [1 / math.sqrt(2)], atol=1e-9)
    assert np.isnan(F.intra_similarity(v[:1])).all()


# ----------------------------------------------------------------------------- Wang & Chen
def test_position_regression_of_a_linear_table_is_exact_and_random_is_not():
    rng = np.random.default_rng(0)
    table = np.arange(64)[:, None] * rng.normal(size=(1, 16)) + rng.normal(size=(1, 16))
    assert positional.position_regression(table) == pytest.approx(0.0, abs=1e-9)
    assert positional.position_regression(positional.sinusoidal(512, 384)) < 0.5
    assert positional.position_regression(rng.normal(size=(64, 16))) > 5
    with pytest.raises(ValueError, match="at least 5 rows"):
        positional.position_regression(table[:3])


# ----------------------------------------------------------------------------- published numbers
def test_published_numbers_carry_citations_and_the_comparison_rules():
    f = published.finding("cls_entropy_last")
    assert f.value == 3.89 and f.unit == "nats" and "Clark" in f.citation and "3.3" in f.citation
    assert published.finding("prev_heads").value == 4 and published.finding("next_heads").value == 5
    assert all(f.where and f.paper.url.startswith("https://") for f in published.FINDINGS.values())
    with pytest.raises(KeyError, match="known"):
        published.finding("nope")
    from bertcore.modeling.config import PRESETS

    assert published.comparable(PRESETS["base"]) and not published.comparable(PRESETS["nano"])
    assert published.differences(PRESETS["base"]) == []
    assert "2 layers instead of 12" in published.differences(PRESETS["nano"])
    # 0-based blocks: bert-base's layers 6-10 (blocks 5-9) are layers 3-5 (blocks 2-4) of a 6-layer model
    assert published.relative_layers(5, 9, 6) == (2, 4) and published.relative_layers(5, 9, 12) == (5, 9)
    assert published.relative_layers(10, 11, 6) == (5, 5) and published.relative_layers(0, 1, 2) == (0, 0)
    assert published.SYNTAX_HEADS["det"].name == "8-11" and (published.SYNTAX_HEADS["det"].layer,
                                                               published.SYNTAX_HEADS["det"].head) == (7, 10)


# ----------------------------------------------------------------------------- evaluation set
def test_heldout_documents_are_the_pretraining_validation_documents(packaged):
    """The documents held out here are exactly those whose NSP pairs form pretraining's validation split."""
    from bertcore import data

    corpus = str(TINY_CORPUS)
    held = evalset.heldout_documents(corpus, seed=0, val_fraction=0.3)
    docs = data.load_documents(corpus)["text"]
    assert 2 <= len(held) < len(docs)
    pre = data.build_pretraining_data(packaged.tokenizer, corpus, 64, seed=0, val_fraction=0.3)
    held_ids = {t for d in held for t in packaged.tokenizer(d, add_special_tokens=False)["input_ids"]}
    train_only = {t for d in docs if d not in held
                  for t in packaged.tokenizer(d, add_special_tokens=False)["input_ids"]} - held_ids
    specials = {packaged.tokenizer.cls_token_id, packaged.tokenizer.sep_token_id}
    val_ids = {t for row in pre.val["input_ids"] for t in row} - specials
    assert val_ids <= held_ids and not (val_ids & train_only)


def test_segments_fit_128_tokens_and_findings_run_on_a_tiny_model(packaged):
    from bertcore.modeling.config import BertConfig
    from bertcore.modeling.model import BertModel

    docs = evalset.heldout_documents(str(TINY_CORPUS), val_fraction=0.5)
    segs = evalset.build_segments(packaged.tokenizer, docs * 3, n_segments=4, max_tokens=40)
    assert 1 <= len(segs) <= 4
    for s in segs:
        ids = packaged.tokenizer(s.text_a, s.text_b)["input_ids"]
        assert len(ids) <= 40 and s.part_a and s.part_b
    config = BertConfig(vocab_size=packaged.config.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    model = BertModel(config).eval()
    seen = []
    r = evalset.run_findings(model, packaged.tokenizer, segs, progress=lambda i, n: seen.append((i, n)))
    assert seen[-1] == (len(segs), len(segs))
    assert r.to_sep.shape == (2, 4) and r.patterns.shape == (2, 5) and r.anisotropy.shape == (3,)
    assert r.patterns.sum() == len(segs) * 2 * 4
    np.testing.assert_allclose(r.pattern_shares.sum(-1), 1.0)
    total = r.to_cls + r.to_sep  # shares are probabilities
    assert np.all((total >= 0) & (total <= 1 + 1e-6)) and np.all(r.entropy > 0)
    with pytest.raises(ValueError, match="empty"):
        evalset.run_findings(model, packaged.tokenizer, [])
