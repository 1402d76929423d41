"""Features: a sparse autoencoder (SAE) rewrites one layer's hidden state as a sparse sum of learned directions, a
transcoder predicts one block's feed-forward output from its input through such a sum; which of them fire on your
text, what one of them means, and (SAEs) what happens when you turn it up."""

from pathlib import Path

import streamlit as st

from bertcore.runs import runs_root
from bertcore.sae import catalog
from bertcore.sae import io as sae_io
from explorer import widgets
from explorer.panels import features as panels
from explorer.views import features as views

st.title("Features (sparse autoencoders and transcoders)")
st.markdown(
    """
A single neuron of BERT often responds to many unrelated things. A **sparse autoencoder (SAE)** rewrites a layer's
hidden state (384 numbers for MiniLM) as a sum of a few of many learned directions, the **features** (thousands of
them; each token keeps only its *k* strongest: a *TopK* SAE, Gao et al. 2024). Most features turn out to mean one
thing: a word, a part of speech, a place in a phrase. Below: the features on your sentence, one feature's dashboard,
a search by text, and steering (turn a feature up and watch fill-mask change).

A **transcoder** has features too, but it reads a block's feed-forward input and predicts what that feed-forward
sub-layer writes (its output), so its features describe what the block computes; pick one below to see its
dashboards (its steering, and the circuits it forms, are on the Circuits page).
"""
)

lm = widgets.current_model()
skipped: list[tuple[str, str]] = []
entries = catalog.available(lm.path, lm.config.hidden_size, lm.config.num_hidden_layers, runs_root(), skipped,
                            kinds=("sae", "transcoder"))
if skipped:
    with st.expander(f"{len(skipped)} SAE or transcoder folder(s) left out: they do not fit this model or cannot be "
                     "read"):
        for label, why in skipped:
            st.markdown(f"- **{label}**: {widgets.escape_md(why)}")
if not entries:
    st.info("No SAE or transcoder fits this model yet. The packaged fill-mask model (MiniLM-MLM) has SAEs at layers "
            "2, 4 and 6; pick it in the sidebar, or train one for this model on the Train page (recipe *Sparse "
            "autoencoder*) or with `python -m bertcore.sae train --model FOLDER --layers 1 --max-time 30 --run-dir "
            "runs/my-sae` (`--layers` counts blocks from 0: block 1 is layer 2; `--kind transcoder` trains "
            "transcoders).")
    st.stop()
labels = [e.label for e in entries]
entry = entries[labels.index(st.selectbox("SAE or transcoder", labels, key="feat_sae"))]
what = "SAE" if entry.kind == "sae" else "transcoder"
if entry.same_model is False:
    st.warning(f"This {what} was trained on other weights of the same shape: its features may mean little here.")
folder = Path(entry.folder)  # the views key it on its size and modification time: a rewritten SAE is read again
try:
    card = views.card(lm.source, folder)
except sae_io.SAEError as exc:
    st.error(str(exc))
    st.stop()
panels.metrics(card, lm.config.num_hidden_layers)

your_text, one, search, steer = st.tabs(["Your text", "One feature", "Search", "Steering"])
with your_text:
    panels.your_text(lm.source, folder)
with one:
    panels.one_feature(lm.source, folder, card)
with search:
    panels.search(lm.source, folder)
with steer:
    panels.steering(lm.source, folder, card)
