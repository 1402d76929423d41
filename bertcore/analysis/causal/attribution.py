"""Integrated gradients (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks",
section 3) of one model output with respect to the input word embeddings, one score per token.

Computed with Captum's ``IntegratedGradients`` on the word embeddings, passed as ``inputs_embeds`` (the rows
of the encoder's input embedding table, HF ``BertEmbeddings.word_embeddings``; no hook on the model): the path
goes from the embeddings of a baseline input to those of the real input, with position and segment embeddings
unchanged. The baseline is the input with every token replaced by ``[PAD]``, except ``[CLS]``,
``[SEP]`` (and, for fill-mask, the ``[MASK]`` being predicted), which are kept.

Three outputs ``f`` can be explained:
- ``classification``: the softmax probability of a class (default: the predicted one) of a
  :class:`~bertcore.modeling.heads.BertForSequenceClassification`;
- ``fill_mask``: the softmax probability of one vocabulary token at one position of a model with
  an MLM head (:class:`~bertcore.modeling.heads.BertForMaskedLM` / ``BertForPreTraining``);
- ``similarity``: the cosine similarity between the mean-pooled last hidden states of sentence A
  and of a fixed sentence B (how sentence-transformers compare sentences), for any encoder,
  including the packaged MiniLM which has no head.

Completeness (IG's axiom): the token scores sum to ``f(x) - f(baseline)`` up to the integral's
approximation error, ``delta``; Captum's Gauss-Legendre rule keeps ``|delta|`` small at the default 20 steps.

Never imports streamlit or plotly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from transformers import BertTokenizerFast

from ...device import device_of
from ...readouts.fill_mask import FillMaskError, mlm_head_of, normalise_mask_markers
from ...modeling.model import BertModel
from ...tokenization.tokenizer import Encoding, encode

DEFAULT_STEPS = 20
TOKENS_PER_BATCH = 4096  # interpolation steps are batched so that batch x T stays near this

NO_CLASSIFIER = ("this model has no classification head (no `classifier` weights). Fine-tune one on the Train "
                 "page (task: fine-tune) and pick its checkpoint in the sidebar.")


class AttributionError(ValueError):
    """A model or an input that cannot be explained this way (the message says why and what to do)."""


@dataclass
class Attribution:
    """Integrated-gradients scores of one output.

    Attributes:
        encoding: the input (T tokens) that was explained.
        scores: ``(T,)`` float64, one score per token: the attribution summed over the hidden
            dimension, in units of ``f`` (probability or cosine); positive pushes ``f`` up.
        f_input / f_baseline: ``f(x)`` and ``f(baseline)``.
        delta: Captum's convergence delta, ``sum(scores) - (f_input - f_baseline)``.
        n_steps: integration steps used.
        target: what ``f`` is, for people (``P(class = sport)``, ``P("paris" at position 6)``).
    """

    encoding: Encoding
    scores: np.ndarray
    f_input: float
    f_baseline: float
    delta: float
    n_steps: int
    target: str

    @property
    def tokens(self) -> list[str]:
        return self.encoding.tokens

    @property
    def relative_error(self) -> float:
        """``|delta| / |f_input - f_baseline|`` (inf when f does not change along the path)."""
        change = abs(self.f_input - self.f_baseline)
        return abs(self.delta) / change if change > 0 else float("inf")

    def word_scores(self) -> tuple[list[str], np.ndarray]:
        """Scores per word: the sum over each word's WordPieces (``encoding.word_ids``), special
        tokens dropped. Returns ``(words, scores (W,))``; a word's text is its pieces joined."""
        words, scores = [], []
        for positions in self.encoding.words:
            words.append("".join(self.encoding.tokens[p].removeprefix("##") for p in positions))
            scores.append(float(self.scores[positions].sum()))
        return words, np.array(scores, dtype=np.float64)


def _encoder(model: torch.nn.Module) -> BertModel:
    return model.base_model  # the BertModel inside any head class (HF's base_model)


def baseline_ids(input_ids: torch.Tensor, pad_id: int, keep: torch.Tensor) -> torch.Tensor:
    """``input_ids (1, T)`` with every position where ``keep (1, T) bool`` is False set to ``pad_id``."""
    return torch.where(keep, input_ids, torch.full_like(input_ids, pad_id))


