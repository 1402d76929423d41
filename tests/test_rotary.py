"""Rotary position embeddings (bertcore.modeling.rotary): transformers' frequencies, the relative property checked
numerically, the long-range decay (Su et al. 2021, section 3.4.3), and each head's attention
by offset (bertcore.readouts.positional.attention_by_offset)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from bertcore.readouts import positional


from bertcore.modeling import rotary
def test_frequencies_are_transformers_modernbert_ones():
    cfg = transformers.ModernBertConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=3,
                                        global_rope_theta=160_000.0, local_rope_theta=10_000.0)
    emb = transformers.models.modernbert.modeling_modernbert.ModernBertRotaryEmbedding(cfg)
    assert torch.equal(rotary.inverse_frequencies(16, 160_000.0), emb.full_attention_inv_freq)
    assert torch.equal(rotary.inverse_frequencies(16, 10_000.0), emb.sliding_attention_inv_freq)
    x = torch.randn(1, 4, 7, 16, dtype=torch.float64)
    pos = torch.arange(7)[None]
    cos, sin = rotary.cos_sin(pos, emb.full_attention_inv_freq, torch.float64)
    theirs_cos, theirs_sin = emb(x, pos, "full_attention")
    assert torch.equal(cos, theirs_cos) and torch.equal(sin, theirs_sin)
    ours = rotary.apply_rotary(x, x, cos, sin)[0]
    theirs = transformers.models.modernbert.modeling_modernbert.apply_rotary_pos_emb(x, x, cos, sin)[0]
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("base", [10_000.0, 160_000.0])
def test_dot_product_depends_only_on_the_distance(base):
    """|q(m).k(n) - q(m+s).k(n+s)| < 1e-5 for every shift tested, while the score does change
    with the distance itself."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(64, generator=g, dtype=torch.float64), torch.randn(64, generator=g, dtype=torch.float64)
    pairs = [(0, 0), (5, 2), (2, 9), (40, 7), (100, 163)]
    assert rotary.shift_error(q, k, base, pairs, [1, 3, 17, 100, 1000, 8000]) < 1e-5
    grid = rotary.score_grid(q, k, 24, base).numpy()
    for offset in range(-23, 24):
        diagonal = np.diagonal(grid, offset)
        assert np.ptp(diagonal) < 1e-9
    assert np.ptp([np.diagonal(grid, o)[0] for o in range(-5, 6)]) > 1e-2
    # a rotation that is not one (angles not proportional to the position) breaks it
    bad = torch.stack([rotary.rotate(q, torch.tensor([p ** 1.5]), base)[0] for p in (2, 5)])
    good_k = rotary.rotate(k, torch.tensor([0.0, 3.0]), base)
    assert abs(float(bad[0] @ good_k[0] - bad[1] @ good_k[1])) > 1e-3


def test_long_range_decay_starts_at_one_and_falls():
    d = torch.arange(0.0, 3000.0)
    small, large = rotary.long_range_decay(64, 10_000.0, d), rotary.long_range_decay(64, 160_000.0, d)
    assert float(small[0]) == pytest.approx((1 + 32) / 2)  # |S_j(0)| = j: the mean of 1..32
    assert small[1000:].max() < small[0] / 2 and small[2000:].mean() < small[10:20].mean() / 2
    half = [int((c < c[0] / 2).nonzero()[0]) for c in (small, large)]
    assert half[1] > half[0]  # a larger base decays later (measured: below half at distance 15 vs 22)
    w = rotary.wavelengths(64, 10_000.0)
    assert w[0] == pytest.approx(2 * np.pi) and w[-1] > 5_000


def test_odd_head_size_or_bad_base_is_refused():
    with pytest.raises(ValueError, match="even"):
        rotary.inverse_frequencies(7, 10_000.0)
    with pytest.raises(ValueError, match="> 0"):
        rotary.inverse_frequencies(8, 0.0)


def test_attention_by_offset_finds_a_previous_token_head():
    t = 6
    prev = np.zeros((t, t))
    prev[0, 0] = 1
    prev[np.arange(1, t), np.arange(t - 1)] = 1
    profile, offsets = positional.attention_by_offset(np.stack([prev, np.full((t, t), 1 / t)]), 3)
    assert list(offsets) == [-3, -2, -1, 0, 1, 2, 3]
    assert profile[0, 2] == pytest.approx((t - 1) / (t - 1)) and profile[0, 4] == 0
    np.testing.assert_allclose(profile[1], 1 / t)
    with pytest.raises(ValueError):
        positional.attention_by_offset(np.zeros((2, 3, 4)), 2)
