"""What flows: the Attention page's tab of context-mixing maps (raw attention against what the value vectors, the
residual and LayerNorm actually carry) and the routes between tokens, from the Attention page's views
(:mod:`explorer.views.attention`: :mod:`bertcore.analysis.attention.mixing` and :mod:`.flows`); figures from
:mod:`explorer.figures.mixing` and :mod:`explorer.figures.rollout`.
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertcore.analysis.attention import flows
from bertcore.analysis.attention import mixing as mixing_mod
from bertcore.analysis.attention.words import merge_attention
from bertcore.loading.sources import LoadedModel
from explorer.server import heavy
from explorer import widgets
from explorer.figures import mixing as mixing_figures
from explorer.figures import rollout as rollout_figures
from explorer.views import attention as attention_views

SHOWN = {"attention": "Raw attention", "norm": "Norm ‖αf(x)‖", "norm_res_ln": "+ residual + LayerNorm",
         "value_zeroing": "Value zeroing", "alti": "ALTI"}
"""The methods side by side, in order, with short titles."""
FLOW_MAX_TOKENS = 128
EXPLAIN = {
    "attention": "It measures the attention weights, averaged over heads: where a token *looks*.",
    "norm": "It measures the size of the vector each token actually sends, weight × ‖value‖ (Kobayashi et al. "
            "2020).",
    "norm_res_ln": "The same, with the token's own residual and LayerNorm 1 counted (Kobayashi et al. 2021).",
    "value_zeroing": "It measures how much a token's output changes when one token's value vectors are set to zero "
                     "and the whole layer is rerun (Mohebbi et al. 2023).",
    "alti": "It measures how close each token's vector comes to the token's output after LayerNorm 1 (Ferrando et "
            "al. 2022).",
}


def _maps(lm: LoadedModel, text: str, text_pair: str | None, method: str) -> np.ndarray:
    """``(L, T, T)`` of one method (:func:`explorer.views.attention.mixing_maps`); value zeroing (about T/3 forward
    passes) goes through the server's queue of heavy jobs, with its progress shown."""
    if method != "value_zeroing":
        return attention_views.mixing_maps(lm.source, text, text_pair, method)
    return heavy.run_view(attention_views.mixing_maps,
                          "value zeroing (each token's values removed in turn, every layer rerun)", lm.source, text,
                          text_pair, method)


def section(lm: LoadedModel, text: str, text_pair: str | None, layer: int, labels: list[str], groups,
            query: int) -> None:
    """The Attention page's "What flows" tab: the chosen layer (``layer``: the 0-based block, as
    :func:`explorer.widgets.layer_picker` returns it) by five methods side by side, a one-line readout per method,
    raw attention rollout against ALTI rollout, and the route graph."""
    shown = widgets.layer_number(layer)  # the label's number, in text
    enc = attention_views.forward(lm.source, text, text_pair).encoding
    plain = list(enc.tokens) if groups is None else list(groups.labels)  # without part-of-speech tags
    tokens = len(enc)
    if tokens > FLOW_MAX_TOKENS:
        st.info(f"What flows is measured on inputs of up to {FLOW_MAX_TOKENS} tokens (value zeroing reruns every "
                f"layer once per token); this one has {tokens}. Shorten the text.",
                icon=":material/hourglass_disabled:")
        return
    st.markdown(
        "A token takes in a **weighted sum of value vectors**: attention sets the weights, but what arrives is "
        "weight × the vector's size, plus the token's own residual, squeezed by LayerNorm. The maps below measure "
        f"that in layer {shown}, five ways. Row = the token receiving, column = the token contributing; each row "
        "is shown as shares of 100%, one colour scale for all, the selected token's row outlined.")
    maps, missing = {}, []
    for method in SHOWN:
        try:
            m = mixing_mod.normalize_rows(_maps(lm, text, text_pair, method))
        except ValueError:
            missing.append(method)
            continue
        maps[method] = m if groups is None else merge_attention(m, groups)
    if missing:
        st.info(f"This model is **pre-LN** (LayerNorm before each block): {', '.join(SHOWN[m] for m in missing)} "
                "take a post-LN LayerNorm apart and do not apply to it, so they are left out.",
                icon=":material/info:")
    fig = mixing_figures.side_by_side({SHOWN[m]: v[layer] for m, v in maps.items()}, labels, query,
                                      title=f"Layer {shown}: what flows into each token")
    widgets.plotly_chart(fig, key="att_flows_maps")
    st.markdown(f"**Where “{widgets.escape_md(labels[query])}”'s row goes, layer {shown}.** Kobayashi et al. "
                "(2020) found that raw attention parks a lot on [CLS], [SEP] and punctuation, but those tokens send "
                "small vectors: measured here, on your sentence.")
    lines = []
    for method, m in maps.items():
        s = flows.row_shares(m[layer], query, plain)
        lines.append(f"- **{SHOWN[method]}**: {s.special:.0%} on [CLS] / [SEP], {s.punctuation:.0%} on punctuation, "
                     f"{s.itself:.0%} on itself (mean over all rows: {s.mean_special:.0%} on [CLS] + [SEP]). "
                     + EXPLAIN[method])
    st.markdown("\n".join(lines))

    st.markdown("**Across layers: rollout of raw attention against rollout of ALTI.** Each layer's shares "
                "multiplied from the bottom up (raw attention with the residual counted as 0.5·A + 0.5·I; ALTI "
                "holds the residual already): how much of each input token has reached the selected token.")
    rolled = {"Raw attention rollout": mixing_mod.aggregate(maps["attention"], "attention")[:, query, :]}
    if "alti" in maps:
        rolled["ALTI rollout"] = mixing_mod.aggregate(maps["alti"], "alti")[:, query, :]
    else:
        rolled["ALTI rollout"] = None
    widgets.plotly_chart(rollout_figures.contributions_figure(rolled, labels, f"{query}: {labels[query]}"),
                         key="att_flows_rollout")
    _route_graph(maps, labels, query)


