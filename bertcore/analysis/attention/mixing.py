"""Context mixing: how much each token contributes to each token's representation, layer by layer, by six
measures, from raw attention weights to value zeroing (docs/context-mixing.md).

    mixing(model, inputs, method, rollout=False) -> (layers, T, T) float64 numpy

Row i is the token receiving, column j the token contributing; one matrix per layer, indexed by the 0-based block
(index l is ``encoder.layer[l]``, whose output is ``hidden_states[l + 1]``; the UI's "layer l+1"). Every method
keeps the special tokens ([CLS], [SEP]) as rows and columns. Methods
(:data:`METHODS`; each function's docstring gives the exact definition):

    attention      head-mean attention weights                                  rows sum to 1
    norm           ||sum_h a_hij f_h(x_j)||, Kobayashi et al. 2020              raw (not row-normalised)
    norm_res_ln    ||g1_i(sum_h a_hij f_h(x_j) + [i=j] x_i)||, Kobayashi 2021   raw
    globenc        the same carried through LayerNorm 2, Modarressi et al. 2022  rows sum to 1
    value_zeroing  1 - cos of layer outputs, Mohebbi et al. 2023                 rows sum to 1
    alti           L1 distances after LayerNorm 1, Ferrando et al. 2022          rows sum to 1

The vectors behind the norm family and ALTI are those of :mod:`.decompose` (the tests rebuild the model's real
outputs from them). Each call runs one forward pass of the model (its own dtype) that records the sites each
method reads (values, attention probabilities, the layer's input, the LayerNorms' scales and ALTI's LayerNorm 1
output; :func:`.decompose.record`), then works per layer on those and the weights: the norm family's norms from
heads x heads Gram matrices in float64 (no T^2 vectors built), ALTI's T^2 vectors in float32 for a float32 model
(float64 for a float64 one), value zeroing as :mod:`.value_zeroing`.
:func:`aggregate` rolls any method up across layers with :func:`.rollout.rollout`'s convention. Nothing here
changes the model it reads (no hook, attribute, mode or ``requires_grad`` change).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from . import rollout as _rollout
from .decompose import (BLOCK_ELEMENTS, F64, POST_LN_ONLY, LayerMath, base_model, g, record, require_post_ln,
                        row_blocks, work_dtype)
from .value_zeroing import value_zeroing

RAW_METHODS = ("norm", "norm_res_ln")
"""Methods returned as raw norms (as the authors' code returns them); the others' rows sum to 1."""
WITHOUT_RESIDUAL = ("attention", "norm")
"""Methods whose matrices leave out the residual stream: :func:`aggregate` adds it as ``0.5 A + 0.5 I``."""


def _ln_linear(w: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """A LayerNorm's linear part ``gamma * (z - mean z)`` applied to every column of ``w (H, n)``."""
    return gamma[:, None] * (w - w.mean(0, keepdim=True))


def _transformed(mw: LayerMath, v: torch.Tensor, kwo: torch.Tensor) -> torch.Tensor:
    """``K f_hj = (K W_O^h) v_hj`` for a linear map K folded into ``kwo = K W_O (H, H)``: ``(heads, T, H)``."""
    hid = kwo.shape[0]
    return torch.bmm(v.transpose(0, 1), kwo.view(hid, mw.heads, mw.d).permute(1, 2, 0))


def _f64_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous float64 copy of ``t`` (one pass, whatever its strides)."""
    return torch.empty(t.shape, dtype=F64, device=t.device).copy_(t)


def _norms(model, inputs, stage: str) -> torch.Tensor:
    """``(L, T, T)`` norms of :mod:`.decompose`'s vectors of one stage, without building them: each vector is
    ``s_i K sum_h a_hij f_hj`` (plus the residual on the diagonal) for a linear map K (folded into W_O) and a
    scalar s_i, so ``||.||^2 = s_i^2 a_ij^T G_j a_ij`` with ``G_j`` the heads x heads Gram matrix of the
    ``K f_hj``, in float64 (the vectors ``K f_hj`` in the model's dtype: a float32 model's are rounded once, not
    cancelled). The values, probabilities, input and LayerNorm scales are the recorded sites."""
    base = base_model(model)
    sites = ("attn.hook_v", "attn.hook_pattern") + {
        "attention": (), "ln1": ("hook_resid_pre", "ln1.hook_scale"),
        "layer": ("hook_resid_pre", "ln1.hook_scale", "ln2.hook_scale")}[stage]
    rec = record(model, inputs, sites)
    work = work_dtype(model)
    t = rec[0]["attn.hook_pattern"].shape[-1]
    out = torch.empty(len(rec), t, t, dtype=F64, device="cpu")  # on the CPU: each layer's map goes to numpy
    diag = torch.arange(t, device=rec[0]["attn.hook_pattern"].device)
    with torch.no_grad():
        for layer, module in enumerate(base.encoder.layer):
            mw = LayerMath(module, base.config, work)
            s = rec[layer]
            v, p = s["attn.hook_v"], s["attn.hook_pattern"]
            scale = torch.ones(t, 1, dtype=F64, device=p.device)  # s_i: 1 / the real std of each LayerNorm's input
            k = lambda w: w  # noqa: E731
            if stage != "attention":
                x = s["hook_resid_pre"]
                scale = 1 / s["ln1.hook_scale"].to(F64)
                k = lambda w: _ln_linear(w, mw.g1)  # noqa: E731  LayerNorm 1's linear part, without 1/std
            if stage == "layer":
                scale = scale / s["ln2.hook_scale"].to(F64)
                k = lambda w: _ln_linear(_ln_linear(w, mw.g1), mw.g2)  # noqa: E731
            kf = _f64_copy(_transformed(mw, v, k(mw.wo)).transpose(0, 1))  # (j, heads, H)
            gram = kf @ kf.transpose(1, 2)  # (j, heads, heads)
            a = _f64_copy(p.permute(2, 1, 0))  # (j, i, heads)
            n = ((a @ gram) * a).sum(-1).T.clamp_min(0).sqrt() * scale  # (i, j)
            if stage != "attention":
                own = (kf * a[diag, diag, :, None]).sum(1) + k(x.T).T.to(F64)  # K (w_ii + x_i)
                n[diag, diag] = torch.linalg.vector_norm(own, dim=-1) * scale[:, 0]
            out[layer] = n.cpu()
    return out


def attention(model, inputs: dict) -> np.ndarray:
    """Raw attention: ``A_l[i, j] = mean_h a_hij``, the head mean of the post-softmax attention probabilities
    (Clark et al. 2019; the baseline of every paper below). Rows sum to 1. Returns ``(L, T, T)`` float64."""
    rec = record(model, inputs, ("attn.hook_pattern",))
    return torch.stack([s["attn.hook_pattern"] for s in rec.values()]).to(F64).mean(1).cpu().numpy()


def norm(model, inputs: dict) -> np.ndarray:
    """Kobayashi et al. 2020, "Attention is Not Only a Weight", section 3 (eq. 5) at layer level:
    ``N_l[i, j] = ||sum_h a_hij f_h(x_j)||_2`` with ``f_h(x) = W_O^h (W_V^h x + b_V^h)``: the value bias inside
    f, the output bias b_O in no token's vector, the norm of the head-summed vector (as the authors'
    ``summed_weighted_norm``). Raw, not row-normalised. On a pre-LN model x is ``LN1(x)``, what the attention
    reads. Returns ``(L, T, T)`` float64 >= 0."""
    return _norms(model, inputs, "attention").numpy()


def norm_res_ln(model, inputs: dict) -> np.ndarray:
    """Kobayashi et al. 2021, "Incorporating Residual and Normalization Layers into Analysis of Masked Language
    Models", section 2.2 (ATB + RES + LN): ``||g_i(sum_h a_hij f_h(x_j) + [i=j] x_i)||_2`` with
    ``g_i(z) = gamma1 * (z - mean(z)) / sqrt(var(y_i) + eps)``, y_i the real pre-LayerNorm sum of token i
    (attention output + b_O + residual). b_O and beta1 are in no token's vector. Raw, not row-normalised (the
    authors' code returns these norms). Post-LN only. Returns ``(L, T, T)`` float64 >= 0."""
    require_post_ln(model, "norm_res_ln")
    return _norms(model, inputs, "ln1").numpy()


