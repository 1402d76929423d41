"""bertcore.analysis.representations.compare: linear CKA (Kornblith et al. 2019) and Jensen-Shannon distance per
head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from bertcore.analysis.representations import compare
from bertcore.loading.sources import ModelSource, load
from bertcore.tokenization.tokenizer import TextError

from tests.conftest import save_with_tokenizer, tiny_bert

SENTENCES = ["The bank raised its rates again.", "She sat on the bank of the river.",
             "The striker scored twice in the final.", "Parliament votes on the budget next week."]
TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 128}


# ----------------------------------------------------------------------------- tiny saved models
def save_tiny(folder: Path, state: dict | None = None, vocab: Path | None = None, **changes) -> Path:
    """A transformers BertModel (random, seeded) saved with save_pretrained, with a WordPiece vocab."""
    model = tiny_bert(transformers.BertModel, **{**TINY, **changes})
    if state is not None:
        model.load_state_dict(state)
    return save_with_tokenizer(folder, model, vocab or "vocab")


def permuted_state(state: dict, perm: torch.Tensor, ffn_perm: torch.Tensor) -> dict:
    """The same network with its hidden neurons (residual stream, H) shuffled by ``perm`` and its
    feed-forward neurons by ``ffn_perm``: every hidden state becomes ``h[..., perm]``, every
    attention map is unchanged (an orthogonal transform of each representation)."""
    out = {}
    for key, w in state.items():
        w = w.clone()
        if key.endswith(("word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight")):
            w = w[:, perm]
        elif "LayerNorm" in key:
            w = w[perm]
        elif any(f"attention.self.{n}.weight" in key for n in ("query", "key", "value")):
            w = w[:, perm]
        elif key.endswith(("attention.output.dense.weight", "pooler.dense.weight")):
            w = w[perm][:, perm] if "pooler" in key else w[perm]
        elif key.endswith(("attention.output.dense.bias", "pooler.dense.bias")):
            w = w[perm]
        elif key.endswith("intermediate.dense.weight"):
            w = w[ffn_perm][:, perm]
        elif key.endswith("intermediate.dense.bias"):
            w = w[ffn_perm]
        elif key.endswith("output.dense.weight"):  # the layer's FFN output (H x I)
            w = w[perm][:, ffn_perm]
        elif key.endswith("output.dense.bias"):
            w = w[perm]
        out[key] = w
    return out


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """``(base, permuted copy, copy with its last layer perturbed)`` as bertcore LoadedModels."""
    root = tmp_path_factory.mktemp("cmp")
    base = save_tiny(root / "base")
    state = transformers.BertModel.from_pretrained(str(base)).state_dict()
    g = torch.Generator().manual_seed(1)
    perm, ffn = torch.randperm(TINY["hidden_size"], generator=g), torch.randperm(TINY["intermediate_size"], generator=g)
    shuffled = save_tiny(root / "perm", permuted_state(state, perm, ffn))
    tuned = {k: v + (0.3 * torch.randn(v.shape, generator=g) if k.startswith("encoder.layer.2.") else 0)
             for k, v in state.items()}
    perturbed = save_tiny(root / "tuned", tuned)
    return [load(ModelSource("local", str(f))) for f in (base, shuffled, perturbed)], perm


# ----------------------------------------------------------------------------- CKA on arrays
def test_cka_invariances():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 20))
    q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    assert compare.linear_cka(x, x) == pytest.approx(1.0, abs=1e-9)
    assert compare.linear_cka(x, x @ q) == pytest.approx(1.0, abs=1e-9)  # orthogonal transform
    assert compare.linear_cka(x, 3.0 * x + 5.0) == pytest.approx(1.0, abs=1e-9)  # scale and shift
    y = rng.normal(size=(50, 20))
    assert compare.linear_cka(x, y) < 0.6
    assert compare.linear_cka(x, np.ones((50, 3))) == 0.0  # a constant representation


def test_cka_matches_the_feature_space_formula():
    """Kornblith et al. eq. 2 written out: ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F), centred columns."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(30, 8)), rng.normal(size=(30, 5)) + rng.normal(size=(30, 1))
    xc, yc = x - x.mean(0), y - y.mean(0)
    expected = (np.linalg.norm(yc.T @ xc, "fro") ** 2
                / (np.linalg.norm(xc.T @ xc, "fro") * np.linalg.norm(yc.T @ yc, "fro")))
    assert compare.linear_cka(x, y) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [6, 40])  # fewer tokens than features (Gram form) and more (feature form)
def test_cka_matrix_equals_pairwise_cka(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=(3, n, 12)), rng.normal(size=(4, n, 10))
    b[1] = a[2] @ np.linalg.qr(rng.normal(size=(12, 12)))[0][:, :10]
    m = compare.cka_matrix(a, b)
    assert m.shape == (3, 4)
    np.testing.assert_allclose(m, [[compare.linear_cka(x, y) for y in b] for x in a], atol=1e-10)


def test_cka_bad_shapes():
    with pytest.raises(ValueError, match="same examples"):
        compare.linear_cka(np.zeros((4, 2)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        compare.cka_matrix(np.zeros((2, 1, 4)), np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match="layer x layer"):
        compare.layerwise_cka(np.zeros((2, 5, 4)), np.zeros((3, 5, 4)))


# ----------------------------------------------------------------------------- Jensen-Shannon
def test_js_identical_is_zero_and_disjoint_is_one():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=(2, 3, 7))
    np.testing.assert_allclose(compare.js_distance(p, p), 0.0, atol=1e-7)
    np.testing.assert_allclose(compare.head_js(p[None], p[None]), 0.0, atol=1e-7)
    assert compare.js_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)


