"""Value zeroing (Mohebbi et al. 2023, "Quantifying Context Mixing in Transformers", EACL, section 2), batched:
one of the methods of :func:`.mixing.mixing`.

For each layer and token j, j's value vectors are set to zero in every head (value bias included, as the authors'
``value_layer[:, :, j] = 0``), the original attention weights are kept and the whole layer runs again from its
real input: attention output, residual, LayerNorm 1, feed-forward, LayerNorm 2. Token i's score is the cosine
distance between its real and its altered layer output.

Batched without T reruns of the layer: zeroing j takes ``w_ij = sum_h a_hij f_h(x_j)`` (:mod:`.decompose`) out of
token i's attention output and nothing else, so every rerun is the real layer plus a difference. The real layer is
read from one forward pass of the model that records its sites (:data:`SITES`: values, probabilities, the
residual stream, the LayerNorms' scales, the layer's output, the feed-forward's pre- and post-activation). The
differences are carried, not the states: LayerNorm 1's new std comes from float64 statistics of ``w_ij`` (no T^2
vectors), the change of LayerNorm 1's output, of the feed-forward's activations and of LayerNorm 2's output are
computed as differences (``act(pre + d) - act(pre)``), and ``1 - cos`` from the part of the output's change
orthogonal to the output, ``(v - u^2) / (q (q + 1 + u))`` with ``u = o.do / |o|^2``, ``v = |do|^2 / |o|^2``,
``q = sqrt(1 + 2u + v)``, never as 1 minus a number close to 1. The T^2-row tensors are float32 for a float32
model (float64 for a float64 one): carried as differences they keep float32's relative precision (the tests
compare with a float64 copy and with T plain reruns of the layer's own modules).
"""

from __future__ import annotations

import numpy as np
import torch

from .decompose import (F64, LayerMath, activation_, base_model, check_inputs, record, require_post_ln, row_blocks,
                        work_dtype)

#: elements of one block of the (zeroed token, T, I) activation changes (4 MB of float32; bench/bench_mixing.py)
VZ_BLOCK = 1 << 20
#: the block sites :func:`distances` reads (:func:`.decompose.record`)
SITES = ("attn.hook_v", "attn.hook_pattern", "hook_resid_mid", "ln1.hook_scale", "mlp.hook_pre", "mlp.hook_post",
         "hook_resid_post", "ln2.hook_scale", "ln2.hook_out")


def value_zeroing(model, inputs: dict) -> np.ndarray:
    """Value zeroing, Mohebbi et al. 2023, section 2 (the module docstring gives the computation).

    ``VZ_l[i, j] = 1 - cos(o_i, o_i^(-j))``: o_i token i's real output of layer l, ``o_i^(-j)`` the output when
    layer l runs again with token j's value vectors zeroed in every head (attention weights kept). Rows divided by
    their sum, as the authors' code. Special tokens kept.

    Args:
        model: a post-LN bertcore BERT in eval mode (only read).
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ...).
    Returns:
        ``(L, T, T)`` float64, rows >= 0 summing to 1.
    Raises:
        ValueError: a pre-LN model, not one encoding, a model in training mode.
    Cost: one forward pass plus, per layer, two matmuls of ``T^2`` rows (the feed-forward's two projections of
    the activations' change) and elementwise work on ``T^2 x I`` arrays (bench/bench_mixing.py).
    """
    require_post_ln(model, "value_zeroing")
    base = base_model(model)
    rec = record(model, inputs, SITES)
    work = work_dtype(model)
    t = rec[0]["attn.hook_pattern"].shape[-1]
    out = torch.empty(len(rec), t, t, dtype=F64, device="cpu")  # on the CPU: each layer's map goes to numpy
    with torch.no_grad():
        for layer, module in enumerate(base.encoder.layer):
            m, mw = LayerMath(module, base.config), LayerMath(module, base.config, work)
            out[layer] = distances(m, mw, rec[layer]).T.cpu()
    total = out.sum(-1, keepdim=True)
    return torch.where(total > 0, out / total, torch.zeros_like(out)).numpy()


