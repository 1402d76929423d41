"""One forward pass written out step by step, for one sequence, following one token (Vaswani et al. 2017,
section 3; Devlin et al. 2019, section 3): embeddings, then each encoder layer as self-attention (queries, keys,
values, scaled scores, softmax, weighted sum of values, output projection, residual, LayerNorm) and the
feed-forward block (dense, GELU, dense, residual, LayerNorm), then the MLM head.

Every step is recomputed here from the model's weights with the formulas written out (nothing is read from
the model's own forward), then compared with that forward: :attr:`ForwardTrace.max_abs_diff`. The embedding
step is :func:`bertcore.anatomy.embedding_breakdown` (one owner). Module names mirror HF ``modeling_bert.py``
(``BertSelfAttention``, ``BertSelfOutput``, ``BertIntermediate``, ``BertOutput``, ``BertLMPredictionHead``);
a ``pre_layer_norm`` model (Xiong et al. 2020) moves each LayerNorm before its sub-layer and adds a final one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .anatomy import EmbeddingBreakdown, embedding_breakdown
from .modeling.rotary import apply_rotary
from .fill_mask import NO_MLM_HEAD


class TraceError(ValueError):
    """A token, layer or head outside the model or the sequence (the message says the valid range)."""


@dataclass
class LayerSteps:
    """One encoder layer taken apart for one sequence of T tokens (H hidden, I intermediate, d = H / heads).

    Attributes:
        layer: the 0-based block (``encoder.layer[layer]``; the UI's "layer ``layer + 1``").
        x: ``(T, H)`` the layer's input (``hidden_states[layer]``).
        attn_in: ``(T, H)`` what self-attention reads: ``x`` (post-LN), ``LayerNorm(x)`` (pre-LN).
        query / key / value: ``(heads, T, d)`` the projections split into heads.
        scores: ``(heads, T, T)`` ``q·k / √d`` (no padding in one sequence, so no mask is added).
        probs: ``(heads, T, T)`` ``softmax(scores)`` over the keys: the model's ``attentions[layer]``.
        context: ``(heads, T, d)`` ``probs @ value``: each head's weighted sum of values.
        merged: ``(T, H)`` the heads' contexts side by side.
        attn_proj: ``(T, H)`` the output projection ``dense(merged)`` (``attention.output.dense``).
        residual1: ``(T, H)`` ``x + attn_proj``.
        attn_out: ``(T, H)`` ``LayerNorm(residual1)`` (post-LN) or ``residual1`` (pre-LN).
        ffn_in: ``(T, H)`` what the feed-forward block reads: ``attn_out`` (post-LN), ``LayerNorm(attn_out)`` (pre-LN).
        ffn_pre: ``(T, I)`` ``intermediate.dense(ffn_in)``, before the activation.
        ffn_act: ``(T, I)`` the activation (GELU for BERT) of ``ffn_pre``.
        ffn_out: ``(T, H)`` ``output.dense(ffn_act)``.
        residual2: ``(T, H)`` ``attn_out + ffn_out``.
        output: ``(T, H)`` ``LayerNorm(residual2)`` (post-LN) or ``residual2`` (pre-LN; after the encoder's final
            LayerNorm in the last layer): ``hidden_states[layer + 1]``.
        query_unrotated / key_unrotated: ``(heads, T, d)`` with rotary positions (ModernBERT), the projections
            before RoPE turns them by their positions (``query`` / ``key`` are then the rotated ones); else None.
        ffn_gate: ``(T, I)`` with a GeGLU feed-forward, the gate half of ``intermediate.dense`` (``ffn_pre`` is the
            other half and ``ffn_act = act(ffn_pre) * ffn_gate``); else None.
        window: the local attention window (keys farther than ``window // 2`` are masked) on a local layer; else None.
    """

    layer: int
    x: torch.Tensor
    attn_in: torch.Tensor
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    scores: torch.Tensor
    probs: torch.Tensor
    context: torch.Tensor
    merged: torch.Tensor
    attn_proj: torch.Tensor
    residual1: torch.Tensor
    attn_out: torch.Tensor
    ffn_in: torch.Tensor
    ffn_pre: torch.Tensor
    ffn_act: torch.Tensor
    ffn_out: torch.Tensor
    residual2: torch.Tensor
    output: torch.Tensor
    query_unrotated: torch.Tensor | None = None
    key_unrotated: torch.Tensor | None = None
    ffn_gate: torch.Tensor | None = None
    window: int | None = None


@dataclass
class MLMSteps:
    """The MLM head (``cls.predictions``) at one token: ``dense (H)``, activation, LayerNorm, then the decoder
    (the word-embedding matrix, tied) plus a bias over the V words.

    Attributes:
        hidden: ``(H,)`` the last layer's output at the token.
        dense / act / normed: ``(H,)`` ``transform.dense``, its activation, ``transform.LayerNorm``.
        logits: ``(V,)`` ``normed @ word_embeddings.T + bias``.
        top_ids / top_probs: the 5 most probable ids and their ``softmax(logits)`` probabilities.
    """

    hidden: torch.Tensor
    dense: torch.Tensor
    act: torch.Tensor
    normed: torch.Tensor
    logits: torch.Tensor
    top_ids: list[int]
    top_probs: list[float]


@dataclass
class ForwardTrace:
    """One sequence's forward pass, step by step.

    Attributes:
        token / layer / head: the followed position, block (``encoder.layer[layer]``) and head, all 0-based.
        pre_layer_norm: the model's LayerNorm placement (``config.pre_layer_norm``).
        hidden_act: the feed-forward activation's HF name (``"gelu"`` for BERT).
        embeddings: :class:`~bertcore.anatomy.EmbeddingBreakdown` (word, position, segment, sum, LayerNorm).
        hidden_states: ``(L + 1, T, H)`` the embedding output and every layer's output, recomputed here.
        steps: :class:`LayerSteps` of the chosen layer.
        mlm: :class:`MLMSteps` at the token, or None for a model without an MLM head.
        no_mlm_reason: why ``mlm`` is None (:data:`bertcore.fill_mask.NO_MLM_HEAD`), else None.
        max_abs_diff: ``{check: float}``: ``hidden_states`` and ``attentions`` (every layer, against the model's
            own forward with ``output_hidden_states`` / ``output_attentions``), ``embeddings``, and ``mlm_logits``
            (against the model's head run on its own last hidden state) when there is a head.
    """

    token: int
    layer: int
    head: int
    pre_layer_norm: bool
    hidden_act: str
    embeddings: EmbeddingBreakdown
    hidden_states: torch.Tensor
    steps: LayerSteps
    mlm: MLMSteps | None
    no_mlm_reason: str | None
    max_abs_diff: dict[str, float]

    def matches(self, atol: float = 1e-5) -> bool:
        """True when every recomputed step equals the model's own forward within ``atol``."""
        return all(d <= atol for d in self.max_abs_diff.values())


def layer_steps(layer_module: nn.Module, x: torch.Tensor, number: int, pre_layer_norm: bool,
                final_norm: nn.Module | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                mask: torch.Tensor | None = None, window: int | None = None) -> LayerSteps:
    """Run one ``BertLayer`` ``layer_module`` on ``x (T, H)`` with every formula written out (eval mode: no dropout);
    ``number``: its 0-based block index (``encoder.layer[number]``), kept as :attr:`LayerSteps.layer`.

    ``final_norm``: the encoder's closing LayerNorm of a pre-LN model, applied after its last layer (else None).
    ``rotary``: ``(cos, sin)`` ``(1, T, d)`` of a rotary model's layer
    (:meth:`bertcore.modeling.encoder.BertEncoder.layer_inputs`); ``mask``: its additive ``(1, 1, T, T)`` sliding-window
    mask on a local layer (``window`` tokens wide).
    Source: HF ``BertSelfAttention`` (``eager_attention_forward``), ``BertSelfOutput``, ``BertIntermediate``,
    ``BertOutput``; ModernBERT's ``apply_rotary_pos_emb`` and ``ModernBertMLP`` (GeGLU).
    """
    layer = layer_module
    att, self_att = layer.attention, layer.attention.self
    t, h = x.shape
    heads, d = self_att.num_attention_heads, self_att.attention_head_size
    attn_in = att.output.LayerNorm(x) if pre_layer_norm else x  # (T, H)

    def split(lin: nn.Linear) -> torch.Tensor:
        return lin(attn_in).view(t, heads, d).transpose(0, 1)  # (heads, T, d)

    q, k, v = split(self_att.query), split(self_att.key), split(self_att.value)
    q0 = k0 = None
    if rotary is not None:  # RoPE: turn each query and key by its position's angles (Su et al. 2021)
        q0, k0 = q, k
        q, k = (r[0] for r in apply_rotary(q[None], k[None], *rotary))  # (heads, T, d)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (heads, T, T)
    if mask is not None:
        scores = scores + mask[0, 0]  # keys outside the local window get -inf-like scores
    soft = self_att.softmax_dtype
    probs = (torch.softmax(scores, dim=-1) if soft is None
             else torch.softmax(scores, dim=-1, dtype=soft).to(scores.dtype))  # (heads, T, T)
    context = probs @ v  # (heads, T, d)
    merged = context.transpose(0, 1).reshape(t, h)  # (T, H)
    attn_proj = att.output.dense(merged)  # (T, H)
    residual1 = x + attn_proj  # (T, H)
    attn_out = residual1 if pre_layer_norm else att.output.LayerNorm(residual1)  # (T, H)
    ffn_in = layer.output.LayerNorm(attn_out) if pre_layer_norm else attn_out  # (T, H)
    ffn_pre, gate = layer.intermediate.dense(ffn_in), None  # (T, I), or (T, 2I) for GeGLU
    if layer.intermediate.gated:
        ffn_pre, gate = ffn_pre.chunk(2, dim=-1)  # each (T, I)
    ffn_act = layer.intermediate.intermediate_act_fn(ffn_pre)  # (T, I)
    if gate is not None:
        ffn_act = ffn_act * gate  # GeGLU: the activation gated by the other half (Shazeer 2020)
    ffn_out = layer.output.dense(ffn_act)  # (T, H)
    residual2 = attn_out + ffn_out  # (T, H)
    output = residual2 if pre_layer_norm else layer.output.LayerNorm(residual2)  # (T, H)
    if final_norm is not None:
        output = final_norm(output)
    return LayerSteps(number, x, attn_in, q, k, v, scores, probs, context, merged, attn_proj, residual1, attn_out,
                      ffn_in, ffn_pre, ffn_act, ffn_out, residual2, output, q0, k0, gate, window if mask is not None
                      else None)


def mlm_steps(model: nn.Module, hidden: torch.Tensor, k: int = 5) -> MLMSteps:
    """The MLM head of ``model`` on one vector ``hidden (H,)``, written out (HF ``BertPredictionHeadTransform``,
    ``BertLMPredictionHead``). Raises ``bertcore.fill_mask.FillMaskError`` without an MLM head."""
    from .fill_mask import mlm_head_of

    _, head = mlm_head_of(model)
    dense = head.transform.dense(hidden)  # (H,)
    act = head.transform.transform_act_fn(dense)  # (H,)
    normed = head.transform.LayerNorm(act)  # (H,)
    logits = normed @ head.decoder.weight.T + head.bias  # (V,)
    top_p, top_i = logits.softmax(-1).topk(min(k, logits.numel()))
    return MLMSteps(hidden, dense, act, normed, logits, top_i.tolist(), top_p.tolist())


def formulas(pre_layer_norm: bool = False, hidden_act: str = "gelu") -> dict[str, str]:
    """The formula of each step, keyed as :class:`LayerSteps` / :class:`MLMSteps` fields, for captions and hovers
    (``x`` is the layer's input; ``LN`` LayerNorm; ``d`` the head size). Pre-LN models normalise before each
    sub-layer instead of after it."""
    act = {"gelu": "GELU", "relu": "ReLU"}.get(hidden_act, hidden_act)
    f = {"word": "W_word[input_id]", "position": "W_pos[i]", "segment": "W_seg[token_type_id]",
         "sum": "e = W_word[id] + W_pos[i] + W_seg[s]", "embedding": "LayerNorm(e) = γ (e − μ) / √(σ² + ε) + β",
         "query": "q = x W_Q + b_Q", "key": "k = x W_K + b_K", "value": "v = x W_V + b_V",
         "scores": "q·k / √d", "probs": "softmax(q·k / √d)", "context": "Σ_j softmax(q·k_j / √d) v_j",
         "merged": "concat(head_1 … head_h)", "attn_proj": "Attn(x) = concat(heads) W_O + b_O",
         "ffn_pre": "h W_1 + b_1", "ffn_act": f"{act}(h W_1 + b_1)",
         "ffn_out": f"FFN(h) = {act}(h W_1 + b_1) W_2 + b_2",
         "mlm_dense": "t W_t + b_t", "mlm_act": f"{act}(t W_t + b_t)", "mlm_norm": f"LN({act}(t W_t + b_t))",
         "logits": "LN(…) W_wordᵀ + b (decoder tied to the word embeddings)", "top": "softmax(logits)"}
    if pre_layer_norm:
        f.update(attn_in="LN(x)", residual1="x + Attn(LN(x))", attn_out="h = x + Attn(LN(x))",
                 ffn_in="LN(h)", residual2="h + FFN(LN(h))", output="h + FFN(LN(h))")
    else:
        f.update(attn_in="x", residual1="x + Attn(x)", attn_out="h = LayerNorm(x + Attn(x))",
                 ffn_in="h", residual2="h + FFN(h)", output="LayerNorm(h + FFN(h))")
    return f


@torch.no_grad()
def trace(model: nn.Module, input_ids: torch.Tensor, token: int, layer: int, head: int,
          token_type_ids: torch.Tensor | None = None) -> ForwardTrace:
    """Follow token ``token`` of one sequence through ``model``, with block ``layer`` and head ``head`` (both
    0-based) taken apart.

    Args:
        model: a bertcore model (any head class), in eval mode; float32 or float64 (the trace keeps its dtype).
        input_ids: ``(1, T)`` long, one unpadded sequence.
        token: 0-based position of the followed token; layer: the 0-based block (``encoder.layer[layer]``,
            ``0..L-1``); head: 0-based (``0..heads-1``).
        token_type_ids: ``(1, T)`` segment ids (None: all 0).
    Returns:
        :class:`ForwardTrace`.
    Raises:
        TraceError: a token, layer or head out of range (a ``ValueError``; the message names the valid range).
        bertcore.modeling.embeddings.InputError: ids the model cannot embed (out of the vocabulary, too long).
    """
    encoder = model.base_model
    cfg = encoder.config
    t = input_ids.size(-1)
    for name, value, lo, hi in (("token", token, 0, t - 1), ("layer", layer, 0, cfg.num_hidden_layers - 1),
                                ("head", head, 0, cfg.num_attention_heads - 1)):
        if not lo <= int(value) <= hi:
            raise TraceError(f"{name} must lie in {lo}..{hi}; got {value}")
    emb = embedding_breakdown(model, input_ids, token_type_ids)
    layers = encoder.encoder.layer
    final_norm = getattr(encoder.encoder, "LayerNorm", None) if cfg.pre_layer_norm else None
    x0 = emb.output
    if hasattr(encoder, "embeddings_project"):  # ELECTRA: E-wide embeddings projected to H
        x0 = encoder.embeddings_project(x0)  # (T, H)
    inputs = encoder.encoder.layer_inputs(None, x0[None])  # per layer: (window mask | None, (cos, sin) | None)
    hidden, probs, chosen = [x0], [], None
    for i, module in enumerate(layers):
        mask, rot = inputs[i]
        steps = layer_steps(module, hidden[-1], i, cfg.pre_layer_norm,
                            final_norm if i == len(layers) - 1 else None, rot, mask, cfg.local_attention)
        hidden.append(steps.output)
        probs.append(steps.probs)
        if i == layer:
            chosen = steps
    hidden_states = torch.stack(hidden)  # (L + 1, T, H)
    out = encoder(input_ids, token_type_ids=token_type_ids, output_hidden_states=True, output_attentions=True)
    diffs = {"embeddings": max(emb.max_abs_diff.values()),
             "hidden_states": float((hidden_states - torch.cat(out.hidden_states)).abs().max()),  # (L + 1, T, H)
             "attentions": float((torch.stack(probs) - torch.cat(out.attentions)).abs().max())}  # (L, heads, T, T)
    mlm = reason = None
    if getattr(getattr(model, "cls", None), "predictions", None) is not None:
        mlm = mlm_steps(model, hidden_states[-1, token])
        diffs["mlm_logits"] = float((mlm.logits - model.cls.predictions(out.last_hidden_state[0, token])).abs().max())
    else:
        reason = NO_MLM_HEAD
    return ForwardTrace(int(token), int(layer), int(head), bool(cfg.pre_layer_norm), cfg.hidden_act, emb,
                        hidden_states, chosen, mlm, reason, diffs)
