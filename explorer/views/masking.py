"""The Masking page's views: one masking draw as the training collator makes it (Devlin et al. 2019, section 3.1),
the MLM head's guesses at every selected or typed [MASK], and the logit lens of what the model was fed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertcore.analysis.attention import decompx
from bertcore.analysis.causal import faithfulness
from bertcore.analysis.representations import logit_lens
from bertcore.readouts import fill_mask
from bertcore.tokenization import masking
from bertcore.tokenization.tokenizer import Encoding, encode
from explorer.figures import lens as lens_figures
from explorer.figures import masking as mask_figures
from explorer.views.core import load, view

MAX_PANELS = 12  # bar charts drawn; the page's table lists every position


@dataclass
class Draw:
    """One masking draw. ``tokens``: the T WordPieces of the text; ``fed_tokens``: what the model is fed;
    ``input_ids`` / ``labels`` / ``token_type_ids`` / ``attention_mask``: ``(T,)`` int64 (labels -100 where not
    selected); ``decisions``: per position, a :data:`bertcore.tokenization.masking.DECISION_NAMES` index;
    ``eligible``: which positions may be selected; ``counts``: selected / masked / random / unchanged / eligible;
    ``typed_masks``: positions of [MASK]s in the text; ``positions``: where the model is asked (selected or typed);
    ``num_truncated``: tokens cut at the model's length."""

    tokens: list[str]
    fed_tokens: list[str]
    input_ids: np.ndarray
    labels: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    decisions: list[int]
    eligible: list[bool]
    counts: dict[str, int]
    typed_masks: list[int]
    positions: list[int]
    num_truncated: int


@view
def encoding(source, text: str, text_pair: str | None) -> Encoding:
    """``text`` (and ``text_pair``) as the model reads it, cut to its length: one
    :class:`~bertcore.tokenization.tokenizer.Encoding` that every view of the page reads (a repaint encodes once).
    People type [mask] or [Mask]: the tokenizer knows only its own spelling, so both are normalised first.

    Raises ``TextError`` (an empty or unreadable text)."""
    lm = load(source)
    marked = [None if s is None else fill_mask.normalise_mask_markers(s, lm.tokenizer) for s in (text, text_pair)]
    return encode(lm.tokenizer, *marked, max_length=lm.max_length)


@view
def draw(source, text: str, text_pair: str | None, rate: float, whole_word: bool, mask_replace_prob: float,
         random_replace_prob: float, seed: int) -> Draw:
    """Which tokens BERT's MLM selects in ``text`` (and ``text_pair``) and what it feeds instead, with ``seed``.

    Raises ``TextError`` (empty text) and ``MaskingError`` (fractions that do not add up)."""
    lm = load(source)
    tok = lm.tokenizer
    enc = encoding(source, text, text_pair)
    # on the CPU on purpose: a CPU generator gives the same draw for a seed on every device (the views that run
    # the model move what it is fed there)
    t = enc.tensors("cpu")
    # which tokens may be selected, then BERT's 15% / 80-10-10 draw (Devlin et al. 2019, section 3.1)
    with torch.device("cpu"):  # the tokenizer's special-id and continuation tables, on the CPU as the draw
        eligible = masking.eligible_positions(tok, t["input_ids"], t["attention_mask"])  # (1, T) bool
        word_ids = masking.whole_word_ids(tok, t["input_ids"], eligible) if whole_word else None
    drawn = masking.mask_tokens(t["input_ids"], eligible, mask_token_id=tok.mask_token_id, vocab_size=len(tok),
                                mlm_probability=rate, mask_replace_prob=mask_replace_prob,
                                random_replace_prob=random_replace_prob, word_ids=word_ids,
                                generator=torch.Generator().manual_seed(seed))
    decisions = drawn.decision[0].tolist()
    typed = fill_mask.mask_token_positions(tok, t["input_ids"])
    selected = [i for i, d in enumerate(decisions) if d != masking.NOT_SELECTED]
    return Draw(tokens=enc.tokens, fed_tokens=tok.convert_ids_to_tokens(drawn.input_ids[0].tolist()),
                input_ids=drawn.input_ids[0].numpy(), labels=drawn.labels[0].numpy(),
                token_type_ids=t["token_type_ids"][0].numpy(), attention_mask=t["attention_mask"][0].numpy(),
                decisions=decisions, eligible=eligible[0].tolist(), counts=drawn.counts(), typed_masks=typed,
                positions=sorted(set(selected) | set(typed)), num_truncated=enc.num_truncated)


@dataclass
class Guesses:
    """The MLM head at every asked position of a :class:`Draw`: ``predictions`` (top-k tokens and probabilities,
    the original's rank), ``probs`` ``(N, k)`` float, ``logits`` ``(N, V)`` float32 (for sampling)."""

    draw: Draw
    predictions: list[fill_mask.Prediction]
    probs: np.ndarray
    logits: np.ndarray


