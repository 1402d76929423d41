"""DecompX: a prediction taken apart into one term per input token (Modarressi et al. 2023, "DecompX: Explaining
Transformers Decisions by Propagating Token Decomposition", ACL, section 3).

Every hidden state is kept as a sum of one vector per input token plus one bias term,
``x_i = sum_k x_i<-k + x_i<-bias``, from the embeddings to the output, and the sum is carried exactly through
every operation of a post-LN BERT (each term through the layer's weights; where an operation needs the whole sum,
the attention weights, a LayerNorm's std, an activation's operating point, it reads the model's own activation,
recorded by one forward pass at the sites of :mod:`bertcore.modeling.interventions`; the model itself is only
read), in float64 for a float64 model and float32 for a float32 one up to the last layer's output (the heads
then run in float64; the tests check a float64 model's terms to 1e-9 of its logits, the shipped float32 model's
to 1e-4):

- embeddings: the embedding output of token k (word + position + segment, after the embedding LayerNorm;
  ``blocks.0.hook_resid_pre``) is token k's vector, ``x_k<-k``; nothing else is in it.
- linear maps ``W x + b``: ``W x_i<-k`` for each k, the bias ``b`` joins the bias term (value, attention output,
  feed-forward and head projections).
- attention: ``sum_j a_hij`` of each head's values of every term, with the real attention weights
  (``attn.hook_pattern``).
- LayerNorm: ``LN(sum_k z_k) = sum_k gamma * (z_k - mean(z_k)) / s + beta`` with ``s`` the real std of the whole
  sum (Kobayashi et al. 2021; ``ln1.hook_scale``, ``ln2.hook_scale``, ``mlm_head.ln.hook_scale``); beta joins the
  bias term.
- activations (feed-forward, MLM transform, the pooler's tanh): linearised at their operating point (``mlp.hook_pre``,
  ``mlm_head.hook_pre``; the pooler's has no site and is the sum of its terms), unit by unit,
  as the line through the origin and the activation's real output: ``act(u) = (act(u) / u) * u`` and each term
  ``u_k`` becomes ``(act(u) / u) * u_k`` (for GELU ``act(u) / u`` is ``Phi(u)``; at ``u = 0`` the slope at 0).
  The terms then sum exactly to the real activation.

Where this differs from the authors' code: their default (``bias_decomp_type="absdot"``) shares each bias out to
the tokens by ``|x_i<-k . x_i|``; here every bias stays in its own term, reported as the last row (so that a
token's term holds nothing the token did not send). Post-LN only (``ValueError`` on a pre-LN model). Memory and
time grow as ``T^2``: about ``T * (T + 1) * H`` numbers per array of a layer (feed-forward in blocks); refused
above :data:`MAX_TOKENS` tokens. Cost: bench/bench_mixing.py (about T times one forward pass).
"""

from __future__ import annotations

import math as _math
from dataclasses import dataclass

import numpy as np
import torch

from ...modeling.interventions import Interventions
from .decompose import F64, LayerMath, base_model, check_inputs, f64, g, require_post_ln, row_blocks

MAX_TOKENS = 256


@dataclass
class TokenDecomposition:
    """A prediction taken apart into one term per input token.

    Attributes:
        contributions: ``(T + 1, C)`` float64: row k < T is input token k's term, row T the bias term (every
            bias, LayerNorm beta and the MLM decoder's bias, carried through the layers).
        value: ``(C,)`` float64, ``contributions.sum(0)``: the real logits (or logit difference), recomputed in
            float64 (the tests check it against the model's own forward).
        columns: the C labels (candidate ids as strings, ``"good-bad"``, or class indices).
    """

    contributions: np.ndarray
    value: np.ndarray
    columns: list[str]


