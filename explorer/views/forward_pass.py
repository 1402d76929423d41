"""The One forward pass page's views: one text encoded, then one token followed through the model, with one block
and one head taken apart, every step read from the model's own forward pass and checked against its formula
(:func:`bertcore.readouts.forward_pass.trace`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertcore.readouts import forward_pass
from bertcore.tokenization.tokenizer import Encoding, encode
from explorer.figures import forward_pass as figs
from explorer.views.core import load, view


@view
def encoding(source, text: str, text_pair: str | None):
    """``text`` (and ``text_pair``) as the model's tokenizer encodes it, cut at the model's length: an
    :class:`~bertcore.tokenization.tokenizer.Encoding` (tokens, ids, segment ids).

    Raises ``TextError`` (an empty or unreadable text)."""
    lm = load(source)
    return encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)


@dataclass
class Trace:
    """One token followed through the model: ``encoding`` (the T tokens), ``trace``
    (:class:`~bertcore.readouts.forward_pass.ForwardTrace`: the embeddings, every layer's output, the chosen block's
    steps, the MLM head), ``top_words``: the MLM head's 5 best guesses at the token as WordPieces (empty without a
    head)."""

    encoding: Encoding
    trace: forward_pass.ForwardTrace
    top_words: list[str]


@view
def trace(source, text: str, text_pair: str | None, token: int, layer: int, head: int) -> Trace:
    """Token ``token`` of the encoded text through the model, block ``layer`` and head ``head`` taken apart (all
    0-based: the page's "Layer 1" is block 0).

    Raises what :func:`encoding` raises, ``TraceError`` (a token, layer or head out of range) and ``InputError``."""
    lm = load(source)
    enc = encoding(source, text, text_pair)
    # every step of the chosen block read at the model's named sites, each checked against its formula
    tr = forward_pass.trace(lm.model, torch.tensor([enc.input_ids]), token, layer, head,
                            torch.tensor([enc.token_type_ids]))
    top_words = [] if tr.mlm is None else lm.tokenizer.convert_ids_to_tokens(tr.mlm.top_ids)
    return Trace(enc, tr, top_words)


def layers_figure(result: Trace, rows: list[str]):
    """The followed token's vector after each layer (row 0: the embeddings), the chosen block outlined; ``rows``:
    the rows' labels."""
    tr, word = result.trace, result.encoding.tokens[result.trace.token]
    states = tr.hidden_states[:, tr.token].double().numpy()  # (L + 1, H)
    return figs.strips_figure([figs.Strip(f"'{word}' after each layer", states,
                                          f"(L + 1, T, H) = ({states.shape[0]}, {len(result.encoding)}, "
                                          f"{states.shape[1]})", "hidden_states[ℓ][i]", rows=rows,
                                          highlight=tr.layer + 1)])  # row 0 is the embeddings
