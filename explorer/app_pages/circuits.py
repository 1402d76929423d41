"""Circuits: the attribution graph behind a fill-mask prediction, through per-block transcoders."""

import streamlit as st

from bertcore.analysis import shipped
from bertcore.circuits import export
from bertcore.circuits.attribution import CircuitError
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.runs.layout import runs_root
from bertcore.sae import catalog
from bertcore.sae.io import SAEError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.figures import circuits as circuit_figures
from explorer.panels import circuits as panels
from explorer.server import heavy, share, shared_settings
from explorer.views import circuits as views
from explorer.views.code import snippet

DEFAULT = shipped.CIRCUIT_TEXT  # its graph ships with the model and its shipped transcoders
DEFAULT_CONTRAST = "/".join(shipped.CIRCUIT_CONTRAST)

st.title("Circuits")
st.markdown(
    "Which features, through which layers and positions, make the model write *are* at the [MASK]? An "
    "**attribution graph** (Ameisen et al. 2025, \"Circuit tracing\") answers in a model made linear around this one "
    "input: every attention pattern and LayerNorm scale is frozen at its value here, and each feed-forward block is "
    "replaced by a **transcoder** (a wide, sparse stand-in whose features are readable) plus an **error node** "
    "holding exactly what the transcoder misses. An edge is one node's direct effect on another; the graph is "
    "pruned to the nodes that carry most of the influence on the prediction. Unlike the decoders circuit-tracer "
    "studies, BERT reads both directions: a position may feed any other, [CLS] is a real node, and the target is "
    "the [MASK], not the last token.")

lm = widgets.current_model()
share.shareable({"cir_text": share.text, "cir_contrast": share.text, "cir_threshold": share.number(0.1, 1.0)})
sets = catalog.transcoder_sets(lm.path, runs_root())
c1, c2 = st.columns([3, 2])
shared = shared_settings.settings().enabled  # a shared server opens no typed path
labels = [label for label, _ in sets] + ([] if shared else ["a folder ..."])
if not labels:
    panels.how_to_train(lm)
    st.stop()
choice = c1.selectbox("Transcoders", labels, key="cir_set",
                      help="A set of one transcoder per block: shipped beside the model, written by a training run "
                           "(its newest checkpoint while it runs), or any folder of layer-<n>/ transcoders.")
transcoders = dict(sets).get(choice)
if choice == "a folder ...":
    folder = c2.text_input("Folder of the set (layer-1/ … layer-N/ inside)", key="cir_folder")
    transcoders = panels.typed_folder(folder)
if transcoders is None:
    panels.how_to_train(lm)
    st.stop()

text = st.text_area("Text, with one [MASK] where the model guesses a word", DEFAULT, key="cir_text")
c1, c2 = st.columns([2, 3])
pair = c1.text_input("Contrast (two words, logit difference)", DEFAULT_CONTRAST, key="cir_contrast",
                     help="Two words separated by '/', each one token: the graph explains logit(first) − "
                          "logit(second). Empty: it explains the top fills (up to 95% of the probability, at most 10).")
threshold = c2.slider("Keep the nodes carrying this share of the influence", 0.1, 1.0, 0.8, 0.05,
                      key="cir_threshold", persist_state="session",
                      help="circuit-tracer's node threshold: nodes are ranked by their influence on the prediction "
                           "and kept until their cumulative share reaches it (edges: 98%).")
contrast = None
if pair.strip():
    words = [w.strip() for w in pair.split("/")]
    if len(words) != 2 or not all(words):
        st.warning("Type two words separated by '/', e.g. are/is (or leave it empty).", icon=":material/edit_note:")
        st.stop()
    contrast = (words[0], words[1])

args = (lm.source, text, contrast, transcoders)
try:
    c = heavy.run_view(views.circuit, "the attribution graph", *args, node_threshold=float(threshold))  # queued
except (CircuitError, SAEError, FillMaskError, TextError, ValueError) as exc:
    widgets.show_error(exc)
    st.stop()

m = st.columns(4)
m[0].metric("Nodes kept", f"{len(c.node_ids):,} of {c.n_nodes:,}")
m[1].metric("Edges kept", f"{len(c.edges):,}",
            help=f"The graph draws the {circuit_figures.MAX_EDGES:,} strongest of them; the JSON download holds all.")
m[2].metric("Replacement score", f"{c.scores['replacement_pruned']:.2f}", f"unpruned {c.scores['replacement']:.2f}",
            delta_color="off", delta_arrow="off",
            help="Of the influence reaching the prediction from the graph's inputs (embeddings and error nodes), the "
                 "share that flows from the embeddings through features: 1 = the transcoders explain everything.")
m[3].metric("Completeness score", f"{c.scores['completeness_pruned']:.2f}", f"unpruned {c.scores['completeness']:.2f}",
            delta_color="off", delta_arrow="off",
            help="Over the nodes, weighted by their influence, the share of their inputs that does not come from "
                 "error nodes: how much of each step the graph can name.")
st.caption("**Replacement**: how much of the prediction flows through named features rather than the error nodes. "
           "**Completeness**: how much of each node's input the graph names. circuit-tracer's Gemma-2-2B example "
           "scores 0.70 / 0.92 unpruned and 0.55 / 0.86 pruned. Targets: "
           + ", ".join(f"{widgets.escape_md(t)} ({p:.0%})" if contrast is None else widgets.escape_md(t)
                       for t, p in zip(c.targets, c.target_probs)) + ".")

selected = panels.node_picker(c)
full = st.toggle("Show the whole pruned graph", key="cir_full", persist_state="session",
                 help=f"Off: the {views.AT_A_GLANCE} most influential nodes and the logit, each with its label. "
                      "On: every node the pruning keeps, labels on hover.")
top = None if full else views.AT_A_GLANCE
if not full:
    st.caption(f"The {views.AT_A_GLANCE} most influential nodes of {len(c.node_ids):,} kept, and the edges among them. "
               "A feature's label is measured, not written: the words it fires on most in held-out text, their "
               "spaCy label when one covers half of them, and the words it promotes (→); the Features page "
               "explains each part.")
widgets.plotly_chart(views.graph_figure(c, selected, top), key="cir_graph", on_select="rerun",
                     selection_mode="points")
panels.node_details(lm, c, selected, transcoders)
panels.steering(lm, args, c)

as_code.expander("circuits", "Circuits", snippet("Circuits: the attribution graph of a [MASK] prediction",
                                                 views.circuit, args, {"node_threshold": float(threshold)},
                                                 [(views.graph_figure, {"selected": selected, "top": top})]), c)
st.download_button("Download the graph for Neuronpedia's viewer (JSON)", key="cir_json", icon=":material/download:",
                   data=lambda: export.dumps(views.neuronpedia(*args, node_threshold=float(threshold))),
                   file_name="bert-attribution-graph.json", mime="application/json", on_click="ignore",
                   help="Neuronpedia's graph format (nodes, links, metadata, qParams), as circuit-tracer writes it.")
