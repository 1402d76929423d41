"""Embedding projector: a whole corpus's vectors at one layer, in 2-D (PCA, UMAP or an axis between two
words), coloured by part of speech, word, label or a classifier's answers; a slider over the layers animates it.

Widgets -> ``explorer.views.projector`` (``bertcore.analysis.projector_view.view``, cached on disk per model files,
corpus, layer, method, N) ->
``explorer.figures.projector``. Keys start with ``proj_``.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from bertcore.analysis import projector_view as PV
from bertcore.analysis import shipped
from bertcore.analysis.representations import projector as P
from bertcore.data import DataError, cache_dir
from bertcore.sae import catalog
from bertcore.runs import runs_root
from explorer import as_code, widgets
from explorer.server import heavy
from explorer.server import share
from explorer.views import projector as views
from explorer.views.code import snippet

OWN_EXAMPLE = """happy | What a wonderful day, I love it.
happy | The concert was great and everyone smiled.
sad | I lost my keys and missed the train.
sad | The rain ruined our picnic and we went home."""
METHOD_NAMES = {"pca": "PCA", "umap": "UMAP", "axis": "an axis between two words"}
UNIT_NAMES = {"token": "every token", "cls": "one per text: [CLS]", "mean": "one per text: mean of its tokens"}

st.title("Embedding projector")
st.markdown(
    """
