"""Numpy-side analysis of a BERT forward pass: attentions, per-head statistics, contextual word
embeddings (subword -> word mean pooling), cosine similarities, similarity across layers,
a random-pair baseline and a 2-D PCA.

Never imports streamlit or plotly; every array returned is numpy ``float32`` (or ``float64``
where noted). Layers are indexed as in :class:`~bertcore.model.BertModelOutput`: attentions
``0..L-1`` (layer 1..L), hidden states ``0..L`` (0 = the embedding output).
"""

from .activations import (  # noqa: F401
    Activations,
    run_encoding,
    run,
    show_invisible,
    normalize,
    word_rows,
    check_attention,
    hide_tokens,
    is_punctuation,
    HeadStats,
    head_stats,
)
from .similarity import (  # noqa: F401
    word_pieces,
    find_word,
    pool,
    Occurrences,
    word_occurrences,
    cosine_matrix,
    similarity_by_layer,
    random_pair_baseline,
    pca_2d,
)
