"""bertcore.analysis.representations.whatif: WordPiece alignment (difflib), identical inputs give exactly zero
difference, a one-word change moves the similarity only where expected, JS over aligned keys, fill-mask Δ."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from bertcore.analysis.attention.activations import Activations
from bertcore.analysis.representations import whatif
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.modeling.model import BertModel
from bertcore.loading.sources import packaged_model_dir
from bertcore.tokenization.tokenizer import TextError, load_tokenizer

from tests.conftest import tiny_bert

A = "The keys to the cabinet [MASK] on the table."
B = "The key to the cabinet [MASK] on the table."


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(packaged_model_dir())


@pytest.fixture(scope="module")
def mlm():
    return tiny_bert(BertForMaskedLM, 0, max_position_embeddings=64)


# ----------------------------------------------------------------------------- alignment
def test_align_identity_insertion_and_replacement():
    same = whatif.align(list("abc"), list("abc"))
    assert same.a.tolist() == same.b.tolist() == [0, 1, 2] and same.same.all() and not same.only_a + same.only_b
    inserted = whatif.align(["[CLS]", "keys", "are", "[SEP]"], ["[CLS]", "keys", "are", "not", "[SEP]"])
    assert inserted.a.tolist() == [0, 1, 2, 3] and inserted.b.tolist() == [0, 1, 2, 4]
    assert inserted.only_b == [3] and inserted.only_a == []
    replaced = whatif.align(["[CLS]", "the", "keys", "are", "[SEP]"], ["[CLS]", "the", "key", "is", "[SEP]"])
    assert replaced.a.tolist() == replaced.b.tolist() == [0, 1, 2, 3, 4]  # equal-length replacement: one for one
    assert replaced.same.tolist() == [True, True, False, False, True]
    uneven = whatif.align(["x", "keys", "y"], ["x", "key", "##s", "y"])  # 1 piece -> 2: no partner
    assert uneven.a.tolist() == [0, 2] and uneven.b.tolist() == [0, 3]
    assert uneven.only_a == [1] and uneven.only_b == [1, 2]
    assert len(whatif.align([], [])) == 0


# ----------------------------------------------------------------------------- identical inputs: exactly zero
def test_identical_inputs_give_exactly_zero_difference(mlm, tok):
    result = whatif.compare(mlm, tok, A, A)
    assert result.identical and len(result.alignment) == len(result.act_a.tokens)
    assert np.all(result.cosine == 1.0) and np.all(result.js == 0.0) and np.all(result.head_js == 0.0)
    assert np.all(result.dropped_a == 0.0) and np.all(result.dropped_b == 0.0)
    (m,) = result.masks
    assert m.top_a == m.top_b and np.all(m.delta == 0.0)


def test_equal_runs_computed_twice_give_exactly_zero(mlm, tok):
    """Not only the shortcut (identical inputs run once): the measures are exactly 0 on equal, separate arrays."""
    act = whatif.compare(mlm, tok, A, A).act_a
    twin = Activations(copy.deepcopy(act.encoding), act.attentions.copy(), act.hidden_states.copy())
    result = whatif.compare_activations(act, twin)
    assert result.identical
    assert np.all(result.cosine == 1.0) and np.all(result.js == 0.0)


# ----------------------------------------------------------------------------- a one-word change
def test_one_word_change_moves_only_that_token_at_the_embeddings(mlm, tok):
    result = whatif.compare(mlm, tok, A, B)
    assert not result.identical and result.labels()[2] == "keys→key"
    changed = ~result.alignment.same
    assert changed.tolist() == [i == 2 for i in range(len(result.alignment))]
    # layer 0 (embeddings: token + position + segment): only the replaced token moves
    assert np.all(result.cosine[0, ~changed] == 1.0) and result.cosine[0, changed][0] < 0.99
    # every later layer mixes in the context: the other tokens move too, but less than the edited one
    assert np.all(result.cosine[1:, ~changed] < 1.0)
    assert np.all(result.cosine[1:, changed][:, 0] < result.cosine[1:, ~changed].mean(1))
    assert result.js.shape == (2, 4, len(result.alignment)) and np.all(result.head_js > 0)


def test_an_insertion_shifts_positions_only_after_it(mlm, tok):
    result = whatif.compare(mlm, tok, "The keys are here.", "The keys are not here.")
    al = result.alignment
    assert al.only_b == [4] and al.only_a == [] and al.same.all()
    shifted = al.a != al.b  # tokens after "not": a new position embedding
    assert np.all(result.cosine[0, ~shifted] == 1.0) and np.all(result.cosine[0, shifted] < 1.0)
    assert np.all(result.dropped_a == 0.0) and np.all(result.dropped_b > 0.0)  # attention on "not" is left out


def test_js_is_over_aligned_keys_renormalised():
    al = whatif.align(["a", "b", "c"], ["a", "x", "c"])  # b / x replaced one for one: all paired
    al2 = whatif.align(["a", "c"], ["a", "x", "c"])  # x inserted: key x left out of B's rows
    attn_a = np.array([[[[0.5, 0.5], [0.5, 0.5]]]], dtype=np.float32)  # (1, 1, 2, 2)
    attn_b = np.array([[[[0.25, 0.5, 0.25], [0.1, 0.8, 0.1], [0.4, 0.2, 0.4]]]], dtype=np.float32)
    js, dropped_a, dropped_b = whatif.aligned_js(attn_a, attn_b, al2)
    np.testing.assert_allclose(js, 0.0, atol=1e-7)  # B's rows over a and c are (0.5, 0.5) once renormalised
    assert dropped_a[0, 0] == 0.0 and dropped_b[0, 0] == pytest.approx((0.5 + 0.2) / 2)
    with pytest.raises(ValueError, match="one model"):
        whatif.aligned_js(attn_a, np.zeros((2, 1, 2, 2)), al)


# ----------------------------------------------------------------------------- fill-mask and bad input
def test_fill_mask_delta_and_models_without_an_mlm_head(mlm, tok):
    result = whatif.compare(mlm, tok, A, B, k=3)
    (m,) = result.masks
    assert len(m.top_a) == len(m.top_b) == 3 and m.position_a == m.position_b == 6
    assert m.candidates[:3] == m.top_a and set(m.top_b) <= set(m.candidates)
    np.testing.assert_allclose(m.p_a[:3], m.probs_a) and np.testing.assert_allclose(m.delta, m.p_b - m.p_a)
    assert np.abs(m.delta).max() > 0
    two = whatif.compare(mlm, tok, A, B.replace("table", "[MASK]"))
    assert len(two.masks) == 1 and two.unpaired_masks == 1
    encoder = tiny_bert(BertModel, 0, max_position_embeddings=64)
    assert whatif.compare(encoder, tok, A, B).masks is None
    assert whatif.compare(mlm, tok, "No mask here.", "No mask there.").masks == []


def test_bad_b_raises_or_is_cut(mlm, tok):
    with pytest.raises(TextError, match="empty"):
        whatif.compare(mlm, tok, A, "   ")
    long = whatif.compare(mlm, tok, A, "word " * 100)
    assert long.act_b.encoding.num_truncated > 0 and len(long.act_b.tokens) == 64
    odd = whatif.compare(mlm, tok, A, "😀 zero\u200bwidth مرحبا \u0000 [MASK]")
    assert np.isfinite(odd.cosine).all() and np.isfinite(odd.js).all()
