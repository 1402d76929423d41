"""Cached resources: models (``st.cache_resource``, shared, read-only) and forward passes
(``st.cache_data``, keyed by the model source and the text; the model itself is an unhashed
``_loaded`` argument).

Pages never call these with a model they built themselves: :func:`explorer.widgets.current_model`
gives them the loaded model of the sidebar's choice, and :func:`source_key` its cache key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.readouts import anatomy
from bertcore.analysis.attention import activations
from bertcore.analysis.representations import similarity
from bertcore.analysis.attention import ablation, neurons, rollout
from bertcore.analysis.causal import attribution as attribution_mod
from bertcore.analysis.representations import compare as compare_mod
from bertcore.analysis.attention.words import WordGroups, merge_attention, word_groups
from bertcore.modeling.config import PRESETS
from bertcore.loading.sources import LoadedModel, ModelSource
from explorer.views import core as views_core
from explorer.views.core import source_key


def load_model(source: ModelSource) -> LoadedModel:
    """The model of ``source`` from the server's one model cache (:func:`explorer.views.core.load`: once per
    process per version of its files, shared by every session and view; never mutate it), with a spinner while it
    loads.

    Raises:
        bertcore.loading.sources.SourceError: the model cannot be found or read (not cached: a later
            call tries again).
    """
    with st.spinner("Loading the model ...", show_time=True):
        return views_core.load(source)


@st.cache_resource(show_spinner="Running the model ...", max_entries=6, ttl="1h")
def forward(key: tuple[str, ...], text: str, text_pair: str | None, _loaded: LoadedModel) -> activations.Activations:
    """:func:`bertcore.analysis.attention.activations.run` for one text (or pair), cached per
    ``(key, text, text_pair)``.

    A resource cache, not ``st.cache_data``: 512 tokens of a 6-layer model are ~80 MB of
    attention, which ``cache_data`` would unpickle on every rerun. The arrays are made
    read-only instead, so no page can change what another session sees (copy before editing,
    as :func:`bertcore.analysis.attention.activations.hide_tokens` does).

    ``key`` must be :func:`source_key` of ``_loaded.source`` (the model is not hashed).
    Raises the same errors as :func:`bertcore.analysis.attention.activations.run` (``TextError``, ``InputError``).
    """
    act = activations.run(_loaded.encoder, _loaded.tokenizer, text, text_pair)
    act.attentions.flags.writeable = False
    act.hidden_states.flags.writeable = False
    return act


@st.cache_data(show_spinner=False, max_entries=24)
def head_stats(key: tuple[str, ...], text: str, text_pair: str | None, _loaded: LoadedModel) -> activations.HeadStats:
    """:func:`bertcore.analysis.attention.activations.head_stats` of :func:`forward`'s attentions (same cache key)."""
    act = forward(key, text, text_pair, _loaded)
    return activations.head_stats(act.attentions, act.tokens, _loaded.tokenizer.cls_token, _loaded.tokenizer.sep_token)


@st.cache_data(show_spinner="Running the model on every sentence ...", max_entries=8)
def occurrences(key: tuple[str, ...], target: str, sentences: tuple[str, ...],
                _loaded: LoadedModel) -> similarity.Occurrences:
    """:func:`bertcore.analysis.representations.similarity.word_occurrences` cached per ``(key, target, sentences)``."""
    return similarity.word_occurrences(_loaded.encoder, _loaded.tokenizer, target, list(sentences))


@st.cache_resource(show_spinner="Running both models on every sentence ...", max_entries=4, ttl="1h")
def compare(key_a: tuple[str, ...], key_b: tuple[str, ...], sentences: tuple[str, ...], include_special: bool,
            _a: LoadedModel, _b: LoadedModel) -> compare_mod.Comparison:
    """:func:`bertcore.analysis.representations.compare.run_pair` of the two models' encoders, cached per
    ``(key_a, key_b, sentences, include_special)`` (a resource: it holds every attention map; the
    arrays are made read-only). Raises what ``run_pair`` raises."""
    result = compare_mod.run_pair(_a.encoder, _a.tokenizer, _b.encoder, _b.tokenizer, list(sentences), include_special)
    for act in result.runs_a + result.runs_b:
        act.attentions.flags.writeable = False
        act.hidden_states.flags.writeable = False
    return result


