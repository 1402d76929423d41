"""Text to token ids and back: the tokenizer wrapper (WordPiece and byte-level BPE), corpus vocabularies (WordPiece,
BPE training), which positions MLM may select (masking), the spaCy pipeline."""
