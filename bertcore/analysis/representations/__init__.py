"""What the hidden states hold.

    similarity     word_occurrences, similarity_by_layer, random_pair_baseline, pool (word senses)
    parses         spaCy parses aligned to WordPieces: parse_segment, ParsedSegment, word_attention
    syntax         syntax heads (Clark et al. 2019 section 4.2): syntax_heads, run_syntax
    syntax_probe   Clark et al.'s attention-only parsing probe (section 5): attention_probe
    probes         probing classifiers by layer with control tasks (Hewitt & Liang 2019)
    logit_lens     every layer decoded by the MLM head; the tuned lens
    corpus_search  the nearest tokens of a corpus by contextual vector (exBERT)
    compare        CKA and Jensen-Shannon between two models
"""

__all__ = ["similarity", "parses", "syntax", "syntax_probe", "probes", "logit_lens", "corpus_search", "compare"]
