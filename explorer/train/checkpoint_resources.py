"""Cached reads of a run's checkpoints for the Evolution page (each checkpoint loaded, run and dropped, not kept in
memory; a checkpoint's :func:`bertcore.loading.sources.files_stamp` keys the cache, so a rewritten checkpoint is read
again). The sidebar's model and its forward passes: :mod:`explorer.resources`.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertcore.readouts import positional
from bertcore.analysis.attention import activations
from bertcore.analysis.attention.words import merge_attention, word_groups
from bertcore.loading.sources import ModelSource, load


@st.cache_data(show_spinner=False, max_entries=64)
def suite_summary(folder: str, stamp: str, n_per_paradigm: int) -> dict[str, float]:
    """The minimal-pair suite's PLL accuracy per paradigm (:mod:`bertcore.analysis.grammar.minimal_pairs`, suite seed)
    of one run checkpoint with an MLM head (loaded, run, dropped). ``stamp`` keys the cache only.
    Raises ``FillMaskError`` for a checkpoint without an MLM head."""
    from bertcore.analysis.grammar import minimal_pairs as M

    loaded = load(ModelSource("run", folder))
    results = list(M.score(loaded.model, loaded.tokenizer, M.generate(n_per_paradigm)))
    return {name: acc["pll"] for name, acc in M.accuracy_by_paradigm(results).items()}


@st.cache_data(show_spinner=False, max_entries=64)
def agreement_summary(folder: str, stamp: str) -> dict[str, float]:
    """:func:`bertcore.analysis.grammar.agreement.agreement_heads` of one run checkpoint (loaded, run, dropped):
    ``{"to_subject": best head's mean verb -> subject attention, "to_attractor": the same head's verb ->
    attractor attention, "layer", "head"}`` (0-based block and head). ``stamp``
    (:func:`bertcore.loading.sources.files_stamp`
    of the folder) keys the cache only."""
    from bertcore.analysis.grammar import agreement

    loaded = load(ModelSource("run", folder))
    heads = agreement.agreement_heads(loaded.encoder, loaded.tokenizer)
    layer, head = heads.best
    return {"to_subject": heads.best_score, "to_attractor": float(heads.to_attractor[layer, head]),
            "layer": layer, "head": head}


@st.cache_data(show_spinner="Running every checkpoint on the sentence ...", max_entries=16)
def attention_per_checkpoint(folders: tuple[str, ...], stamps: tuple[str, ...], text: str, layer: int,
                             head: int, by_word: bool = False) -> tuple[list[np.ndarray], list[str]]:
    """One (T, T) attention map of ``layer``/``head`` (0-based block and head) per checkpoint, and the T token labels;
    with ``by_word``, (W, W) maps over words (:func:`bertcore.analysis.attention.words.merge_attention`) and W labels.

    Each checkpoint is loaded, run and dropped (not kept in memory). ``stamps``
    (:func:`bertcore.loading.sources.files_stamp`
    of each) only key the cache.
    """
    maps, tokens = [], []
    for folder in folders:
        loaded = load(ModelSource("run", folder))
        acts = activations.run(loaded.encoder, loaded.tokenizer, text)
        one = acts.attentions[layer, head]  # (T, T)
        tokens = acts.tokens
        if by_word:
            groups = word_groups(acts.encoding.tokens, acts.encoding.word_ids)
            one, tokens = merge_attention(one, groups), groups.labels  # (W, W)
        maps.append(one.astype(np.float64))
    return maps, tokens


@st.cache_data(show_spinner="Reading the position embeddings of every checkpoint ...", max_entries=16)
def position_similarity_per_checkpoint(folders: tuple[str, ...], stamps: tuple[str, ...],
                                       n_positions: int) -> list[np.ndarray]:
    """Cosine similarity (P, P) of the first ``n_positions`` learned positions, per checkpoint."""
    out = []
    for folder in folders:
        loaded = load(ModelSource("run", folder))
        table = positional.learned_positions(loaded.model, 0, n_positions)  # (P, H)
        out.append(positional.cosine_similarity(table))
    return out