def gate(name: str, u: torch.Tensor) -> torch.Tensor:
    """``act(u) / u`` unit by unit for the activation ``name`` (:func:`bertcore.modeling.encoder.activation`'s names),
    the slope at 0 where ``u = 0``: ``Phi(u)`` for GELU, the tanh form's ``0.5 (1 + tanh(...))``, ``[u > 0]`` for ReLU,
    ``sigmoid(u)`` for SiLU."""
    if name == "gelu":
        return 0.5 * (1.0 + torch.erf(u / _math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * (1.0 + torch.tanh(_math.sqrt(2.0 / _math.pi) * (u + 0.044715 * u ** 3)))
    if name == "relu":
        return (u > 0).to(u.dtype)
    return torch.sigmoid(u)


#: the block sites :func:`_layer` reads: the real attention weights, LayerNorm 1's std, the feed-forward's
#: operating point, LayerNorm 2's std
LAYER_SITES = ("attn.hook_pattern", "ln1.hook_scale", "mlp.hook_pre", "ln2.hook_scale")


def _layer(m: LayerMath, d: torch.Tensor, sites: dict[str, torch.Tensor], rows: slice = slice(None)) -> torch.Tensor:
    """One post-LN layer on a decomposition ``d (T, K, H)`` (column K-1 the bias) -> ``(R, K, H)`` for the output
    rows ``rows``, in ``d``'s dtype (that of ``m``'s weights). ``sites``: the layer's recorded :data:`LAYER_SITES`
    (batch axis dropped, in ``d``'s dtype)."""
    t, k, hid = d.shape
    probs = sites["attn.hook_pattern"][:, rows]  # (heads, R, T) the real attention weights
    r = probs.shape[1]
    v = d @ m.wv.T  # (T, K, H): the value of each term
    v[:, -1] += m.bv
    v = v.view(t, k, m.heads, m.d)
    ctx = torch.empty(r, k, m.heads, m.d, dtype=d.dtype, device=d.device)
    for h in range(m.heads):
        ctx[:, :, h] = (probs[h] @ v[:, :, h].reshape(t, k * m.d)).view(r, k, m.d)
    del v
    y = ctx.view(r, k, hid) @ m.wo.T  # (R, K, H)
    del ctx
    y[:, -1] += m.bo
    y += d[rows]
    x1 = g(y, m.g1, (1 / sites["ln1.hook_scale"][rows])[:, None])  # LayerNorm 1 taken apart, its real std
    x1[:, -1] += m.beta1
    del y
    slope = gate(m.act_name, sites["mlp.hook_pre"][rows])  # (R, I) at the real pre-activation
    z = torch.empty_like(x1)
    for block in row_blocks(r, k * m.w1.shape[0]):
        u = x1[block] @ m.w1.T  # (B, K, I)
        u[:, -1] += m.b1
        u *= slope[block, None]
        z[block] = u @ m.w2.T
    z[:, -1] += m.b2
    z += x1
    out = g(z, m.g2, (1 / sites["ln2.hook_scale"][rows])[:, None])
    out[:, -1] += m.beta2
    return out


def _propagate(model, inputs: dict, layer: int = -1, row: int | None = None,
               head_sites: tuple[str, ...] = ()) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The decomposition of layer ``layer``'s output, ``(T, T + 1, H)`` (``(1, T + 1, H)`` for one ``row`` of
    the last layer asked), in the work dtype: float32 for a float32 model, else float64; and the sites
    ``head_sites`` (``mlm_head.*``: then the whole model runs, its head included), ``{site: (T, ...)}``. One
    forward pass records every site read (the embedding output, each layer's :data:`LAYER_SITES`)."""
    ids = check_inputs(inputs)
    base = base_model(model)
    require_post_ln(model, "DecompX")
    t = ids.shape[1]
    if t > MAX_TOKENS:
        raise ValueError(f"DecompX is offered up to {MAX_TOKENS} tokens (this input has {t}): its memory grows as T^2")
    layers = list(base.encoder.layer)
    if not -len(layers) <= layer < len(layers):
        raise ValueError(f"layer must be in -{len(layers)}..{len(layers) - 1}; got {layer}")
    layers = layers[: layer % len(layers) + 1]
    if base.embeddings.position_embeddings is None or hasattr(base, "embeddings_project"):
        raise ValueError(f"DecompX follows BERT's embeddings (learned positions, width H); this {base.config.family} "
                         "model has rotary positions or projected embeddings")
    work = torch.float32 if base.dtype == torch.float32 else F64
    maths = [LayerMath(module, base.config, work) for module in layers]  # raises for a layer that is not BERT's
    names = ["blocks.0.hook_resid_pre", *(f"blocks.{n}.{site}" for n in range(len(layers)) for site in LAYER_SITES),
             *head_sites]
    iv = Interventions(record=names)  # this call's own, never a hook
    device = next(base.parameters()).device
    kw = {k: v.to(device) for k, v in inputs.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        (model if head_sites else base)(**kw, interventions=iv)
    rec = {name: value[0].to(work) for name, value in iv.recorded.items()}
    x = rec["blocks.0.hook_resid_pre"]  # (T, H) the embedding output
    d = torch.zeros(t, t + 1, x.shape[1], dtype=work, device=x.device)
    diag = torch.arange(t, device=x.device)
    d[diag, diag] = x
    with torch.no_grad():
        for n, m in enumerate(maths):
            last = n == len(maths) - 1 and row is not None
            sites = {site: rec[f"blocks.{n}.{site}"] for site in LAYER_SITES}
            d = _layer(m, d, sites, slice(row, row + 1) if last else slice(None))
    return d, {name: rec[name] for name in head_sites}


def hidden_decomposition(model, inputs: dict, layer: int = -1) -> torch.Tensor:
    """Every position's output of one layer as a sum of one vector per input token plus the bias term.

    Args:
        model: a bertcore BERT (any head class), post-LN, in eval mode; only read.
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ``token_type_ids``, ``attention_mask``).
        layer: the 0-based block (``encoder.layer[layer]``, ``0..L-1``) whose output is taken apart; negative counts
            from the end as in Python (-1, the default: the last block).
    Returns:
        ``(T, T + 1, H)`` float64 tensor: ``[i, k]`` token k's term in position i's hidden state, ``[i, T]`` the bias
        term; ``.sum(1)`` is the hidden state (the model's ``hidden_states[layer + 1]``). Computed in float64 for a
        float64 model, in float32 for a float32 one (its terms then sum to the hidden state to float32 rounding).
    Raises:
        ValueError: a pre-LN model, more than :data:`MAX_TOKENS` tokens, not one encoding, a layer out of range
            (the message names it), a model in training mode.
    """
    return _propagate(model, inputs, layer)[0].to(F64)


def _mlm_terms(model, inputs: dict, position: int) -> tuple[torch.Tensor, object]:
    """The MLM transform's output at ``position`` taken apart: ``(T + 1, H)``, and the decoder."""
    head = getattr(getattr(model, "cls", None), "predictions", None)
    if head is None:
        raise ValueError("this model has no MLM head (cls.predictions): use a fill-mask model")
    t = check_inputs(inputs).shape[1]
    if not 0 <= position < t:
        raise ValueError(f"position must lie in [0, {t}); got {position}")
    d, rec = _propagate(model, inputs, row=position, head_sites=("mlm_head.hook_pre", "mlm_head.ln.hook_scale"))
    d = d[0].to(F64)  # (K, H)
    tr = head.transform
    u = d @ f64(tr.dense.weight).T  # (K, H)
    u[-1] += f64(tr.dense.bias)
    u *= gate(model.config.hidden_act, rec["mlm_head.hook_pre"][position].to(F64))  # at the real pre-activation
    y = g(u, f64(tr.LayerNorm.weight), 1 / rec["mlm_head.ln.hook_scale"][position].to(F64))  # its real std
    y[-1] += f64(tr.LayerNorm.bias)
    return y, head.decoder


def fill_mask(model, inputs: dict, position: int, candidate_ids: list[int]) -> TokenDecomposition:
    """DecompX of MLM logits at one position (the [MASK]): each candidate's logit as one term per input token plus
    the bias term, through the MLM head (transform dense, activation linearised, LayerNorm, tied decoder).

    Args:
        model: a bertcore model with an MLM head (``BertForPreTraining`` / ``BertForMaskedLM``), post-LN, eval.
        inputs: an encoding's ``tensors()``.
        position: 0-based position of the predicted token.
        candidate_ids: C vocabulary ids.
    Returns:
        :class:`TokenDecomposition` with ``contributions (T + 1, C)``; ``value`` the C logits.
    Raises:
        ValueError: no MLM head, a position out of range, and as :func:`hidden_decomposition`.
    """
    y, decoder = _mlm_terms(model, inputs, position)
    ids = torch.as_tensor(list(candidate_ids), dtype=torch.long, device=y.device)
    c = y @ f64(decoder.weight[ids]).T  # (K, C)
    c[-1] += f64(decoder.bias[ids])
    c = c.cpu().numpy()
    return TokenDecomposition(c, c.sum(0), [str(int(i)) for i in candidate_ids])


def logit_difference(model, inputs: dict, position: int, good_id: int, bad_id: int) -> TokenDecomposition:
    """DecompX of ``logit(good) - logit(bad)`` at one position (e.g. ``are`` against ``is``): one column, each
    token's term the difference of its two logit terms. Arguments and errors as :func:`fill_mask`."""
    both = fill_mask(model, inputs, position, [good_id, bad_id])
    c = both.contributions[:, :1] - both.contributions[:, 1:]
    return TokenDecomposition(c, c.sum(0), [f"{good_id}-{bad_id}"])


def classifier(model, inputs: dict) -> TokenDecomposition:
    """DecompX of a sequence classifier's logits (the Train page's fine-tuned runs): the final [CLS] vector taken
    apart, through the pooler (dense, tanh linearised as ``tanh(p) / p``) and the classifier (dropout off).

    Args:
        model: a bertcore ``BertForSequenceClassification``, post-LN, in eval mode.
        inputs: an encoding's ``tensors()``.
    Returns:
        :class:`TokenDecomposition` with ``contributions (T + 1, num_labels)``; ``value`` the logits.
    Raises:
        ValueError: no classifier head, and as :func:`hidden_decomposition`.
    """
    pooler = getattr(getattr(model, "bert", None), "pooler", None)
    if pooler is None or not hasattr(model, "classifier"):
        raise ValueError("this model has no sequence classifier (bert.pooler + classifier)")
    d = _propagate(model, inputs, row=0)[0][0].to(F64)  # (K, H): [CLS]
    p = d @ f64(pooler.dense.weight).T
    p[-1] += f64(pooler.dense.bias)
    total = p.sum(0)
    p *= torch.where(total == 0, torch.ones_like(total), torch.tanh(total) / total)
    c = p @ f64(model.classifier.weight).T  # (K, C)
    c[-1] += f64(model.classifier.bias)
    c = c.cpu().numpy()
    return TokenDecomposition(c, c.sum(0), [str(i) for i in range(c.shape[1])])
