"""One encoder layer recomputed in float64 from its weights and taken apart into one vector per contributing
token: the math behind the context-mixing measures (:mod:`.mixing`) and DecompX (:mod:`.decompx`).

Post-LN BERT layer (Devlin et al. 2019; HF ``BertLayer``) on its input ``x (T, H)``, with heads h:

    v_hj = W_V^h x_j + b_V^h                   the value of token j in head h (its bias b_V inside)
    f_hj = W_O^h v_hj                          Kobayashi et al. 2020, section 3 ("transformed vector")
    w_ij = sum_h a_hij f_hj                    (T, T, H): what token j sends to token i
    a_i  = sum_j w_ij + b_O                    stage "attention": the attention block's output
    y_i  = a_i + x_i                           residual
    g_i(z) = gamma * (z - mean(z)) / s_i       LayerNorm taken apart, s_i = sqrt(var(y_i) + eps) of the real
                                               whole sum (Kobayashi et al. 2021, section 2.2, eq. 6)
    LN1(y_i) = sum_j g1_i(w_ij + [i=j] x_i) + g1_i(b_O) + beta1          stage "ln1"
    h_i  = W2 act(W1 LN1(y_i) + b1) + b2       the feed-forward output: in no token's vector (GlobEnc, section 3)
    LN2(h_i + LN1(y_i)) = sum_j g2_i(g1_i(...)) + g2_i(g1_i(b_O) + beta1) + g2_i(h_i) + beta2   stage "layer"

Nothing here registers a hook on, sets an attribute of, or changes the mode or ``requires_grad`` of the model
it reads (the same model object serves many threads): weights are read and copied on the fly, to float64, or
used as they are where a float32 model's T^2 arrays stay float32 (:class:`LayerMath`, :func:`work_dtype`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...modeling.encoder import activation

STAGES = ("attention", "ln1", "layer")
POST_LN_ONLY = ("norm_res_ln", "globenc", "value_zeroing", "alti")
"""Context-mixing methods that take a post-LN layer apart (LayerNorm after each residual, as BERT); they raise
ValueError on a pre-LN model, as DecompX does. ``attention`` and ``norm`` work on both."""
#: elements of one (rows, T, H or I) block of the T^2 arrays: small enough to stay in the CPU's cache (large
#: temporaries cost more in page faults and memory traffic than in arithmetic; bench/bench_mixing.py)
BLOCK_ELEMENTS = 1 << 18
F64 = torch.float64


def activation_(name: str, x: torch.Tensor) -> torch.Tensor:
    """:func:`bertcore.modeling.encoder.activation` ``name`` applied to ``x`` in place (no new array); returns ``x``."""
    if name == "gelu":
        return torch.ops.aten.gelu_(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return torch.ops.aten.gelu_(x, approximate="tanh")
    if name == "relu":
        return x.relu_()
    return torch.nn.functional.silu(x, inplace=True)


def f64(t: torch.Tensor) -> torch.Tensor:
    """A float64 copy of a tensor (the tensor itself when already float64; never written to)."""
    return t.detach().to(F64)


def base_model(model):
    """The :class:`~bertcore.modeling.model.BertModel` inside any head class (read, never changed).

    Raises:
        ValueError: the model is in training mode (dropout would be on; call ``.eval()`` before sharing it).
    """
    base = getattr(model, "base_model", model)
    if base.training:
        raise ValueError("context mixing needs a model in eval mode (dropout off); this one is in training mode")
    return base


def require_post_ln(model, method: str) -> None:
    """Raise ValueError naming the post-LN methods when ``model`` is pre-LN."""
    if base_model(model).config.pre_layer_norm:
        raise ValueError(f"{method!r} assumes a post-LN model (LayerNorm after each residual, as BERT); this model "
                         f"is pre-LN. Methods that assume post-LN: {', '.join(POST_LN_ONLY)} and DecompX; "
                         "'attention' and 'norm' work on it")


def check_inputs(inputs: dict) -> torch.Tensor:
    """``inputs['input_ids']``, checked to be ``(1, T)``. Raises ValueError for another shape."""
    ids = inputs["input_ids"]
    if ids.dim() != 2 or ids.size(0) != 1:
        raise ValueError(f"inputs must hold one encoding, input_ids of shape (1, T); got {tuple(ids.shape)}")
    return ids


def work_dtype(model) -> torch.dtype:
    """The dtype of the T^2 arrays: float64 for a float64 model, float32 otherwise."""
    return F64 if base_model(model).dtype == F64 else torch.float32


@dataclass
class Run:
    """One plain forward of the model: ``hidden``, L+1 tensors ``(T, H)`` (index 0 the embeddings), and ``probs``,
    L tensors ``(heads, T, T)`` of attention probabilities, in :func:`work_dtype`."""

    hidden: tuple[torch.Tensor, ...]
    probs: tuple[torch.Tensor, ...]

    @property
    def tokens(self) -> int:
        return self.hidden[0].shape[0]


def run(model, inputs: dict) -> Run:
    """One forward pass of the model's encoder (in its own dtype) with hidden states and attentions.

    Raises:
        ValueError: not one encoding, or a model in training mode.
    """
    check_inputs(inputs)
    base = base_model(model)
    device = next(base.parameters()).device
    kw = {k: v.to(device) for k, v in inputs.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        out = base(**kw, output_attentions=True, output_hidden_states=True)
    work = work_dtype(model)
    return Run(tuple(h[0].to(work) for h in out.hidden_states), tuple(a[0].to(work) for a in out.attentions))


def ln_inv_std(y: torch.Tensor, eps: float) -> torch.Tensor:
    """``1 / sqrt(var(y) + eps)`` over the last axis, kept as a trailing axis of 1 (biased variance, as
    ``nn.LayerNorm``)."""
    c = y - y.mean(-1, keepdim=True)
    return torch.rsqrt((c * c).mean(-1, keepdim=True) + eps)


def g(z: torch.Tensor, gamma: torch.Tensor, inv_std: torch.Tensor) -> torch.Tensor:
    """The LayerNorm's linear part applied to one summand: ``gamma * (z - mean(z)) * inv_std``."""
    return gamma * (z - z.mean(-1, keepdim=True)) * inv_std