def integrated_gradients(forward, encoder: BertModel, inputs: dict[str, torch.Tensor], keep: torch.Tensor,
                         pad_id: int, n_steps: int = DEFAULT_STEPS) -> tuple[np.ndarray, float, float, float]:
    """Captum ``IntegratedGradients`` of ``forward`` w.r.t. the word embeddings (``inputs_embeds``).

    The same attribution as Captum's ``LayerIntegratedGradients`` on ``encoder.embeddings.word_embeddings``, but
    the word embeddings are computed here and passed in, so no hook is put on the model (it is shared by every
    session of the app: a hook would act on their forward passes too); the gradients come from
    ``torch.autograd.grad`` on the interpolated embeddings and are written into no parameter.

    Args:
        forward: ``f(inputs_embeds, token_type_ids, attention_mask) -> (B,)`` float (batched by Captum), where
            ``inputs_embeds`` is ``(B, T, H)``, as :meth:`bertcore.modeling.model.BertModel.forward` takes it.
        encoder: the :class:`BertModel` whose word embeddings are attributed.
        inputs: ``input_ids``, ``token_type_ids``, ``attention_mask``, each ``(1, T)`` long.
        keep: ``(1, T)`` bool, positions the baseline keeps (the rest become ``pad_id``).
        n_steps: integration steps (Gauss-Legendre).
    Returns:
        ``(scores (T,) float64, f_input, f_baseline, delta)``.
    Raises:
        AttributionError: ``n_steps < 2``.
    Source: Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks"; Captum ``IntegratedGradients``.
    """
    from captum.attr import IntegratedGradients

    if n_steps < 2:
        raise AttributionError(f"integrated gradients needs at least 2 steps, got {n_steps}")
    ids, tt, am = inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"]
    t = ids.size(1)
    with torch.no_grad():
        word = encoder.embeddings.word_embeddings(ids)  # (1, T, H)
        base = encoder.embeddings.word_embeddings(baseline_ids(ids, pad_id, keep))  # (1, T, H)
    ig = IntegratedGradients(forward)
    attr, delta = ig.attribute(word, baselines=base, additional_forward_args=(tt, am), n_steps=n_steps,
                               internal_batch_size=max(1, TOKENS_PER_BATCH // t), return_convergence_delta=True)
    with torch.no_grad():
        f = forward(torch.cat([word, base]), tt.expand(2, -1), am.expand(2, -1))  # (2,)
    scores = attr[0].sum(-1).detach().double().cpu().numpy()  # (T, H) -> (T,)
    return scores, float(f[0]), float(f[1]), float(delta.reshape(-1)[0])


def _encode(tokenizer: BertTokenizerFast, model: torch.nn.Module, text: str, text_pair: str | None = None) -> Encoding:
    """Encode, truncated to what the model reads (as ``LoadedModel.max_length``)."""
    limit = min(int(_encoder(model).config.max_sequence_length), int(tokenizer.model_max_length))
    return encode(tokenizer, text, text_pair, max_length=limit)


def _special(enc: Encoding, device: torch.device) -> torch.Tensor:
    return torch.tensor([enc.special_tokens_mask], dtype=torch.bool, device=device)  # (1, T)


def explain_class(model: torch.nn.Module, tokenizer: BertTokenizerFast, text: str, text_pair: str | None = None,
                  target: int | None = None, n_steps: int = DEFAULT_STEPS) -> Attribution:
    """IG of ``P(class = target)`` (softmax of the classifier's logits) of a sequence classifier.

    Args:
        model: a :class:`~bertcore.modeling.heads.BertForSequenceClassification` (eval mode).
        target: class index; None = the predicted class.
    Raises:
        AttributionError: no classifier, or a class index out of range.
        bertcore.tokenization.tokenizer.TextError: empty / unreadable text.
    """
    if not hasattr(model, "classifier"):
        raise AttributionError(NO_CLASSIFIER)
    enc = _encode(tokenizer, model, text, text_pair)
    device = device_of(model)
    inputs = enc.tensors(device)
    with torch.no_grad():
        logits = model(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"]).logits[0]
    n = logits.numel()
    if target is None:
        target = int(logits.argmax())
    if not 0 <= target < n:
        raise AttributionError(f"class {target} does not exist: this classifier has {n} classes")
    names = getattr(_encoder(model).config, "id2label", None) or {}

    def forward(embeds, tt, am):
        return model(None, am, tt, inputs_embeds=embeds).logits.softmax(-1)[:, target]  # (B,)

    scores, fx, fb, delta = integrated_gradients(forward, _encoder(model), inputs, _special(enc, device),
                                                 tokenizer.pad_token_id, n_steps)
    return Attribution(enc, scores, fx, fb, delta, n_steps, f"P(class = {names.get(target, target)})")


def mask_positions(encoding: Encoding, tokenizer: BertTokenizerFast) -> list[int]:
    """Positions of the ``[MASK]`` tokens in an encoding."""
    return [i for i, tid in enumerate(encoding.input_ids) if tid == tokenizer.mask_token_id]


def explain_fill_mask(model: torch.nn.Module, tokenizer: BertTokenizerFast, text: str, position: int | None = None,
                      token_id: int | None = None, n_steps: int = DEFAULT_STEPS) -> Attribution:
    """IG of ``P(token_id at position)`` of a model with an MLM head.

    Args:
        text: a text with at least one ``[MASK]`` (any case: ``[mask]`` works too).
        position: the token position to explain; None = the first ``[MASK]``.
        token_id: the vocabulary id whose probability is explained; None = the top prediction.
    Raises:
        AttributionError: no MLM head, no [MASK] in the text, or a position / id out of range.
        bertcore.tokenization.tokenizer.TextError: empty / unreadable text.
    """
    try:
        encoder, head = mlm_head_of(model)
    except FillMaskError as exc:
        raise AttributionError(str(exc)) from exc
    enc = _encode(tokenizer, model, normalise_mask_markers(text or "", tokenizer))
    masks = mask_positions(enc, tokenizer)
    if position is None:
        if not masks:
            raise AttributionError("the text has no [MASK]: type [MASK] where the model should guess a word.")
        position = masks[0]
    if not 0 <= position < len(enc):
        raise AttributionError(f"position {position} is outside the {len(enc)} tokens")
    device = device_of(model)
    inputs = enc.tensors(device)

    def forward(embeds, tt, am):
        hidden = encoder(None, am, tt, inputs_embeds=embeds).last_hidden_state[:, position]  # (B, H)
        return head(hidden).softmax(-1)[:, token_id]  # (B,)

    if token_id is None:
        with torch.no_grad():
            token_id = int(head(encoder(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"])
                                .last_hidden_state[:, position]).argmax(-1)[0])
    vocab = encoder.config.vocab_size
    if not 0 <= token_id < vocab:
        raise AttributionError(f"token id {token_id} is outside the vocabulary (0..{vocab - 1})")
    keep = _special(enc, device)
    keep[0, position] = True  # the [MASK] being predicted stays in the baseline
    scores, fx, fb, delta = integrated_gradients(forward, encoder, inputs, keep, tokenizer.pad_token_id, n_steps)
    word = tokenizer.convert_ids_to_tokens(token_id)
    return Attribution(enc, scores, fx, fb, delta, n_steps, f'P("{word}" at position {position})')


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden (B, T, H)`` over the tokens where ``attention_mask (B, T)`` is 1 -> ``(B, H)``
    (sentence-transformers' mean pooling, as all-MiniLM-L6-v2 was trained with)."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def explain_similarity(model: torch.nn.Module, tokenizer: BertTokenizerFast, text: str, other: str,
                       n_steps: int = DEFAULT_STEPS) -> Attribution:
    """IG of the cosine similarity between the mean-pooled embeddings of ``text`` and ``other``,
    attributed to the tokens of ``text`` (``other``'s embedding is held fixed).

    Works for any encoder (no head needed). Raises ``TextError`` for an empty text or other.
    """
    encoder = _encoder(model)
    enc = _encode(tokenizer, model, text)
    enc_b = _encode(tokenizer, model, other)
    device = device_of(model)
    b = enc_b.tensors(device)
    with torch.no_grad():
        pooled_b = mean_pool(encoder(b["input_ids"], b["attention_mask"], b["token_type_ids"]).last_hidden_state,
                             b["attention_mask"])  # (1, H)

    def forward(embeds, tt, am):
        pooled = mean_pool(encoder(None, am, tt, inputs_embeds=embeds).last_hidden_state, am)  # (B, H)
        return torch.nn.functional.cosine_similarity(pooled, pooled_b, dim=-1)  # (B,)

    scores, fx, fb, delta = integrated_gradients(forward, encoder, enc.tensors(device), _special(enc, device),
                                                 tokenizer.pad_token_id, n_steps)
    return Attribution(enc, scores, fx, fb, delta, n_steps, "cosine(sentence A, sentence B)")

