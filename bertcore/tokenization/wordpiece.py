"""Train a WordPiece vocabulary on a corpus, for models pretrained from scratch.

The trainer is the ``tokenizers`` library's ``WordPieceTrainer`` (the BPE-style merge trainer that
Hugging Face uses for BERT vocabularies; Google's original WordPiece used a likelihood criterion,
Schuster & Nakajima 2012 / Wu et al. 2016 section 4.1) with BERT's own normalizer (clean text,
split CJK characters, lower-case and strip accents, as bert-base-uncased) and pre-tokenizer
(whitespace and punctuation), ``##`` continuation pieces and the five special tokens
``[PAD] [UNK] [CLS] [SEP] [MASK]`` at ids 0-4. The result is a ``transformers.BertTokenizerFast``
whose post-processor builds ``[CLS] A [SEP] B [SEP]`` with segment ids 0 / 1.

Training is deterministic: the same corpus gives the same vocabulary with the same ids in every
run. ``tokenizers`` numbers the ``##`` pieces in hash-map order and breaks ties between equally
frequent merges by those numbers (and ties at ``limit_alphabet`` by hash order), so on its own two
runs can differ. Here the alphabet is chosen first (most frequent characters, ties by code point),
a first pass finds the ``##`` pieces, and the real pass gets them as pre-numbered symbols; ids are
then assigned as the special tokens, the word-initial pieces sorted, the ``##`` pieces sorted.

A corpus's vocabulary, trained once and cached, and the ``--tokenizer`` values of a run are
:mod:`bertcore.data.vocabularies`'s (they read corpora; this module reads only the texts it is given).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from transformers import BertTokenizerFast

from .tokenizer import TokenizerError, check_tokenizer, shareable

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION_PREFIX = "##"
MIN_VOCAB_SIZE, MAX_VOCAB_SIZE = 100, 100_000
MODEL_MAX_LENGTH = 512  # BERT's positions; a model with fewer refuses longer inputs itself
TRAINER_VERSION = "wp1"  # part of the cache key: change it when the training recipe changes
INFO_FILE = "wordpiece.json"  # what a cached corpus vocabulary was trained on


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    lowercase: bool = True,
) -> BertTokenizerFast:
    """Train a BERT WordPiece tokenizer on ``texts``.

    Args:
        texts: documents (any iterable of str; read into a list, as the trainer reads it twice).
        vocab_size: the target number of tokens, special tokens included, in [MIN_VOCAB_SIZE,
            MAX_VOCAB_SIZE]. A small corpus may yield fewer (merges stop below ``min_frequency``);
            the alphabet and its ``##`` forms are always kept, so a tiny target may be exceeded.
        min_frequency: a merge must occur at least this often to become a token.
        limit_alphabet: keep at most this many distinct characters (the rarest become [UNK]),
            as ``tokenizers``' ``BertWordPieceTokenizer``.
        lowercase: lower-case and strip accents (bert-base-uncased); False keeps case and accents.
    Returns:
        A checked ``BertTokenizerFast`` ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4), ``model_max_length`` 512.
    Raises:
        TokenizerError: ``vocab_size`` out of range, or no text to learn from.
    """
    if not MIN_VOCAB_SIZE <= int(vocab_size) <= MAX_VOCAB_SIZE:
        raise TokenizerError(f"vocab_size {vocab_size} is outside [{MIN_VOCAB_SIZE:,}, {MAX_VOCAB_SIZE:,}]")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise TokenizerError("no text to learn a vocabulary from (the corpus is empty)")
    alphabet = _alphabet(texts, lowercase, limit_alphabet)
    # pass 1 stops before any merge: the continuation pieces ("##e") the corpus needs
    first = _train(texts, 1, min_frequency, alphabet, list(SPECIAL_TOKENS), lowercase)
    continuation = sorted(t for t in first if t.startswith(CONTINUATION_PREFIX) and t not in SPECIAL_TOKENS)
    # pass 2 with every symbol numbered in a fixed order, so equally frequent merges are taken in a fixed order
    learned = set(_train(texts, int(vocab_size), min_frequency, alphabet, [*SPECIAL_TOKENS, *continuation],
                         lowercase)) - set(SPECIAL_TOKENS)
    if not learned:
        raise TokenizerError("no text to learn a vocabulary from (only characters the tokenizer drops)")
    ordered = [*SPECIAL_TOKENS, *sorted(learned, key=lambda t: (t.startswith(CONTINUATION_PREFIX), t))]
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(ordered)}, do_lower_case=lowercase,
                            model_max_length=MODEL_MAX_LENGTH)
    check_tokenizer(tok, "the trained WordPiece tokenizer")
    return shareable(tok)


def _normalizer(lowercase: bool):
    from tokenizers import normalizers

    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=lowercase)


def _alphabet(texts: list[str], lowercase: bool, limit: int) -> list[str]:
    """The ``limit`` most frequent characters of the normalized texts (ties by code point), so the
    trainer's own limit, which breaks count ties in hash order, never has to choose."""
    norm = _normalizer(lowercase)
    codes = np.frombuffer("".join(norm.normalize_str(t) for t in texts).encode("utf-32-le"), dtype=np.uint32)
    chars, counts = np.unique(codes, return_counts=True)  # chars ascending, so a stable sort keeps code-point order
    order = np.argsort(-counts, kind="stable")
    return [chr(c) for c in chars[order] if not chr(c).isspace()][:limit]


def _train(texts: list[str], vocab_size: int, min_frequency: int, alphabet: list[str], specials: list[str],
           lowercase: bool) -> dict[str, int]:
    """One run of ``tokenizers``' ``WordPieceTrainer`` with BERT's normalizer and pre-tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = _normalizer(lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
                                        initial_alphabet=alphabet, limit_alphabet=len(alphabet),
                                        continuing_subword_prefix=CONTINUATION_PREFIX, show_progress=False)
    backend.train_from_iterator(texts, trainer, length=len(texts))
    return backend.get_vocab()
