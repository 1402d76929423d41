"""One forward pass written out step by step, for one sequence, following one token (Vaswani et al. 2017,
section 3; Devlin et al. 2019, section 3): embeddings, then each encoder layer as self-attention (queries, keys,
values, scaled scores, softmax, weighted sum of values, output projection, residual, LayerNorm) and the
feed-forward block (dense, GELU, dense, residual, LayerNorm), then the MLM head.

Every step is read from the model's own forward pass at its named sites (:mod:`bertcore.modeling.interventions`,
one call), and each is checked against its formula applied to the step before it, with the module's weights
(:func:`formula_checks`: ``softmax(scores) = probs``, ``probs @ V = context``, ``x + attn_proj = residual1``, ...):
:attr:`ForwardTrace.max_abs_diff`. The embedding step is :func:`bertcore.readouts.anatomy.embedding_breakdown` (one
owner).
Module names mirror HF ``modeling_bert.py``
(``BertSelfAttention``, ``BertSelfOutput``, ``BertIntermediate``, ``BertOutput``, ``BertLMPredictionHead``);
a ``pre_layer_norm`` model (Xiong et al. 2020) moves each LayerNorm before its sub-layer and adds a final one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .anatomy import EmbeddingBreakdown, embedding_breakdown
from .fill_mask import NO_MLM_HEAD
from ..modeling.interventions import BLOCK_SITES, MLM_HEAD_SITES, Interventions, missing_reason


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
        embeddings: :class:`~bertcore.readouts.anatomy.EmbeddingBreakdown` (word, position, segment, sum, LayerNorm).
        hidden_states: ``(L + 1, T, H)`` the embedding output and every layer's output, as recorded at the sites.
        steps: :class:`LayerSteps` of the chosen layer.
        mlm: :class:`MLMSteps` at the token, or None for a model without an MLM head.
        no_mlm_reason: why ``mlm`` is None (:data:`bertcore.readouts.fill_mask.NO_MLM_HEAD`), else None.
        max_abs_diff: ``{check: float}``: ``formulas`` (the largest of :func:`formula_checks` over every layer),
            ``hidden_states`` and ``attentions`` (the recorded ones against the model's plain forward with
            ``output_hidden_states`` / ``output_attentions``), ``embeddings``, and ``mlm_logits`` (the head's formula
            on the recorded steps against the model's logits) when there is a head.
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
        """True when every step equals its formula and the model's own forward within ``atol``."""
        return all(d <= atol for d in self.max_abs_diff.values())


def step_sites(config) -> list[str]:
    """Every site :func:`trace` records for a model of ``config``: each block's sites (those the family has), the
    final LayerNorm of a pre-LN stack, and the MLM head's."""
    names = [f"blocks.{i}.{s}" for i in range(config.num_hidden_layers) for s in BLOCK_SITES]
    names.append("ln_final.hook_out")
    return [n for n in names if missing_reason(config, n) is None] + list(MLM_HEAD_SITES)