Each dot is one **token of a sentence** (or one whole sentence) as the model sees it at one layer: a vector of
hundreds of numbers, squeezed into 2-D. **PCA** keeps the two directions along which the vectors differ most
(straight lines stay straight, distances are shrunk); **UMAP** keeps who is near whom (clusters are real,
distances between clusters are not); **an axis between two words** puts each vector between them (0 = the first,
1 = the second). Colour the dots by part of speech and watch the slider under the plot: in the first layers tokens
group by *word*, higher up by *role*. Click a dot for its sentence and its nearest neighbours in the full space
(cosine, not the 2-D picture); draw a lasso or a box to list the selected sentences.
"""
)

lm = widgets.current_model()
cfg = lm.config
n_layers = cfg.num_hidden_layers
share.shareable({"proj_points": share.integer(2, PV.MAX_POINTS), "proj_layer": share.integer(0, n_layers),
                 "proj_method": share.text, "proj_colour": share.text, "proj_corpus": share.text,
                 "proj_unit": share.text})
for key, allowed in (("proj_method", P.METHODS), ("proj_colour", PV.COLOURS), ("proj_unit", P.UNITS),
                     ("proj_corpus", (*PV.CORPORA, "yours"))):
    if st.session_state.get(key) not in (None, *allowed):
        del st.session_state[key]  # a stale link: the default instead

c1, c2, c3, c4 = st.columns([2, 1, 1, 2])
corpus_name = c1.selectbox("Corpus", [*PV.CORPORA, "yours"], key="proj_corpus",
                           index=list(PV.CORPORA).index(shipped.PROJECTOR_CORPUS),
                           format_func=lambda k: PV.CORPORA.get(k, "your own texts (typed or pasted)"))
n_points = int(c2.number_input("Points", 2, PV.MAX_POINTS, shipped.PROJECTOR_POINTS, step=500, key="proj_points",
                               help="Tokens (or texts) drawn. Up to 10,000 stay smooth in the browser; up to "
                                    f"{PV.MAX_POINTS:,} are computed (a minute or two)."))
layer = int(c3.selectbox("Layer", range(n_layers + 1), index=min(shipped.PROJECTOR_LAYER, n_layers), key="proj_layer",
                         help="0 = the embeddings (no context yet); the slider under the plot moves through all."))
unit = c4.radio("Points are", list(P.UNITS), key="proj_unit", horizontal=True, format_func=UNIT_NAMES.__getitem__)
c5, c6, c7 = st.columns([2, 2, 2])
method = c5.radio("Projection", list(P.METHODS), key="proj_method", horizontal=True,
                  format_func=METHOD_NAMES.__getitem__)
saes = catalog.available(lm.path, cfg.hidden_size, n_layers, runs_root()) if lm.path is not None else []
colours = [c for c in PV.COLOURS if c != "sae" or saes]  # an SAE feature only where this model has an SAE
if st.session_state.get("proj_colour") not in (None, *colours):
    del st.session_state["proj_colour"]
colour = c6.selectbox("Colour by", colours, index=colours.index(shipped.PROJECTOR_COLOUR), key="proj_colour",
                      format_func=PV.COLOURS.__getitem__)
sae_folder, feature = None, 0
if colour == "sae":
    s1, s2 = c7.columns([3, 2])
    entry = s1.selectbox("SAE", saes, key="proj_sae", format_func=lambda e: f"{e.label} ({e.cfg['d_sae']} features)")
    feature = int(s2.number_input("Feature", 0, int(entry.cfg["d_sae"]) - 1, 0, key="proj_feature",
                                  help="Its activation colours each point (the Features page tells what it means)."))
    sae_folder = str(entry.folder)
axis_words = ("good", "bad")
if method == "axis":
    a, b = c7.columns(2)
    axis_words = (a.text_input("From word", "good", key="proj_axis_a"), b.text_input("To word", "bad",
                                                                                      key="proj_axis_b"))
    if not all(w.strip() for w in axis_words):
        st.info("Type a word at each end of the axis.", icon=":material/edit_note:")
        st.stop()

own = None
if corpus_name == "yours":
    block = st.text_area("Your texts, one per line (write `label | text` on every line to colour by label)",
                         OWN_EXAMPLE, key="proj_own", height=150)
    try:
        own = PV.own_corpus(block)
    except ValueError as exc:
        st.info(widgets.escape_md(str(exc)), icon=":material/edit_note:")
        st.stop()

args = (lm.source, corpus_name, n_points, layer, method, colour, unit, axis_words,
        block if own is not None else None, sae_folder, feature, str(cache_dir()))
try:  # one computation per inputs for the whole server, queued beside other heavy jobs
    view = heavy.run_view(views.projection, "the projection", *args, keep=False)
except DataError as exc:
    st.error("Cannot read that corpus: " + widgets.escape_md(str(exc)), icon=":material/error:")
    st.stop()
except ValueError as exc:
    widgets.show_error(exc)
    st.stop()

proj = view.projection
for note in view.notes:
    st.info(widgets.escape_md(note), icon=":material/info:")
where = "shipped with the model: the default view" if view.shipped else "computed now, or read from the cache"
explained = proj.explained[proj.layers.index(layer)] if layer in proj.layers else None
st.caption(f"{len(proj.tokens):,} points from {len(set(proj.sentence.tolist())):,} texts, layer {layer}, "
           f"{METHOD_NAMES[method]} ({where})."
           + (f" The two axes hold {explained[0]:.0%} and {explained[1]:.0%} of the variance at this layer: the rest "
              "is not drawn." if method == "pca" and explained is not None else ""))

# the chart's key follows the view: a selection made on other points is not carried over to these
chart_key = "proj_chart_" + hashlib.sha256(repr(views.projection.key(*args)).encode()).hexdigest()[:12]
picked = st.session_state.get(chart_key)
sel_points = []
if picked and getattr(picked, "selection", None):
    sel_points = sorted({int(p["customdata"][0] if isinstance(p.get("customdata"), list) else p["customdata"])
                         for p in picked.selection.get("points", []) if p.get("customdata") is not None})
sel_points = [i for i in sel_points if 0 <= i < len(proj.tokens)]
typed = st.session_state.get("proj_point")  # the field under the chart (drawn there, read here)
clicked = sel_points[0] if len(sel_points) == 1 else None
if typed is not None and not 0 <= int(typed) < len(proj.tokens):
    st.session_state["proj_point"] = typed = None  # a number of a bigger view: cleared
if typed is not None:
    clicked = int(typed)
ring = []
if clicked is not None:
    near = views.neighbours(view, clicked)
    ring = [clicked, *near.ids]

if colour == "layer":
    if len(proj.layers) < 2:
        st.info("The path through the layers needs every layer: choose at most 20,000 points.",
                icon=":material/info:")
        st.stop()
    st.markdown("Each token of the first three texts at **every layer**, joined in layer order (dark = layer 0). "
                "Where a path jumps, that layer moved the token's vector to another neighbourhood.")
widgets.plotly_chart(views.figure(view, layer, ring), key=chart_key, on_select="rerun",
                     selection_mode=("points", "box", "lasso"))
as_code.expander("projector", "Embedding projector",
                 snippet("Embedding projector", views.projection, args,
                         draw=[(views.figure, {"layer": layer, "highlight": ring})]),
                 view)
if len(proj.layers) > 1:
    st.caption("The slider under the plot moves through the layers (▶ plays them). PCA's signs are matched from "
               "layer to layer so that the points move rather than flip; clicks and neighbours are at the layer "
               "chosen above.")

st.number_input("Or type a point's number (the hover shows it: #123)", 0, max(0, len(proj.tokens) - 1), None,
                key="proj_point", help="Its text and nearest neighbours are listed below; clear it to see your "
                                       "selection again.")
if clicked is not None:
    s = int(proj.sentence[clicked])
    st.subheader(f"Point {clicked}: {proj.tokens[clicked] if proj.unit == 'token' else 'a text'}")
    st.markdown("**Its text:** " + widgets.escape_md(proj.texts[s]))
    rows = [{"point": j, "token": proj.tokens[j] if proj.unit == "token" else "", "cosine": c, "in context": where}
            for j, c, where in zip(near.ids, near.cosine, near.context)]
    st.markdown(f"**Its {len(rows)} nearest neighbours at layer {layer}** (cosine in the full "
                f"{cfg.hidden_size}-dimensional space, not in the picture):")
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="proj_neighbours",
                 column_config={"cosine": st.column_config.NumberColumn(format="%.3f")})
    if st.button("Open this text on the Attention page", key="proj_open", icon=":material/grid_on:"):
        st.session_state["att_text"] = proj.texts[s][:2000]
        st.session_state["att_pair_on"] = False
        st.switch_page("explorer/app_pages/attention.py")
elif len(sel_points) > 1:
    texts = sorted(set(int(proj.sentence[i]) for i in sel_points))
    st.subheader(f"Your selection: {len(sel_points):,} points from {len(texts):,} texts")
    counts = pd.Series([str(view.values[i]) for i in sel_points]).value_counts().head(8)
    if colour != "layer":
        st.markdown(f"**{PV.COLOURS[colour].capitalize()}:** "
                    + widgets.escape_md(", ".join(f"{k} ({v})" for k, v in counts.items())))
    table = pd.DataFrame([{"text": proj.texts[t], "points selected": sum(1 for i in sel_points
                                                                         if proj.sentence[i] == t)} for t in texts])
    st.dataframe(table, hide_index=True, key="proj_selection")
    widgets.download_csv(table, "projector-selection", key="proj_selection_csv", index=False)
else:
    st.caption("Click a point, or draw a lasso / box (the plot's toolbar), to see the texts behind it.")