@view
def guesses(source, text: str, text_pair: str | None, rate: float, whole_word: bool, mask_replace_prob: float,
            random_replace_prob: float, seed: int, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
            k: int = 5) -> Guesses:
    """The MLM head's top-``k`` guesses at every position :func:`draw` selected or the text typed as [MASK],
    decoded with ``temperature``, ``top_k`` (0 = off) and ``top_p`` (1 = off), as Hugging Face's logits warpers.

    Raises what :func:`draw` raises, and ``FillMaskError`` for a model without an MLM head or nothing to ask."""
    lm = load(source)
    d = draw(source, text, text_pair, rate, whole_word, mask_replace_prob, random_replace_prob, seed)
    device = lm.device
    input_ids = torch.tensor(d.input_ids, device=device)[None]
    logits = fill_mask.mlm_logits_at(lm.model, input_ids, d.positions,
                                     torch.tensor(d.attention_mask, device=device)[None],
                                     torch.tensor(d.token_type_ids, device=device)[None])  # (N, V)
    decoding = fill_mask.Decoding(temperature, top_k, top_p)  # softmax(logits / T), then top-k, then top-p
    preds = fill_mask.predictions_from_logits(lm.tokenizer, input_ids, d.positions, logits,
                                              torch.tensor(d.labels, device=device)[None], k, decoding)
    return Guesses(d, preds, np.array([p.probs for p in preds]), logits.cpu().numpy())


@view
def sampled(source, text: str, text_pair: str | None, rate: float, whole_word: bool, mask_replace_prob: float,
            random_replace_prob: float, seed: int, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
            k: int = 5, sample_seed: int = 0) -> list[str]:
    """One word drawn at each position of :func:`guesses` (the same parameters) from its decoded distribution, with
    a ``torch.Generator`` seeded with ``sample_seed`` (:func:`bertcore.readouts.fill_mask.sample`)."""
    g = guesses(source, text, text_pair, rate, whole_word, mask_replace_prob, random_replace_prob, seed,
                temperature, top_k, top_p, k)
    # on the CPU on purpose: the draw uses a CPU generator, the same ids for a seed on every device
    ids = fill_mask.sample(torch.tensor(g.logits, device="cpu"), fill_mask.Decoding(temperature, top_k, top_p),
                           sample_seed)
    return load(source).tokenizer.convert_ids_to_tokens(ids)


def grid_figure(g: Guesses | Draw):
    """What the model is fed: one cell per token, coloured by its masking decision."""
    d = g.draw if isinstance(g, Guesses) else g
    return mask_figures.decision_grid(d.tokens, d.decisions, d.eligible, d.fed_tokens,
                                      per_row=12 if len(d.tokens) <= 120 else 16)


def bars_figure(g: Guesses, drawn: list[str] | None = None):
    """The top guesses at the first :data:`MAX_PANELS` positions (green: the original token); ``drawn``: a sampled
    word per position, named in the titles."""
    d, shown = g.draw, g.predictions[:MAX_PANELS]
    titles = []
    for i, p in enumerate(shown):
        orig, seen = d.tokens[p.position], d.fed_tokens[p.position]
        title = (f"pos {p.position}: your [MASK]" if p.original_id is None
                 else f"pos {p.position}: {orig}" + ("" if seen == orig else f" → {seen}"))
        titles.append(title if drawn is None else f"{title} · drew {drawn[i]}")
    return mask_figures.topk_figure(titles, [p.tokens for p in shown], [p.probs for p in shown],
                                    [None if p.original_id is None else d.tokens[p.position] for p in shown])


@dataclass
class Lens:
    """The logit lens of a draw: ``lens`` (:class:`~bertcore.analysis.representations.logit_lens.LogitLens`, tensors
    over L+1 layers), ``top_tokens`` ``[layer][position][k]`` (its top ids as WordPieces), ``fed_tokens`` (T)."""

    lens: logit_lens.LogitLens
    top_tokens: list[list[list[str]]]
    fed_tokens: list[str]


@view
def lens(source, text: str, text_pair: str | None, rate: float, whole_word: bool, mask_replace_prob: float,
         random_replace_prob: float, seed: int, tuned: Path | None = None) -> Lens:
    """The logit lens (nostalgebraist 2020) of what :func:`draw` fed the model: every layer's hidden state decoded
    by the model's own MLM head, or through the tuned lens in the file ``tuned`` (Belrose et al. 2023; the cache
    key holds the file's size and modification time, so a refitted lens is read again).

    Raises what :func:`draw` raises, ``ValueError`` for an unreadable tuned-lens file, and ``FillMaskError``
    without an MLM head."""
    lm = load(source)
    d = draw(source, text, text_pair, rate, whole_word, mask_replace_prob, random_replace_prob, seed)
    tuned_lens = None if tuned is None else logit_lens.load_tuned_lens(tuned).to(lm.device)  # read here: ours
    ll = logit_lens.logit_lens(lm.model, torch.tensor(d.input_ids, device=lm.device)[None], None,
                               torch.tensor(d.token_type_ids, device=lm.device)[None], k=5, tuned=tuned_lens)
    top_tokens = [[lm.tokenizer.convert_ids_to_tokens(row) for row in layer] for layer in ll.top_ids.tolist()]
    return Lens(ll, top_tokens, d.fed_tokens)