def layer_steps(recorded: dict[str, torch.Tensor], layer: int, config, window: int | None = None) -> LayerSteps:
    """Block ``layer``'s steps (0-based) for the first sequence of ``recorded``, the recording of
    :func:`step_sites` (``{site: (1, ...)}``); ``window``: the local attention window on a local layer.
    Source: the sites of :mod:`bertcore.modeling.interventions` (HF ``BertSelfAttention``, ``BertSelfOutput``,
    ``BertIntermediate``, ``BertOutput``; ModernBERT's rotary attention and GeGLU).

    Raises:
        TraceError: ``layer`` outside ``0..num_hidden_layers - 1``.
    """
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < config.num_hidden_layers:
        raise TraceError(f"layer must lie in 0..{config.num_hidden_layers - 1}; got {layer!r}")

    def site(name: str) -> torch.Tensor:
        return recorded[f"blocks.{layer}.{name}"][0]

    def heads_first(x: torch.Tensor) -> torch.Tensor:  # (T, heads, d) -> (heads, T, d)
        return x.transpose(0, 1)

    pre, rotary = config.pre_layer_norm, config.position_embedding_type == "rotary"
    x = site("hook_resid_pre")  # (T, H)
    has_ln1 = missing_reason(config, f"blocks.{layer}.ln1.hook_out") is None
    attn_in = site("ln1.hook_out") if pre and has_ln1 else x  # (T, H)
    q, k = (heads_first(site(f"attn.hook_{'rot_' if rotary else ''}{n}")) for n in "qk")  # (heads, T, d)
    q0, k0 = (heads_first(site("attn.hook_q")), heads_first(site("attn.hook_k"))) if rotary else (None, None)
    z = site("attn.hook_z")  # (T, heads, d)
    residual1 = site("hook_resid_mid")  # (T, H)
    attn_out = residual1 if pre else site("ln1.hook_out")  # (T, H)
    residual2 = site("hook_resid_post")  # (T, H)
    output = residual2 if pre else site("ln2.hook_out")  # (T, H)
    if pre and layer == config.num_hidden_layers - 1:
        output = recorded["ln_final.hook_out"][0]
    return LayerSteps(layer, x, attn_in, q, k, heads_first(site("attn.hook_v")), site("attn.hook_attn_scores"),
                      site("attn.hook_pattern"), heads_first(z), z.reshape(z.shape[0], -1), site("hook_attn_out"),
                      residual1, attn_out, site("ln2.hook_out") if pre else attn_out, site("mlp.hook_pre"),
                      site("mlp.hook_post"), site("hook_mlp_out"), residual2, output, q0, k0,
                      site("mlp.hook_pre_linear") if config.gated_ffn else None, window)


def formula_checks(steps: LayerSteps, block: nn.Module, config, last: bool = False,
                   final_norm: nn.Module | None = None) -> dict[str, float]:
    """How far each recorded step is from its formula applied to the recorded step before it, with ``block``'s
    weights (``encoder.layer[steps.layer]``): ``{step: max |formula - recorded|}``. ``final_norm``: a pre-LN stack's
    closing LayerNorm (``last``: this is the last block)."""
    s, pre, d = steps, config.pre_layer_norm, steps.query.size(-1)
    att, soft = block.attention, block.attention.self.softmax_dtype
    seen = s.scores > torch.finfo(s.scores.dtype).min / 2  # keys the additive mask lets through
    checks = {"scores": torch.where(seen, s.query @ s.key.transpose(-1, -2) / math.sqrt(d) - s.scores, 0),
              "probs": (torch.softmax(s.scores, -1) if soft is None
                        else torch.softmax(s.scores, -1, dtype=soft).to(s.scores.dtype)) - s.probs,
              "context": s.probs @ s.value - s.context,
              "attn_proj": att.output.dense(s.merged) - s.attn_proj,
              "residual1": s.x + s.attn_proj - s.residual1,
              "ffn_out": block.output.dense(s.ffn_act) - s.ffn_out,
              "residual2": s.attn_out + s.ffn_out - s.residual2}
    up = block.intermediate.dense(s.ffn_in)  # (T, I) or (T, 2I)
    if s.ffn_gate is not None:
        first, gate = up.chunk(2, dim=-1)
        checks["ffn_pre"] = torch.cat([first - s.ffn_pre, gate - s.ffn_gate], -1)
        checks["ffn_act"] = block.intermediate.intermediate_act_fn(s.ffn_pre) * s.ffn_gate - s.ffn_act
    else:
        checks["ffn_pre"] = up - s.ffn_pre
        checks["ffn_act"] = block.intermediate.intermediate_act_fn(s.ffn_pre) - s.ffn_act
    if s.query_unrotated is None:
        heads = s.query.shape[0]
        checks["query"] = att.self.query(s.attn_in).view(-1, heads, d).transpose(0, 1) - s.query
    if pre:
        checks["ffn_in"] = block.output.LayerNorm(s.attn_out) - s.ffn_in
        if last and final_norm is not None:
            checks["output"] = final_norm(s.residual2) - s.output
    else:
        checks["attn_out"] = att.output.LayerNorm(s.residual1) - s.attn_out
        checks["output"] = block.output.LayerNorm(s.residual2) - s.output
    return {name: float(diff.abs().max()) for name, diff in checks.items()}