def globenc(model, inputs: dict) -> np.ndarray:
    """GlobEnc, Modarressi et al. 2022, "GlobEnc: Quantifying Global Token Attribution by Incorporating the Whole
    Encoder Layer in Transformers", section 3 (N_Enc): norm_res_ln's vectors carried on through the second
    residual and LayerNorm, ``||g2_i(g1_i(sum_h a_hij f_h(x_j) + [i=j] x_i))||_2``, where g2 divides by the
    real std of token i's pre-LayerNorm-2 sum (feed-forward output included). The feed-forward output is in no
    token's vector: as the authors, the non-linear FFN is not taken apart (it is a rest term with b_O, beta1,
    beta2; the vectors plus those rebuild the layer's real output). Rows divided by their sum. Post-LN only.
    Returns ``(L, T, T)`` float64, rows >= 0 summing to 1."""
    require_post_ln(model, "globenc")
    return normalize_rows(_norms(model, inputs, "layer").numpy())


def alti(model, inputs: dict) -> np.ndarray:
    """ALTI, Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the Transformer", sections
    2-3: with ``y_i = LN1(...)`` the real output of the attention block after its LayerNorm (the post-LN1 state)
    and ``T_i(x_j) = g1_i(sum_h a_hij f_h(x_j) + [i=j] x_i)`` the transformed vectors (LayerNorm 1 taken apart
    as in norm_res_ln, the residual in T_i(x_i)), ``c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1)``, rows
    divided by their sum. L1 distance without the 1e-6 that the authors' ``F.pairwise_distance`` adds inside it
    (that moves a share by at most 3e-5 on the shipped model's default sentence). The T^2 vectors are float32 for
    a float32 model (float64 for a float64 one). Post-LN only. Returns ``(L, T, T)`` float64, rows >= 0 summing
    to 1."""
    require_post_ln(model, "alti")
    base = base_model(model)
    rec = record(model, inputs, ("hook_resid_pre", "attn.hook_v", "attn.hook_pattern", "ln1.hook_scale",
                                 "ln1.hook_out"))
    work = work_dtype(model)
    t, hid = rec[0]["hook_resid_pre"].shape
    out = torch.empty(len(rec), t, t, dtype=F64, device="cpu")  # on the CPU: each layer's map goes to numpy
    diag = torch.arange(t, device=rec[0]["hook_resid_pre"].device)
    with torch.no_grad():
        for layer, module in enumerate(base.encoder.layer):
            mw = LayerMath(module, base.config, work)
            s = rec[layer]
            x, v, p = s["hook_resid_pre"], s["attn.hook_v"], s["attn.hook_pattern"]
            inv = (1 / s["ln1.hook_scale"].to(F64)).to(work)  # (T, 1): 1 / std(y_i), y_i the real pre-LN1 sum
            x1 = s["ln1.hook_out"]  # (T, H) the real post-LN1 state y_i
            kf = _transformed(mw, v, _ln_linear(mw.wo, mw.g1)).transpose(0, 1).contiguous()  # (j, heads, H)
            a = (p * inv[None]).permute(2, 1, 0).contiguous()  # (j, i, heads): a_hij / std(y_i)
            own = (kf * a[diag, diag, :, None]).sum(1) + g(x, mw.g1, inv)  # T_i(x_i), the residual inside
            norm1 = x1.abs().sum(-1)  # (i,)
            c = torch.empty(t, t, dtype=work, device=x.device)  # (j, i)
            for js in row_blocks(t, t * hid, 1 << 19):
                c[js] = torch.sub(norm1, torch.bmm(a[js], kf[js]).sub_(x1).abs_().sum(-1))  # T_i(x_j) = g1_i(w_ij)
            c[diag, diag] = norm1 - (x1 - own).abs().sum(-1)  # j = i: the residual's vector, not w_ii's
            out[layer] = c.T.clamp_min(0).to(F64).cpu()
    return normalize_rows(out.numpy())