def layer_norm(y: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float) -> torch.Tensor:
    return g(y, gamma, ln_inv_std(y, eps)) + beta


class LayerMath:
    """Copies of one encoder layer's weights (float64 unless asked otherwise) and the layer's math on them. Each
    weight is copied on first use only (a method that never reads the feed-forward never copies it).

    Args:
        layer: a :class:`~bertcore.modeling.encoder.BertLayer` (only read).
        config: the model's :class:`~bertcore.modeling.config.BertConfig`.
        dtype: the copies' dtype.
    """

    _WEIGHTS = {"wq": "attention.self.query.weight", "bq": "attention.self.query.bias",
                "wk": "attention.self.key.weight", "bk": "attention.self.key.bias",
                "wv": "attention.self.value.weight", "bv": "attention.self.value.bias",
                "wo": "attention.output.dense.weight", "bo": "attention.output.dense.bias",
                "g1": "attention.output.LayerNorm.weight", "beta1": "attention.output.LayerNorm.bias",
                "w1": "intermediate.dense.weight", "b1": "intermediate.dense.bias",
                "w2": "output.dense.weight", "b2": "output.dense.bias",
                "g2": "output.LayerNorm.weight", "beta2": "output.LayerNorm.bias"}

    def __init__(self, layer, config, dtype: torch.dtype = F64) -> None:
        self._layer, self.dtype = layer, dtype
        self.heads, self.d, self.pre_ln = config.num_attention_heads, config.head_size, config.pre_layer_norm
        if config.gated_ffn or not (config.attention_bias and config.mlp_bias and config.norm_bias
                                    and config.first_attention_norm):
            raise ValueError(f"the decomposition follows BERT's layer (biases, a LayerNorm in every sub-layer, a plain "
                             f"feed-forward); this {config.family} model's layer differs (no biases, GeGLU), so "
                             "only the 'attention' weights are shown for it")
        self.eps1, self.eps2 = layer.attention.output.LayerNorm.eps, layer.output.LayerNorm.eps
        self.act = activation(config.hidden_act)
        self.act_name = config.hidden_act

    def __getattr__(self, name: str) -> torch.Tensor:  # only called for names not set yet: the weights
        if name not in LayerMath._WEIGHTS:
            raise AttributeError(name)
        t = self._layer
        for part in LayerMath._WEIGHTS[name].split("."):
            t = getattr(t, part)
        value = t.detach().to(self.dtype)
        self.__dict__[name] = value  # the copy is this object's, never the model's
        return value

    def attention_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the attention reads: ``x``, or ``LN1(x)`` in a pre-LN layer."""
        return layer_norm(x, self.g1, self.beta1, self.eps1) if self.pre_ln else x

    def values(self, x: torch.Tensor) -> torch.Tensor:
        """``x (T, H)`` -> values ``(T, heads, d)``, the value bias inside."""
        return (x @ self.wv.T + self.bv).view(x.shape[0], self.heads, self.d)

    def head_vectors(self, x: torch.Tensor) -> torch.Tensor:
        """``f_hj = W_O^h (W_V^h x_j + b_V^h)``: ``x (T, H)`` -> ``(heads, T, H)``."""
        wo = self.wo.view(self.wo.shape[0], self.heads, self.d).permute(1, 2, 0)  # (heads, d, H): W_O^h transposed
        v = self.values(self.attention_input(x)).transpose(0, 1)  # (heads, T, d)
        return torch.bmm(v.contiguous(), wo.contiguous())

    def ffn(self, x1: torch.Tensor) -> torch.Tensor:
        """The feed-forward output ``W2 act(W1 x1 + b1) + b2`` (its residual and LayerNorm not included)."""
        return self.act(x1 @ self.w1.T + self.b1) @ self.w2.T + self.b2


def weighted(f: torch.Tensor, probs: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
    """``w_ij = sum_h a_hij f_hj`` for the rows i of ``rows``: ``f (heads, T, H)``, ``probs (heads, T, T)`` ->
    ``(R, T, H)``."""
    return torch.einsum("hij,hjd->ijd", probs[:, rows], f)


@dataclass
class LayerDecomposition:
    """One stage of one layer taken apart, for R receiving rows (all T tokens unless asked otherwise).

    Attributes:
        vectors: ``(R, T, H)`` float64, ``[i, j]`` the vector token j contributes to token i.
        rest: name -> ``(R, H)`` float64, the terms in no token's vector: ``"b_O"`` (the attention's output bias),
            ``"beta1"`` (LayerNorm 1's bias), ``"ffn"`` (the feed-forward output) and ``"beta2"``, each carried
            through the LayerNorms that follow it.
        output: ``(R, H)`` float64, the stage's real output recomputed from the weights: equal to
            ``vectors.sum(1) + sum(rest.values())`` (the tests check that against the model's own modules).
    """

    vectors: torch.Tensor
    rest: dict[str, torch.Tensor]
    output: torch.Tensor

    def rebuilt(self) -> torch.Tensor:
        """``(R, H)``: the per-token vectors plus every rest term."""
        return self.vectors.sum(1) + sum(self.rest.values())


def decompose(math: LayerMath, x: torch.Tensor, probs: torch.Tensor, stage: str,
              rows: slice = slice(None)) -> LayerDecomposition:
    """Take one stage of one layer apart (see the module docstring for the formulas).

    Args:
        math: the layer's :class:`LayerMath`.
        x: ``(T, H)`` float64, the layer's input.
        probs: ``(heads, T, T)`` float64, the layer's attention probabilities.
        stage: one of :data:`STAGES`: ``"attention"`` (the attention block's output, Kobayashi et al. 2020),
            ``"ln1"`` (after residual and LayerNorm 1, Kobayashi et al. 2021), ``"layer"`` (the layer's output,
            after the feed-forward's residual and LayerNorm 2, Modarressi et al. 2022).
        rows: the receiving rows i to compute (a slice of 0..T-1).
    Returns:
        :class:`LayerDecomposition`.
    Raises:
        ValueError: an unknown stage, or ``"ln1"`` / ``"layer"`` on a pre-LN layer (its LayerNorms sit before the
            sub-layers, so no LayerNorm closes the attention block's sum).
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}; got {stage!r}")
    if stage != "attention" and math.pre_ln:
        raise ValueError(f"stage {stage!r} takes a post-LN layer apart (LayerNorm after the residual); "
                         "this model is pre-LN")
    w = weighted(math.head_vectors(x), probs, rows)  # (R, T, H)
    r = w.shape[0]
    if stage == "attention":
        return LayerDecomposition(w, {"b_O": math.bo.expand(r, -1)}, w.sum(1) + math.bo)
    xr = x[rows]  # (R, H)
    y = w.sum(1) + math.bo + xr  # (R, H) pre-LN1
    z = w.clone()
    i = torch.arange(x.shape[0], device=x.device)[rows]
    z[torch.arange(r, device=x.device), i] += xr  # the residual: token i's own vector joins column i
    inv1 = ln_inv_std(y, math.eps1)  # (R, 1)
    vectors = g(z, math.g1, inv1[:, None])  # (R, T, H)
    rest = {"b_O": g(math.bo, math.g1, inv1), "beta1": math.beta1.expand(r, -1)}
    x1 = g(y, math.g1, inv1) + math.beta1  # (R, H) LN1's output
    if stage == "ln1":
        return LayerDecomposition(vectors, rest, x1)
    h = math.ffn(x1)  # (R, H)
    u = h + x1
    inv2 = ln_inv_std(u, math.eps2)
    rest = {name: g(term, math.g2, inv2) for name, term in rest.items()}
    rest["ffn"] = g(h, math.g2, inv2)
    rest["beta2"] = math.beta2.expand(r, -1)
    return LayerDecomposition(g(vectors, math.g2, inv2[:, None]), rest, g(u, math.g2, inv2) + math.beta2)


def row_blocks(t: int, width: int, budget: int | None = None) -> list[slice]:
    """Slices of 0..t-1 whose ``rows * width`` stays under ``budget`` (:data:`BLOCK_ELEMENTS`)."""
    step = max(1, (BLOCK_ELEMENTS if budget is None else budget) // max(1, width))
    step = -(-t // -(-t // step))  # blocks of even size
    return [slice(a, min(t, a + step)) for a in range(0, t, step)]


def layer_decomposition(model, inputs: dict, layer: int, stage: str) -> LayerDecomposition:
    """:func:`decompose` of one layer of ``model`` on one encoding (one forward pass of the model first).

    Args:
        model: a bertcore BERT (any head class) in eval mode; only read.
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ``token_type_ids``, ``attention_mask``).
        layer: the 0-based block (``encoder.layer[layer]``, ``0..L-1``); it reads ``hidden_states[layer]``.
        stage: one of :data:`STAGES`.
    Returns:
        :class:`LayerDecomposition` over all T rows (memory ``T * T * H`` float64).
    Raises:
        ValueError: a layer out of range (the message names ``0..L-1``), an unknown stage, a pre-LN model for
            ``"ln1"`` / ``"layer"``, not one encoding, a model in training mode.
    """
    base = base_model(model)
    layers = base.encoder.layer
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer must be in 0..{len(layers) - 1}; got {layer}")
    state = run(model, inputs)
    return decompose(LayerMath(layers[layer], base.config), state.hidden[layer].to(F64), state.probs[layer].to(F64),
                     stage)