def mlm_steps(recorded: dict[str, torch.Tensor], hidden: torch.Tensor, token: int, logits: torch.Tensor,
              k: int = 5) -> MLMSteps:
    """The MLM head at position ``token``: the last layer's output there ``hidden (H,)``, the recorded ``mlm_head.*``
    sites (``{site: (1, T, H)}``: the head's ``transform.dense``, activation and LayerNorm, HF
    ``BertPredictionHeadTransform``) and the model's own ``logits (V,)`` there (``BertLMPredictionHead``'s decoder)."""
    def site(name: str) -> torch.Tensor:
        return recorded[f"mlm_head.{name}"][0, token]

    top_p, top_i = logits.softmax(-1).topk(min(k, logits.numel()))
    return MLMSteps(hidden, site("hook_pre"), site("hook_post"), site("ln.hook_out"), logits, top_i.tolist(),
                    top_p.tolist())


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
    0-based) taken apart: one forward call records every step (:func:`step_sites`), each checked against its formula
    (:func:`formula_checks`), the recording against a plain forward.

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
    has_mlm = getattr(getattr(model, "cls", None), "predictions", None) is not None
    iv = Interventions(record=[n for n in step_sites(cfg) if has_mlm or not n.startswith("mlm_head.")])
    if has_mlm:
        recorded_out = model(input_ids, token_type_ids=token_type_ids, interventions=iv)
        logits = getattr(recorded_out, "prediction_logits", None)
        logits = recorded_out.logits if logits is None else logits  # (1, T, V)
    else:
        encoder(input_ids, token_type_ids=token_type_ids, interventions=iv)
    rec = iv.recorded
    final_norm = getattr(encoder.encoder, "LayerNorm", None) if cfg.pre_layer_norm else None
    steps, formulas_diff = [], 0.0
    for i, block in enumerate(encoder.encoder.layer):
        local = cfg.local_attention if not cfg.is_global_layer(i) else None
        s = layer_steps(rec, i, cfg, local)
        last = i == cfg.num_hidden_layers - 1
        formulas_diff = max(formulas_diff, *formula_checks(s, block, cfg, last, final_norm).values())
        steps.append(s)
    hidden_states = torch.stack([steps[0].x] + [s.output for s in steps])  # (L + 1, T, H)
    out = encoder(input_ids, token_type_ids=token_type_ids, output_hidden_states=True, output_attentions=True)
    diffs = {"embeddings": max(emb.max_abs_diff.values()), "formulas": formulas_diff,
             "hidden_states": float((hidden_states - torch.cat(out.hidden_states)).abs().max()),  # (L + 1, T, H)
             "attentions": float((torch.stack([s.probs for s in steps])
                                  - torch.cat(out.attentions)).abs().max())}  # (L, heads, T, T)
    mlm = reason = None
    if has_mlm:
        mlm = mlm_steps(rec, hidden_states[-1, token], token, logits[0, token])
        decoder = model.cls.predictions
        diffs["mlm_logits"] = float((mlm.normed @ decoder.decoder.weight.T + decoder.bias - mlm.logits).abs().max())
    else:
        reason = NO_MLM_HEAD
    return ForwardTrace(int(token), int(layer), int(head), bool(cfg.pre_layer_norm), cfg.hidden_act, emb,
                        hidden_states, steps[layer], mlm, reason, diffs)
