"""Next sentence prediction: does sentence B follow sentence A? (Devlin et al. 2019, section 3.1,
"Task #2: Next Sentence Prediction"; HF ``BertForNextSentencePrediction`` / ``BertForPreTraining``).

BERT reads ``[CLS] A [SEP] B [SEP]`` (segment 0 for A and its [SEP], 1 for B); the pooler turns
the final ``[CLS]`` vector into ``tanh(W h_CLS + b)`` and the NSP head ``cls.seq_relationship``
maps it to 2 logits: index 0 = IsNext (B is A's real continuation), 1 = NotNext (B is a random
sentence from another document). Only models that carry ``cls.seq_relationship`` weights
(``BertForPreTraining`` checkpoints) can answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..device import device_of
from ..tokenization.tokenizer import Encoding, encode


class NextSentenceError(ValueError):
    """A model without an NSP head (the message says what to pick instead)."""


NO_NSP_HEAD = ("this model has no next-sentence head (no cls.seq_relationship weights), so it cannot score "
               "sentence pairs. Choose a model trained with NSP: the packaged MiniLM-MLM, a checkpoint of a "
               "pretraining run with NSP on, or an HF folder saved from BertForPreTraining (e.g. bert-base-uncased).")


#: why a family has no NSP head at all (its pretraining dropped the task)
FAMILY_WITHOUT_NSP = {
    "roberta": "RoBERTa is trained without next-sentence prediction (Liu et al. 2019, section 4.2, found it did not "
               "help)",
    "distilbert": "DistilBERT is distilled with the MLM loss only, without next-sentence prediction (Sanh et al. 2019)",
    "electra": "ELECTRA is trained on replaced-token detection, without next-sentence prediction (Clark et al. 2020)",
    "modernbert": "ModernBERT is trained with MLM only, without next-sentence prediction (Warner et al. 2024)",
}


def no_nsp_reason(config) -> str:
    """The one line a page shows for a model without an NSP head: the family's reason, or :data:`NO_NSP_HEAD`."""
    reason = FAMILY_WITHOUT_NSP.get(getattr(config, "family", "bert"))
    return NO_NSP_HEAD if reason is None else f"{reason}, so it cannot score sentence pairs."


@dataclass
class NextSentencePrediction:
    """The NSP head's answer for one pair.

    Attributes:
        p_is_next: softmax probability of IsNext (float in [0, 1]).
        logits: ``[IsNext, NotNext]`` raw scores.
        encoding: the tokenized pair (tokens, token_type_ids, ``num_truncated`` ...).
        cls_attention: ``(L, heads, T)`` float32: how much ``[CLS]`` attends to each token in
            every layer and head (row 0 of each attention map).
    """

    p_is_next: float
    logits: list[float]
    encoding: Encoding
    cls_attention: np.ndarray


def has_nsp_head(model: torch.nn.Module) -> bool:
    """True for models with ``cls.seq_relationship`` (``BertForPreTraining``)."""
    return hasattr(getattr(model, "cls", None), "seq_relationship")


@torch.no_grad()
def predict(model: torch.nn.Module, tokenizer, sentence_a: str, sentence_b: str,
            max_length: int | None = None) -> NextSentencePrediction:
    """P(IsNext) for ``[CLS] sentence_a [SEP] sentence_b [SEP]`` and the [CLS] attention.

    Args:
        model: a :class:`~bertcore.modeling.heads.BertForPreTraining` (eval mode).
        max_length: longest input in tokens (the pair is cut longest-first beyond it).
    Raises:
        NextSentenceError: the model has no NSP head.
        bertcore.tokenization.tokenizer.TextError: an empty sentence or an input that cannot be encoded.
    """
    if not has_nsp_head(model):
        raise NextSentenceError(NO_NSP_HEAD)
    enc = encode(tokenizer, sentence_a, sentence_b, max_length=max_length)
    out = model.base_model(**enc.tensors(device_of(model)), output_attentions=True)
    logits = model.cls.seq_relationship(out.pooler_output)[0].float()  # (2,)
    attn = torch.stack([a[0, :, 0, :] for a in out.attentions]).float().cpu().numpy()  # (L, heads, T)
    return NextSentencePrediction(float(logits.softmax(-1)[0]), logits.tolist(), enc, attn)
