"""Numpy-side analysis of a BERT forward pass, one subpackage per question a user asks:

    attention/        what attention does: a forward pass with every activation (activations), word-level
                      merging (words), rollout and flow, query-key maps, the neuron view, head ablation
    representations/  what the hidden states hold: similarity across layers, spaCy parses and syntax heads,
                      Clark et al.'s attention-only probe, probing classifiers, the logit / tuned lens, corpus
                      search, CKA / Jensen-Shannon between models
    causal/           why a prediction was made: integrated gradients (attribution), activation patching
    grammar/          which sentence the model prefers: pseudo-log-likelihood scoring, minimal pairs, agreement
    papers/           what the papers measured and how training changes it: findings, published numbers,
                      emergence across checkpoints, the held-out evaluation set
    shipped.py        the app's heavy default views over all of the above, and their results shipped beside a
                      model (``precomputed.npz``, keyed by the model's files)

The subpackages import downwards only: ``attention`` < ``representations`` < ``grammar`` and ``causal`` <
``papers`` (``docs/LAYERING.md``; ``tests/test_layering.py`` checks it). Numeric helpers shared with model-level
code (cosine matrix, PCA) live in :mod:`bertcore.vectors`.

Never imports streamlit or plotly; every array returned is numpy ``float32`` (or ``float64`` where noted).
Layers are indexed as in :class:`~bertcore.modeling.model.BertModelOutput`: attentions ``0..L-1`` (layer 1..L), hidden
states ``0..L`` (0 = the embedding output).
"""

from __future__ import annotations

import importlib

SUBPACKAGES = ("attention", "representations", "causal", "grammar", "papers")
__all__ = list(SUBPACKAGES)


def __getattr__(name: str):
    """A subpackage, imported on first use (``bertcore.analysis.attention`` without importing it first)."""
    if name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