def _route_graph(maps: dict[str, np.ndarray], labels: list[str], query: int) -> None:
    """The route graph of the selected token, and the row of a clicked node."""
    st.markdown("**Route graph.** From the selected token at the top layer down to the input tokens: each line "
                "is a contribution above the threshold, as thick as its share (LM Transparency Tool's view, for "
                "an encoder). Pick a node in the box below the graph (or click it) to see that token's whole row at "
                "that layer.")
    c1, c2 = st.columns(2)
    names = list(maps)
    method = c1.selectbox("Contributions by", names, index=names.index("alti") if "alti" in names else 0,
                          format_func=SHOWN.get, key="att_route_method")
    threshold = c2.slider("Threshold (smallest share drawn)", 0.02, 0.5, 0.1, 0.01, key="att_route_threshold")
    num_layers = maps[method].shape[0]
    route = flows.routes(maps[method], query, threshold, max_edges_per_node=4, max_nodes_per_level=8)
    fig = mixing_figures.route_graph(route.nodes, route.edges, labels, num_layers,
                                     title=f"What reaches “{labels[query]}” ({SHOWN[method]})")
    event = widgets.plotly_chart(fig, key="att_route", on_select="rerun", selection_mode="points")
    picked = None
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", []) or []
    for p in points:
        data = p.get("customdata") if isinstance(p, dict) else None
        if data is not None and len(data) == 2:
            picked = (int(data[0]), int(data[1]))
    if len(route.edges) == 0:
        st.caption("No contribution passes the threshold: lower it.")
    node_names = [n for n in route.nodes if n[0] >= 1]
    if picked is None or picked[0] < 1:
        if not node_names:
            return
        if not 0 <= st.session_state.get("att_route_node", 0) < len(node_names):
            st.session_state["att_route_node"] = 0  # another token or threshold: fewer nodes
        picked = node_names[st.selectbox("Node whose row is shown", range(len(node_names)), key="att_route_node",
                                         format_func=lambda n: f"layer {node_names[n][0]}: {labels[node_names[n][1]]}")]
    level, token = picked  # level: a hidden_states index (1..L here), so "layer {level}" is its label
    row = maps[method][level - 1, token]  # the row of block level - 1, whose output is hidden_states[level]
    st.caption(f"Layer {level}, row of “{widgets.escape_md(labels[token])}”: the share each token contributes "
               f"({SHOWN[method]}).")
    widgets.plotly_chart(mixing_figures.rankings(labels, {f"layer {level}: into {labels[token]}": row}, scaled=False),
                         key="att_route_row")
