"""Query-key map: one head's queries and keys over a set of sentences in one 2-D picture (AttentionViz).

Widgets -> ``explorer.views.query_key`` (``bertcore.analysis.attention.query_key``) ->
``explorer.figures.query_key``. Session-state keys start with ``qk_``.
"""

from __future__ import annotations

import streamlit as st

from bertcore.analysis.representations import syntax
from explorer import as_code, widgets
from explorer.server import heavy, share
from explorer.figures import attention as att_figures
from explorer.figures import query_key as figs
from explorer.views import query_key as views
from explorer.views.code import snippet

DEFAULT = """The keys to the cabinet are on the table.
She put the milk back in the fridge to keep it cold.
The dog wagged its tail when it saw its owner.
Shares fell sharply after the company issued a profit warning.
Bees make honey from the nectar of flowers.
The children who live next door play football every evening.
He said that the old bridge would be closed for a week.
The sun rises in the east and sets in the west."""
MAX_SENTENCES = 40
COLOURS = {"role": "query or key", "position": "position in the sentence", "pos": "part of speech (spaCy)"}

st.title("Query-key map")
st.markdown(
    """
A head attends from a token to another when the first one's **query** vector points the same way as the second
one's **key** (a large dot product). AttentionViz (Yeh et al. 2023) draws all queries and keys of one head, over
many sentences, in **one 2-D picture**: queries near a group of keys attend to them. Two adjustments make the
picture honest without changing a single attention weight: keys are shifted so their centre sits on the queries'
centre, and queries are scaled by *c* and keys by 1/*c* so both clouds have the same spread. Positional heads
show bands ordered by position; syntactic heads group by part of speech. Click a point to see its sentence's
attention for this head.
"""
)

lm = widgets.current_model()
cfg = lm.config
share.shareable({"qk_text": share.text, "qk_layer": share.integer(1, cfg.num_hidden_layers),
                 "qk_head": share.integer(1, cfg.num_attention_heads)})
text = st.text_area(f"Sentences, one per line (at most {MAX_SENTENCES})", DEFAULT, key="qk_text", height=190)
lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
sentences = lines[:MAX_SENTENCES]
if not sentences:
    st.warning("The text is empty: type a few sentences, one per line.", icon=":material/edit_note:")
    st.stop()
sentences = tuple(sentences)
lines_read = views.lines(lm.source, sentences)
limit, cut = lines_read.limit, lines_read.cut
said = [f"Only the first {MAX_SENTENCES} of your {len(lines)} lines are mapped."] if len(lines) > MAX_SENTENCES else []
if cut:
    said.append(f"{widgets.lines_phrase(cut)} cut to {limit} tokens, the most this map reads of a sentence.")
if said:
    st.warning(" ".join(said), icon=":material/content_cut:")
c1, c2, c3, c4 = st.columns(4)
# the inputs show (and keep in the session) the labels' numbers, from 1; bertcore takes the 0-based block and head
layer = int(c1.number_input("Layer", 1, cfg.num_hidden_layers, min(3, cfg.num_hidden_layers), key="qk_layer")) - 1
head = int(c2.number_input("Head", 1, cfg.num_attention_heads, 1, key="qk_head")) - 1
shown_layer, shown_head = widgets.layer_number(layer), widgets.head_number(head)
method = c3.radio("Projection", ["pca", "tsne"], format_func={"pca": "PCA", "tsne": "t-SNE"}.__getitem__,
                  key="qk_method", horizontal=True, help="PCA keeps distances along the two main directions; "
                  "t-SNE keeps neighbours (slower, and its distances mean little).")
colour = c4.radio("Colour", list(COLOURS), format_func=COLOURS.__getitem__, key="qk_colour")

try:
    qmap = views.qk_map(lm.source, sentences, layer, head, method)
except ValueError as exc:
    widgets.show_error(exc)
    st.stop()
labels = None
if colour == "pos":
    try:
        labels = views.parts_of_speech(lm.source, sentences).labels
    except syntax.SyntaxUnavailable as exc:
        st.caption(widgets.escape_md(str(exc)))
title = f"Layer {shown_layer}, head {shown_head}"
fig = views.map_figure(qmap, title, colour, labels)
event = widgets.plotly_chart(fig, key="qk_scatter", on_select="rerun", selection_mode="points")
draw = {"title": title, "colour": colour, **({"labels": labels} if colour == "pos" else {})}
as_code.expander("query_key", "Query-key map",
                 snippet(f"Query-key map: {title.lower()}", views.qk_map, (lm.source, sentences, layer, head, method),
                         draw=[(views.map_figure, draw)]), qmap)
picked = None
try:
    points = event["selection"]["points"]
except (KeyError, TypeError):
    points = []
if points and points[0].get("customdata") is not None:
    data = points[0]["customdata"]
    picked = int(data[0] if isinstance(data, list) else data)
s_idx = picked if picked is not None else int(st.session_state.get("qk_sentence", 0))
s_idx = min(max(s_idx, 0), len(sentences) - 1)
st.session_state["qk_sentence"] = s_idx
picked_attention = views.sentence_attention(lm.source, sentences, layer, head, s_idx, method)
st.markdown(f"**Sentence {s_idx + 1}** ({'clicked' if picked is not None else 'click a point to pick another'}): "
            f"{widgets.escape_md(sentences[s_idx])}")
widgets.plotly_chart(att_figures.attention_heatmap(picked_attention.attention, picked_attention.tokens,
                                                   title=f"Layer {shown_layer}, head {shown_head}"), key="qk_attention")

with st.expander(f"Every head of layer {shown_layer} (small multiples, PCA)"):
    if st.toggle("Show every head", key="qk_all"):
        heads = heavy.run_view(views.every_head, f"every head of layer {shown_layer}", lm.source, sentences, layer)
        widgets.plotly_chart(figs.head_multiples(heads.projections, layer), key="qk_multiples")
