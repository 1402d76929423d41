"""The logit lens for a masked LM: what the model would predict if it stopped at layer k.

nostalgebraist (2020, "interpreting GPT: the logit lens") decodes every layer's hidden state with the model's
own output head. For BERT the head is ``cls.predictions`` (dense + GELU + LayerNorm, then the decoder tied to
the word embeddings; HF ``BertLMPredictionHead``), applied here to ``hidden_states[k]`` for k = 0 (the embedding
output) .. L (the last layer, whose lens is the model's real prediction). BERT's head was trained on the last
layer only, so early layers decode poorly: the lens shows *when* the final guess becomes readable with the final
decoder, not everything a layer knows (a trained per-layer map, the tuned lens of Belrose et al. 2023, reads
earlier layers better).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...device import device_of
from ...readouts.fill_mask import mlm_head_of

#: longest input the lens decodes at every position ((L+1) x T x V logits are kept in memory)
MAX_TOKENS = 256


@dataclass(frozen=True)
class LogitLens:
    """The lens over one sequence of T tokens and L layers; rows are hidden_states indices (0 = embeddings; row k is
    block k-1's output, the UI's "layer k").

    Attributes:
        top_ids: ``(L+1, T, k)`` long, the k most probable tokens at each layer and position.
        top_probs: ``(L+1, T, k)`` float, their probabilities (softmax over the vocabulary).
        final_ids: ``(T,)`` long, the last layer's top-1 token (the model's prediction).
        final_rank: ``(L+1, T)`` long, rank of ``final_ids`` at each layer (0 = top-1).
        final_prob: ``(L+1, T)`` float, its probability at each layer.
        kl_to_final: ``(L+1, T)`` float, KL(final || layer) in nats (0 at the last layer).
    """

    top_ids: torch.Tensor
    top_probs: torch.Tensor
    final_ids: torch.Tensor
    final_rank: torch.Tensor
    final_prob: torch.Tensor
    kl_to_final: torch.Tensor


@torch.no_grad()
def layer_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
    """``cls.predictions`` applied to every layer's hidden state.

    Args:
        model: a model with an MLM head (:class:`~bertcore.modeling.heads.BertForPreTraining` or ``BertForMaskedLM``).
        input_ids: ``(1, T)`` or ``(T,)`` long.
        attention_mask / token_type_ids: ``(1, T)`` (None: all ones / zeros).
    Returns:
        ``(L+1, T, V)`` float32 logits; row L equals the model's own MLM logits.
    Raises:
        bertcore.readouts.fill_mask.FillMaskError: no MLM head.
        ValueError: more than :data:`MAX_TOKENS` tokens or not one sequence.
    """
    encoder, head = mlm_head_of(model)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"input_ids must be one sequence, shape (1, T) or (T,), got {tuple(input_ids.shape)}")
    if input_ids.size(1) > MAX_TOKENS:
        raise ValueError(f"the logit lens reads at most {MAX_TOKENS} tokens; this input has {input_ids.size(1)}")
    out = encoder(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
    return torch.stack([head(h[0]) for h in out.hidden_states]).float()  # (L+1, T, V)


def logit_lens(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               token_type_ids: torch.Tensor | None = None, k: int = 5, tuned: "TunedLens | None" = None) -> LogitLens:
    """The lens of one sequence (see :class:`LogitLens`), through ``tuned`` (a :class:`TunedLens`) when given;
    errors as :func:`layer_logits` / :func:`tuned_layer_logits`."""
    logits = (layer_logits(model, input_ids, attention_mask, token_type_ids) if tuned is None
              else tuned_layer_logits(model, tuned, input_ids, attention_mask, token_type_ids))
    logp = torch.log_softmax(logits, -1)  # (L+1, T, V)
    top = logp.topk(min(k, logp.size(-1)), -1)
    final = logp[-1].argmax(-1)  # (T,)
    final_logp = logp.gather(-1, final[None, :, None].expand(logp.size(0), -1, 1))[..., 0]  # (L+1, T)
    rank = (logp > final_logp[..., None]).sum(-1)  # tokens strictly more probable than the final guess
    p_final = logp[-1].exp()
    kl = (p_final[None] * (logp[-1][None] - logp)).sum(-1).clamp_min(0)
    return LogitLens(top.indices, top.values.exp(), final, rank, final_logp.exp(), kl)


# ----------------------------------------------------------------------------- the tuned lens
class TunedLens(torch.nn.Module):
    """One affine map per layer below the last (Belrose et al. 2023, "Eliciting Latent Predictions from
    Transformers with the Tuned Lens", section 3): layer k is decoded as ``cls.predictions(h + A_k h + b_k)``,
    ``A_k`` and ``b_k`` starting at zero (the identity map: an untrained tuned lens is the logit lens). The last
    layer needs no map (its decoding is the model's prediction).

    Attributes:
        translators: L ``nn.Linear(H, H)``, for hidden_states[0] (embeddings) .. hidden_states[L-1].
        kl_logit / kl_tuned: ``(L+1,)`` mean KL(final || layer) in nats on held-out positions, of the logit lens
            and of this lens (filled by :func:`train_tuned_lens`; empty before).
    """

    def __init__(self, num_layers: int, hidden_size: int) -> None:
        super().__init__()
        self.translators = torch.nn.ModuleList(torch.nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
        for t in self.translators:
            torch.nn.init.zeros_(t.weight)
            torch.nn.init.zeros_(t.bias)
        self.register_buffer("kl_logit", torch.zeros(0))
        self.register_buffer("kl_tuned", torch.zeros(0))

    def translate(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """``(..., H)`` hidden state ``hidden_states[layer]`` -> what the MLM head decodes. ``layer``: a hidden_states
        index (0 = embeddings), ``0..L``; the last, L, passes through unchanged (the model's own prediction).

        Raises:
            ValueError: ``layer`` outside ``0..L`` (the message names the range).
        """
        if not 0 <= layer <= len(self.translators):
            raise ValueError(f"layer must be a hidden_states index in 0..{len(self.translators)} "
                             f"(0 = embeddings); got {layer}")
        if layer == len(self.translators):
            return hidden
        return hidden + self.translators[layer](hidden)


@torch.no_grad()
def tuned_layer_logits(model: torch.nn.Module, lens: TunedLens, input_ids: torch.Tensor,
                       attention_mask: torch.Tensor | None = None,
                       token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`layer_logits` through the tuned lens: ``(L+1, T, V)``; row L is the model's own prediction.

    Raises:
        ValueError: the lens was made for another number of layers or hidden size; see :func:`layer_logits`.
    """
    encoder, head = mlm_head_of(model)
    cfg = encoder.config
    if len(lens.translators) != cfg.num_hidden_layers or lens.translators[0].in_features != cfg.hidden_size:
        raise ValueError("this tuned lens was trained for another model shape")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.size(1) > MAX_TOKENS:
        raise ValueError(f"the logit lens reads at most {MAX_TOKENS} tokens; this input has {input_ids.size(1)}")
    out = encoder(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
    return torch.stack([head(lens.translate(k, h[0])) for k, h in enumerate(out.hidden_states)]).float()


def _kl(logp_final: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(p || q) for ``(N, V)`` log-probabilities."""
    return (logp_final.exp() * (logp_final - logq)).sum(-1).mean()


def train_tuned_lens(model: torch.nn.Module, encodings: list[dict[str, torch.Tensor]], steps: int = 200,
                     positions_per_step: int = 128, lr: float = 1e-3, heldout_fraction: float = 0.2, seed: int = 0,
                     progress=None) -> TunedLens:
    """Fit a :class:`TunedLens` to ``model`` on some text: minimise KL(final layer || lens at layer k), summed
    over the layers, at random token positions (Belrose et al. 2023, section 3; Adam instead of their SGD).

    Args:
        model: a model with an MLM head, in eval mode; its weights are not changed.
        encodings: tokenized sequences, each ``{"input_ids", "attention_mask", "token_type_ids"}`` of shape
            ``(1, T)`` (e.g. held-out BBC segments).
        steps / positions_per_step / lr: the optimisation (a few minutes on 2 CPU threads for a 6-layer MiniLM
            with the defaults).
        heldout_fraction: the share of positions kept out of training, on which ``kl_logit`` / ``kl_tuned``
            are measured.
        progress: optional ``callable(step, steps, loss)``.
    Raises:
        bertcore.readouts.fill_mask.FillMaskError: no MLM head. ValueError: no usable positions.
    """
    encoder, head = mlm_head_of(model)
    cfg = encoder.config
    device = device_of(encoder)
    with torch.no_grad():
        states = []
        for enc in encodings:
            enc = {k: v.to(device) for k, v in enc.items() if v is not None}
            out = encoder(enc["input_ids"], enc.get("attention_mask"), enc.get("token_type_ids"),
                          output_hidden_states=True)
            keep = (enc["attention_mask"][0].bool() if enc.get("attention_mask") is not None
                    else torch.ones(enc["input_ids"].size(1), dtype=torch.bool, device=device))
            states.append(torch.stack([h[0][keep] for h in out.hidden_states]))  # (L+1, T_i, H)
    if not states:
        raise ValueError("no text to fit the tuned lens on")
    hidden = torch.cat(states, 1)  # (L+1, P, H)
    n = hidden.size(1)
    if n < 10:
        raise ValueError(f"{n} token positions are too few to fit a tuned lens")
    # the draws on the CPU on purpose: a CPU generator picks the same positions on every device
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=gen, device="cpu")
    n_held = max(1, int(n * heldout_fraction))
    held, train = order[:n_held], order[n_held:]
    lens = TunedLens(cfg.num_hidden_layers, cfg.hidden_size).to(device)
    opt = torch.optim.Adam(lens.parameters(), lr=lr)
    # The head is shared with every other session: its flags stay as they are and no gradient is written into it;
    # torch.autograd.grad computes the lens's gradients only (loss.backward() would fill the head's .grad too).
    params = list(lens.parameters())
    for step in range(steps):
        idx = train[torch.randint(len(train), (min(positions_per_step, len(train)),), generator=gen,
                                  device="cpu")].to(device)
        with torch.no_grad():
            target = torch.log_softmax(head(hidden[-1, idx]).float(), -1)
        loss = sum(_kl(target, torch.log_softmax(head(lens.translate(k, hidden[k, idx])).float(), -1))
                   for k in range(cfg.num_hidden_layers))
        for p, g in zip(params, torch.autograd.grad(loss, params)):
            p.grad = g
        opt.step()
        if progress is not None:
            progress(step + 1, steps, float(loss.detach()) / cfg.num_hidden_layers)
    with torch.no_grad():
        kl_logit, kl_tuned = [], []
        for k in range(cfg.num_hidden_layers + 1):
            a, b = [], []
            for chunk in held.to(device).split(256):
                target = torch.log_softmax(head(hidden[-1, chunk]).float(), -1)
                a.append(_kl(target, torch.log_softmax(head(hidden[k, chunk]).float(), -1)) * len(chunk))
                b.append(_kl(target, torch.log_softmax(head(lens.translate(k, hidden[k, chunk])).float(), -1))
                         * len(chunk))
            kl_logit.append(float(sum(a)) / len(held))
            kl_tuned.append(float(sum(b)) / len(held))
        lens.kl_logit = torch.tensor(kl_logit, device=device)
        lens.kl_tuned = torch.tensor(kl_tuned, device=device)
    return lens.eval()


def save_tuned_lens(lens: TunedLens, path) -> None:
    """Write ``lens`` as safetensors (atomically: a killed write leaves no half file)."""
    from safetensors.torch import save_file

    from ...modeling.checkpoint import atomic_write

    tensors = {k: v.contiguous() for k, v in lens.state_dict().items()}
    atomic_write(path, lambda p: save_file(tensors, str(p), metadata={"format": "tuned-lens-v1"}))


def load_tuned_lens(path) -> TunedLens:
    """Read a lens written by :func:`save_tuned_lens`.

    Raises:
        ValueError: not such a file, or damaged.
    """
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path))
        n = sum(1 for key in sd if key.endswith(".weight"))
        lens = TunedLens(n, sd["translators.0.weight"].shape[0])
        lens.kl_logit, lens.kl_tuned = sd["kl_logit"], sd["kl_tuned"]  # sized by training, not by the shape
        lens.load_state_dict(sd)
    except Exception as exc:  # noqa: BLE001 - safetensors raises several kinds for a damaged file
        raise ValueError(f"cannot read the tuned lens {path}: {exc}") from exc
    return lens.eval()


def tuned_lens_path(model_key: str):
    """Where the tuned lens of a model is kept: ``<cache>/tuned-lens/<hash of model_key>.safetensors``.
    ``model_key`` must change when the model's weights change (e.g. ``repr`` of the UI's source key, which holds
    the files' sizes and modification times)."""
    import hashlib

    from ...data import cache_dir

    return cache_dir() / "tuned-lens" / f"{hashlib.sha256(model_key.encode()).hexdigest()[:20]}.safetensors"
