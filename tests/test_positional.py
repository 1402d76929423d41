"""bertcore.readouts.positional: sinusoidal encodings (Vaswani et al. 2017, 3.5), cosine, PCA path, ranges."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity as sk_cosine

from bertcore.readouts import positional
from bertcore.readouts.positional import PositionRangeError


def test_sinusoidal_matches_the_paper_formula():
    pe = positional.sinusoidal(50, 16)
    assert pe.shape == (50, 16) and pe.dtype == np.float32
    for pos in (0, 1, 7, 49):
        for i in range(8):
            assert pe[pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)), abs=1e-6)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)), abs=1e-6)


def test_sinusoidal_equals_the_annotated_transformer_implementation():
    """The common torch formulation (exp of -log(10000) * 2i / d)."""
    n, d = 128, 64
    position = torch.arange(n).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * -(math.log(10000.0) / d))
    ref = torch.zeros(n, d)
    ref[:, 0::2] = torch.sin(position * div_term)
    ref[:, 1::2] = torch.cos(position * div_term)
    np.testing.assert_allclose(positional.sinusoidal(n, d), ref.numpy(), atol=2e-5)


def test_sinusoidal_position_zero_start_offset_and_odd_width():
    pe = positional.sinusoidal(10, 7)
    assert pe.shape == (10, 7)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0, 1, 0], atol=1e-7)
    np.testing.assert_allclose(positional.sinusoidal(5, 8, start=3), positional.sinusoidal(8, 8)[3:], atol=1e-6)
    assert np.abs(positional.sinusoidal(512, 384)).max() <= 1.0


def test_sinusoidal_dot_product_depends_only_on_the_offset():
    """PE(p) . PE(p + k) = sum_i cos(k w_i): the same for every p (what makes relative offsets readable)."""
    pe = positional.sinusoidal(300, 64).astype(np.float64)
    for k in (1, 5, 40):
        dots = np.einsum("pd,pd->p", pe[:-k], pe[k:])
        assert np.ptp(dots) < 1e-4


@pytest.mark.parametrize("args", [(0, 8), (8, 0), (4, 8, 1.0), (4, 8, 10000.0, -1)])
def test_sinusoidal_rejects_bad_sizes(args):
    with pytest.raises(ValueError):
        positional.sinusoidal(*args)


def test_cosine_similarity_matches_sklearn_and_handles_zero_rows():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 9))
    sim = positional.cosine_similarity(x)
    np.testing.assert_allclose(sim, sk_cosine(x), atol=1e-6)
    assert np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T)
    x[3] = 0
    sim = positional.cosine_similarity(x)
    assert np.isfinite(sim).all() and sim[3, 3] == 1 and np.all(np.delete(sim[3], 3) == 0)
    with pytest.raises(ValueError, match="positions, dims"):
        positional.cosine_similarity(np.zeros(5))


def test_pca_path_of_a_line_is_one_dimensional_and_ordered():
    direction = np.random.default_rng(1).normal(size=32)
    x = np.arange(40)[:, None] * direction[None]
    path = positional.pca_path(x)
    assert path.coords.shape == (40, 2)
    assert path.explained[0] == pytest.approx(1.0, abs=1e-9)
    steps = np.diff(path.coords[:, 0])
    assert np.all(steps > 0) or np.all(steps < 0)


def test_pca_path_of_sinusoids_traces_the_slowest_circle():
    """Sinusoids lie on circles: the first two components carry comparable variance."""
    path = positional.pca_path(positional.sinusoidal(64, 32))
    assert path.explained.sum() > 0.2 and path.explained[1] > 0.3 * path.explained[0]


@pytest.mark.parametrize("x", [np.ones((1, 5)), np.ones((6, 5)), np.zeros((3, 4))])
def test_pca_path_degenerate_inputs_give_zeros_not_errors(x):
    path = positional.pca_path(x)
    assert path.coords.shape == (x.shape[0], 2) and np.all(path.coords == 0) and np.all(path.explained == 0)


def test_pca_path_two_points():
    path = positional.pca_path(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert path.explained[0] == pytest.approx(1.0) and path.explained[1] == 0


@pytest.mark.parametrize("start,stop,match", [(0, 513, "512 positions"), (-1, 10, ">= 0"), (10, 10, "empty"),
                                              (600, 700, "512 positions")])
def test_check_range_messages(start, stop, match):
    with pytest.raises(PositionRangeError, match=match):
        positional.check_range(start, stop, 512)


def test_learned_positions_are_the_model_table(packaged):
    table = packaged.encoder.embeddings.position_embeddings.weight
    rows = positional.learned_positions(packaged.model, 10, 42)
    assert rows.shape == (32, packaged.config.hidden_size)
    np.testing.assert_array_equal(rows, table[10:42].detach().numpy())
    assert positional.learned_positions(packaged.model).shape[0] == packaged.config.max_position_embeddings
    with pytest.raises(PositionRangeError, match="512 positions"):
        positional.learned_positions(packaged.model, 500, 520)


def test_views_and_neighbour_similarity(packaged):
    v = positional.views(positional.learned_positions(packaged.model, 0, 64))
    assert v.table.shape == (64, 384) and v.cosine.shape == (64, 64) and v.pca.coords.shape == (64, 2)
    assert v.norms.shape == (64,)
    near = positional.neighbour_similarity(v.cosine, 10)
    assert near.shape == (10,)
    assert near[0] == pytest.approx(np.diagonal(v.cosine, 1).mean())
    s = positional.views(positional.sinusoidal(64, 384))
    near_s = positional.neighbour_similarity(s.cosine, 30)
    assert near_s[0] > near_s[-1], "sinusoids: nearby positions are more alike than distant ones"
    assert positional.neighbour_similarity(np.eye(1), 5).shape == (0,)
