"""The Attention page's tabs: one head, every head of a layer, every layer × head, the head view, head statistics,
rollout and flow, what flows (:mod:`explorer.panels.what_flows`) and the neuron view; each draws what
:mod:`explorer.views.attention` computes for the page's :class:`Page`. Keys start with ``att_``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis.attention import activations, rollout as rollout_mod
from bertcore.analysis.attention.activations import Activations
from bertcore.loading.sources import LoadedModel
from explorer import widgets
from explorer.panels import what_flows as flows_panel
from explorer.figures import attention as att_figures
from explorer.figures import rollout as rollout_figures
from explorer.server import heavy
from explorer.views import attention as views


@dataclass
class Page:
    """What the Attention page chose and computed: the model, the text, the 0-based ``layer`` and ``head``, the
    toggles, the forward pass ``act``, the maps as ``shown``, the units' ``labels`` (with parts of speech when
    asked) and the one head's ``result``."""

    lm: LoadedModel
    text: str
    text_pair: str | None
    layer: int
    head: int
    hide: bool
    words: bool
    act: Activations
    shown: views.Maps
    labels: list[str]
    result: views.Head

    @property
    def ids(self) -> list[str]:
        """Position-prefixed labels (tokens repeat), for CSV exports."""
        return [f"{i}:{lab}" for i, lab in enumerate(self.labels)]

    @property
    def default_query(self) -> int:
        """The first unit that is a word (not a special token)."""
        enc = self.act.encoding
        return next((u for u, m in enumerate(self.shown.members) if enc.word_ids[m[0]] is not None), 0)

    @property
    def numbers(self) -> tuple[int, int]:
        """The layer's and head's numbers as their labels show them."""
        return widgets.layer_number(self.layer), widgets.head_number(self.head)


def matrix_frame(m: np.ndarray, rows: list[str], cols: list[str]) -> pd.DataFrame:
    """A matrix with labelled rows and columns for CSV export (position-prefixed: tokens repeat)."""
    return pd.DataFrame(np.asarray(m), index=pd.Index(rows, name="query"), columns=cols)


def query_picker(key_: str, names: list[str], default: int) -> int:
    """A token selectbox whose value survives a shorter text (reset to ``default``)."""
    if key_ in st.session_state and not 0 <= st.session_state[key_] < len(names):
        st.session_state[key_] = default
    return int(st.selectbox("Token", range(len(names)), key=key_, format_func=lambda i: f"{i}: {names[i]}",
                            **({} if key_ in st.session_state else {"index": default})))


def one_head(p: Page) -> None:
    shown_layer, shown_head = p.numbers
    st.caption(f"Layer {shown_layer}, head {shown_head}: row = the token that looks, column = the token looked at. "
               + ("The dotted lines separate sentence A from sentence B." if p.shown.segment_break else ""))
    widgets.plotly_chart(views.heatmap_figure(p.result, p.labels), key="att_one")
    widgets.download_csv(matrix_frame(p.result.attention, p.ids, p.ids), f"attention_L{shown_layer}_H{shown_head}",
                         key="att_one_csv")


def layer_grid(p: Page) -> None:
    st.caption("The same sentence seen by every head of the chosen layer: heads specialize (next token, "
               "previous token, [SEP], the same word ...).")
    layer_maps = p.shown.attentions[p.layer]  # (heads, U, U)
    widgets.plotly_chart(att_figures.layer_grid(layer_maps, p.labels, p.layer), key="att_grid")
    index = pd.MultiIndex.from_product([range(1, p.act.num_heads + 1), p.ids], names=["head", "query"])
    widgets.download_csv(pd.DataFrame(layer_maps.reshape(-1, len(p.labels)), index=index, columns=p.ids),
                         f"attention_L{p.numbers[0]}_all_heads", key="att_grid_csv")


def thumbnails(p: Page) -> None:
    st.caption("Every head of every layer as a thumbnail, each scaled to its own maximum; long inputs are "
               "averaged over blocks of tokens. Vertical stripes mean everyone looks at one token "
               "(often [SEP]); a diagonal means 'look at myself / my neighbour'. Download one layer's "
               "maps as CSV from 'All heads of a layer'.")
    widgets.plotly_chart(att_figures.thumbnails(p.shown.attentions), key="att_thumbs")


def head_view(p: Page) -> None:
    shown_layer, shown_head = p.numbers
    t = len(p.labels)
    st.caption("Pick a token: lines go to the tokens it attends to in the chosen layer and head, thicker "
               "for more attention. Only the strongest links are drawn.")
    vc1, vc2 = st.columns([3, 1])
    with vc1:
        query = query_picker("att_query", p.labels, p.default_query)
    with vc2:
        top_k = widgets.clamped_slider("Links drawn", "att_topk", 1, min(50, t), min(12, t))
    one_map = p.result.attention
    fig = att_figures.head_view(one_map, p.labels, query, top_k=top_k, segment_ids=p.shown.unit_types)
    widgets.plotly_chart(fig, key="att_view")
    d1, d2, _ = st.columns([1, 1, 4])
    widgets.download_html(fig, f"head_view_L{shown_layer}_H{shown_head}_{query}", key="att_view_html", where=d1)
    widgets.download_csv(pd.DataFrame({"key": p.ids, "weight": one_map[query]}).set_index("key"),
                         f"head_view_L{shown_layer}_H{shown_head}_{query}", key="att_view_csv", where=d2)