def test_js_equals_scipy():
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(9), size=(2, 3, 9)), rng.dirichlet(np.ones(9), size=(2, 3, 9))
    q[0, 0, 0, :4] = 0.0  # zeros on one side
    q[0, 0, 0] /= q[0, 0, 0].sum()
    np.testing.assert_allclose(compare.js_distance(p, q), jensenshannon(p, q, axis=-1, base=2), atol=1e-6)


def test_js_known_pair():
    """p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4): KL(p||m) = 1/2 log2(2/3) + 1/2 log2 2, KL(q||m) = log2(4/3)."""
    kl_p = 0.5 * np.log2(0.5 / 0.75) + 0.5 * np.log2(0.5 / 0.25)
    kl_q = np.log2(1 / 0.75)
    expected = np.sqrt(0.5 * kl_p + 0.5 * kl_q)  # 0.5579
    assert compare.js_distance(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(0.5579, abs=1e-4)


def test_head_js_averages_rows_and_checks_shapes():
    a = np.zeros((1, 2, 2, 2))
    a[..., 0] = 1.0  # every row on token 0
    b = a.copy()
    b[0, 1, 1] = [0.0, 1.0]  # head 2, query 2 moves to token 1: one row of two at distance 1
    np.testing.assert_allclose(compare.head_js(a, b), [[0.0, 0.5]], atol=1e-7)
    with pytest.raises(ValueError, match="layers x heads"):
        compare.head_js(np.zeros((2, 3, 4, 4)), np.zeros((2, 4, 4, 4)))


# ----------------------------------------------------------------------------- two models
def test_model_with_itself(tiny_models):
    (base, _, _), _ = tiny_models
    cmp = compare.run_pair(base.encoder, base.tokenizer, base.encoder, base.tokenizer, SENTENCES)
    np.testing.assert_allclose(cmp.cka, 1.0, atol=1e-6)
    np.testing.assert_allclose(cmp.js, 0.0, atol=1e-6)
    assert cmp.cka.shape == (TINY["num_hidden_layers"] + 1,) and cmp.js.shape == (3, 4)
    assert cmp.tokens == sum(len(r.tokens) - 2 for r in cmp.runs_a)  # [CLS]/[SEP] left out


def test_model_and_a_neuron_permuted_copy(tiny_models):
    (base, shuffled, _), perm = tiny_models
    cmp = compare.run_pair(base.encoder, base.tokenizer, shuffled.encoder, shuffled.tokenizer, SENTENCES,
                           include_special=True)
    # the copy really is the same network with shuffled neurons ...
    np.testing.assert_allclose(cmp.runs_b[0].hidden_states, cmp.runs_a[0].hidden_states[..., perm.numpy()], atol=1e-4)
    assert not np.allclose(cmp.runs_b[0].hidden_states, cmp.runs_a[0].hidden_states, atol=1e-2)
    # ... and CKA sees through it
    np.testing.assert_allclose(cmp.cka, 1.0, atol=1e-5)
    np.testing.assert_allclose(cmp.js, 0.0, atol=1e-3)


def test_a_perturbed_last_layer_shows_in_the_last_layer_only(tiny_models):
    (base, _, tuned), _ = tiny_models
    cmp = compare.run_pair(base.encoder, base.tokenizer, tuned.encoder, tuned.tokenizer, SENTENCES)
    np.testing.assert_allclose(cmp.cka[:3], 1.0, atol=1e-5)  # embeddings, layers 1-2 unchanged
    assert cmp.cka[3] < 0.99
    np.testing.assert_allclose(cmp.js[:2], 0.0, atol=1e-5)
    assert cmp.js[2].min() > 0.01
    assert cmp.cka_matrix.shape == (4, 4)


def test_different_depths_give_the_matrix_only(tiny_models, tmp_path):
    (base, _, _), _ = tiny_models
    other = load(ModelSource("local", str(save_tiny(tmp_path / "deep", num_hidden_layers=2, hidden_size=16))))
    cmp = compare.run_pair(base.encoder, base.tokenizer, other.encoder, other.tokenizer, SENTENCES[:2])
    assert cmp.cka is None and cmp.js is None
    assert cmp.cka_matrix.shape == (4, 3)


def test_models_of_different_lengths_read_the_same_tokens(tiny_models, tmp_path):
    (base, _, _), _ = tiny_models  # 128 positions
    short = load(ModelSource("local", str(save_tiny(tmp_path / "short", max_position_embeddings=64))))
    cmp = compare.run_pair(base.encoder, base.tokenizer, short.encoder, short.tokenizer, ["word " * 100, "a b c"])
    assert len(cmp.runs_a[0].tokens) == len(cmp.runs_b[0].tokens) == 64
    assert cmp.runs_a[0].encoding.num_truncated == 38


def test_different_tokenizers_are_refused(tiny_models, tmp_path):
    (base, _, _), _ = tiny_models
    vocab = tmp_path / "vocab.txt"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bank", "##s", "."]
    vocab.write_text("\n".join(words + [f"w{i}" for i in range(100)]) + "\n")
    other = load(ModelSource("local", str(save_tiny(tmp_path / "small_vocab", vocab=vocab))))
    with pytest.raises(compare.TokenizationMismatch, match="cannot be compared token by token"):
        compare.run_pair(base.encoder, base.tokenizer, other.encoder, other.tokenizer, SENTENCES)


def test_sentences_of():
    assert compare.sentences_of(" a \n\n b\n") == ["a", "b"]
    with pytest.raises(TextError, match="empty"):
        compare.sentences_of(" \n \t")
    with pytest.raises(TextError, match="at most"):
        compare.sentences_of("x\n" * (compare.MAX_SENTENCES + 1))