@st.cache_data(show_spinner="Integrated gradients: running the model along the path ...", max_entries=16)
def attribution(key: tuple[str, ...], kind: str, text: str, other: str | None, position: int | None,
                target: int | None, n_steps: int, _loaded: LoadedModel) -> attribution_mod.Attribution:
    """Integrated gradients of the sidebar model, cached per its arguments.

    ``kind``: ``"classification"`` (``target`` = class, None = predicted; ``other`` = sentence B or
    None), ``"fill_mask"`` (``position`` of the [MASK], ``target`` = token id, None = top guess) or
    ``"similarity"`` (``other`` = sentence B). Raises what :mod:`bertcore.analysis.causal.attribution` raises.
    """
    m, tok = _loaded.model, _loaded.tokenizer
    if kind == "classification":
        return attribution_mod.explain_class(m, tok, text, other, target=target, n_steps=n_steps)
    if kind == "fill_mask":
        return attribution_mod.explain_fill_mask(m, tok, text, position=position, token_id=target, n_steps=n_steps)
    return attribution_mod.explain_similarity(m, tok, text, other or "", n_steps=n_steps)


@st.cache_resource(show_spinner=False)
def bert_base_uncased_tokenizer():
    """bert-base-uncased's WordPiece tokenizer (30,522 tokens: the packaged MiniLM's ``vocab.txt``),
    loaded once and shared (read-only).

    Raises:
        bertcore.loading.sources.SourceError: the packaged model is not installed;
        bertcore.tokenization.tokenizer.TokenizerError: its tokenizer files are unusable.
    """
    from bertcore.loading.sources import packaged_model_dir
    from bertcore.tokenization.tokenizer import load_tokenizer

    return load_tokenizer(packaged_model_dir())


@st.cache_data(show_spinner=False, max_entries=8)
def has_bert_base_uncased_vocab(key: tuple[str, ...], _loaded: LoadedModel) -> bool:
    """:func:`bertcore.tokenization.tokenizer.is_bert_base_uncased` of the model's tokenizer, cached per source
    ``key``."""
    from bertcore.tokenization.tokenizer import is_bert_base_uncased

    return is_bert_base_uncased(_loaded.tokenizer)


@st.cache_resource(show_spinner="Reading and splitting the corpus into sentences ...", max_entries=2)
def corpus_sentences(corpus: str = "bbc") -> list[list[str]]:
    """Each document of a pretraining corpus as its list of sentences (NLTK Punkt), read once per process."""
    from bertcore import data

    return [data.split_sentences(text) for text in data.load_documents(corpus)["text"]]


# ----------------------------------------------------------------------------- attention views (rollout, flow, neurons)
@st.cache_resource(show_spinner=False, max_entries=6, ttl="1h")
def attention_maps(key: tuple[str, ...], text: str, text_pair: str | None, hide: bool,
                   _loaded: LoadedModel) -> np.ndarray:
    """:func:`forward`'s attentions ``(L, heads, T, T)``, with [CLS]/[SEP] hidden and rows rescaled
    when ``hide`` (:func:`bertcore.analysis.attention.activations.hide_tokens`). Read-only."""
    act = forward(key, text, text_pair, _loaded)
    if not hide:
        return act.attentions
    attn = activations.hide_tokens(act.attentions, np.array(act.encoding.special_tokens_mask, dtype=bool))
    attn.flags.writeable = False
    return attn


