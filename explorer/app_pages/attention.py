"""Attention: what each head of each layer looks at, as heatmaps, grids, a head view and statistics."""

import numpy as np
import pandas as pd
import streamlit as st

from bertcore import analysis
from bertcore.embeddings import InputError
from bertcore.tokenizer import TextError
from explorer import resources, widgets
from explorer.figures import attention as att_figures

DEFAULT = "The animal didn't cross the street because it was too tired."
DEFAULT_B = "It lay down on the pavement and slept."

st.title("Attention")
st.markdown(
    """
In every layer, each token (a **query**) spreads one unit of attention over all tokens (the
**keys**) and takes in a weighted mix of their vectors. Each layer has several **heads** that do
this independently, each with its own idea of what is relevant. A row of a heatmap below is one
token's attention: it sums to 1. Many heads park most of their attention on `[CLS]`, `[SEP]` or
punctuation when they have nothing better to do (Clark et al., 2019, "What does BERT look at?"):
hide those to see the rest.
"""
)

lm = widgets.current_model()
text, text_pair = widgets.text_or_pair("att", DEFAULT, DEFAULT_B)
try:
    act = resources.forward(resources.source_key(lm.source), text, text_pair, _loaded=lm)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()

enc = act.encoding
limit = min(lm.config.max_position_embeddings, int(lm.tokenizer.model_max_length))
if enc.num_truncated:
    st.warning(f"The input was cut to this model's {limit} positions: {enc.num_truncated:,} tokens were dropped.",
               icon=":material/content_cut:")
tokens = enc.tokens
t = len(tokens)
labels = [f"{tok}" for tok in tokens]
segment_break = enc.sequence_ids.index(1) if 1 in enc.sequence_ids else None

c1, c2, c3 = st.columns([2, 2, 2])
with c1:
    layer = widgets.layer_picker("att", act.num_layers, default=1)
with c2:
    head = widgets.head_picker("att", act.num_heads)
with c3:
    hide = st.toggle("Hide attention to [CLS] / [SEP]", key="att_hide", persist_state="session",
                     help="Zero the attention to special tokens and rescale each row to sum to 1 again.")
special = np.array(enc.special_tokens_mask, dtype=bool)
attn = analysis.hide_tokens(act.attentions, special) if hide else act.attentions
if hide:
    st.caption("Attention to [CLS]/[SEP] removed; each row is rescaled to sum to 1 over the other tokens.")

TABS = ["One head", "All heads of a layer", "All layers × heads", "Head view", "Head statistics"]
one, grid, thumbs, view, stats = st.tabs(TABS, key="att_tab", on_change="rerun")  # lazy: only the open tab runs
if one.open:
    with one:
        st.caption(f"Layer {layer}, head {head}: row = the token that looks, column = the token looked at. "
                   + ("The dotted lines separate sentence A from sentence B." if segment_break else ""))
        widgets.plotly_chart(att_figures.attention_heatmap(attn[layer - 1, head - 1], labels, segment_break=segment_break),
                        key="att_one")
if grid.open:
    with grid:
        st.caption("The same sentence seen by every head of the chosen layer: heads specialize (next token, "
                   "previous token, [SEP], the same word ...).")
        widgets.plotly_chart(att_figures.layer_grid(attn[layer - 1], labels, layer), key="att_grid")
if thumbs.open:
    with thumbs:
        st.caption("Every head of every layer as a thumbnail, each scaled to its own maximum; long inputs are "
                   "averaged over blocks of tokens. Vertical stripes mean everyone looks at one token "
                   "(often [SEP]); a diagonal means 'look at myself / my neighbour'.")
        widgets.plotly_chart(att_figures.thumbnails(attn), key="att_thumbs")
if view.open:
    with view:
        st.caption("Pick a token: lines go to the tokens it attends to in the chosen layer and head, thicker "
                   "for more attention. Only the strongest links are drawn.")
        vc1, vc2 = st.columns([3, 1])
        with vc1:
            default_query = next((i for i, w in enumerate(enc.word_ids) if w is not None), 0)
            if "att_query" in st.session_state and not 0 <= st.session_state["att_query"] < t:
                st.session_state["att_query"] = default_query  # the text changed and got shorter
            query = st.selectbox("Token", range(t), key="att_query", format_func=lambda i: f"{i}: {tokens[i]}",
                                 **({} if "att_query" in st.session_state else {"index": default_query}))
        with vc2:
            top_k = widgets.clamped_slider("Links drawn", "att_topk", 1, min(50, t), min(12, t))
        widgets.plotly_chart(att_figures.head_view(attn[layer - 1, head - 1], labels, int(query), top_k=top_k,
                                              segment_ids=enc.token_type_ids), key="att_view")
if stats.open:
    with stats:
        st.caption("Computed on the full attention (special tokens included), averaged over the query tokens. "
                   "Entropy: 0 bits = all attention on one token; "
                   f"{np.log2(t):.1f} bits = spread evenly over all {t}. Distance: how many positions away, on average.")
        hs = resources.head_stats(resources.source_key(lm.source), text, text_pair, _loaded=lm)
        name = st.radio("Statistic", list(analysis.HeadStats.NAMES), format_func=analysis.HeadStats.NAMES.get,
                        horizontal=True, key="att_stat")
        bounds = {"entropy": (0, hs.max_entropy), "distance": (0, None)}.get(name, (0, 1))
        widgets.plotly_chart(att_figures.stat_heatmap(getattr(hs, name), analysis.HeadStats.NAMES[name], *bounds),
                        key="att_stat_fig")
        st.caption(f"Layer {layer}, every head:")
        st.dataframe(pd.DataFrame({"head": np.arange(1, act.num_heads + 1),
                                   **{label: np.round(getattr(hs, key)[layer - 1], 3)
                                      for key, label in analysis.HeadStats.NAMES.items()}}),
                     hide_index=True, key="att_stat_table")
