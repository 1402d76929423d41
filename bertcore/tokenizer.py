"""WordPiece tokenization through ``transformers.BertTokenizerFast`` (BERT section 3, "Input/Output
Representations"): ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, segment ids 0 / 1.

We never hard-code special-token ids: they are read from the tokenizer.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import BertTokenizerFast

MAX_CHARS = 100_000  # longer text is refused: it cannot fit any BERT and would only cost time


class TextError(ValueError):
    """Text that cannot be encoded (empty, whitespace only, too long); the message is for people."""


def load_tokenizer(path: str | Path) -> BertTokenizerFast:
    """Load the WordPiece tokenizer of a local model folder (``tokenizer.json`` or ``vocab.txt``), offline.

    Raises:
        OSError: the folder holds no tokenizer files.
    """
    return BertTokenizerFast.from_pretrained(str(path), local_files_only=True)


@dataclass
class Encoding:
    """One encoded text or sentence pair (lists of length T, the encoded length).

    Attributes:
        input_ids: WordPiece ids, with [CLS]/[SEP].
        token_type_ids: segment ids, 0 for [CLS] A [SEP], 1 for B [SEP].
        attention_mask: 1 for every token (a single sequence has no padding).
        tokens: the WordPiece strings (``##`` marks a continuation piece).
        word_ids: index of the word each token belongs to, None for special tokens; words of
            sentence B are numbered after those of sentence A, so a word index is unique.
        sequence_ids: 0 (sentence A), 1 (sentence B) or None (special tokens).
        special_tokens_mask: 1 for [CLS]/[SEP]/[PAD].
        offsets: ``(start, end)`` character span of each token in its own sentence.
        num_truncated: tokens dropped to fit ``max_length`` (0 if none).
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    word_ids: list[int | None]
    sequence_ids: list[int | None]
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]]
    num_truncated: int
    text: str
    text_pair: str | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def tensors(self, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """``input_ids``, ``token_type_ids``, ``attention_mask`` as ``(1, T)`` long tensors."""
        return {name: torch.tensor([getattr(self, name)], dtype=torch.long, device=device)
                for name in ("input_ids", "token_type_ids", "attention_mask")}

    @property
    def words(self) -> list[list[int]]:
        """Token positions grouped by word: ``words[w]`` lists the positions of word w's pieces."""
        groups: dict[int, list[int]] = {}
        for pos, w in enumerate(self.word_ids):
            if w is not None:
                groups.setdefault(w, []).append(pos)
        return [groups[w] for w in sorted(groups)]


def clean_text(text: str) -> str:
    """Drop NUL and other control characters except tab/newline; NFC-normalise.

    BERT's own normaliser drops control characters too; doing it first keeps offsets
    meaningful and keeps NUL bytes out of anything we display.
    """
    text = unicodedata.normalize("NFC", text)
    return "".join(ch for ch in text if ch in "\t\n\r" or unicodedata.category(ch) != "Cc")


def check_text(text: str | None, what: str = "text") -> str:
    """Return the cleaned text, or raise :class:`TextError` with a message for people."""
    if text is None or not clean_text(text).strip():
        raise TextError(f"The {what} is empty: type a sentence.")
    if len(text) > MAX_CHARS:
        raise TextError(f"The {what} has {len(text):,} characters; the limit is {MAX_CHARS:,}.")
    return clean_text(text)


def encode(
    tokenizer: BertTokenizerFast,
    text: str,
    text_pair: str | None = None,
    max_length: int | None = None,
) -> Encoding:
    """Encode a text (or a sentence pair) for BERT.

    Args:
        tokenizer: a BERT WordPiece tokenizer.
        text: sentence A. Control characters are dropped (see :func:`clean_text`).
        text_pair: optional sentence B (for NSP-style inputs).
        max_length: the most tokens, special tokens included (default: the tokenizer's
            ``model_max_length``, 512 for BERT). Longer inputs are truncated,
            ``longest_first`` for pairs; ``num_truncated`` says how many tokens went.
    Raises:
        TextError: empty / whitespace-only / over-long text, or a pair that cannot fit.
    """
    text = check_text(text, "text" if text_pair is None else "first sentence")
    if text_pair is not None:
        text_pair = check_text(text_pair, "second sentence")
    if max_length is None:
        max_length = min(int(tokenizer.model_max_length), 512)
    n_special = 3 if text_pair is not None else 2
    if max_length < n_special + (2 if text_pair is not None else 1):
        raise TextError(f"max_length {max_length} leaves no room for text beside the special tokens")
    full = tokenizer(text, text_pair, add_special_tokens=True, truncation=False, verbose=False)
    enc = tokenizer(text, text_pair, add_special_tokens=True, truncation="longest_first", max_length=max_length,
                    return_special_tokens_mask=True, return_offsets_mapping=True, verbose=False)
    ids = enc["input_ids"]
    if len(ids) <= n_special:
        raise TextError("The text has no token BERT can read (only characters the tokenizer drops).")
    seq_ids = enc.sequence_ids()
    raw_words = enc.word_ids()
    n_words_a = 1 + max((w for w, s in zip(raw_words, seq_ids) if s == 0 and w is not None), default=-1)
    word_ids = [None if w is None else (w + n_words_a if s == 1 else w) for w, s in zip(raw_words, seq_ids)]
    return Encoding(
        input_ids=list(ids),
        token_type_ids=list(enc["token_type_ids"]),
        attention_mask=list(enc["attention_mask"]),
        tokens=tokenizer.convert_ids_to_tokens(ids),
        word_ids=word_ids,
        sequence_ids=list(seq_ids),
        special_tokens_mask=list(enc["special_tokens_mask"]),
        offsets=[tuple(o) for o in enc["offset_mapping"]],
        num_truncated=len(full["input_ids"]) - len(ids),
        text=text,
        text_pair=text_pair,
    )


def encode_batch(
    tokenizer: BertTokenizerFast,
    texts: list[str],
    text_pairs: list[str] | None = None,
    max_length: int | None = None,
) -> dict[str, torch.Tensor]:
    """Encode several texts (or pairs) padded to the longest: ``input_ids``, ``token_type_ids``,
    ``attention_mask`` as ``(B, T)`` long tensors. Truncates to ``max_length`` (default 512)."""
    if max_length is None:
        max_length = min(int(tokenizer.model_max_length), 512)
    texts = [clean_text(t) for t in texts]
    pairs = None if text_pairs is None else [clean_text(t) for t in text_pairs]
    enc = tokenizer(texts, pairs, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