def groups_of(key: tuple[str, ...], text: str, text_pair: str | None, _loaded: LoadedModel) -> WordGroups:
    """:func:`bertcore.analysis.attention.words.word_groups` of :func:`forward`'s encoding (cheap, not cached)."""
    enc = forward(key, text, text_pair, _loaded).encoding
    return word_groups(enc.tokens, enc.word_ids)


@st.cache_resource(show_spinner="Merging WordPieces into words ...", max_entries=4, ttl="1h")
def word_attention(key: tuple[str, ...], text: str, text_pair: str | None, hide: bool,
                   _loaded: LoadedModel) -> np.ndarray:
    """:func:`attention_maps` of every layer and head merged into words ``(L, heads, W, W)``
    (:func:`bertcore.analysis.attention.words.merge_attention`; read-only). Views of one head or one layer
    merge their slice instead, which is cheaper."""
    out = merge_attention(attention_maps(key, text, text_pair, hide, _loaded),
                          groups_of(key, text, text_pair, _loaded))
    out.flags.writeable = False
    return out


@st.cache_resource(show_spinner=False, max_entries=6, ttl="1h")
def head_mean(key: tuple[str, ...], text: str, text_pair: str | None, hide: bool, words: bool,
              _loaded: LoadedModel) -> np.ndarray:
    """:func:`attention_maps` averaged over heads ``(L, T, T)`` float64, merged into words ``(L, W, W)``
    with ``words`` (merging is linear, so it commutes with the mean). Read-only."""
    mean = attention_maps(key, text, text_pair, hide, _loaded).astype(np.float64).mean(axis=1)  # (L, T, T)
    if words:
        mean = merge_attention(mean, groups_of(key, text, text_pair, _loaded)).astype(np.float64)
    mean.flags.writeable = False
    return mean


@st.cache_resource(show_spinner="Rolling attention out over the layers ...", max_entries=6, ttl="1h")
def rollout_maps(key: tuple[str, ...], text: str, text_pair: str | None, hide: bool, words: bool,
                 _loaded: LoadedModel) -> np.ndarray:
    """:func:`bertcore.analysis.attention.rollout.rollout` ``(L, T, T)`` of :func:`head_mean` (read-only)."""
    out = rollout.rollout(head_mean(key, text, text_pair, hide, words, _loaded)[:, None])
    out.flags.writeable = False
    return out


@st.cache_data(show_spinner="Computing attention flow (one max-flow per layer and token) ...", max_entries=32)
def flow_map(key: tuple[str, ...], text: str, text_pair: str | None, hide: bool, words: bool, query: int,
             _loaded: LoadedModel) -> np.ndarray:
    """:func:`bertcore.analysis.attention.rollout.flow` ``(L, T)`` into ``query`` of :func:`head_mean`; raises
    ``FlowTooLongError`` as it."""
    return rollout.flow(head_mean(key, text, text_pair, hide, words, _loaded)[:, None], query)


@st.cache_data(show_spinner=False, max_entries=32)
def neuron_view(key: tuple[str, ...], text: str, text_pair: str | None, layer: int, head: int, query: int,
                _loaded: LoadedModel) -> neurons.NeuronView:
    """:func:`bertcore.analysis.attention.neurons.neuron_view` from :func:`forward`'s hidden states (``layer``: the
    0-based block, whose input is ``hidden_states[layer]``; ``head``: 0-based)."""
    act = forward(key, text, text_pair, _loaded)
    return neurons.neuron_view(_loaded.encoder, act.hidden_states[layer], layer, head, query)


@st.cache_data(show_spinner="Running the model with and without those heads ...", max_entries=16)
def ablation_readout(key: tuple[str, ...], text: str, text_pair: str | None, off: tuple[tuple[int, int], ...],
                     mode: str, _loaded: LoadedModel) -> ablation.Readout:
    """:func:`bertcore.analysis.attention.ablation.readout` with the heads ``off`` (0-based ``(block, head)``;
    empty: the unablated run)."""
    enc = forward(key, text, text_pair, _loaded).encoding
    cfg = _loaded.config
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off) if off else None
    return ablation.readout(_loaded.model, _loaded.head, _loaded.tokenizer, enc, mask, mode)


