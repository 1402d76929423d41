"""bertcore.analysis.attention.words: word pieces merged into words keep every attention row a distribution."""

import numpy as np
import pytest

from bertcore.analysis.attention import words
from bertcore.tokenization.tokenizer import encode

from tests.conftest import random_attention


def test_word_merge_preserves_row_sums_and_groups_pieces(packaged):
    enc = encode(packaged.tokenizer, "Tokenization of unbelievably long words", "Snuffleupagus agreed.")
    groups = words.word_groups(enc.tokens, enc.word_ids)
    assert groups.labels[0] == "[CLS]" and "tokenization" in groups.labels and "snuffleupagus" in groups.labels
    assert groups.num_units < len(enc.tokens)
    att = random_attention(np.random.default_rng(0), layers=2, heads=3, t=len(enc.tokens))
    merged = words.merge_attention(att, groups)
    assert merged.shape == (2, 3, groups.num_units, groups.num_units)
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-6)
    # to a word = sum over its pieces; from a word = mean over its pieces
    w = groups.labels.index("tokenization")
    rows = groups.members[w]
    np.testing.assert_allclose(merged[0, 0, 0, w], att[0, 0, 0, rows].sum(), atol=1e-6)
    np.testing.assert_allclose(merged[0, 0, w, 0], att[0, 0, rows, 0].mean(), atol=1e-6)
    np.testing.assert_allclose(words.merge_vector(att[0, 0, 0], groups).sum(), 1.0)
    with pytest.raises(ValueError, match="merge"):
        words.merge_attention(att[..., :-1, :-1], groups)
    # the contiguous fast path equals the general one-hot product (pieces given out of order)
    shuffled = words.WordGroups(groups.labels[::-1], groups.members[::-1], groups.assign[:, ::-1],
                                [groups.num_units - 1 - u for u in groups.token_to_unit])
    np.testing.assert_allclose(words.merge_attention(att, shuffled)[..., ::-1, ::-1], merged, atol=1e-6)
