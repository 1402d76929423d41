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
                      model (``shipped.npz``, keyed by the model's files)

The subpackages import downwards only: ``attention`` < ``representations`` < ``grammar`` and ``causal`` <
``papers`` (``docs/LAYERING.md``; ``tests/test_layering.py`` checks it). Numeric helpers shared with model-level
code (cosine matrix, PCA) live in :mod:`bertcore.vectors`.

Never imports streamlit or plotly; every array returned is numpy ``float32`` (or ``float64`` where noted).
One numbering, as Hugging Face's ``encoder.layer[i]`` and TransformerLens's ``blocks.i``: a parameter that names a
block (layer) of the encoder takes ``0..L-1`` (``attentions[i]`` is block i's), heads ``0..heads-1``; one that indexes
``hidden_states`` (``0..L``) says "hidden_states index (0 = embeddings)" (``hidden_states[i + 1]`` is block i's
output). Out-of-range values raise ``ValueError`` naming the valid range. "Layer 1" exists only in the UI's labels
(:func:`explorer.widgets.layer_picker`).
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
