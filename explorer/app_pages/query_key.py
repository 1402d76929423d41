"""Query-key map: one head's queries and keys over a set of sentences in one 2-D picture (AttentionViz).

Widgets -> ``bertcore.analysis.attention.query_key`` -> ``explorer.figures.query_key``. Session-state keys start with
``qk_``.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertcore.analysis.attention import query_key as QK
from bertcore.analysis.representations import syntax
from explorer import as_code, resources, widgets
from explorer.server import share
from explorer.as_code import more
from explorer.figures import attention as att_figures
from explorer.figures import query_key as figs

DEFAULT = """The keys to the cabinet are on the table.
She put the milk back in the fridge to keep it cold.
The dog wagged its tail when it saw its owner.
Shares fell sharply after the company issued a profit warning.
Bees make honey from the nectar of flowers.
The children who live next door play football every evening.
He said that the old bridge would be closed for a week.
The sun rises in the east and sets in the west."""
MAX_SENTENCES = 40
MAX_TOKENS = 128  # tokens read of one sentence, [CLS]/[SEP] included
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
limit = min(lm.max_length, MAX_TOKENS)
cut = [i + 1 for i, n in enumerate(map(len, lm.tokenizer(sentences)["input_ids"])) if n > limit]
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



@st.cache_resource(show_spinner="Running the model on the sentences ...", max_entries=16, ttl="1h")
def _map(key: tuple, sentences: tuple[str, ...], layer: int, head: int, method: str, _lm):
    """Queries and keys of one head (0-based block and head), normalised and projected, cached per (model,
    sentences, layer, head, projection)."""
    qk = QK.query_keys(_lm.encoder, _lm.tokenizer, list(sentences), layer, head,
                       max_length=min(_lm.max_length, MAX_TOKENS))
    q, k, c = QK.normalize(qk.queries, qk.keys)
    return qk, c, QK.project(q, k, method)


try:
    qk, c, (pq, pk) = _map(resources.source_key(lm.source), tuple(sentences), layer, head, method, lm)
except ValueError as exc:
    widgets.show_error(exc)
    st.stop()
lengths = np.asarray(qk.lengths)[qk.sentence]
kwargs = {}
if colour == "position":
    kwargs = {"color": qk.position / np.maximum(lengths - 1, 1), "color_name": "position / length"}
elif colour == "pos":
    try:
        labels = []
        for s in sentences:
            seg = syntax.parse_segment(lm.tokenizer, s, max_length=limit)
            labels += ["special" if w is None else seg.words[w].pos for w in seg.word_ids]
        kwargs = {"categorical": labels} if len(labels) == len(qk.tokens) else {}
    except syntax.SyntaxUnavailable as exc:
        st.caption(widgets.escape_md(str(exc)))
fig = figs.qk_scatter(pq, pk, qk.tokens, qk.sentence, title=(
    f"Layer {shown_layer}, head {shown_head}: {len(qk.tokens)} queries and keys of {len(sentences)} sentences "
    f"(c = {c:.2f})"), **kwargs)
event = widgets.plotly_chart(fig, key="qk_scatter", on_select="rerun", selection_mode="points")
as_code.expander("query_key", "Query-key map",
                 more.query_key(lm.source, sentences, layer, head, method, limit),
                 {"queries": pq, "keys": pk})
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
idx = np.flatnonzero(qk.sentence == s_idx)
st.markdown(f"**Sentence {s_idx + 1}** ({'clicked' if picked is not None else 'click a point to pick another'}): "
            f"{widgets.escape_md(sentences[s_idx])}")
widgets.plotly_chart(att_figures.attention_heatmap(QK.attention_from(qk.queries, qk.keys, qk, s_idx),
                                                   [qk.tokens[i] for i in idx],
                                                   title=f"Layer {shown_layer}, head {shown_head}"), key="qk_attention")



@st.cache_data(show_spinner="Projecting every head ...", max_entries=8)
def _all_heads(key: tuple, sentences: tuple[str, ...], layer: int, _lm) -> list:
    out = []
    for h in range(_lm.config.num_attention_heads):
        one = QK.query_keys(_lm.encoder, _lm.tokenizer, list(sentences), layer, h,
                            max_length=min(_lm.max_length, MAX_TOKENS))
        out.append(QK.project(*QK.normalize(one.queries, one.keys)[:2], "pca"))
    return out


with st.expander(f"Every head of layer {shown_layer} (small multiples, PCA)"):
    if st.toggle("Show every head", key="qk_all"):
        projections = _all_heads(resources.source_key(lm.source), tuple(sentences), layer, lm)
        widgets.plotly_chart(figs.head_multiples(projections, layer), key="qk_multiples")
