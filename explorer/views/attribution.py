"""The Attribution page's views: integrated gradients (Sundararajan et al. 2017; Captum's
``LayerIntegratedGradients`` on the word embeddings) of a classifier's class, a fill-mask guess or the similarity of
two sentences, one score per token; the [MASK]s of a text and the model's guesses there; a classifier's
probabilities (the what-if compares them)."""

from __future__ import annotations

import numpy as np

from bertcore.analysis.attention.ablation import readout
from bertcore.analysis.causal import attribution
from bertcore.readouts import fill_mask
from bertcore.tokenization.tokenizer import encode
from explorer.figures import attribution as attr_figures
from explorer.views.core import load, view


@view
def masks(source, text: str) -> list[int]:
    """The positions of the [MASK]s in ``text`` (``[mask]`` and ``[Mask]`` read as [MASK]). Raises ``TextError``."""
    lm = load(source)
    enc = encode(lm.tokenizer, fill_mask.normalise_mask_markers(text, lm.tokenizer), max_length=lm.max_length)
    positions = attribution.mask_positions(enc, lm.tokenizer)
    return positions


@view
def guesses(source, text: str, position: int) -> fill_mask.Prediction:
    """The MLM head's top 5 guesses at the [MASK] at ``position`` of ``text``. Raises ``TextError``."""
    lm = load(source)
    enc = encode(lm.tokenizer, fill_mask.normalise_mask_markers(text, lm.tokenizer), max_length=lm.max_length)
    t = enc.tensors(lm.device)
    top = fill_mask.predict(lm.model, lm.tokenizer, t["input_ids"], [position], k=5,
                            attention_mask=t["attention_mask"], token_type_ids=t["token_type_ids"])[0]
    return top


@view
def class_probs(source, text: str, other: str | None) -> np.ndarray | None:
    """The classifier's class probabilities ``(C,)`` for one input (one forward), or None without a classifier.
    Raises ``TextError``."""
    lm = load(source)
    enc = encode(lm.tokenizer, text, other, max_length=lm.max_length)
    probs = readout(lm.model, lm.head, lm.tokenizer, enc, None).class_probs
    return probs


@view
def explain(source, kind: str, text: str, other: str | None, position: int | None, target: int | None,
            n_steps: int) -> attribution.Attribution:
    """Integrated gradients of one output: ``kind`` "classification" (``target`` = class, None = the predicted one;
    ``other`` = sentence B or None), "fill_mask" (the guess ``target``, a token id, at the [MASK] at ``position``)
    or "similarity" (the cosine of ``text``'s and ``other``'s mean-pooled embeddings), in ``n_steps`` steps from
    the baseline (every word [PAD]). Raises ``TextError``, ``InputError`` and ``AttributionError``."""
    lm = load(source)
    # integrated gradients (Sundararajan et al. 2017): Captum's LayerIntegratedGradients, word embeddings
    if kind == "classification":
        res = attribution.explain_class(lm.model, lm.tokenizer, text, other, target=target, n_steps=n_steps)
    elif kind == "fill_mask":
        res = attribution.explain_fill_mask(lm.model, lm.tokenizer, text, position=position, token_id=target,
                                            n_steps=n_steps)
    else:
        res = attribution.explain_similarity(lm.model, lm.tokenizer, text, other or "", n_steps=n_steps)
    return res


def bars_figure(res: attribution.Attribution, per_word: bool = False, unit: str = "probability"):
    """One bar per token (or, ``per_word``, per word: the sum of its WordPieces); red pushes the output up."""
    labels, scores = res.word_scores() if per_word else (res.tokens, res.scores)
    return attr_figures.attribution_bars(labels, scores, f"What moves {res.target}", unit)
