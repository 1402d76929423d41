"""The One forward pass page's views: one text encoded, then one token followed through the model, with one block
and one head taken apart, every step read from the model's own forward pass and checked against its formula
(:func:`bertcore.readouts.forward_pass.trace`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertcore.modeling.config import BertConfig
from bertcore.readouts import forward_pass
from bertcore.tokenization.tokenizer import Encoding, encode
from explorer.figures import forward_pass as figs
from explorer.views.core import load, view


@view
def encoding(source, text: str, text_pair: str | None):
    """``text`` (and ``text_pair``) as the model's tokenizer encodes it, cut at the model's length: an
    :class:`~bertcore.tokenization.tokenizer.Encoding` (tokens, ids, segment ids).

    Raises ``TextError`` (an empty or unreadable text)."""
    lm = load(source)
    return encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)


@dataclass
class Trace:
    """One token followed through the model: ``encoding`` (the T tokens), ``trace``
    (:class:`~bertcore.readouts.forward_pass.ForwardTrace`: the embeddings, every layer's output, the chosen block's
    steps, the MLM head), ``top_words``: the MLM head's 5 best guesses at the token as WordPieces (empty without a
    head); ``config``: the model's (what the steps' shapes and formulas depend on)."""

    encoding: Encoding
    trace: forward_pass.ForwardTrace
    top_words: list[str]
    config: BertConfig


@view
def trace(source, text: str, text_pair: str | None, token: int, layer: int, head: int) -> Trace:
    """Token ``token`` of the encoded text through the model, block ``layer`` and head ``head`` taken apart (all
    0-based: the page's "Layer 1" is block 0).

    Raises what :func:`encoding` raises, ``TraceError`` (a token, layer or head out of range) and ``InputError``."""
    lm = load(source)
    enc = encoding(source, text, text_pair)
    # every step of the chosen block read at the model's named sites, each checked against its formula
    t = enc.tensors(lm.device)  # (1, T) each
    tr = forward_pass.trace(lm.model, t["input_ids"], token, layer, head, t["token_type_ids"])
    top_words = [] if tr.mlm is None else lm.tokenizer.convert_ids_to_tokens(tr.mlm.top_ids)
    return Trace(enc, tr, top_words, lm.config)


def layers_figure(result: Trace, rows: list[str]):
    """The followed token's vector after each layer (row 0: the embeddings), the chosen block outlined; ``rows``:
    the rows' labels."""
    tr, word = result.trace, result.encoding.tokens[result.trace.token]
    states = tr.hidden_states[:, tr.token].double().cpu().numpy()  # (L + 1, H)
    return figs.strips_figure([figs.Strip(f"'{word}' after each layer", states,
                                          f"(L + 1, T, H) = ({states.shape[0]}, {len(result.encoding)}, "
                                          f"{states.shape[1]})", "hidden_states[ℓ][i]", rows=rows,
                                          highlight=tr.layer + 1)])  # row 0 is the embeddings


def as_numbers(x: torch.Tensor) -> np.ndarray:
    """A tensor's values as a float64 numpy array (on the CPU)."""
    return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


STEPS = ("embeddings", "one_head", "all_heads", "feed_forward", "mlm_head")  # the steps step_figure draws


def step_figure(result: Trace, step: str, shown_layer: int, shown_head: int):
    """One step of the pass as strips of numbers (the One forward pass page's tab of that step): ``step`` one of
    :data:`STEPS`; ``shown_layer`` / ``shown_head``: the chosen block's and head's numbers as the page's labels show
    them (block 0 is "layer 1"). Raises ``ValueError`` for another step, or "mlm_head" on a model without one."""
    cfg, tr, enc = result.config, result.trace, result.encoding
    s, i, layer, h0 = tr.steps, tr.token, tr.layer, tr.head
    F = forward_pass.formulas(cfg.pre_layer_norm, cfg.hidden_act)
    H, I_, d, T = cfg.hidden_size, cfg.intermediate_size, cfg.hidden_size // cfg.num_attention_heads, len(enc.tokens)
    word, show = enc.tokens[i], [f"{j}: {w}" for j, w in enumerate(enc.tokens)]
    act = {"gelu": "GELU"}.get(cfg.hidden_act, cfg.hidden_act)
    if step == "embeddings":
        e = tr.embeddings
        tid, seg = enc.input_ids[i], enc.token_type_ids[i]
        has_position, has_segment = cfg.position_embedding_type == "absolute", cfg.type_vocab_size > 0
        E = cfg.embedding_width  # ELECTRA: narrower tables, projected to H before layer 1
        En = "E" if E != H else "H"
        strips = [figs.Strip(f"word embedding of '{word}' (row {tid})", as_numbers(e.word[i]),
                             f"(V, {En}) = ({cfg.vocab_size}, {E})", F["word"])]
        if has_position:
            strips.append(figs.Strip(f"position embedding (row {i})", as_numbers(e.position[i]),
                                     f"(P, {En}) = ({cfg.max_position_embeddings}, {E})", F["position"]))
        if has_segment:
            strips.append(figs.Strip(f"segment embedding (row {seg})", as_numbers(e.segment[i]),
                                     f"(S, {En}) = ({cfg.type_vocab_size}, {E})", F["segment"]))
        strips = strips + [figs.Strip("sum", as_numbers(e.total[i]), f"(T, {En}) = ({T}, {E})", F["sum"]),
                        figs.Strip("after LayerNorm", as_numbers(e.output[i]), f"(T, {En}) = ({T}, {E})",
                                   F["embedding"]),
                        figs.Strip("embedding output, every token", as_numbers(e.output), f"(T, {En}) = ({T}, {E})",
                                   F["embedding"], rows=show, highlight=i)]
    elif step == "one_head":
        strips = [figs.Strip(f"x: layer {shown_layer}'s input at '{word}'", as_numbers(s.x[i]), f"(T, H) = ({T}, {H})",
                                  f"hidden_states[{layer}]")]
        if cfg.pre_layer_norm:
            strips.append(figs.Strip("LN(x): what attention reads", as_numbers(s.attn_in[i]), f"(T, H) = ({T}, {H})",
                                          F["attn_in"]))
        heads_shape = f"(heads, T, d) = ({cfg.num_attention_heads}, {T}, {d})"
        if s.query_unrotated is not None:  # RoPE (ModernBERT): the rotation is its own step
            strips += [
                figs.Strip(f"q before RoPE: query of '{word}', head {shown_head}", as_numbers(s.query_unrotated[h0, i]),
                           heads_shape, F["query"]),
                figs.Strip(f"k before RoPE: keys of every token, head {shown_head}", as_numbers(s.key_unrotated[h0]),
                           heads_shape,
                           F["key"], rows=show, highlight=i)]
            rot = "RoPE(·, i): pair (j, j + d/2) turned by i·θⱼ"
            strips += [
                figs.Strip(f"q after RoPE: turned by position {i}", as_numbers(s.query[h0, i]), heads_shape, rot),
                figs.Strip("k after RoPE: each key turned by its own position", as_numbers(s.key[h0]), heads_shape, rot,
                           rows=show, highlight=i)]
        else:
            strips += [
                figs.Strip(f"q: query of '{word}', head {shown_head}", as_numbers(s.query[h0, i]), heads_shape,
                           F["query"]),
                figs.Strip(f"k: keys of every token, head {shown_head}", as_numbers(s.key[h0]), heads_shape, F["key"],
                           rows=show,
                           highlight=i)]
        strips += [
            figs.Strip("scores of this query against every key", as_numbers(s.scores[h0, i]),
                       f"(heads, T, T) = ({cfg.num_attention_heads}, {T}, {T})", F["scores"], columns=show),
            figs.Strip("attention weights (the row of the attention map)", as_numbers(s.probs[h0, i]),
                       f"(heads, T, T) = ({cfg.num_attention_heads}, {T}, {T})", F["probs"], columns=show,
                       probability=True),
            figs.Strip(f"v: values of every token, head {shown_head}", as_numbers(s.value[h0]), heads_shape, F["value"],
                       rows=show,
                       highlight=i),
            figs.Strip(f"weighted sum of the values: head {shown_head}'s output at '{word}'",
                       as_numbers(s.context[h0, i]),
                       heads_shape, F["context"])]
    elif step == "all_heads":
        strips = [figs.Strip(f"attention weights of '{word}' in every head", as_numbers(s.probs[:, i]),
                          f"(heads, T, T) = ({cfg.num_attention_heads}, {T}, {T})", F["probs"], columns=show,
                          rows=[f"head {k + 1}" for k in range(cfg.num_attention_heads)], highlight=h0,
                          probability=True),
               figs.Strip("heads side by side", as_numbers(s.merged[i]), f"(T, H) = ({T}, {H})", F["merged"]),
               figs.Strip("output projection Attn(x)", as_numbers(s.attn_proj[i]), f"(T, H) = ({T}, {H})",
                          F["attn_proj"]),
               figs.Strip("x + Attn(x)" if not cfg.pre_layer_norm else "x + Attn(LN(x))", as_numbers(s.residual1[i]),
                          f"(T, H) = ({T}, {H})", F["residual1"]),
               *([] if cfg.pre_layer_norm else [figs.Strip("after LayerNorm: h", as_numbers(s.attn_out[i]),
                                                           f"(T, H) = ({T}, {H})",
                                                           F["attn_out"])])]
    elif step == "feed_forward":
        strips = ([figs.Strip("LN(h): what the feed-forward reads", as_numbers(s.ffn_in[i]), f"(T, H) = ({T}, {H})",
                              F["ffn_in"])] if cfg.pre_layer_norm else [])
        if s.ffn_gate is not None:  # GeGLU (ModernBERT): one map gives 2I numbers, half of them gate the other half
            shape = f"(T, I) = ({T}, {I_})"
            strips += [figs.Strip("first linear map, first half (up)", as_numbers(s.ffn_pre[i]), shape,
                                  "u = (W_i h)[:I]"),
                       figs.Strip("first linear map, second half (gate)", as_numbers(s.ffn_gate[i]), shape,
                                  "g = (W_i h)[I:]"),
                       figs.Strip(f"GeGLU: {act}(up) × gate", as_numbers(s.ffn_act[i]), shape, f"{act}(u) ⊙ g")]
        else:
            strips += [figs.Strip("first linear map", as_numbers(s.ffn_pre[i]), f"(T, I) = ({T}, {I_})", F["ffn_pre"]),
                    figs.Strip(f"after {act}", as_numbers(s.ffn_act[i]), f"(T, I) = ({T}, {I_})", F["ffn_act"])]
        strips += [
                figs.Strip("second linear map FFN(h)", as_numbers(s.ffn_out[i]), f"(T, H) = ({T}, {H})", F["ffn_out"]),
                figs.Strip("h + FFN(h)", as_numbers(s.residual2[i]), f"(T, H) = ({T}, {H})", F["residual2"]),
                figs.Strip(f"layer {shown_layer}'s output at '{word}'", as_numbers(s.output[i]), f"(T, H) = ({T}, {H})",
                           F["output"])]
    elif step == "mlm_head":
        if tr.mlm is None:
            raise ValueError(f"this model has no MLM head: {tr.no_mlm_reason}")
        m = tr.mlm
        strips = [figs.Strip("last layer's output", as_numbers(m.hidden), f"(T, H) = ({T}, {H})",
                          f"hidden_states[{cfg.num_hidden_layers}]"),
               figs.Strip("dense", as_numbers(m.dense), f"(T, H) = ({T}, {H})", F["mlm_dense"]),
               figs.Strip(act, as_numbers(m.act), f"(T, H) = ({T}, {H})", F["mlm_act"]),
               figs.Strip("LayerNorm", as_numbers(m.normed), f"(T, H) = ({T}, {H})", F["mlm_norm"])]
    else:
        raise ValueError(f"step must be one of {STEPS}; got {step!r}")
    return figs.strips_figure(strips)
