"""Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer", section 3.4), as ModernBERT uses them.

No position table: before the dot product, each query and key vector of a head (width d) is rotated in d/2 planes,
plane j by the angle ``m * theta_j`` at position m, with ``theta_j = base^(-2j/d)`` (section 3.4.2). Rotations
compose, so ``q(m) . k(n)`` depends on m and n only through m - n (equation 16): attention sees relative positions.

The layout is transformers' (``rotate_half``: the planes pair dimension j with j + d/2, not 2j with 2j+1). Where
transformers computes in float32 whatever the model's dtype, so do we, so that a float64 model equals transformers'
to 1e-9: the inverse frequencies are float32 (``ModernBertRotaryEmbedding.compute_default_rope_parameters``), the
angles, cos and sin are computed in float32 and cast to the model's dtype (its ``forward``), and the rotation itself
runs in float32 (``apply_rotary_pos_emb`` calls ``q.float()``). In a float32 model all of this is a no-op.

The functions after :func:`apply_rotary` are for the Positional embeddings page: the relative property and the
long-range decay (section 3.4.3), measured, not assumed.
"""

from __future__ import annotations

import torch


def inverse_frequencies(head_size: int, base: float) -> torch.Tensor:
    """``theta_j = base^(-2j/d)`` for j = 0 .. d/2 - 1: ``(d/2,)`` float32, radians per position.

    Raises:
        ValueError: an odd ``head_size`` (dimensions are rotated in pairs) or a base <= 0.
    Source: Su et al. 2021, section 3.4.2; HF ``compute_default_rope_parameters`` (float32, as there).
    """
    if head_size % 2 or head_size < 2:
        raise ValueError(f"rotary positions rotate pairs of dimensions: the head size must be even, got {head_size}")
    if base <= 0:
        raise ValueError(f"the RoPE base must be > 0, got {base}")
    # on the CPU on purpose, as HF's buffer (computed at init, then moved with the model): the same float32
    # frequencies on every device; callers move them to where they compute
    return 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float, device="cpu") / head_size))


def cos_sin(position_ids: torch.Tensor, inv_freq: torch.Tensor,
            dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every angle: ``position_ids (B or 1, T)`` long -> two ``(B or 1, T, d)`` tensors of ``dtype``
    (each angle twice, for the two halves ``rotate_half`` pairs). Computed in float32, as transformers."""
    freqs = position_ids[..., None].float() * inv_freq.float()  # (B, T, d/2) float32
    emb = torch.cat((freqs, freqs), dim=-1)  # (B, T, d)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the last dimension's two halves: a quarter turn in every plane."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(query: torch.Tensor, key: torch.Tensor, cos: torch.Tensor,
                 sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``query`` and ``key`` ``(B, heads, T, d)`` by their positions' angles (``cos``/``sin`` ``(B, T, d)``):
    ``x * cos + rotate_half(x) * sin``, in float32 and cast back, as HF ``apply_rotary_pos_emb``."""
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, d)
    q, k = query.float(), key.float()
    return (q * cos + rotate_half(q) * sin).to(query.dtype), (k * cos + rotate_half(k) * sin).to(key.dtype)


# ----------------------------------------------------------------------------- what the page shows
def rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """One vector ``x (d,)`` rotated to each of ``positions (P,)``: ``(P, d)`` in ``x``'s dtype (float64 on the
    page, so the relative property is checked to float64 rounding, not float32's)."""
    freqs = positions.to(x.dtype)[:, None] * inverse_frequencies(x.shape[-1], base).to(x.device, x.dtype)  # (P, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (P, d)
    return x * emb.cos() + rotate_half(x.expand(len(positions), -1)) * emb.sin()


def score_grid(q: torch.Tensor, k: torch.Tensor, positions: int, base: float) -> torch.Tensor:
    """``S[m, n] = q(m) . k(n)`` for m, n < ``positions``: ``(P, P)``. Constant along each diagonal (m - n fixed)
    by the relative property (Su et al. 2021, equation 16)."""
    pos = torch.arange(positions, device=q.device)
    return rotate(q, pos, base) @ rotate(k, pos, base).T


def shift_error(q: torch.Tensor, k: torch.Tensor, base: float, pairs: list[tuple[int, int]],
                shifts: list[int]) -> float:
    """The largest ``|q(m) . k(n) - q(m+s) . k(n+s)|`` over the ``(m, n)`` pairs and shifts s: the relative
    property's numeric check (0 up to rounding)."""
    worst = 0.0
    for m, n in pairs:
        for s in shifts:
            pos = torch.tensor([m, n, m + s, n + s], device=q.device)
            rq, rk = rotate(q, pos, base), rotate(k, pos, base)
            worst = max(worst, abs(float(rq[0] @ rk[1] - rq[2] @ rk[3])))
    return worst


def long_range_decay(head_size: int, base: float, distances: torch.Tensor) -> torch.Tensor:
    """Su et al. 2021, section 3.4.3: the bound on ``|q(m) . k(n)|`` shrinks with the distance r = m - n as
    ``(1 / (d/2)) * sum_j |S_j(r)|``, ``S_j(r) = sum_{i<j} exp(i r theta_i)`` (their figure 2). ``distances (R,)``
    -> ``(R,)`` float64."""
    theta = inverse_frequencies(head_size, base).to(distances.device, torch.float64)  # (d/2,)
    angles = distances.double()[:, None] * theta  # (R, d/2)
    partial = torch.cumsum(torch.polar(torch.ones_like(angles), angles), dim=-1)  # (R, d/2) complex: S_1 .. S_{d/2}
    return partial.abs().mean(dim=-1)


def wavelengths(head_size: int, base: float) -> torch.Tensor:
    """Positions per full turn of each plane, ``2 pi / theta_j``: ``(d/2,)`` float64 (short in the first planes,
    up to ~base in the last)."""
    return 2 * torch.pi / inverse_frequencies(head_size, base).double()
