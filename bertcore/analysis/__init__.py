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

Before the split (November 2026) this package was flat: ``bertcore.analysis.syntax``, ``analysis.run`` and the
like. Those names keep working for one release through :func:`__getattr__` below, with a
``DeprecationWarning`` that names the new place.
"""

from __future__ import annotations

import importlib
import warnings

#: old flat module name -> its subpackage (``from bertcore.analysis import syntax`` still works)
MOVED_MODULES = {
    "activations": "attention", "words": "attention", "rollout": "attention", "query_key": "attention",
    "neurons": "attention", "ablation": "attention",
    "similarity": "representations", "syntax": "representations", "syntax_probe": "representations",
    "probes": "representations", "logit_lens": "representations", "corpus_search": "representations",
    "compare": "representations",
    "attribution": "causal", "patching": "causal",
    "scoring": "grammar", "minimal_pairs": "grammar", "agreement": "grammar",
    "findings": "papers", "published": "papers", "emergence": "papers", "evalset": "papers",
}
#: old ``bertcore.analysis.<name>`` function or class -> the module that owns it now
MOVED_NAMES = {
    **{n: "bertcore.analysis.attention.activations" for n in (
        "Activations", "run_encoding", "run", "show_invisible", "normalize", "word_rows", "check_attention",
        "hide_tokens", "is_punctuation", "HeadStats", "head_stats")},
    **{n: "bertcore.analysis.representations.similarity" for n in (
        "word_pieces", "find_word", "pool", "Occurrences", "word_occurrences", "similarity_by_layer",
        "random_pair_baseline")},
    "cosine_matrix": "bertcore.vectors",
    "pca_2d": "bertcore.vectors",
}
SUBPACKAGES = ("attention", "representations", "causal", "grammar", "papers")
__all__ = list(SUBPACKAGES)


def __getattr__(name: str):
    """The pre-split names: a moved module or a moved function, imported on first use (with a warning)."""
    if name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in MOVED_MODULES:
        new = f"{__name__}.{MOVED_MODULES[name]}.{name}"
        warnings.warn(f"bertcore.analysis.{name} moved to {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)
    if name in MOVED_NAMES:
        warnings.warn(f"bertcore.analysis.{name} moved to {MOVED_NAMES[name]}.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(MOVED_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
