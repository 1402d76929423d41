"""What attention does.

    activations  run / run_encoding (one forward pass with every attention and hidden state: Activations),
                 head_stats (HeadStats), hide_tokens, word_rows, check_attention, normalize, is_punctuation
    words        word_groups, merge_attention, merge_vector: WordPieces merged to words (Clark et al. 2019)
    rollout      rollout, attention flow (Abnar & Zuidema 2020)
    query_key    one head's queries and keys over many sentences (AttentionViz)
    neurons      the neuron view: q * k products of one query against every key
    ablation     switching heads off (head_mask) and what it changes
"""

__all__ = ["activations", "words", "rollout", "query_key", "neurons", "ablation"]
