"""The Word senses page's views: one word's contextual vectors across sentences (the mean of its WordPieces at every
layer), their cosine similarity at one layer, a PCA of them, and same-sense against different-sense similarity
layer by layer beside a random-word baseline (Ethayarajh 2019 measures the same over a corpus)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore import vectors
from bertcore.analysis.representations import similarity
from explorer.figures import similarity as sim_figures
from explorer.views.core import load, view


@view
def occurrences(source, target: str, sentences: list[str]) -> similarity.Occurrences:
    """The vectors of ``target`` in each of ``sentences`` at every layer (``vectors``: ``(n, L+1, H)``), which
    sentences hold it (``sentence_index``), which do not (``missing``), could not be read (``errors``) or were cut
    (``truncated``), and the other words' vectors (``others``) for the baseline.

    Raises ``TextError`` for an empty target."""
    lm = load(source)
    # the word's vector in every sentence and layer: the mean of its WordPieces (first occurrence per sentence)
    occ = similarity.word_occurrences(lm.encoder, lm.tokenizer, target, list(sentences))
    return occ


@dataclass
class Senses:
    """The occurrences compared at one layer. ``labels`` / ``senses``: one per occurrence (the sense label, '' when
    none was typed); ``cosine``: ``(n, n)`` at ``layer``; ``points`` ``(n, 2)`` and ``explained`` ``(2,)``: their
    PCA; ``same`` / ``different``: ``(L+1,)`` mean cosine of same-sense and different-sense pairs per layer;
    ``base_mean`` / ``base_std``: ``(L+1,)`` random pairs of different words; ``layer_names``: 'emb', '1', ...;
    ``layer``: a hidden_states index (0 = the embeddings)."""

    labels: list[str]
    senses: list[str]
    cosine: np.ndarray
    points: np.ndarray
    explained: np.ndarray
    same: np.ndarray
    different: np.ndarray
    base_mean: np.ndarray
    base_std: np.ndarray
    layer_names: list[str]
    layer: int


@view
def senses(source, target: str, sentences: list[str], senses: list[str], layer: int) -> Senses:
    """Do the vectors of ``target`` group by the sense labels ``senses`` (one per sentence), at ``layer`` (a
    hidden_states index: 0 = the embeddings, k = the output of block k) and across layers?

    Raises ``TextError`` for an empty target and ``ValueError`` when fewer than two sentences hold the word."""
    occ = occurrences(source, target, sentences)
    if len(occ.sentence_index) < 2:
        raise ValueError(f"The target word was found in {len(occ.sentence_index)} sentence(s); at least two are "
                         "needed to compare its vectors.")
    occ_senses = [senses[i] for i in occ.sentence_index]
    labels = [f"[{senses[i]}] {occ.sentences[i]}" if senses[i] else occ.sentences[i] for i in occ.sentence_index]
    # raw cosines are high in BERT (a shared direction): random pairs of different words of the same sentences
    base_mean, base_std = similarity.random_pair_baseline(occ.others, occ.other_words, n_pairs=400, seed=0)
    at_layer = occ.vectors[:, layer]  # (n, H)
    cosine = vectors.cosine_matrix(at_layer)  # (n, n)
    points, explained = vectors.pca_2d(at_layer)  # (n, 2), (2,)
    same, different = similarity.similarity_by_layer(occ.vectors, occ_senses)  # (L+1,) each
    layer_names = ["emb"] + [str(i) for i in range(1, occ.vectors.shape[1])]
    return Senses(labels, occ_senses, cosine, points, explained, same, different, base_mean, base_std, layer_names,
                  layer)


def matrix_figure(s: Senses):
    """The cosine of every pair of occurrences at the layer; the colour scale starts at the random baseline."""
    return sim_figures.cosine_heatmap(s.cosine, s.labels, baseline=float(s.base_mean[s.layer]))


def pca_figure(s: Senses):
    """The occurrences at the layer on their two main directions of variation, coloured by sense."""
    return sim_figures.pca_scatter(s.points, s.labels, s.senses, s.explained)


def layers_figure(s: Senses):
    """Same-sense and different-sense similarity by layer, beside the random-pairs band."""
    return sim_figures.similarity_by_layer(s.same, s.different, s.base_mean, s.base_std,
                                           s.layer_names)