def lens_figure(result: Lens, positions: list[int] | None = None,
                title: str = "Logit lens: each layer's best guess at each position"):
    """The lens grid: each layer's top guess at each position (or only at ``positions``)."""
    return lens_figures.lens_grid(result.fed_tokens, result.top_tokens, result.lens.top_probs.cpu().numpy(),
                                  result.lens.final_rank.cpu().numpy(), title=title, positions=positions)


@dataclass
class Candidates:
    """The top ``k`` fills at a [MASK]: ``ids`` and ``tokens`` (most probable first), over the encoding of the
    text the explanations read (``tokens`` of the input: ``input_tokens``)."""

    ids: list[int]
    tokens: list[str]
    input_tokens: list[str]


@view
def candidates(source, text: str, text_pair: str | None, position: int, k: int = 5) -> Candidates:
    """The MLM head's top ``k`` ids at ``position`` of ``text`` (one forward; [mask] spellings normalised, cut to
    the model's length). Raises ``TextError`` for empty text, ``FillMaskError`` without an MLM head."""
    lm = load(source)
    tok = lm.tokenizer
    enc = encoding(source, text, text_pair)
    t = enc.tensors(lm.device)
    logits = fill_mask.mlm_logits_at(lm.model, t["input_ids"], [position], t["attention_mask"],
                                     t["token_type_ids"])[0]  # (V,)
    ids = logits.topk(k).indices.tolist()
    return Candidates(ids, tok.convert_ids_to_tokens(ids), enc.tokens)


@dataclass
class Explanations:
    """Which input tokens made the logit of ``token_id`` at a [MASK] (minus ``bad_id``'s when given): ``decompx``
    (its per-token contributions and the rest, None where it does not apply: ``decompx_error`` says why), ``ig``
    ``(T,)`` integrated gradients, ``occlusion`` ``(T,)`` (0 at special tokens and the position itself)."""

    tokens: list[str]
    decompx: object
    decompx_error: str | None
    ig: np.ndarray
    occlusion: np.ndarray


@view
def explanations(source, text: str, text_pair: str | None, position: int, token_id: int,
                 bad_id: int | None = None) -> Explanations:
    """DecompX (Modarressi et al. 2023: the logit split exactly into one term per input token plus the biases),
    integrated gradients (Sundararajan et al. 2017, from [PAD]s) and occlusion (the token replaced by [MASK]) of
    the logit of ``token_id`` at ``position`` (minus that of ``bad_id``). Raises ``ValueError`` (no MLM head, a
    position out of range)."""
    lm = load(source)
    tok = lm.tokenizer
    enc = encoding(source, text, text_pair)
    inputs = enc.tensors(lm.device)
    special = np.array(enc.special_tokens_mask, dtype=bool)
    dx, dx_error = None, None
    try:  # DecompX decomposes post-LN BERT only: a pre-LN model says why
        dx = (decompx.fill_mask(lm.model, inputs, position, [token_id]) if bad_id is None
              else decompx.logit_difference(lm.model, inputs, position, token_id, bad_id))
    except ValueError as exc:
        dx_error = str(exc)
    ig = faithfulness.ig_scores(lm.model, inputs, position, token_id, tok.pad_token_id, special, bad_id=bad_id)
    ranked = [j for j in range(len(enc)) if not special[j] and j != position]
    occlusion = np.zeros(len(enc))
    occlusion[ranked] = faithfulness.occlusion(lm.model, inputs, position, token_id, tok.mask_token_id, ranked,
                                               bad_id=bad_id)
    return Explanations(enc.tokens, dx, dx_error, ig, occlusion)


@view
def faithfulness_table(source, text: str, text_pair: str | None, position: int,
                       token_id: int) -> faithfulness.Faithfulness:
    """How faithful each explanation of the prediction ``token_id`` at ``position`` is: Spearman's correlation of
    its ranking with two ways of removing each token (:func:`bertcore.analysis.causal.faithfulness.measure`)."""
    lm = load(source)
    tok = lm.tokenizer
    enc = encoding(source, text, text_pair)
    return faithfulness.measure(lm.model, enc.tensors(lm.device), position, token_id, tok.mask_token_id,
                                tok.pad_token_id, np.array(enc.special_tokens_mask, dtype=bool))
