"""One encoder layer taken apart into one vector per contributing token, from the activations one forward pass
records and copies of the layer's weights: the math behind the context-mixing measures (:mod:`.mixing`) and
DecompX (:mod:`.decompx`).

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

The activations are the model's own, read at the sites of :mod:`bertcore.modeling.interventions` that one
forward pass records (:func:`record`): the layer's input ``x`` (``hook_resid_pre``), the values v
(``attn.hook_v``), the attention probabilities a (``attn.hook_pattern``), the LayerNorms' scales s
(``ln1.hook_scale`` / ``ln2.hook_scale``) and outputs, the feed-forward's output h (``hook_mlp_out``) and
pre-activation. :class:`LayerMath` keeps only the algebra on the weights that the decompositions add (the
per-head value-output products f_hj, the LayerNorms' linear parts); nothing of the layer's forward pass is
recomputed from its weights.

Nothing here registers a hook on, sets an attribute of, or changes the mode, dtype or ``requires_grad`` of the
model it reads (the same model object serves many threads): the recordings travel with the one call
(:class:`~bertcore.modeling.interventions.Interventions`), weights are read and copied on the fly, to float64, or
used as they are where a float32 model's T^2 arrays stay float32 (:class:`LayerMath`, :func:`work_dtype`); a
float64 recording of a float32 model runs a private float64 copy (:func:`float64_copy`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from ...modeling.interventions import Interventions

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


def float64_copy(model):
    """The model's encoder (:func:`base_model`) in float64: itself when already float64, else a private copy (the
    shared model is never cast in place)."""
    base = base_model(model)
    return base if base.dtype == F64 else copy.deepcopy(base).to(F64)


def record(model, inputs: dict, sites: Sequence[str], blocks: Iterable[int] | None = None,
           dtype: torch.dtype | None = None) -> dict[int, dict[str, torch.Tensor]]:
    """The block sites ``sites`` (short names of :mod:`bertcore.modeling.interventions`, e.g.
    ``"attn.hook_pattern"``) of ``blocks`` (None: every block), recorded in one forward pass of the model's
    encoder in its own dtype (the model is only read: the recordings travel with the call).

    Args:
        model: a bertcore BERT (any head class) in eval mode.
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ``token_type_ids``, ``attention_mask``).
        sites: the block sites to record in each block.
        blocks: 0-based blocks (``encoder.layer[i]``; one beyond the model raises when the model runs).
        dtype: the returned tensors' dtype (None: :func:`work_dtype`).
    Returns:
        ``{block: {site: tensor}}``, the batch axis dropped: ``attn.hook_v`` ``(T, heads, d)``,
        ``attn.hook_pattern`` ``(heads, T, T)``, a ``hook_scale`` ``(T, 1)``, the others ``(T, H)`` or ``(T, I)``.
    Raises:
        ValueError: not one encoding, a model in training mode, a site the model does not have.
    """
    check_inputs(inputs)
    base = base_model(model)
    blocks = range(base.config.num_hidden_layers) if blocks is None else list(blocks)
    iv = Interventions(record=[f"blocks.{i}.{site}" for i in blocks for site in sites])
    device = next(base.parameters()).device
    kw = {k: v.to(device) for k, v in inputs.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        base(**kw, interventions=iv)
    work = work_dtype(model) if dtype is None else dtype
    return {i: {site: iv.recorded[f"blocks.{i}.{site}"][0].to(work) for site in sites} for i in blocks}


class _Stop(Exception):
    """Raised inside a forward pass once the deepest site asked for is recorded (nothing after it is needed)."""


def record_block(model, hidden: torch.Tensor, layer: int, sites: Sequence[str]) -> dict[str, torch.Tensor]:
    """Block ``layer``'s sites ``sites`` (short names, the deepest last) when the encoder runs from that block
    (``start_layer``) on ``hidden (T, H)``, one unpadded sequence: one forward pass that stops right after the last
    site is recorded. ``model``: any bertcore BERT (only read). Returns ``{site: tensor}`` in the model's dtype, the
    batch axis dropped (shapes as :func:`record`).

    Raises:
        ValueError: a block out of range (the message names ``0..L-1``), a site the block does not have (e.g.
            ``attn.hook_rot_q`` in a model without rotary positions).
    """
    base = getattr(model, "base_model", model)
    n = base.config.num_hidden_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"layer must lie in 0..{n - 1}; got {layer!r}")
    names = [f"blocks.{layer}.{site}" for site in sites]

    def stop(x: torch.Tensor) -> torch.Tensor:
        iv.recorded[names[-1]] = x.detach().clone()
        raise _Stop

    iv = Interventions({names[-1]: stop}, record=names[:-1])  # this call's own, never a hook
    iv.check(base.config)
    p = next(base.parameters())
    with torch.no_grad():
        try:
            base.encoder(hidden.to(device=p.device, dtype=p.dtype)[None], start_layer=layer, interventions=iv)
        except _Stop:
            pass
    return {site: iv.recorded[name][0] for site, name in zip(sites, names)}


def g(z: torch.Tensor, gamma: torch.Tensor, inv_std: torch.Tensor) -> torch.Tensor:
    """The LayerNorm's linear part applied to one summand: ``gamma * (z - mean(z)) * inv_std``."""
    return gamma * (z - z.mean(-1, keepdim=True)) * inv_std


