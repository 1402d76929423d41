"""Numeric helpers on vectors that model-level and analysis code share: cosine similarity of every pair of
rows and a 2-D principal-component projection.

The lowest layer of ``bertcore`` beside :mod:`bertcore.modeling.config` (numpy and scikit-learn only): both
:mod:`bertcore.readouts.positional` and :mod:`bertcore.analysis` import it, so neither imports the other.
"""

from __future__ import annotations

import numpy as np


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of the rows of ``x (N, H)`` -> ``(N, N)`` float32 in [-1, 1].

    A zero row has similarity 0 with everything. Raises ``ValueError`` unless ``x`` is 2-D.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must have shape (N, H), got {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return np.clip(unit @ unit.T, -1.0, 1.0).astype(np.float32)


def pca_2d(x: np.ndarray, svd_solver: str = "full") -> tuple[np.ndarray, np.ndarray]:
    """Project the rows of ``x (N, H)`` on their first two principal components (scikit-learn PCA).

    ``svd_solver``: scikit-learn's; ``"covariance_eigh"`` is exact too and much faster for N >> H (the projector's
    tens of thousands of points).

    Returns ``(points (N, 2) float32, explained_variance_ratio (2,) float32)``; with N = 2 the
    second coordinate is 0 (two points span one direction); identical rows give all zeros.

    Raises:
        ValueError: fewer than 2 rows or not 2-D.
    """
    from sklearn.decomposition import PCA

    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"PCA needs at least 2 vectors of shape (N, H), got {x.shape}")
    if np.allclose(x, x.mean(0), rtol=0.0, atol=1e-7):  # no variance: every point is the same
        return np.zeros((x.shape[0], 2), np.float32), np.zeros(2, np.float32)
    k = min(2, x.shape[0] - 1, x.shape[1])
    pca = PCA(n_components=k, svd_solver=svd_solver)
    pts = pca.fit_transform(x)
    ratio = pca.explained_variance_ratio_
    if k < 2:
        pts = np.hstack([pts, np.zeros((pts.shape[0], 2 - k))])
        ratio = np.concatenate([ratio, np.zeros(2 - k)])
    return pts.astype(np.float32), np.nan_to_num(ratio).astype(np.float32)
