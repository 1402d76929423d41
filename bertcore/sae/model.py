"""The TopK sparse autoencoder (Gao et al. 2024, "Scaling and evaluating sparse autoencoders", section 2.3).

One layer's hidden state ``x (..., d_in)`` (BERT's residual stream after layer l, post-LN as the model outputs it)
is first scaled by a fixed factor ``c`` so that its mean norm over the training data is ``sqrt(d_in)`` (section
2.1, "we normalize ... to a fixed mean norm"), then::

    pre = (c x - b_dec) @ W_enc + b_enc                     (..., d_sae)   the pre-activations
    z   = TopK(pre): the k largest kept, ReLU on them, 0 elsewhere       the feature activations
    x_hat = (z @ W_dec + b_dec) / c                         (..., d_in)    the reconstruction, in the input's units

``W_enc (d_in, d_sae)``, ``b_enc (d_sae,)``, ``W_dec (d_sae, d_in)`` with unit-norm rows (the features'
directions), ``b_dec (d_in,)`` subtracted before encoding (``apply_b_dec_to_input`` in SAELens). The ReLU after
TopK is SAELens's (``sae_lens.saes.topk_sae.TopK``): a selected latent with a negative pre-activation is 0, so a
token has *at most* k active latents and exactly k selected ones. The auxiliary loss against dead latents (AuxK,
section A.2) reconstructs the residual error with the ``k_aux`` largest pre-activations of the latents that have
not fired for a while.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class SAEOutput:
    """One forward pass of :class:`TopKSAE`, all in the *normalised* units (input times ``norm_scale``).

    ``x (N, d_in)`` the scaled input; ``x_hat (N, d_in)`` its reconstruction; ``pre (N, d_sae)`` the
    pre-activations; ``values (N, k)`` / ``indices (N, k)`` long: the selected latents and their activations
    (after the ReLU).
    """

    x: torch.Tensor
    x_hat: torch.Tensor
    pre: torch.Tensor
    values: torch.Tensor
    indices: torch.Tensor

    @property
    def target(self) -> torch.Tensor:
        """What is reconstructed: the input itself (a transcoder's output has its own target)."""
        return self.x

    def fired(self) -> torch.Tensor:
        """The latents active on some token, ``(M,)`` long."""
        return self.indices[self.values > 0].unique()

    def l0(self) -> float:
        """Mean number of active latents per token."""
        return float((self.values > 0).sum(-1).float().mean())


class TopKSAE(nn.Module):
    """A TopK SAE on vectors of size ``d_in`` with ``d_sae`` latents (float32 parameters).

    Args:
        d_in: the hidden size it reads (384 for MiniLM).
        d_sae: the number of latents (features), e.g. 16 x d_in.
        k: the latents kept per token (1 <= k <= d_sae).
        norm_scale: ``c``, the factor that scales an input to the training data's mean norm ``sqrt(d_in)``.
        seed: the initialisation's seed (decoder rows random unit vectors, encoder = decoder transposed, biases 0:
            Gao et al. 2024, section A.1).
    Raises:
        ValueError: a size or k out of range, ``norm_scale`` not positive.
    """

    def __init__(self, d_in: int, d_sae: int, k: int, norm_scale: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        if d_in < 1 or d_sae < 1:
            raise ValueError(f"an SAE needs d_in >= 1 and d_sae >= 1; got {d_in} and {d_sae}")
        if not 1 <= k <= d_sae:
            raise ValueError(f"k must be between 1 and the number of latents ({d_sae}); got {k}")
        if not norm_scale > 0 or not math.isfinite(norm_scale):
            raise ValueError(f"norm_scale must be a positive number; got {norm_scale}")
        self.d_in, self.d_sae, self.k = d_in, d_sae, k
        gen = torch.Generator().manual_seed(seed)
        w_dec = torch.randn(d_sae, d_in, generator=gen)
        w_dec /= w_dec.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(w_dec)  # (d_sae, d_in), unit rows
        self.W_enc = nn.Parameter(w_dec.T.clone())  # (d_in, d_sae)
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        self.register_buffer("norm_scale", torch.tensor(float(norm_scale)))

    # -- the three steps
    def pre_acts(self, x_scaled: torch.Tensor) -> torch.Tensor:
        """``(..., d_in)`` scaled input -> ``(..., d_sae)`` pre-activations ``(x - b_dec) @ W_enc + b_enc``, computed
        as ``x @ W_enc + (b_enc - b_dec @ W_enc)`` (the same numbers; the backward pass then needs one large matrix
        product, not two, since the input needs no gradient)."""
        return x_scaled @ self.W_enc + (self.b_enc - self.b_dec @ self.W_enc)

    def select(self, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """TopK then ReLU: ``(..., d_sae)`` -> values ``(..., k)`` (>= 0) and indices ``(..., k)`` long."""
        values, indices = torch.topk(pre, self.k, dim=-1, sorted=False)
        return values.relu(), indices

    def decode_sparse(self, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """``sum_j values[j] W_dec[indices[j]] + b_dec`` in the scaled units, ``(N, k)`` -> ``(N, d_in)``
        (``F.embedding_bag``: only the k selected rows of ``W_dec`` are read)."""
        return F.embedding_bag(indices, self.W_dec, per_sample_weights=values, mode="sum") + self.b_dec

    def forward(self, x: torch.Tensor) -> SAEOutput:
        """``x (N, d_in)`` in the model's units -> :class:`SAEOutput` (scaled units)."""
        x_scaled = x * self.norm_scale
        pre = self.pre_acts(x_scaled)
        values, indices = self.select(pre)
        return SAEOutput(x_scaled, self.decode_sparse(values, indices), pre, values, indices)

    # -- the public views, in the model's units
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``(..., d_sae)`` of hidden states ``(..., d_in)`` (0 except at most k per token)."""
        values, indices = self.select(self.pre_acts(x * self.norm_scale))
        return torch.zeros(*values.shape[:-1], self.d_sae, dtype=values.dtype,
                           device=values.device).scatter_(-1, indices, values)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Feature activations ``(..., d_sae)`` -> reconstruction ``(..., d_in)`` in the model's units."""
        return (z @ self.W_dec + self.b_dec) / self.norm_scale

    kind = "sae"  #: what it reads (:data:`bertcore.sae.stream.READERS`)

    @property
    def d_out(self) -> int:
        """The size of what it reconstructs: its input's."""
        return self.d_in

    def measure(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(target, z, reconstruction)`` of hidden states ``x (N, d_in)``, in the model's units (what the held-out
        measures compare)."""
        z = self.encode(x)
        return x, z, self.decode(z)

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., d_in)`` -> ``x_hat (..., d_in)``, the same units: what is spliced into the model."""
        shape = x.shape
        out = self(x.reshape(-1, shape[-1]).to(self.W_enc.dtype))
        return (out.x_hat / self.norm_scale).reshape(shape).to(x.dtype)

    def widened(self, d_sae: int, seed: int = 0) -> TopKSAE:
        """A copy with ``d_sae`` latents: this SAE's latents first, unchanged, then ``d_sae - self.d_sae`` new ones
        (random unit decoder rows, encoder columns their transposes at a fifth of the old columns' mean norm, so
        that the old latents keep their tokens). A wider dictionary started from a trained one; :func:`resample`
        then points the new latents at the reconstruction's errors (:class:`bertcore.sae.train.Trainer`, on a run's
        first block).

        Raises:
            ValueError: ``d_sae`` smaller than this SAE's.
        """
        if d_sae < self.d_sae:
            raise ValueError(f"a widened SAE needs at least this one's {self.d_sae} latents; got {d_sae}")
        wide = TopKSAE(self.d_in, d_sae, self.k, float(self.norm_scale), seed=seed)
        old = self.d_sae
        with torch.no_grad():
            wide.W_dec[:old] = self.W_dec.float()
            wide.W_enc[:, :old] = self.W_enc.float()
            wide.W_enc[:, old:] *= 0.2 * float(self.W_enc.float().norm(dim=0).mean())
            wide.b_enc[:old] = self.b_enc.float()
            wide.b_dec.copy_(self.b_dec.float())
        return wide

    # -- training helpers (Gao et al. 2024, sections A.1-A.2)
    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Rescale every decoder row to unit norm (after each optimizer step)."""
        self.W_dec /= self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        """Project out of ``W_dec.grad`` the component along each row (before the step), so that the unit-norm
        constraint is not fought by the optimizer."""
        if self.W_dec.grad is not None:
            parallel = (self.W_dec.grad * self.W_dec).sum(dim=1, keepdim=True)
            self.W_dec.grad -= parallel * self.W_dec


def mse(x: torch.Tensor, x_hat: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of the squared error summed over the hidden size, ``(N, d) -> ()``."""
    return (x_hat - x).pow(2).sum(dim=-1).mean()


def aux_k_loss(sae: TopKSAE, out: SAEOutput, dead: torch.Tensor, k_aux: int) -> torch.Tensor:
    """AuxK (Gao et al. 2024, section A.2): the squared error of reconstructing the main reconstruction's residual
    ``e = x - x_hat`` with the ``k_aux`` largest pre-activations among the dead latents (``dead (d_sae,)`` bool),
    decoded without ``b_dec``: ``mean ||e - e_hat||^2`` (the units of :func:`mse`). 0 when no latent is dead.
    ``()`` float."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return out.x.new_zeros(())
    residual = (out.x - out.x_hat).detach()
    masked = out.pre.masked_fill(~dead, float("-inf"))
    values, indices = torch.topk(masked, min(k_aux, n_dead), dim=-1, sorted=False)
    e_hat = F.embedding_bag(indices, sae.W_dec, per_sample_weights=values.relu(), mode="sum")
    return (e_hat - residual).pow(2).sum(-1).mean()


@torch.no_grad()
def resample(sae, dead: torch.Tensor, out, optimizer: torch.optim.Optimizer | None = None,
             generator: torch.Generator | None = None, encoder_scale: float = 0.2) -> int:
    """Resample dead latents (Bricken et al. 2023, "Towards Monosemanticity", "neuron resampling"), for TopK.

    Each latent of ``dead (d_sae,)`` bool gets a new decoder row: the normalised reconstruction error ``x - x_hat``
    of a token of ``out`` (one forward pass of a batch, scaled units), drawn with probability proportional to its
    squared error; its encoder column points the same way at ``encoder_scale`` times the alive columns' mean norm
    (small, so that the old features keep their tokens while the new one finds its own); ``b_enc`` 0; and its Adam
    moments (``optimizer``'s ``exp_avg`` / ``exp_avg_sq`` of those rows and columns) reset. Returns how many were
    resampled (0 when none is dead or the batch reconstructs perfectly). For a transcoder
    (:class:`bertcore.sae.transcoder.Transcoder`, whose ``out.target`` is not its input) the error is
    ``target - x_hat`` and the encoder column points along the token's input ``out.x`` instead.
    """
    idx = dead.nonzero().flatten()
    err = out.target - out.x_hat
    weights = err.pow(2).sum(-1)
    if len(idx) == 0 or not float(weights.sum()) > 0:
        return 0
    # drawn where the generator is (a seeded CPU generator draws the same tokens whatever the SAE's device)
    on = generator.device if generator is not None else weights.device
    picked = torch.multinomial(weights.to(on), len(idx), replacement=len(idx) > int((weights > 0).sum()),
                               generator=generator).to(weights.device)
    directions = err[picked] / err[picked].norm(dim=-1, keepdim=True).clamp_min(1e-12)
    reads = directions if out.target is out.x else out.x[picked] / out.x[picked].norm(dim=-1, keepdim=True).clamp_min(
        1e-12)
    alive = ~dead
    norm = sae.W_enc[:, alive].norm(dim=0).mean() if bool(alive.any()) else sae.W_enc.new_tensor(1.0)
    sae.W_dec[idx] = directions
    sae.W_enc[:, idx] = reads.T * (encoder_scale * norm)
    sae.b_enc[idx] = 0.0
    if optimizer is not None:
        for param, rows in ((sae.W_dec, (idx,)), (sae.W_enc, (slice(None), idx)), (sae.b_enc, (idx,))):
            state = optimizer.state.get(param, {})
            for name in ("exp_avg", "exp_avg_sq"):
                if name in state:
                    state[name][rows] = 0.0
    return len(idx)