class LayerMath:
    """Copies of one encoder layer's weights (float64 unless asked otherwise) and the algebra on them that the
    decompositions add to the recorded activations (:func:`record`): the per-head value-output products
    (:meth:`head_vectors`) and the LayerNorms' linear parts (:func:`g` with :attr:`g1` / :attr:`g2`). Nothing of the
    layer's forward pass is recomputed here: its input, values, probabilities, LayerNorm scales and feed-forward
    are recorded sites. Each weight is copied on first use only (a method that never reads the feed-forward never
    copies it).

    Args:
        layer: a :class:`~bertcore.modeling.encoder.BertLayer` (only read).
        config: the model's :class:`~bertcore.modeling.config.BertConfig`.
        dtype: the copies' dtype.
    """

    _WEIGHTS = {"wv": "attention.self.value.weight", "bv": "attention.self.value.bias",
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

    def head_vectors(self, v: torch.Tensor) -> torch.Tensor:
        """``f_hj = W_O^h v_hj`` of the recorded values ``v (T, heads, d)`` (``attn.hook_v``: ``W_V^h x_j + b_V^h``,
        of ``LN1(x)`` in a pre-LN layer) -> ``(heads, T, H)``."""
        wo = self.wo.view(self.wo.shape[0], self.heads, self.d).permute(1, 2, 0)  # (heads, d, H): W_O^h transposed
        return torch.bmm(v.to(self.dtype).transpose(0, 1).contiguous(), wo.contiguous())


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
        output: ``(R, H)`` float64, the stage's real output as the model computed it (the recorded site:
            ``hook_attn_out``, ``ln1.hook_out`` or ``ln2.hook_out``): equal to
            ``vectors.sum(1) + sum(rest.values())`` (the tests check both against the model's own modules).
    """

    vectors: torch.Tensor
    rest: dict[str, torch.Tensor]
    output: torch.Tensor

    def rebuilt(self) -> torch.Tensor:
        """``(R, H)``: the per-token vectors plus every rest term."""
        return self.vectors.sum(1) + sum(self.rest.values())


#: the block sites (:func:`record`) that :func:`decompose` reads for each stage
STAGE_SITES: dict[str, tuple[str, ...]] = {
    "attention": ("attn.hook_v", "attn.hook_pattern", "hook_attn_out"),
    "ln1": ("attn.hook_v", "attn.hook_pattern", "hook_resid_pre", "ln1.hook_scale", "ln1.hook_out"),
    "layer": ("attn.hook_v", "attn.hook_pattern", "hook_resid_pre", "ln1.hook_scale", "hook_mlp_out",
              "ln2.hook_scale", "ln2.hook_out")}


def check_stage(stage: str, pre_ln: bool) -> None:
    """Raise ValueError for an unknown stage, or ``"ln1"`` / ``"layer"`` on a pre-LN layer (its LayerNorms sit
    before the sub-layers, so no LayerNorm closes the attention block's sum)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}; got {stage!r}")
    if stage != "attention" and pre_ln:
        raise ValueError(f"stage {stage!r} takes a post-LN layer apart (LayerNorm after the residual); "
                         "this model is pre-LN")


def decompose(math: LayerMath, sites: dict[str, torch.Tensor], stage: str,
              rows: slice = slice(None)) -> LayerDecomposition:
    """Take one stage of one layer apart (see the module docstring for the formulas).

    Args:
        math: the layer's :class:`LayerMath`.
        sites: the layer's recorded sites (:func:`record`, float64), at least :data:`STAGE_SITES` ``[stage]``: its
            values, attention probabilities and output; from ``"ln1"`` on its input and LayerNorm 1's scale (the
            real std of each token's whole pre-LayerNorm sum); for ``"layer"`` the feed-forward's output and
            LayerNorm 2's scale.
        stage: one of :data:`STAGES`: ``"attention"`` (the attention block's output, Kobayashi et al. 2020),
            ``"ln1"`` (after residual and LayerNorm 1, Kobayashi et al. 2021), ``"layer"`` (the layer's output,
            after the feed-forward's residual and LayerNorm 2, Modarressi et al. 2022).
        rows: the receiving rows i to compute (a slice of 0..T-1).
    Returns:
        :class:`LayerDecomposition`.
    Raises:
        ValueError: as :func:`check_stage`.
    """
    check_stage(stage, math.pre_ln)
    w = weighted(math.head_vectors(sites["attn.hook_v"]), sites["attn.hook_pattern"], rows)  # (R, T, H)
    r = w.shape[0]
    if stage == "attention":
        return LayerDecomposition(w, {"b_O": math.bo.expand(r, -1)}, sites["hook_attn_out"][rows])
    x = sites["hook_resid_pre"]
    xr = x[rows]  # (R, H)
    z = w.clone()
    i = torch.arange(x.shape[0], device=x.device)[rows]
    z[torch.arange(r, device=x.device), i] += xr  # the residual: token i's own vector joins column i
    inv1 = 1 / sites["ln1.hook_scale"][rows]  # (R, 1): LayerNorm 1 divides by the real std of the whole sum
    vectors = g(z, math.g1, inv1[:, None])  # (R, T, H)
    rest = {"b_O": g(math.bo, math.g1, inv1), "beta1": math.beta1.expand(r, -1)}
    if stage == "ln1":
        return LayerDecomposition(vectors, rest, sites["ln1.hook_out"][rows])
    inv2 = 1 / sites["ln2.hook_scale"][rows]  # (R, 1)
    rest = {name: g(term, math.g2, inv2) for name, term in rest.items()}
    rest["ffn"] = g(sites["hook_mlp_out"][rows], math.g2, inv2)
    rest["beta2"] = math.beta2.expand(r, -1)
    return LayerDecomposition(g(vectors, math.g2, inv2[:, None]), rest, sites["ln2.hook_out"][rows])


def row_blocks(t: int, width: int, budget: int | None = None) -> list[slice]:
    """Slices of 0..t-1 whose ``rows * width`` stays under ``budget`` (:data:`BLOCK_ELEMENTS`)."""
    step = max(1, (BLOCK_ELEMENTS if budget is None else budget) // max(1, width))
    step = -(-t // -(-t // step))  # blocks of even size
    return [slice(a, min(t, a + step)) for a in range(0, t, step)]


def layer_decomposition(model, inputs: dict, layer: int, stage: str) -> LayerDecomposition:
    """:func:`decompose` of one layer of ``model`` on one encoding: one forward pass of the model in float64 (a
    private float64 copy of a float32 model) records the layer's sites (:data:`STAGE_SITES`).

    Args:
        model: a bertcore BERT (any head class) in eval mode; only read.
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ``token_type_ids``, ``attention_mask``).
        layer: the 0-based block (``encoder.layer[layer]``, ``0..L-1``); its input is ``hidden_states[layer]``.
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
    check_stage(stage, base.config.pre_layer_norm)
    LayerMath(layers[layer], base.config)  # raises for a layer that is not BERT's, before the forward pass
    check_inputs(inputs)
    base = float64_copy(base)
    sites = record(base, inputs, STAGE_SITES[stage], [layer], F64)[layer]
    return decompose(LayerMath(base.encoder.layer[layer], base.config), sites, stage)