def stats(p: Page) -> None:
    tokens = p.act.encoding.tokens
    st.caption("Computed on the full attention (special tokens and WordPieces, whatever the toggles say), "
               "averaged over the query tokens. Entropy: 0 bits = all attention on one token; "
               f"{np.log2(len(tokens)):.1f} bits = spread evenly over all {len(tokens)}. "
               "Distance: how many positions away, on average.")
    hs = views.head_stats(p.lm.source, p.text, p.text_pair)
    name = st.radio("Statistic", list(activations.HeadStats.NAMES), format_func=activations.HeadStats.NAMES.get,
                    horizontal=True, key="att_stat")
    bounds = {"entropy": (0, hs.max_entropy), "distance": (0, None)}.get(name, (0, 1))
    values = getattr(hs, name)
    widgets.plotly_chart(att_figures.stat_heatmap(values, activations.HeadStats.NAMES[name], *bounds),
                         key="att_stat_fig")
    widgets.download_csv(pd.DataFrame(values, index=pd.Index(range(1, p.act.num_layers + 1), name="layer"),
                                      columns=[f"head {h}" for h in range(1, p.act.num_heads + 1)]),
                         f"head_{name}", key="att_stat_csv")
    st.caption(f"Layer {p.numbers[0]}, every head (the table's toolbar downloads it as CSV):")
    st.dataframe(pd.DataFrame({"head": np.arange(1, p.act.num_heads + 1),
                               **{label: np.round(getattr(hs, k)[p.layer], 3)
                                  for k, label in activations.HeadStats.NAMES.items()}}),
                 hide_index=True, key="att_stat_table")


def rollout(p: Page) -> None:
    t = len(p.labels)
    st.caption(
        "How much of each input token reaches the chosen token at each layer (Abnar & Zuidema 2020, "
        "'Quantifying Attention Flow in Transformers'). **Raw**: that layer's attention alone, averaged "
        "over heads. **Rollout**: the layers' attention multiplied from the bottom up, with the residual "
        "connection counted as 0.5·A + 0.5·I. **Flow**: the same graph read as pipes with capacities, "
        "the maximum flow from each input token. Rows sum to 1; top row = last layer.")
    query = query_picker("att_query", p.labels, p.default_query)
    rolled = views.rolled_out(p.lm.source, p.text, p.text_pair, p.hide, p.words)
    maps = {rollout_mod.METHODS["raw"]: rolled.raw[:, query, :],
            rollout_mod.METHODS["rollout"]: rolled.rollout[:, query, :]}
    if t <= rollout_mod.FLOW_MAX_TOKENS:
        maps[rollout_mod.METHODS["flow"]] = heavy.run_view(
            views.flow, "attention flow (one max-flow per layer and token)", p.lm.source, p.text, p.text_pair,
            p.hide, p.words, query)
    else:
        maps[rollout_mod.METHODS["flow"]] = None
        st.info(f"Attention flow is offered up to {rollout_mod.FLOW_MAX_TOKENS} tokens (this input has {t}"
                f"{' words' if p.words else ''}): it needs one max-flow per layer and input token. "
                "Shorten the text, or turn on 'Words, not WordPieces' to merge pieces.",
                icon=":material/hourglass_disabled:")
    fig = rollout_figures.contributions_figure(maps, p.labels, f"{query}: {p.labels[query]}")
    widgets.plotly_chart(fig, key="att_roll")
    rows = [(method, lv) for method, m in maps.items() if m is not None for lv in range(1, p.act.num_layers + 1)]
    table = pd.DataFrame(np.concatenate([m for m in maps.values() if m is not None]),
                         index=pd.MultiIndex.from_tuples(rows, names=["method", "layer"]), columns=p.ids)
    d1, d2, _ = st.columns([1, 1, 4])
    widgets.download_html(fig, f"rollout_{query}", key="att_roll_html", where=d1)
    widgets.download_csv(table, f"rollout_{query}", key="att_roll_csv", where=d2)


def what_flows(p: Page) -> None:
    flows_panel.section(p.lm, p.text, p.text_pair, p.layer, p.labels, p.shown.groups,
                        query_picker("att_query", p.labels, p.default_query))


def neuron(p: Page) -> None:
    shown_layer, shown_head = p.numbers
    tokens = p.act.encoding.tokens
    st.caption(
        "Where one attention weight comes from (bertviz's neuron view; Vig 2019). For the chosen layer, "
        "head and query token: the query vector q, every key vector k, their elementwise product (its "
        "sum is the dot product), the score q·k/√d and the softmax that turns scores into the attention "
        "weights of the other views. Red = positive, blue = negative. Always per WordPiece: q and k are "
        "vectors of single tokens.")
    nq = query_picker("att_nq", tokens, next((i for i, w in enumerate(p.act.encoding.word_ids) if w is not None), 0))
    nv = views.neuron_view(p.lm.source, p.text, p.text_pair, p.layer, p.head, nq)
    widgets.plotly_chart(rollout_figures.neuron_figure(nv.query_vector, nv.key_vectors, nv.product, nv.scores,
                                                       nv.probs, tokens, f"{nq}: {tokens[nq]}"),
                         key="att_neuron")
    tok_ids = [f"{i}:{tok}" for i, tok in enumerate(tokens)]
    d = nv.query_vector.size
    table = pd.DataFrame(np.column_stack([nv.scores, nv.probs, nv.key_vectors, nv.product]),
                         index=pd.Index(tok_ids, name="key"),
                         columns=["score", "probability"] + [f"k[{i}]" for i in range(d)]
                         + [f"q*k[{i}]" for i in range(d)])
    widgets.download_csv(table, f"neuron_view_L{shown_layer}_H{shown_head}_{nq}", key="att_neuron_csv")
