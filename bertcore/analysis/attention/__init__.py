"""What attention does.

    activations  run / run_encoding (one forward pass with every attention and hidden state: Activations),
                 head_stats (HeadStats), hide_tokens, word_rows, check_attention, normalize, is_punctuation
    words        word_groups, merge_attention, merge_vector: WordPieces merged to words (Clark et al. 2019)
    rollout      rollout, attention flow (Abnar & Zuidema 2020)
    query_key    one head's queries and keys over many sentences (AttentionViz)
    neurons      the neuron view: q * k products of one query against every key
    ablation     switching heads off (head_mask) and what it changes
    mixing       context mixing by six measures, one (layers, T, T) matrix per method: attention,
                 norm-based (Kobayashi 2020, 2021), GlobEnc, value zeroing (value_zeroing), ALTI; rollout of any
    decompose    one layer taken apart into one vector per contributing token (recorded sites, float64 weights)
    decompx      DecompX: a prediction (fill-mask logit, logit difference, classifier) as one term per token
"""

__all__ = ["activations", "words", "rollout", "query_key", "neurons", "ablation", "mixing", "decompose",
           "value_zeroing", "decompx"]
