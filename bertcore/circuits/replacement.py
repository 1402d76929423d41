"""The local replacement model of one input (Ameisen et al. 2025, "Circuit tracing", section 3; circuit-tracer's
``ReplacementModel``), for an encoder that reads both directions: what an attribution graph
(:mod:`bertcore.circuits.attribution`) differentiates.

Every attention pattern, every LayerNorm's scale (the embedding LayerNorm's and the MLM head's included) and the MLM
head's GELU (as the slope ``gelu(u) / u`` at its operating point) are frozen at the real forward pass's values; each
block's feed-forward output is replaced by its transcoder's prediction, with the feature activations frozen, plus an
*error* that holds exactly what the transcoder misses. The model is then linear from the embeddings to a logit, and
on this input it computes exactly what the real model does. Everything runs on a private float64 copy of the model
(the shared model is only read).
"""

from __future__ import annotations

import copy

import torch

from ..device import device_of
from ..modeling.interventions import Interventions, layer_norm_scale_sites, missing_reason
from ..readouts.fill_mask import mlm_head_of
from ..sae.transcoder import Transcoder, sites


class CircuitError(ValueError):
    """An input or transcoder set a graph cannot be built from (the message says why)."""


class Replacement:
    """The local replacement model of one input (module docstring) on a float64 copy of ``model``.

    Args:
        model: a bertcore model with an MLM head (only read; copied).
        transcoders: ``{block: Transcoder}`` for every block (copied to float64).
        inputs: ``input_ids``, ``token_type_ids``, ``attention_mask`` of one sequence, ``(1, T)``.
    Raises:
        CircuitError: a block without a transcoder, or one whose sizes do not fit the model.
    """

    def __init__(self, model: torch.nn.Module, transcoders: dict[int, Transcoder], inputs: dict) -> None:
        encoder, _ = mlm_head_of(model)
        cfg = encoder.config
        missing = [layer for layer in range(cfg.num_hidden_layers) if layer not in transcoders]
        if missing:
            raise CircuitError(f"an attribution graph needs a transcoder for every block; blocks {missing} have none "
                               "(train them: python -m bertcore.sae train --kind transcoder --layers 0,1,...)")
        for layer, tc in transcoders.items():
            if tc.d_in != cfg.hidden_size or tc.d_out != cfg.hidden_size:
                raise CircuitError(f"the transcoder of block {layer} reads {tc.d_in} and writes {tc.d_out} values; "
                                   f"this model's hidden size is {cfg.hidden_size}: it was trained on another model")
        self.model = copy.deepcopy(model).double().eval().requires_grad_(False)
        self.encoder, self.head = mlm_head_of(self.model)
        self.cfg, self.inputs = cfg, inputs
        device = device_of(self.model)  # the transcoders' copies go where the model computes
        self.tcs = {layer: copy.deepcopy(tc).double().to(device).eval().requires_grad_(False)
                    for layer, tc in transcoders.items()}
        self.n = cfg.num_hidden_layers
        # what each block's attention reads: post-LN the block's input; pre-LN its ln1 output (none in ModernBERT's
        # block 0, whose input the embedding norm has normed)
        self.attention_inputs = [f"blocks.{i}.ln1.hook_out" if cfg.pre_layer_norm and missing_reason(
            cfg, f"blocks.{i}.ln1.hook_out") is None else f"blocks.{i}.hook_resid_pre" for i in range(self.n)]
        self.frozen_sites = layer_norm_scale_sites(cfg)
        self.frozen_sites += [f"blocks.{i}.attn.hook_pattern" for i in range(self.n)]
        record = self.frozen_sites + ["mlm_head.hook_pre", "mlm_head.hook_post", "embed.hook_embed"]
        record += [s for i in range(self.n) for s in sites(cfg, i)]
        record += [n for n in ("embed.hook_pos_embed", "embed.hook_token_type_embed") if missing_reason(cfg, n) is None]
        iv = Interventions(record=record)
        with torch.no_grad():
            hidden = self.encoder(**inputs, interventions=iv).last_hidden_state
            self.logits = self.head(hidden[0], iv.tap())  # (T, V): the real model's, as recorded
        rec = iv.recorded
        self.recorded = rec
        self.embedding = rec["embed.hook_embed"][0].clone()  # (T, E): word + position + segment
        for name in ("embed.hook_pos_embed", "embed.hook_token_type_embed"):
            if name in rec:
                self.embedding += rec[name][0].expand_as(self.embedding)
        pre, post = rec["mlm_head.hook_pre"], rec["mlm_head.hook_post"]
        self.gelu_slope = torch.where(pre.abs() > 1e-12, post / pre.where(pre.abs() > 1e-12, 1.0), 0.5)
        self.codes, self.errors, self.fixed = {}, {}, {}
        for layer, tc in self.tcs.items():
            x = rec[sites(cfg, layer)[0]][0]  # (T, H) the feed-forward input
            y = rec[sites(cfg, layer)[1]][0]  # (T, H) its real output
            with torch.no_grad():
                z = tc.encode(x)  # (T, d_sae)
                self.codes[layer] = z
                self.errors[layer] = y - tc.decode(z, x)  # (T, H): exactly what the transcoder misses
                self.fixed[layer] = (z @ tc.W_dec + tc.b_dec) / tc.out_scale  # (T, H): the frozen features' part

    def _skip(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        tc = self.tcs[layer]
        return (x * tc.in_scale) @ tc.W_skip.T / tc.out_scale

    def run(self, batch: int, deltas: dict | None = None, parts: dict | None = None, scale_features=None,
            positions: list[int] | None = None):
        """The frozen model on ``batch`` copies of the input. ``deltas``: ``{"embed" | block: (B, T, ·)}`` added
        where the embeddings / each block's feed-forward output are written (leaf tensors for gradients);
        ``parts``: which sources to keep, ``{"embed": bool, "features": bool, "errors": bool}`` (all by default;
        the biases always flow); ``scale_features``: ``{block: (B, T, d_sae)}`` multipliers of the frozen
        activations; ``positions``: where the MLM head runs (None: every position; ``[m]``: the [MASK] only, which
        spares the ``(B, T, V)`` projection). Returns ``(feature inputs {block: (B, T, H)}, logits (B, T, V) at
        every position, or (B, len(positions), V))``."""
        deltas, parts = deltas or {}, {"embed": True, "features": True, "errors": True, **(parts or {})}
        rec, edits, seen = self.recorded, {}, {}
        head_rows = slice(None) if positions is None else list(positions)
        for name in self.frozen_sites:
            v = rec[name][head_rows] if name.startswith("mlm_head.") else rec[name]
            edits[name] = lambda x, v=v: v.expand_as(x)  # a view: one copy of a (heads, T, T) pattern, not B
        emb = self.embedding if parts["embed"] else torch.zeros_like(self.embedding)

        def embed(x, emb=emb):  # the summed embedding, in place of the word embedding; the other summands removed
            out = emb.expand(batch, -1, -1)
            return out + deltas["embed"] if "embed" in deltas else out

        edits["embed.hook_embed"] = embed
        for name in ("embed.hook_pos_embed", "embed.hook_token_type_embed"):
            if name in rec:
                edits[name] = torch.zeros_like
        for layer in range(self.n):
            site_in, site_out = sites(self.cfg, layer)

            def keep(x, layer=layer):
                seen[layer] = x
                return x

            def replace(y, layer=layer):
                tc = self.tcs[layer]
                out = self._skip(layer, seen[layer]) + tc.b_dec / tc.out_scale  # (B, T, H)
                if parts["features"]:
                    z = self.codes[layer]
                    if scale_features is not None and layer in scale_features:
                        out = out + (scale_features[layer] * z) @ tc.W_dec / tc.out_scale
                    else:
                        out = out + (self.fixed[layer] - tc.b_dec / tc.out_scale)
                if parts["errors"]:
                    out = out + self.errors[layer]
                return out + deltas[layer] if layer in deltas else out

            edits[site_in], edits[site_out] = keep, replace
            # the patterns are frozen, so queries and keys carry no gradient; the values are recomputed from the
            # attention's input by the value projection alone (the same numbers), so that a backward pass does not
            # run through the model's fused (3H, H) query-key-value projection and its zero query and key gradients
            value = self.encoder.encoder.layer[layer].attention.self.value
            read: dict[str, torch.Tensor] = {}

            def attention_input(x, read=read):
                read["x"] = x
                return x

            def values(v, read=read, value=value):  # v (B, T, heads, d)
                return torch.nn.functional.linear(read.pop("x"), value.weight, value.bias).view_as(v)

            edits[self.attention_inputs[layer]] = attention_input
            edits[f"blocks.{layer}.attn.hook_q"] = edits[f"blocks.{layer}.attn.hook_k"] = torch.Tensor.detach
            edits[f"blocks.{layer}.attn.hook_v"] = values
        slope = self.gelu_slope[head_rows]
        stash = {}
        edits["mlm_head.hook_pre"] = lambda u: stash.setdefault("u", u)
        edits["mlm_head.hook_post"] = lambda _: stash["u"] * slope.expand_as(stash["u"])
        iv = Interventions(edits)
        ids = {k: v.expand(batch, -1) for k, v in self.inputs.items()}
        hidden = self.encoder(**ids, interventions=iv).last_hidden_state  # (B, T, H)
        logits = self.head(hidden[:, head_rows], iv.tap())  # (B, T or len(positions), V)
        return dict(seen), logits

    def pre_activations(self, inputs: dict[int, torch.Tensor], layer: int, positions, latents) -> torch.Tensor:
        """Pre-activations ``(B, k)`` of the latents ``latents`` at ``positions`` of block ``layer`` from its
        feed-forward inputs ``(B, T, H)``.

        Raises:
            CircuitError: ``layer`` outside ``0..L-1``.
        """
        if isinstance(layer, bool) or layer not in self.tcs:
            raise CircuitError(f"layer must lie in 0..{self.n - 1}; got {layer!r}")
        tc = self.tcs[layer]
        x = inputs[layer][:, positions] * tc.in_scale  # (B, k, H)
        return (x * tc.W_enc.T[latents]).sum(-1) + tc.b_enc[latents]
