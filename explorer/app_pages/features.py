"""Features: a sparse autoencoder (SAE) rewrites one layer's hidden state as a sparse sum of learned directions;
which of them fire on your text, what one of them means, and what happens when you turn it up."""

from pathlib import Path

import streamlit as st

from bertcore.runs import runs_root
from bertcore.sae import catalog
from bertcore.sae import io as sae_io
from explorer import widgets
from explorer.panels import features as panels
from explorer.views import features as views

st.title("Features (sparse autoencoders)")
st.markdown(
    """
A single neuron of BERT often responds to many unrelated things. A **sparse autoencoder (SAE)** rewrites a layer's
hidden state (384 numbers for MiniLM) as a sum of a few of many learned directions, the **features** (thousands of
them; each token keeps only its *k* strongest: a *TopK* SAE, Gao et al. 2024). Most features turn out to mean one
thing: a word, a part of speech, a place in a phrase. Below: the features on your sentence, one feature's dashboard,
a search by text, and steering (turn a feature up and watch fill-mask change).
"""
)

lm = widgets.current_model()
skipped: list[tuple[str, str]] = []
entries = catalog.available(lm.path, lm.config.hidden_size, lm.config.num_hidden_layers, runs_root(), skipped)
if skipped:
    with st.expander(f"{len(skipped)} SAE folder(s) left out: they do not fit this model or cannot be read"):
        for label, why in skipped:
            st.markdown(f"- **{label}**: {widgets.escape_md(why)}")
if not entries:
    st.info("No SAE fits this model yet. The packaged fill-mask model (MiniLM-MLM) has SAEs at layers 2, 4 and 6; "
            "pick it in the sidebar, or train one for this model on the Train page (recipe *Sparse autoencoder*) or "
            "with `python -m bertcore.sae train --model FOLDER --layers 1 --max-time 30 --run-dir runs/my-sae` "
            "(`--layers` counts blocks from 0: block 1 is layer 2).")
    st.stop()
labels = [e.label for e in entries]
entry = entries[labels.index(st.selectbox("SAE", labels, key="feat_sae"))]
if entry.same_model is False:
    st.warning("This SAE was trained on other weights of the same shape: its features may mean little here.")
folder = Path(entry.folder)  # the views key it on its size and modification time: a rewritten SAE is read again
try:
    card = views.card(lm.source, folder)
except sae_io.SAEError as exc:
    st.error(str(exc))
    st.stop()
layer = card.layer  # the 0-based block whose output the SAE reads; "layer {layer + 1}" in text
shown_layer = widgets.layer_number(layer)
m = card.metrics
cols = st.columns(5)
cols[0].metric("Layer", f"{shown_layer} of {lm.config.num_hidden_layers}",
               help=f"reads {sae_io.hook_name(layer)}'s output")
cols[1].metric("Features", f"{card.d_sae:,}", help=f"k = {card.k} kept per token")
if "fvu" in m:
    cols[2].metric("Unexplained variance", f"{100 * m['fvu']:.1f}%", help="FVU on held-out State of the Union text")
    cols[3].metric("Dead features", f"{100 * m['dead']:.1f}%", help=f"never active on {m['tokens']:,} held-out tokens")
if "delta_ce_sae" in m:
    cols[4].metric("MLM loss with the SAE", f"+{m['delta_ce_sae']:.2f} nats",
                   help=f"layer {shown_layer}'s output replaced by the reconstruction; zeroing the layer costs "
                        f"+{m['delta_ce_zero']:.2f}, its mean +{m['delta_ce_mean']:.2f}")

your_text, one, search, steer = st.tabs(["Your text", "One feature", "Search", "Steering"])
with your_text:
    panels.your_text(lm.source, folder)
with one:
    panels.one_feature(lm.source, folder, card)
with search:
    panels.search(lm.source, folder)
with steer:
    panels.steering(lm.source, folder, card)