@st.cache_data(show_spinner="MLM loss on the held-out BBC batch ...", max_entries=16)
def heldout_mlm_loss(key: tuple[str, ...], off: tuple[tuple[int, int], ...], mode: str, _loaded: LoadedModel) -> float:
    """:func:`bertcore.analysis.attention.ablation.mlm_loss` on the fixed held-out batch with the heads ``off``."""
    batch = ablation.heldout_batch(_loaded.tokenizer, ablation.heldout_texts(),
                                   max_length=min(ablation.HELDOUT_TOKENS, _loaded.max_length))
    cfg = _loaded.config
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off) if off else None
    return ablation.mlm_loss(_loaded.model, batch, mask, mode)

@st.cache_resource(show_spinner="Running the model step by step ...", max_entries=8, ttl="1h")
def forward_trace(key: tuple[str, ...], input_ids: tuple[int, ...], token_type_ids: tuple[int, ...], token: int,
                  layer: int, head: int, _loaded: LoadedModel):
    """:func:`bertcore.readouts.forward_pass.trace` of one encoded sequence, cached per ``(key, ids, segments, token,
    layer,
    head)`` (a resource: the tensors are shared read-only, never edited by a page). Raises what ``trace`` raises."""
    import torch

    from bertcore.readouts import forward_pass

    return forward_pass.trace(_loaded.model, torch.tensor([input_ids]), token, layer, head,
                              torch.tensor([token_type_ids]))


PLL_MAX_TOKENS = 128  # the Grammar page scores sentences, not documents: 128 copies of 128 tokens take ~1 s


@st.cache_data(show_spinner="Scoring the sentence (one forward per token) ...", max_entries=64)
def pll(key: tuple[str, ...], text: str, metric: str, _loaded: LoadedModel):
    """:func:`bertcore.analysis.grammar.scoring.pseudo_log_likelihood` of ``text`` with the sidebar's model, cached per
    ``(key, text, metric)``. Raises ``ScoringError`` as it."""
    from bertcore.analysis.grammar.scoring import pseudo_log_likelihood

    return pseudo_log_likelihood(_loaded.model, _loaded.tokenizer, text, metric, max_tokens=PLL_MAX_TOKENS)


@st.cache_data(show_spinner="Fitting the position regression ...", max_entries=8)
def position_regression(key: tuple[str, ...], _loaded: LoadedModel) -> dict[str, dict]:
    """Wang & Chen 2020's 5-fold linear position regression on the model's whole learned table and on a
    sinusoidal table of the same size (:func:`bertcore.readouts.positional.regression_summary`, or its result shipped
    beside the model: :mod:`bertcore.analysis.shipped`), cached per model.

    Returns:
        ``{"learned": {"predictions": (P,), "mae": float}, "sinusoidal": {...}}``.
    """
    from bertcore.analysis import shipped

    return shipped.get(_loaded, shipped.position_regression(_loaded))


# ----------------------------------------------------------------------------- Model anatomy
@st.cache_data(show_spinner="Counting the presets (on the meta device, no memory) ...")
def preset_table() -> pd.DataFrame:
    """Every preset's parameter counts beside transformers' own (the Model anatomy page)."""
    rows = []
    for c in anatomy.preset_counts():
        hf_base, hf_tensors = anatomy.transformers_count(PRESETS[c.name], "base")
        hf_pre, _ = anatomy.transformers_count(PRESETS[c.name], "pretraining")
        rows.append({"preset": c.name, "layers L": c.layers, "hidden H": c.hidden, "heads": c.heads,
                     "intermediate I": c.intermediate, "BertModel": c.base, "named tensors": c.named_tensors,
                     "BertForPreTraining": c.pretraining,
                     "equal to transformers": c.base == hf_base and c.pretraining == hf_pre
                     and c.named_tensors == hf_tensors})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- what flows (context mixing)