def distances(m: LayerMath, mw: LayerMath, sites: dict[str, torch.Tensor]) -> torch.Tensor:
    """Raw ``1 - cos`` of one layer, ``(T_j, T_i)`` float64 (zeroed token first). ``m``: the layer's float64
    weights; ``mw``: its weights in the dtype of the T^2-row arrays and of the feed-forward (the model's own when
    float32: no copy). ``sites``: the layer's recorded :data:`SITES` (batch axis dropped)."""
    work = mw.dtype
    probs = sites["attn.hook_pattern"].to(F64)  # (heads, T, T)
    f = m.head_vectors(sites["attn.hook_v"])  # (heads, T, H) f_hj, float64
    y = sites["hook_resid_mid"].to(F64)  # (T, H) pre-LN1
    hid = y.shape[1]
    cy = y - y.mean(-1, keepdim=True)
    s1 = sites["ln1.hook_scale"].to(F64)[:, 0]  # (T,) sqrt(var1 + eps1)
    var1, inv1 = s1 * s1 - m.eps1, 1 / s1
    pre_w, act_w = sites["mlp.hook_pre"].to(work), sites["mlp.hook_post"].to(work)  # (T, I)
    z = sites["hook_resid_post"].to(F64)  # (T, H) pre-LN2: the changes below are taken from these
    cz = z - z.mean(-1, keepdim=True)
    s2 = sites["ln2.hook_scale"].to(F64)[:, 0]
    var2, inv2 = s2 * s2 - m.eps2, 1 / s2
    o = sites["ln2.hook_out"].to(F64)  # (T, H) the layer's real output
    # LayerNorm 1 of y_i - w_ij: var = var(y_i) - 2 cov(y_i, w_ij) + var(w_ij), from f without building w
    cf = f - f.mean(-1, keepdim=True)  # (heads, T, H)
    a = probs.permute(2, 1, 0).contiguous()  # (j, i, heads)
    cov = (cy @ cf.reshape(-1, hid).T).view(-1, *cf.shape[:2])  # (i, heads, j): Cy_i . f_hj
    cov = (a * cov.permute(2, 0, 1)).sum(-1) / hid  # (j, i)
    cfj = cf.transpose(0, 1).contiguous()  # (j, heads, H)
    var_w = ((a @ (cfj @ cfj.transpose(1, 2))) * a).sum(-1) / hid  # (j, i): a^T Gram_j a / H
    inv1z = torch.rsqrt(var1 - 2 * cov + var_w + m.eps1)  # (j, i)
    d_inv1 = (inv1z - inv1).to(work)[..., None]  # (j, i, 1)
    a_w = (a * -inv1z[..., None]).to(work)  # (j, i, heads): -a_hij / std(y_i - w_ij)
    kf = (m.g1 * cfj).to(work)  # (j, heads, H): gamma1 * C f_hj
    qf = (kf.reshape(-1, hid) @ mw.w1.T).view(*kf.shape[:2], -1)  # (j, heads, I): W1 (gamma1 * C f_hj)
    gy = (m.g1 * cy).to(work)  # (i, H)
    qy = gy @ mw.w1.T  # (i, I)
    w2t = mw.w2.T
    cz_w, o_w, g2 = cz.to(work), o.to(work), m.g2.to(work)
    o_sq = (o * o).sum(-1)  # (i,)
    out = torch.empty(a.shape[:2], dtype=F64, device=y.device)
    blocks = row_blocks(a.shape[0], a.shape[1] * qf.shape[2], VZ_BLOCK)
    size = blocks[0].stop - blocks[0].start
    h_buf = torch.empty(size, *pre_w.shape, dtype=work, device=y.device)  # reused: no new large arrays per block
    z_buf = torch.empty(size, *y.shape, dtype=work, device=y.device)
    for js in blocks:
        n = js.stop - js.start
        # LayerNorm 1's output change: d_inv * gamma1 * C y_i - inv' * gamma1 * C w_ij; W1 of it from qf, qy
        dx1 = torch.bmm(a_w[js], kf[js]).addcmul_(d_inv1[js], gy)  # (J, i, H)
        h = torch.bmm(a_w[js], qf[js], out=h_buf[:n])  # (J, i, I)
        h.addcmul_(d_inv1[js], qy).add_(pre_w)  # W1 (x1 + dx1) + b1
        activation_(mw.act_name, h).sub_(act_w)  # the activations' change
        dz = torch.matmul(h.view(-1, h.shape[-1]), w2t, out=z_buf[:n].view(-1, hid)).view(n, -1, hid)
        dz += dx1  # (J, i, H): the pre-LN2 change
        dz -= dz.mean(-1, keepdim=True)  # centred
        delta2 = (2 * (dz * cz_w).sum(-1) + torch.linalg.vector_norm(dz, dim=-1) ** 2).to(F64) / hid
        inv2z = torch.rsqrt(var2 + delta2 + m.eps2)  # (J, i): LayerNorm 2's new 1 / std
        do = dz.mul_(inv2z[..., None].to(work)).addcmul_((inv2z - inv2)[..., None].to(work), cz_w).mul_(g2)
        u = (do * o_w).sum(-1).to(F64) / o_sq  # (J, i): o . do / |o|^2
        perp = do.addcmul_(u[..., None].to(work), o_w, value=-1)  # the part of the change orthogonal to o_i
        excess = torch.linalg.vector_norm(perp, dim=-1).to(F64) ** 2 / o_sq  # v - u^2 >= 0
        q = torch.sqrt(1 + 2 * u + excess + u * u)
        out[js] = excess / (q * (q + 1 + u))
    return out


