"""The Features page's computations: which features fire on a text, what one feature does, steering.

Each works for a TopK SAE and (all but steering) for a transcoder (:class:`bertcore.sae.transcoder.Transcoder`), by its
``kind``: an SAE's features are read from the block's output, a transcoder's from the block's feed-forward input
(:func:`bertcore.sae.transcoder.sites`), each through :data:`bertcore.sae.stream.READERS`.

Every function reads the model through one forward call with :class:`bertcore.modeling.interventions.Interventions` (no
hook, no attribute, no mode change: a cached shared model stays untouched, ``docs/CONTRACTS.md``). An SAE's
``layer`` is the 0-based block whose output it reads (``0..L-1``: the output of transformers'
``bert.encoder.layer.{layer}``, the site :func:`bertcore.sae.io.site` names; a block outside the model raises
:class:`bertcore.sae.io.SAEError`, a ``ValueError`` naming the range); feature activations are in
the SAE's units (the input scaled to mean norm ``sqrt(d_in)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..device import device_of
from ..readouts.fill_mask import FillMaskError, mask_token_positions, mlm_head_of, predictions_from_logits
from ..modeling.interventions import Interventions, eval_mode
from ..tokenization.tokenizer import encode
from .io import SAEError, site
from .model import TopKSAE
from .stream import READERS
from .transcoder import Transcoder


@dataclass
class TextFeatures:
    """``tokens`` (T WordPieces, [CLS]/[SEP] included) and ``z (T, d_sae)`` float32 their feature activations;
    ``num_truncated``: the tokens cut off the end of a text longer than ``max_length``."""

    tokens: list[str]
    z: np.ndarray
    num_truncated: int = 0

    def strongest(self, n: int = 12) -> list[int]:
        """The ``n`` features with the largest activation anywhere in the text, strongest first (active ones)."""
        peak = self.z.max(axis=0)
        order = np.argsort(-peak)[:n]
        return [int(f) for f in order if peak[f] > 0]

    def at(self, position: int, n: int = 10) -> list[tuple[int, float]]:
        """The active features at one token, ``(feature, activation)``, strongest first."""
        row = self.z[position]
        order = np.argsort(-row)[:n]
        return [(int(f), float(row[f])) for f in order if row[f] > 0]


def activations(model, batch: dict[str, torch.Tensor], sae: TopKSAE | Transcoder, layer: int) -> torch.Tensor:
    """``(B, T, d_sae)`` float32: the feature activations of ``sae`` at block ``layer`` (0-based) on ``batch``, one
    forward pass stopped after that block: an SAE encodes the block's output, a transcoder the block's feed-forward
    input (the first ``d_in`` of :func:`bertcore.sae.stream.feed_forward_pairs`).

    Raises:
        SAEError: a block outside ``0..L-1``.
    """
    site(getattr(model, "base_model", model).config, layer)  # SAEError for a block outside 0..L-1, either kind
    with torch.no_grad():
        read = READERS[sae.kind](model, batch, [layer])[layer].float()  # (B, T, H) or (B, T, d_in + d_out)
        return sae.encode(read[..., :sae.d_in])


def text_features(model, tokenizer, sae: TopKSAE | Transcoder, layer: int, text: str,
                  max_length: int | None = None) -> TextFeatures:
    """The SAE's (or transcoder's) feature activations on each token of ``text`` (:func:`activations`).

    Raises:
        bertcore.tokenization.tokenizer.TextError: empty or unusable text.
        SAEError: a block outside ``0..L-1``.
    """
    enc = encode(tokenizer, text, max_length=max_length)
    z = activations(model, enc.tensors(device_of(model)), sae, layer)[0]  # (T, d_sae)
    return TextFeatures(list(enc.tokens), z.cpu().numpy(), enc.num_truncated)


def search(model, tokenizer, sae: TopKSAE | Transcoder, layer: int, phrase: str,
           n: int = 10) -> list[tuple[int, float]]:
    """The features that fire most on ``phrase``: ``(feature, mean activation over its WordPieces)``, strongest
    first ([CLS]/[SEP] left out)."""
    tf = text_features(model, tokenizer, sae, layer, phrase)
    inner = tf.z[1:-1] if tf.z.shape[0] > 2 else tf.z
    mean = inner.mean(axis=0)
    order = np.argsort(-mean)[:n]
    return [(int(f), float(mean[f])) for f in order if mean[f] > 0]


def nearest(sae: TopKSAE | Transcoder, feature: int, n: int = 8) -> list[tuple[int, float]]:
    """The features whose decoder directions (what they write) are closest to ``feature``'s: ``(feature, cosine)``."""
    w = sae.W_dec.detach()
    w = w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)
    cos = w @ w[feature]
    cos[feature] = -2.0
    values, idx = cos.topk(n)
    return [(int(i), float(v)) for i, v in zip(idx, values)]