METHODS: dict[str, Callable[..., np.ndarray]] = {
    "attention": attention, "norm": norm, "norm_res_ln": norm_res_ln, "globenc": globenc,
    "value_zeroing": value_zeroing, "alti": alti,
}
LABELS = {"attention": "Attention weights (head mean)", "norm": "Norm ||αf(x)|| (Kobayashi et al. 2020)",
          "norm_res_ln": "Norm + residual + LayerNorm (Kobayashi et al. 2021)",
          "globenc": "GlobEnc: whole layer (Modarressi et al. 2022)",
          "value_zeroing": "Value zeroing (Mohebbi et al. 2023)", "alti": "ALTI (Ferrando et al. 2022)"}


def normalize_rows(matrices: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (rows summing to 0 stay 0). ``(..., T, T)`` -> float64, same shape."""
    m = np.asarray(matrices, dtype=np.float64)
    total = m.sum(-1, keepdims=True)
    return np.divide(m, total, out=np.zeros_like(m), where=total > 0)


def aggregate(matrices: np.ndarray, method: str) -> np.ndarray:
    """Roll one method's per-layer matrices up across layers with :func:`.rollout.rollout`'s convention
    (Abnar & Zuidema 2020, section 3; the tests check it equals that function): rows normalised, then
    ``R_0 = A_0``, ``R_l = A_l @ R_(l-1)``. Methods of :data:`WITHOUT_RESIDUAL` get the residual as
    ``A = 0.5 A + 0.5 I`` (rows renormalised), as rollout does for attention; the others already hold the
    residual, so none is added (ALTI + rollout as Ferrando et al. 2022, section 3, define it; GlobEnc's and value
    zeroing's aggregation the same way).

    Args:
        matrices: ``(L, T, T)`` from :func:`mixing` with the same ``method``.
    Returns:
        ``(L, T, T)`` float64: ``[l, i, j]`` = share of input token j in token i after block l (0-based: in
        ``hidden_states[l + 1]``); rows sum to 1.
    Raises:
        ValueError: an unknown method or another shape.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    m = np.asarray(matrices, dtype=np.float64)
    if m.ndim != 3 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"matrices must have shape (layers, T, T); got {m.shape}")
    a = torch.from_numpy(normalize_rows(m))
    if method in WITHOUT_RESIDUAL:  # as rollout.residual_attention
        w = _rollout.RESIDUAL_WEIGHT
        a = (1.0 - w) * a + w * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        a = a / a.sum(-1, keepdim=True)
    out = torch.empty_like(a)
    out[0] = a[0]
    for layer in range(1, a.shape[0]):  # the products in torch: numpy's BLAS threads spin after a call and slow
        out[layer] = a[layer] @ out[layer - 1]  # the next torch forward pass (about 5x, bench_mixing.py)
    return out.numpy()


def mixing(model, inputs: dict, method: str, rollout: bool = False) -> np.ndarray:
    """Context mixing of one encoding, one matrix per layer, by one of :data:`METHODS`.

    Args:
        model: a bertcore BERT (``BertModel`` or any head class) in eval mode. Only read: no hook, attribute,
            mode or ``requires_grad`` change (the same model may serve other threads at once).
        inputs: an encoding's ``tensors()``: ``input_ids (1, T)`` long, ``token_type_ids``, ``attention_mask``.
        method: ``"attention"``, ``"norm"``, ``"norm_res_ln"``, ``"globenc"``, ``"value_zeroing"`` or ``"alti"``
            (each function of that name states its definition and source).
        rollout: roll the layers up with :func:`aggregate` (rows then sum to 1 for every method).
    Returns:
        ``(L, T, T)`` float64 numpy: ``[l, i, j]`` how much token j contributes to token i in block l (0-based);
        special tokens kept. ``norm`` and ``norm_res_ln`` are raw norms (:data:`RAW_METHODS`; divide rows with
        :func:`normalize_rows` to compare); the others' rows are >= 0 and sum to 1.
    Raises:
        ValueError: an unknown method, not one encoding, a model in training mode, a method of
            :data:`POST_LN_ONLY` on a pre-LN model.
    Cost (bench/bench_mixing.py, docs/context-mixing.md): one forward pass of the model, then per layer work on
    its weights: about 2 to 3 forward passes in all for the norm family and ALTI; value zeroing two matmuls of
    ``T^2`` rows per layer (about T/3 to T/4 forward passes).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    out = METHODS[method](model, inputs)
    return aggregate(out, method) if rollout else out


def special_share(matrices: np.ndarray, columns: np.ndarray | list[bool]) -> np.ndarray:
    """The mean row's share on some columns (e.g. [CLS] + [SEP]): rows normalised, then
    ``mean_i sum_{j in columns} M[l, i, j]``. ``matrices (L, T, T)``, ``columns (T,)`` bool -> ``(L,)`` float64.
    Raises ValueError when ``columns`` does not have length T."""
    cols = np.asarray(columns, dtype=bool)
    m = normalize_rows(matrices)
    if cols.shape != (m.shape[-1],):
        raise ValueError(f"columns must have one flag per token ({m.shape[-1]}); got shape {cols.shape}")
    return m[..., cols].sum(-1).mean(-1)


__all__ = ["mixing", "aggregate", "normalize_rows", "special_share", "METHODS", "LABELS", "RAW_METHODS",
           "POST_LN_ONLY", "WITHOUT_RESIDUAL", "BLOCK_ELEMENTS"]