def every_layer(model, inputs: dict, position: int, token_id: int, tokens: list[int] | None = None,
                batch: int = 16) -> np.ndarray:
    """The effect of removing each token from the mixing of every layer at once (for faithfulness): the logit of
    ``token_id`` at ``position`` in the real forward pass minus the logit when token j's value vectors are zeroed
    in every head of every layer (value bias included, as :func:`value_zeroing`; queries and keys unchanged, so
    token j still receives and is still attended to, but sends nothing). Positive: the token helped the
    prediction.

    The zeroing is an argument of the forward pass (:class:`bertcore.modeling.interventions.Interventions` at the
    ``blocks.{l}.attn.hook_v`` sites), never a hook: the shared model is only read. Copies of the input run
    ``batch`` at a
    time, copy b zeroing its own token. Works on post-LN and pre-LN models.

    Args:
        model: a bertcore model with an MLM head (``BertForPreTraining`` / ``BertForMaskedLM``), eval mode.
        inputs: an encoding's ``tensors()`` (``input_ids (1, T)``, ...).
        position: the predicted position; ``token_id`` the vocabulary id whose logit is read.
        tokens: the positions to zero (default: every position).
    Returns:
        ``(len(tokens),)`` float64: real logit minus the logit with that token's values zeroed.
    Raises:
        ValueError: no MLM head, a position or id out of range, not one encoding, a model in training mode.
    """
    from bertcore.readouts.fill_mask import FillMaskError, mlm_head_of
    from bertcore.modeling.interventions import Interventions

    try:
        encoder, head = mlm_head_of(model)
    except FillMaskError as exc:
        raise ValueError(str(exc)) from exc
    ids = check_inputs(inputs)
    base = base_model(model)
    t = ids.shape[1]
    if not 0 <= position < t:
        raise ValueError(f"position must lie in [0, {t}); got {position}")
    if not 0 <= token_id < head.decoder.weight.shape[0]:
        raise ValueError(f"token id {token_id} is outside the vocabulary")
    tokens = list(range(t)) if tokens is None else [int(j) for j in tokens]
    device = next(base.parameters()).device
    kw = {k: v.to(device) for k, v in inputs.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    layers = base.config.num_hidden_layers
    out = np.empty(len(tokens), dtype=np.float64)
    with torch.no_grad():
        real = float(head(encoder(**kw).last_hidden_state[:, position])[0, token_id])
        for start in range(0, len(tokens), batch):
            js = tokens[start:start + batch]
            keep = torch.ones(len(js), t, 1, 1, dtype=base.dtype, device=device)  # (B, T, heads, d) broadcast
            keep[torch.arange(len(js), device=device), torch.tensor(js, device=device)] = 0

            def zero(v: torch.Tensor, keep: torch.Tensor = keep) -> torch.Tensor:
                return v * keep.to(v.dtype)

            iv = Interventions({f"blocks.{layer}.attn.hook_v": zero for layer in range(layers)})
            copies = {k: v.expand(len(js), -1) for k, v in kw.items()}
            hidden = encoder(**copies, interventions=iv).last_hidden_state[:, position]  # (B, H)
            out[start:start + len(js)] = real - head(hidden)[:, token_id].double().cpu().numpy()
    return out
