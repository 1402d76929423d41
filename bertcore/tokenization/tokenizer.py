"""WordPiece tokenization through ``transformers.BertTokenizerFast`` (BERT section 3, "Input/Output
Representations"): ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, segment ids 0 / 1.

Loading is checked (:func:`load_tokenizer` refuses a folder that is not a usable BERT WordPiece
tokenizer); a corpus vocabulary is trained with the ``tokenizers`` WordPiece trainer in
:mod:`bertcore.tokenization.wordpiece`. We never hard-code special-token ids: they are read from the tokenizer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import BertTokenizerFast

MAX_CHARS = 100_000  # longer text is refused: it cannot fit any BERT and would only cost time
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
REQUIRED_SPECIALS = ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token")
# md5 of bert-base-uncased's vocab.txt (30,522 lines), which the packaged all-MiniLM-L6-v2 uses as is
BERT_BASE_UNCASED_VOCAB_MD5 = "64800d5d8528ce344256daf115d4965e"


# transformers' fast tokenizers keep padding and truncation as state of the one Rust tokenizer they share: every
# call sets it, then encodes. Two threads calling one tokenizer (two browser sessions of one cached model) interleave
# those steps: one gets the other's padding ("Unable to create tensor"), or PyO3 refuses the borrow ("Already
# borrowed"), as in transformers 5.23. Calls on every tokenizer the loaders return take this lock.
_ENCODE_LOCK = threading.RLock()


def _encode_plus_locked(tok, *args, **kwargs):
    with _ENCODE_LOCK:
        return type(tok)._encode_plus(tok, *args, **kwargs)


def shareable(tok):
    """Make ``tok`` (a ``transformers`` fast tokenizer) safe to call from several threads at once, in place.

    Its ``_encode_plus`` (which every ``tok(...)``, ``encode`` and ``batch_encode_plus`` call goes through, and
    which sets the Rust tokenizer's padding and truncation state before encoding) runs under one process-wide
    lock. The tokenizer still pickles, copies and saves as before. Returns ``tok``.
    """
    if "_encode_plus" not in vars(tok) and hasattr(type(tok), "_encode_plus"):
        tok._encode_plus = functools.partial(_encode_plus_locked, tok)
    return tok


class TextError(ValueError):
    """Text that cannot be encoded (empty, whitespace only, too long); the message is for people."""


class TokenizerError(ValueError):
    """A folder that does not hold a usable BERT WordPiece tokenizer; the message says why."""


def load_tokenizer(path: str | Path) -> BertTokenizerFast:
    """Load and check the WordPiece tokenizer of a local folder (``tokenizer.json`` or ``vocab.txt``), offline.

    The checks catch what ``BertTokenizerFast.from_pretrained`` accepts silently: a ``tokenizer.json``
    that is not JSON or whose model is not WordPiece (BPE, Unigram), a vocabulary holding only the
    special tokens (transformers 5's ``BertTokenizerFast(vocab_file=...)`` ignores ``vocab_file`` and
    builds such a 5-token tokenizer, whose ``save_pretrained`` folder then looks valid), special tokens
    ([UNK] [CLS] [SEP] [PAD] [MASK]) missing from the vocabulary, and a post-processor that does not
    build ``[CLS] A [SEP] B [SEP]`` with segment ids 0 / 1 (BERT section 3).

    Raises:
        TokenizerError (a ValueError): the folder is missing, holds no tokenizer files, or fails a check;
            the message names the folder and the problem.
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise TokenizerError(f"{folder} is not a folder: a tokenizer is a folder with tokenizer.json or vocab.txt")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise TokenizerError(f"no tokenizer in {folder}: expected {' or '.join(TOKENIZER_FILES)}")
    tj = folder / "tokenizer.json"
    if tj.is_file():
        try:
            model = json.loads(tj.read_text(encoding="utf-8")).get("model") or {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
            raise TokenizerError(f"{tj} is not readable JSON ({type(exc).__name__}: {exc})") from exc
        if model.get("type") != "WordPiece":
            raise TokenizerError(f"{tj} holds a {model.get('type') or 'unknown'} model, not WordPiece: "
                                 "BERT needs a WordPiece tokenizer")
    try:
        tok = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # tokenizers raises bare Exception (non-UTF-8 vocab), KeyError ...
        raise TokenizerError(f"cannot load the tokenizer in {folder}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    check_tokenizer(tok, str(folder))
    return shareable(tok)


BPE_SPECIALS = ("cls_token", "sep_token", "pad_token", "mask_token")


def load_bpe_tokenizer(path: str | Path):
    """Load and check a byte-level BPE tokenizer (RoBERTa's, ModernBERT's) from a local folder, offline.

    Byte-level BPE (Radford et al. 2019, section 2.2; Sennrich et al. 2016) splits text into bytes and merges
    frequent pairs; a word that follows a space starts with ``Ġ`` (the byte of the space, shown printable), so
    ``" cat"`` is one piece ``Ġcat``. Loaded with ``transformers.AutoTokenizer`` (``tokenizer.json``, or RoBERTa's
    ``vocab.json`` + ``merges.txt``).

    Raises:
        TokenizerError: no tokenizer files, a model other than BPE, the special tokens (cls / sep / pad / mask)
            missing from the vocabulary, or a single text not encoded as ``cls ... sep``.
    """
    from transformers import AutoTokenizer

    folder = Path(path).expanduser()
    if not (folder / "tokenizer.json").is_file() and not (folder / "vocab.json").is_file():
        raise TokenizerError(f"no tokenizer in {folder}: a byte-level BPE tokenizer is tokenizer.json (or vocab.json "
                             "+ merges.txt)")
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # tokenizers raises bare Exception, KeyError, ...
        raise TokenizerError(f"cannot load the tokenizer in {folder}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    # segment ids always (zeros: one segment), as BERT's tokenizer gives them: every analysis reads them
    tok.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    model = type(tok.backend_tokenizer.model).__name__ if hasattr(tok, "backend_tokenizer") else type(tok).__name__
    if model != "BPE":
        raise TokenizerError(f"{folder}: the tokenizer's model is {model}, not byte-level BPE")
    vocab = tok.get_vocab()
    missing = [name for name in BPE_SPECIALS if getattr(tok, name, None) not in vocab]
    if missing:
        raise TokenizerError(f"{folder}: the tokenizer lacks {', '.join(missing)} (a BPE tokenizer for an encoder "
                             "needs cls, sep, pad and mask tokens)")
    ids = tok("a", add_special_tokens=True, verbose=False)["input_ids"]
    if not (ids and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id):
        raise TokenizerError(f"{folder}: a text is not encoded as {tok.cls_token} ... {tok.sep_token} (its "
                             "post-processor adds no special tokens)")
    return shareable(tok)


def is_wordpiece(tok) -> bool:
    """Whether ``tok`` is WordPiece (``##`` marks a continuation) rather than byte-level BPE (``Ġ`` a word start)."""
    model = getattr(getattr(tok, "backend_tokenizer", None), "model", None)
    return type(model).__name__ == "WordPiece"


def check_tokenizer(tok, where: str = "the tokenizer") -> None:
    """Raise :class:`TokenizerError` unless ``tok`` is a usable BERT WordPiece tokenizer (see
    :func:`load_tokenizer` for the checks); ``where`` names it in the message."""
    model = type(tok.backend_tokenizer.model).__name__ if hasattr(tok, "backend_tokenizer") else type(tok).__name__
    if model != "WordPiece":
        raise TokenizerError(f"{where}: the tokenizer's model is {model}, not WordPiece")
    # the WordPiece model's own vocabulary: transformers adds a missing special token as an extra
    # "added token" with an id past the vocabulary (an embedding row the model does not have)
    vocab = tok.backend_tokenizer.get_vocab(with_added_tokens=False)
    missing = [name for name in REQUIRED_SPECIALS if getattr(tok, name, None) not in vocab]
    if missing:
        raise TokenizerError(f"{where}: the vocabulary lacks the special token(s) "
                             f"{', '.join(str(getattr(tok, n, None) or n) for n in missing)}; BERT needs "
                             "[UNK] [CLS] [SEP] [PAD] [MASK]")
    specials = set(tok.all_special_tokens)
    if not any(t not in specials for t in vocab):
        raise TokenizerError(f"{where}: the vocabulary holds only its {len(vocab)} special tokens, so every word "
                             "would become [UNK] (a broken vocab.txt / tokenizer.json?)")
    if len(tok) != len(vocab):
        raise TokenizerError(f"{where}: {len(tok)} tokens but a WordPiece vocabulary of {len(vocab)} (added tokens "
                             "outside the vocabulary have no embedding row)")
    try:
        pair = tok("a", "b", add_special_tokens=True, verbose=False)
    except Exception as exc:  # any failure to encode: unusable
        raise TokenizerError(f"{where}: cannot encode a sentence pair ({type(exc).__name__}: {exc})") from exc
    ids, types = pair["input_ids"], pair.get("token_type_ids")
    sep = tok.sep_token_id
    if not (ids and ids[0] == tok.cls_token_id and ids[-1] == sep and ids.count(sep) == 2 and types
            and types[0] == 0 and types[-1] == 1):
        raise TokenizerError(f"{where}: a sentence pair is not encoded as [CLS] A [SEP] B [SEP] with segment ids "
                             "0 / 1 (its post-processor is not BERT's)")


def vocab_tokens(tok) -> list[str]:
    """The vocabulary in id order (``vocab.txt``'s lines)."""
    return [t for t, _ in sorted(tok.get_vocab().items(), key=lambda x: x[1])]


def vocab_md5(tok) -> str:
    """md5 of the vocabulary written as ``vocab.txt`` (one token a line, id order): equal to the
    md5 of the published ``vocab.txt`` file, e.g. :data:`BERT_BASE_UNCASED_VOCAB_MD5`."""
    return hashlib.md5("".join(t + "\n" for t in vocab_tokens(tok)).encode("utf-8")).hexdigest()


def is_bert_base_uncased(tok) -> bool:
    """Whether ``tok`` has bert-base-uncased's vocabulary (30,522 tokens, md5 of vocab.txt) and lower-cases."""
    return (len(tok) == 30522 and bool(getattr(tok, "do_lower_case", True))
            and vocab_md5(tok) == BERT_BASE_UNCASED_VOCAB_MD5)


def save_tokenizer(tok: BertTokenizerFast, folder: str | Path) -> list[Path]:
    """Save ``tok`` as an HF tokenizer folder: ``tokenizer.json`` + ``tokenizer_config.json``
    (``save_pretrained``), plus ``vocab.txt`` and ``special_tokens_map.json``, which transformers 5
    no longer writes but older readers (and Google's BERT code) use. Returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab_tokens(tok)), encoding="utf-8")
    specials = {name: str(getattr(tok, name)) for name in REQUIRED_SPECIALS if getattr(tok, name, None)}
    (folder / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n", encoding="utf-8")
    return sorted(p for p in folder.iterdir() if p.is_file())


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
        # RoBERTa's and ModernBERT's tokenizers give no segment ids: their models have one segment (or none)
        token_type_ids=list(enc["token_type_ids"]) if "token_type_ids" in enc else [0] * len(ids),
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
    if "token_type_ids" not in enc:  # byte-level BPE tokenizers of one-segment models
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    return {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


@dataclass
class VocabComparison:
    """One text encoded under two vocabularies (see :func:`compare_vocabularies`).

    Attributes:
        encoding, reference: the :class:`Encoding` under the model's and the reference vocabulary.
        words: one row per word (when both split the text into the same words, as two BERT
            pre-tokenizers do): ``word`` (index), ``text`` (the typed span), ``pieces``,
            ``reference_pieces`` (WordPiece strings joined by spaces), ``n_pieces``, ``n_reference_pieces``.
    """

    encoding: Encoding
    reference: Encoding
    words: list[dict]

    @property
    def n_pieces(self) -> tuple[int, int]:
        """Tokens without [CLS]/[SEP] under (the model's vocabulary, the reference)."""
        return (sum(1 for m in self.encoding.special_tokens_mask if not m),
                sum(1 for m in self.reference.special_tokens_mask if not m))


def compare_vocabularies(
    tokenizer: BertTokenizerFast,
    reference: BertTokenizerFast,
    text: str,
    text_pair: str | None = None,
    max_length: int | None = None,
) -> VocabComparison:
    """Encode ``text`` (and ``text_pair``) under ``tokenizer`` and under ``reference`` (e.g.
    bert-base-uncased's vocabulary) and line the words up with their pieces under each.

    Raises:
        TextError: as :func:`encode`.
    """
    enc = encode(tokenizer, text, text_pair, max_length)
    ref = encode(reference, text, text_pair, max_length)

    def spans(e: Encoding) -> list[tuple[int | None, int, int]]:
        return [(e.sequence_ids[p[0]], e.offsets[p[0]][0], e.offsets[p[-1]][1]) for p in e.words]

    rows: list[dict] = []
    words = spans(enc)
    if words == spans(ref):
        for w, (pos_a, pos_b) in enumerate(zip(enc.words, ref.words)):
            seq, start, end = words[w]
            source = enc.text_pair if seq == 1 and enc.text_pair is not None else enc.text
            rows.append({"word": w, "text": source[start:end],
                         "pieces": " ".join(enc.tokens[p] for p in pos_a),
                         "reference_pieces": " ".join(ref.tokens[p] for p in pos_b),
                         "n_pieces": len(pos_a), "n_reference_pieces": len(pos_b)})
    return VocabComparison(enc, ref, rows)