@torch.no_grad()
def logit_effects(model, sae: TopKSAE | Transcoder, layer: int, features, base: torch.Tensor | np.ndarray,
                  strengths, n: int = 10, batch: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """What each of ``features`` writes, read through the MLM head (``cls.predictions``: the post-LN transform and
    the decoder) as a logit lens reads a direction: ``head(h + strength * d) - head(h)``, ``d`` the feature's decoder
    direction in the model's units (``W_dec[f] / c``). ``base``: the feature index's ``mean``
    (:class:`bertcore.sae.features.FeatureIndex`); ``strengths``: one activation per feature (its strongest
    held-out one), in the SAE's units.

    - An SAE of block ``layer``: ``h`` is the layer's mean hidden state (``base (H,)``), ``c`` the SAE's
      ``norm_scale``.
    - A transcoder of block ``layer`` writes into the block's feed-forward output ``hook_mlp_out`` (what ``decode``
      adds there; ``c`` its ``out_scale``): ``h = LN(r + strength * d)`` against ``LN(r)``, ``r`` the block's mean
      pre-LN residual sum ``hook_resid_post`` (post-LN: the mean feed-forward input plus the mean feed-forward
      output, the two halves of ``base (d_in + d_out,)``) and ``LN`` the block's output LayerNorm
      (``encoder.layer[layer].output.LayerNorm``). The LayerNorm of the mean, not the mean of the LayerNorms: like
      the SAE's, a typical state, not an average of effects.

    Returns ``(ids, delta)``, each ``(F, 2n)``: per feature the ``n`` token ids it promotes most then the ``n`` it
    suppresses most, and their Δ logit (float32; the first ``n`` descending, the last ``n`` ascending). Computed
    ``batch`` features at a time, on the model's device.

    Raises:
        FillMaskError: the model has no MLM head.
        SAEError: a block outside ``0..L-1``; a transcoder of a pre-LN model (its block has no output LayerNorm:
            the logit effect is computed for post-LN models only).
    """
    encoder, head = mlm_head_of(model)
    site(encoder.config, layer)
    weight = next(head.parameters())
    features = torch.as_tensor(features, dtype=torch.long, device=weight.device).reshape(-1)  # (F,)
    strengths = torch.as_tensor(strengths, dtype=weight.dtype, device=weight.device).reshape(-1, 1)  # (F, 1)
    base = torch.as_tensor(base, dtype=weight.dtype, device=weight.device)
    if sae.kind == "sae":
        scale, norm, resid = sae.norm_scale, None, base  # (H,)
    else:
        if encoder.config.pre_layer_norm:
            raise SAEError("the logit effect of a transcoder feature is computed for post-LN models only (a pre-LN "
                           "block has no output LayerNorm to apply)")
        scale, norm = sae.out_scale, encoder.encoder.layer[layer].output.LayerNorm
        resid = base[:sae.d_in] + base[sae.d_in:]  # (H,) post-LN hook_resid_post = feed-forward input + output
    clean = head(resid if norm is None else norm(resid))  # (V,)
    ids, deltas = [], []
    for a in range(0, features.numel(), batch):
        f = features[a:a + batch]
        direction = sae.W_dec.detach()[f.to(sae.W_dec.device)].to(weight) / scale  # (b, H)
        edited = resid + strengths[a:a + batch] * direction  # (b, H)
        delta = (head(edited if norm is None else norm(edited)) - clean).float()  # (b, V)
        up, down = delta.topk(n, dim=1), delta.topk(n, dim=1, largest=False)
        ids.append(torch.cat([up.indices, down.indices], 1))
        deltas.append(torch.cat([up.values, down.values], 1))
    width = 2 * n
    return (torch.cat(ids) if ids else torch.empty(0, width, dtype=torch.long),
            torch.cat(deltas) if deltas else torch.empty(0, width))


def logit_effect(model, tokenizer, sae: TopKSAE | Transcoder, layer: int, feature: int, base: torch.Tensor | np.ndarray,
                 strength: float, n: int = 10) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """One feature's :func:`logit_effects`: the ``n`` WordPieces it promotes most and the ``n`` it suppresses most,
    ``(token, Δ logit)``. Raises what :func:`logit_effects` raises."""
    ids, delta = logit_effects(model, sae, layer, [feature], base, [strength], n)
    words = tokenizer.convert_ids_to_tokens([int(i) for i in ids[0]])
    pairs = [(w, float(v)) for w, v in zip(words, delta[0])]
    return pairs[:n], pairs[n:]


def steering_edit(sae: TopKSAE, feature: int, mode: str, value: float, positions: list[int] | None = None):
    """An edit for the site an SAE reads (:func:`bertcore.sae.io.site`): ``"add"`` adds ``value`` times the
    feature's decoder direction (in
    the model's units: ``value * W_dec[f] / c``); ``"clamp"`` sets the feature's activation to ``value`` where it is
    computed (the rest of the hidden state, the SAE's error included, kept). ``positions``: the tokens to steer (None:
    all).

    Raises:
        ValueError: an unknown mode.
        SAEError: a transcoder (steering its features is :mod:`bertcore.circuits.steer`'s, on the Circuits page).
    """
    if sae.kind != "sae":
        raise SAEError("steering a transcoder feature is done on the Circuits page (bertcore.circuits.steer)")
    if mode not in ("add", "clamp"):
        raise ValueError(f"mode must be 'add' or 'clamp'; got {mode!r}")
    direction = sae.W_dec[feature].detach() / sae.norm_scale  # (H,)

    def edit(h: torch.Tensor) -> torch.Tensor:  # (B, T, H)
        if mode == "add":
            amount = torch.full(h.shape[:-1], float(value), dtype=h.dtype, device=h.device)
        else:
            current = sae.encode(h.float())[..., feature]  # (B, T)
            amount = (float(value) - current).to(h.dtype)
        if positions is not None:
            keep = torch.zeros(h.shape[:-1], dtype=torch.bool, device=h.device)
            keep[:, positions] = True
            amount = amount * keep
        return h + amount[..., None] * direction.to(h.dtype)

    return edit


@dataclass
class Steered:
    """Fill-mask at each [MASK] of a text, unsteered (``plain``) and steered (``steered``): lists of
    :class:`bertcore.readouts.fill_mask.Prediction`, one per [MASK]."""

    plain: list
    steered: list


@torch.no_grad()
def steered_fill_mask(model, tokenizer, text: str, layer: int, edit, k: int = 5,
                      max_length: int | None = None) -> Steered:
    """The MLM head's top ``k`` at each [MASK] of ``text`` without and with ``edit`` at the site an SAE of block
    ``layer`` (0-based) reads (:func:`bertcore.sae.io.site`).

    Raises:
        FillMaskError: no MLM head, or no [MASK] in the text.
        bertcore.sae.io.SAEError: a block outside ``0..L-1``.
    """
    encoder, head = mlm_head_of(model)
    name = site(encoder.config, layer)
    enc = encode(tokenizer, text, max_length=max_length)
    inputs = enc.tensors(device_of(model))
    positions = mask_token_positions(tokenizer, inputs["input_ids"])
    if not positions:
        raise FillMaskError("write [MASK] where the model should guess a word")
    out = []
    with eval_mode(model):
        for edits in ({}, {name: edit}):
            hidden = encoder(**inputs, interventions=Interventions(edits=edits)).last_hidden_state
            logits = head(hidden[0, positions])
            out.append(predictions_from_logits(tokenizer, inputs["input_ids"], positions, logits, None, k))
    return Steered(*out)


def context_activations(model, tokenizer, sae: TopKSAE | Transcoder, layer: int, chunks: list[np.ndarray],
                        feature: int) -> list[np.ndarray]:
    """One feature's activation at every token of each chunk (``(len(chunk),)`` float32 each): the shading of a
    dashboard's top contexts (:func:`activations`: one forward pass for all chunks). Raises ``SAEError`` for a block
    outside ``0..L-1``."""
    from .stream import pad

    site(getattr(model, "base_model", model).config, layer)  # the block is checked even with no chunk
    if not chunks:
        return []
    z = activations(model, pad(chunks, tokenizer.pad_token_id), sae, layer)[..., feature].cpu().numpy()  # (B, T)
    return [z[i, :len(c)] for i, c in enumerate(chunks)]
