"""The Tokenization page's views: one text (or pair) as BERT's tokenizer encodes it (WordPieces, ids, segment ids,
attention mask; Devlin et al. 2019, section 3), each word's pieces, and the same text under bert-base-uncased's
vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

from bertcore.analysis.attention import activations
from bertcore.analysis.representations import syntax
from bertcore.loading.sources import packaged_model_dir
from bertcore.tokenization.tokenizer import (Encoding, VocabComparison, compare_vocabularies, encode,
                                             is_bert_base_uncased, load_tokenizer)
from explorer.figures import tokens as token_figures
from explorer.views.core import load, view


@dataclass
class Tokens:
    """One encoded text. ``encoding``: the T tokens, their ids, segment ids, attention mask and words; ``rows``:
    one per word (typed, normalized, pieces: :func:`~bertcore.analysis.attention.activations.word_rows`);
    ``n_unknown``: tokens that became the unknown token; ``labels`` / ``hovers``: each token's word's part of speech
    and dependency (spaCy), or None; ``syntax_note``: why there are none when they were asked for."""

    encoding: Encoding
    rows: list[dict]
    n_unknown: int
    labels: list[str] | None
    hovers: list[str] | None
    syntax_note: str | None


@view
def tokens(source, text: str, text_pair: str | None, parts_of_speech: bool) -> Tokens:
    """``text`` (and ``text_pair``) encoded by the model's tokenizer, cut at the model's length; with
    ``parts_of_speech``, each token labelled with its word's spaCy tags.

    Raises ``TextError`` (an empty or unreadable text)."""
    lm = load(source)
    tok = lm.tokenizer
    # normalize, split on spaces and punctuation, cut each word into the longest WordPieces, add [CLS] / [SEP]
    enc = encode(tok, text, text_pair, max_length=lm.max_length)
    rows = activations.word_rows(enc, tok)  # one row per word: typed, normalized, pieces
    n_unknown = sum(t == tok.unk_token for t in enc.tokens)
    labels = hovers = note = None
    if parts_of_speech:
        try:  # spaCy's English parser, each WordPiece labelled with its word's tags
            labels, hovers = syntax.token_labels(syntax.parse_segment(tok, text, text_pair, max_length=lm.max_length))
        except syntax.SyntaxUnavailable as exc:  # spaCy or its English model is missing: no labels, and why
            note = str(exc)
        if labels is not None and len(labels) != len(enc):  # a tokenizer whose offsets do not match: no labels
            labels = hovers = None
    return Tokens(enc, rows, n_unknown, labels, hovers, note)


def grid_figure(result: Tokens):
    """One cell per token with its id; pieces of a word share a colour, segments differ."""
    enc = result.encoding
    return token_figures.token_grid(enc.tokens, enc.input_ids, enc.word_ids, enc.special_tokens_mask,
                                    enc.token_type_ids, enc.attention_mask, per_row=12 if len(enc) <= 120 else 16,
                                    labels=result.labels, label_hover=result.hovers)


@dataclass
class Vocabularies:
    """``same``: the model reads bert-base-uncased's vocabulary; ``comparison``: otherwise, the text under both
    (:class:`~bertcore.tokenization.tokenizer.VocabComparison`), else None; ``size``: the model's vocabulary."""

    same: bool
    comparison: VocabComparison | None
    size: int


@view
def vocabularies(source, text: str, text_pair: str | None) -> Vocabularies:
    """The text under the model's vocabulary and under bert-base-uncased's (the packaged MiniLM's ``vocab.txt``,
    30,522 WordPieces), unless they are the same vocabulary.

    Raises ``SourceError`` (the packaged model is not installed) or ``TokenizerError`` (its tokenizer files are
    unusable) when a comparison is needed."""
    lm = load(source)
    same = is_bert_base_uncased(lm.tokenizer)
    comparison = None
    if not same:
        reference = load_tokenizer(packaged_model_dir())  # bert-base-uncased's WordPiece vocabulary
        comparison = compare_vocabularies(lm.tokenizer, reference, text, text_pair, max_length=lm.max_length)
    return Vocabularies(same, comparison, len(lm.tokenizer))


def comparison_figure(result: Vocabularies, reference: bool = False):
    """The text's tokens under the model's vocabulary (or, with ``reference``, under bert-base-uncased's)."""
    e = result.comparison.reference if reference else result.comparison.encoding
    return token_figures.token_grid(e.tokens, e.input_ids, e.word_ids, e.special_tokens_mask, e.token_type_ids,
                                    e.attention_mask, per_row=8)
