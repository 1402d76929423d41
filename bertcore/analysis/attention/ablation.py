"""Head ablation: switch attention heads off and compare the model before and after.

Two ways the literature uses (both through :meth:`bertcore.modeling.model.BertModel.forward`'s
``head_mask``): ``"zero"``, the head's output is multiplied by 0 (Michel et al. 2019, "Are Sixteen
Heads Really Better than One?", section 2; HF's ``head_mask``), and ``"uniform"``, the head attends
evenly to every token (Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", section 6).

What is compared, for whatever the model has: how far each layer's hidden states and the sentence
embeddings ([CLS], mean-pooled) move (cosine to the unablated run); fill-mask top-k at the
[MASK] tokens (MLM head); P(IsNext) (NSP head); the class probabilities (classification head);
and the MLM loss on a fixed held-out batch of BBC News text with fixed-seed masks.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics.pairwise import paired_cosine_distances

from ...modeling.attention import HEAD_ABLATIONS
from ...readouts.fill_mask import mlm_head_of
from ...tokenization.tokenizer import Encoding

MODES = {"zero": "Zero the head's output (Michel et al. 2019; HF head_mask)",
         "uniform": "Uniform attention (Kovaleva et al. 2019)"}
assert set(MODES) == set(HEAD_ABLATIONS)


def make_head_mask(num_layers: int, num_heads: int, heads: Iterable[tuple[int, int]] = (),
                   layers: Iterable[int] = (), device: torch.device | str | None = None) -> torch.Tensor:
    """A ``(num_layers, num_heads)`` float head mask, 1 keep / 0 off.

    Args:
        heads: ``(layer, head)`` pairs to switch off: block ``0..num_layers-1`` (as ``encoder.layer[i]``), head
            ``0..num_heads-1``.
        layers: whole blocks (``0..num_layers-1``) to switch off.
        device: where the mask goes: the model's (``bertcore.device.device_of(model)``); None: torch's default.
    Raises:
        ValueError: a layer or head outside the model (the message names the valid ranges).
    """
    mask = torch.ones(num_layers, num_heads, device=device)
    for layer, head in heads:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"head ({layer}, {head}) does not exist: layers 0..{num_layers - 1}, "
                             f"heads 0..{num_heads - 1}")
        mask[layer, head] = 0.0
    for layer in layers:
        if not 0 <= layer < num_layers:
            raise ValueError(f"layer {layer} does not exist: layers 0..{num_layers - 1}")
        mask[layer] = 0.0
    return mask


@dataclass
class Readout:
    """What one forward (ablated or not) says about the input.

    Attributes:
        hidden_states: ``(L+1, T, H)`` float32.
        pooled: ``(H,)`` float32 pooler output, or None (no pooler).
        fill_mask: per [MASK] position, ``(tokens, probs)`` of the top-k (MLM head only).
        p_is_next: P(sentence B follows A) from the NSP head, or None.
        class_probs: ``(C,)`` float32 softmax of the classifier, or None.
    """

    hidden_states: np.ndarray
    pooled: np.ndarray | None = None
    fill_mask: dict[int, tuple[list[str], list[float]]] = field(default_factory=dict)
    p_is_next: float | None = None
    class_probs: np.ndarray | None = None


@torch.no_grad()
def readout(model: torch.nn.Module, head: str, tokenizer, encoding: Encoding, head_mask: torch.Tensor | None,
            mode: str = "zero", k: int = 5) -> Readout:
    """One forward of ``model`` (a :mod:`bertcore.modeling.heads` class or :class:`BertModel`, eval mode) with
    ``head_mask`` / ``mode`` (None: unablated), read out through every head it has.

    Args:
        head: the model's head kind (:attr:`bertcore.loading.sources.LoadedModel.head`: base, mlm,
            pretraining, classification).
        k: fill-mask guesses per [MASK].
    Raises:
        bertcore.modeling.embeddings.InputError: the encoding does not fit the model; ValueError: bad mask / mode.
    """
    encoder = model.base_model
    inputs = encoding.tensors(next(model.parameters()).device)
    out = encoder(**inputs, output_hidden_states=True, head_mask=head_mask, head_ablation=mode)
    hidden = torch.stack([h[0] for h in out.hidden_states]).float().cpu().numpy()  # (L+1, T, H)
    pooled = out.pooler_output
    result = Readout(hidden, None if pooled is None else pooled[0].float().cpu().numpy())
    if head in ("mlm", "pretraining"):
        _, mlm = mlm_head_of(model)
        positions = [i for i, t in enumerate(encoding.input_ids) if t == tokenizer.mask_token_id]
        if positions:
            probs = mlm(out.last_hidden_state[0, positions]).float().softmax(-1)  # (N, V)
            top_p, top_i = probs.topk(min(k, probs.size(-1)), dim=-1)  # (N, k)
            for row, pos in enumerate(positions):
                result.fill_mask[pos] = (tokenizer.convert_ids_to_tokens(top_i[row].tolist()), top_p[row].tolist())
    if head == "pretraining" and pooled is not None:
        result.p_is_next = float(model.cls.seq_relationship(pooled).float().softmax(-1)[0, 0])
    if head == "classification" and pooled is not None:
        result.class_probs = model.classifier(pooled).float().softmax(-1)[0].cpu().numpy()
    return result


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of matching rows: ``a, b (N, H)`` -> ``(N,)`` float64 (scikit-learn)."""
    return 1.0 - paired_cosine_distances(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


@dataclass
class Movement:
    """How far the representations moved: cosine between the unablated and the ablated run.

    Attributes:
        per_token: ``(L+1, T)`` cosine of each token's hidden state at each layer (1 = unchanged).
        per_layer: ``(L+1,)`` mean of ``per_token`` over the tokens.
        cls: cosine of the last layer's [CLS] vector; mean_pooled: of the mean over all tokens;
        pooled: of the pooler output (None without a pooler).
    """

    per_token: np.ndarray
    per_layer: np.ndarray
    cls: float
    mean_pooled: float
    pooled: float | None


def movement(before: Readout, after: Readout) -> Movement:
    """Compare two :class:`Readout` of the same input (see :class:`Movement`)."""
    hb, ha = before.hidden_states, after.hidden_states  # (L+1, T, H)
    n, t, h = hb.shape
    per_token = paired_cosine(hb.reshape(-1, h), ha.reshape(-1, h)).reshape(n, t)  # (L+1, T)
    cls = float(paired_cosine(hb[-1, :1], ha[-1, :1])[0])
    mean_pooled = float(paired_cosine(hb[-1].mean(0, keepdims=True), ha[-1].mean(0, keepdims=True))[0])
    pooled = None
    if before.pooled is not None and after.pooled is not None:
        pooled = float(paired_cosine(before.pooled[None], after.pooled[None])[0])
    return Movement(per_token, per_token.mean(axis=1), cls, mean_pooled, pooled)


# ----------------------------------------------------------------------------- held-out MLM loss
HELDOUT_DOCS = 12  # BBC News articles in the fixed batch
HELDOUT_TOKENS = 48  # tokens per row (first paragraph, truncated)


def heldout_texts(n: int = HELDOUT_DOCS, seed: int = 0) -> list[str]:
    """The first paragraph of ``n`` BBC News articles chosen with ``random.Random(seed)`` (packaged corpus).

    Raises:
        bertcore.data.DataError: the packaged corpus is missing.
    """
    from ...data import bbc_dir, read_text

    files = sorted(bbc_dir().glob("*/*.txt"))
    chosen = sorted(random.Random(seed).sample(range(len(files)), min(n, len(files))))
    texts = []
    for i in chosen:
        paragraphs = [p.strip() for p in read_text(files[i]).split("\n") if p.strip()]
        texts.append(paragraphs[1] if len(paragraphs) > 1 else paragraphs[0])  # [0] is the headline
    return texts


def heldout_batch(tokenizer, texts: list[str], max_length: int = HELDOUT_TOKENS,
                  seed: int = 0) -> dict[str, torch.Tensor]:
    """``texts`` tokenized, padded and masked once with a fixed seed (15%, 80/10/10, as pretraining).

    Returns:
        ``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels`` (-100 where not selected),
        each ``(N, T)`` long, on the CPU (:func:`mlm_loss` moves them to the model's device).
    """
    from ...tokenization.masking import mask_for_tokenizer

    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    gen = torch.Generator().manual_seed(seed)
    # on the CPU on purpose: a CPU generator draws the same masks on every machine; mlm_loss moves the batch
    with torch.device("cpu"):
        masked = mask_for_tokenizer(tokenizer, enc["input_ids"], enc["attention_mask"], generator=gen)
    return {"input_ids": masked.input_ids, "token_type_ids": enc["token_type_ids"],
            "attention_mask": enc["attention_mask"], "labels": masked.labels}


@torch.no_grad()
def mlm_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor], head_mask: torch.Tensor | None = None,
             mode: str = "zero") -> float:
    """MLM cross-entropy (nats per masked token) of a model with an MLM head on :func:`heldout_batch`.

    Raises:
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    mlm_head_of(model)
    device = next(model.parameters()).device
    batch = {name: value.to(device) for name, value in batch.items()}
    out = model(**batch, masked_only=True, head_mask=head_mask, head_ablation=mode)
    return float(out.mlm_loss if hasattr(out, "mlm_loss") else out.loss)