@st.cache_resource(show_spinner="Measuring what flows between the tokens ...", max_entries=16, ttl="1h")
def mixing_maps(key: tuple[str, ...], text: str, text_pair: str | None, method: str,
                _loaded: LoadedModel) -> np.ndarray:
    """:func:`bertcore.analysis.attention.mixing.mixing` ``(L, T, T)`` of :func:`forward`'s encoding by one method,
    cached per ``(key, text, text_pair, method)`` (read-only). Raises ValueError as ``mixing`` (a post-LN-only
    method on a pre-LN model)."""
    from bertcore.analysis.attention import mixing

    enc = forward(key, text, text_pair, _loaded).encoding
    out = mixing.mixing(_loaded.model, enc.tensors(), method)
    out.flags.writeable = False
    return out


def mlm_encoding(text: str, text_pair: str | None, _loaded: LoadedModel):
    """The encoding the fill-mask views explain: ``[MASK]`` markers normalised, cut to what the model reads."""
    from bertcore.readouts.fill_mask import normalise_mask_markers
    from bertcore.tokenization.tokenizer import encode

    tok = _loaded.tokenizer
    return encode(tok, normalise_mask_markers(text, tok),
                  None if text_pair is None else normalise_mask_markers(text_pair, tok), max_length=_loaded.max_length)


@st.cache_data(show_spinner=False, max_entries=32)
def which_words(key: tuple[str, ...], text: str, text_pair: str | None, position: int, token_id: int,
                bad_id: int | None, _loaded: LoadedModel) -> dict:
    """The Masking page's "which words made this prediction" for the logit of ``token_id`` at ``position`` (minus
    that of ``bad_id`` when given), cached per its arguments: ``{"decompx": TokenDecomposition | None,
    "decompx_error": str | None, "ig": (T,), "occlusion": (T,)}`` (occlusion 0 at special tokens and the position
    itself). Raises ValueError (no MLM head, a position out of range)."""
    from bertcore.analysis.attention import decompx
    from bertcore.analysis.causal import faithfulness

    enc = mlm_encoding(text, text_pair, _loaded)
    inputs = enc.tensors()
    tok = _loaded.tokenizer
    special = np.array(enc.special_tokens_mask, dtype=bool)
    out: dict = {"decompx": None, "decompx_error": None}
    try:
        out["decompx"] = (decompx.fill_mask(_loaded.model, inputs, position, [token_id]) if bad_id is None
                          else decompx.logit_difference(_loaded.model, inputs, position, token_id, bad_id))
    except ValueError as exc:
        out["decompx_error"] = str(exc)
    out["ig"] = faithfulness.ig_scores(_loaded.model, inputs, position, token_id, tok.pad_token_id, special,
                                       bad_id=bad_id)
    ranked = [j for j in range(len(enc)) if not special[j] and j != position]
    occ = np.zeros(len(enc))
    occ[ranked] = faithfulness.occlusion(_loaded.model, inputs, position, token_id, tok.mask_token_id, ranked,
                                         bad_id=bad_id)
    out["occlusion"] = occ
    return out


@st.cache_data(show_spinner=False, max_entries=16)
def faithfulness(key: tuple[str, ...], text: str, text_pair: str | None, position: int, token_id: int,
                 _loaded: LoadedModel):
    """:func:`bertcore.analysis.causal.faithfulness.measure` of the prediction ``token_id`` at ``position``, cached
    per its arguments."""
    from bertcore.analysis.causal import faithfulness as faith

    enc = mlm_encoding(text, text_pair, _loaded)
    tok = _loaded.tokenizer
    return faith.measure(_loaded.model, enc.tensors(), position, token_id, tok.mask_token_id, tok.pad_token_id,
                         np.array(enc.special_tokens_mask, dtype=bool))
