"""Features: a sparse autoencoder (SAE) rewrites one layer's hidden state as a sparse sum of learned directions;
which of them fire on your text, what one of them means, and what happens when you turn it up."""

import html

import pandas as pd
import streamlit as st

from bertcore.readouts.fill_mask import FillMaskError
from bertcore.runs import runs_root
from bertcore.sae import catalog, explore
from bertcore.sae import features as sae_features
from bertcore.sae import io as sae_io
from bertcore.sae.report import QUICK_SENTENCES, index_features
from bertcore.tokenization.tokenizer import TextError
from explorer import features_cache as cache
from explorer import as_code, resources, widgets
from explorer.as_code import more
from explorer.figures import features as figs

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
folder = str(entry.folder)
file_stamp = cache.stamp(folder)
try:
    sae, cfg = cache.load_sae(folder, file_stamp)
except sae_io.SAEError as exc:
    st.error(str(exc))
    st.stop()
layer = cfg["layer"]  # the 0-based block whose output the SAE reads; "layer {layer + 1}" in text
shown_layer = widgets.layer_number(layer)
m = sae_io.read_metrics(folder) or {}
cols = st.columns(5)
cols[0].metric("Layer", f"{shown_layer} of {lm.config.num_hidden_layers}",
               help=f"reads {sae_io.hook_name(layer)}'s output")
cols[1].metric("Features", f"{cfg['d_sae']:,}", help=f"k = {cfg['k']} kept per token")
if "fvu" in m:
    cols[2].metric("Unexplained variance", f"{100 * m['fvu']:.1f}%", help="FVU on held-out State of the Union text")
    cols[3].metric("Dead features", f"{100 * m['dead']:.1f}%", help=f"never active on {m['tokens']:,} held-out tokens")
if "delta_ce_sae" in m:
    cols[4].metric("MLM loss with the SAE", f"+{m['delta_ce_sae']:.2f} nats",
                   help=f"layer {shown_layer}'s output replaced by the reconstruction; zeroing the layer costs "
                        f"+{m['delta_ce_zero']:.2f}, its mean +{m['delta_ce_mean']:.2f}")
index = cache.stored_index(folder, str(lm.path), layer, file_stamp)

your_text, one, search, steer = st.tabs(["Your text", "One feature", "Search", "Steering"])


def _pick(feature: int) -> None:
    st.session_state["feat_id"] = int(feature)


with your_text:
    text = st.text_input("Sentence", "The dogs in the park are barking at the mailman.", key="feat_text")
    try:
        tf = cache.text_features(resources.source_key(lm.source), folder, file_stamp, layer, text, lm, sae)
    except TextError as exc:
        widgets.show_error(exc)
        tf = None
    if tf is not None:
        if tf.num_truncated:
            widgets.truncation_notice(len(tf.tokens) + tf.num_truncated, len(tf.tokens))
        strongest = tf.strongest(12)
        if strongest:
            st.session_state.setdefault("feat_id", strongest[0])  # the dashboard opens on this sentence's strongest
        st.caption("Rows: the 12 features that fire most anywhere in the sentence; darker = stronger. Pick a token "
                   "to list all its active features.")
        widgets.plotly_chart(figs.token_strip(tf.tokens, tf.z, strongest), key="feat_strip")
        as_code.expander("features", "Features", more.features(lm.source, folder, text, 12), tf.z[:, strongest])
        pos = st.selectbox("Token", range(len(tf.tokens)), format_func=lambda i: f"{i}: {tf.tokens[i]}",
                           index=min(2, len(tf.tokens) - 1), key="feat_token")
        rows = tf.at(pos, 12)
        st.dataframe(pd.DataFrame(rows, columns=["feature", "activation"]), hide_index=True)
        if rows:
            st.button(f"Open feature #{rows[0][0]}", on_click=_pick, args=(rows[0][0],), key="feat_open_top")

with one:
    default = st.session_state.get("feat_id", 0)
    feature = int(st.number_input("Feature", 0, cfg["d_sae"] - 1, value=min(default, cfg["d_sae"] - 1), key="feat_num"))
    if index is None:
        st.info(f"This SAE has no indexed held-out text yet. Indexing runs the model and spaCy over {QUICK_SENTENCES} "
                "State of the Union sentences (about a minute) and stores the result beside the SAE.")
        if st.button("Index held-out text", key="feat_index"):
            bar = st.progress(0.0, text="Parsing and running the model ...")
            try:
                index_features(entry.folder, lm.model, lm.tokenizer, lm.path, QUICK_SENTENCES,
                               progress=lambda f: bar.progress(f, text="Running the model ..."))
            except Exception as exc:  # noqa: BLE001 - spaCy missing, a folder not writable: say so in the page
                st.error(f"Indexing failed: {exc}")
            else:
                cache.stored_index.clear()
                st.rerun()
    else:
        st.markdown(f"**Fires on {int(index.fired[feature]):,} of {len(index.text.token_ids):,} held-out tokens.** "
                    "Its strongest held-out contexts (the token framed; the shading is the feature's activation on "
                    "each neighbour):")
        rows = [int(r) for r in index.top_rows[feature] if r >= 0][:8]
        sents = [index.text.sentence_of(r) for r in rows]
        chunks = [index.text.token_ids[index.text.starts[s]:index.text.starts[s + 1]] for s in sents]
        shades = explore.context_activations(lm.model, lm.tokenizer, sae, layer, chunks, feature)
        peak = max((float(a.max()) for a in shades), default=1.0) or 1.0
        for r, s, ids, act in zip(rows, sents, chunks, shades):
            words = lm.tokenizer.convert_ids_to_tokens([int(i) for i in ids])
            here = r - int(index.text.starts[s])
            spans = [f"<span style='background: rgba(76,120,168,{min(1.0, float(a) / peak):.2f});"
                     f"{'border: 2px solid #e45756;' if j == here else ''} padding: 0 2px'>{html.escape(w)}</span>"
                     for j, (w, a) in enumerate(zip(words, act)) if w not in ("[CLS]", "[SEP]")]
            st.markdown(f"<div style='line-height: 1.9'>{float(act[here]):.2f} &nbsp; {' '.join(spans)}</div>",
                        unsafe_allow_html=True)
        left, right = st.columns(2)
        widgets.plotly_chart(figs.histogram(sae_features.HIST_EDGES, index.hist[feature], feature), key="feat_hist",
                             where=left)
        profile = sae_features.pure_labels(index.top_rows[feature:feature + 1], index.text)[0]
        if profile is None:
            right.caption("Fewer than 20 held-out activations: no label profile.")
        else:
            right.markdown("**spaCy labels of its top 20 tokens** (the most common value of each kind)")
            right.dataframe(pd.DataFrame([(k, v or "none", f"{100 * share:.0f}%") for k, (v, share) in profile.items()],
                                         columns=["label", "most common", "share"]), hide_index=True)
        right.markdown("**Nearest features** (cosine of decoder directions)")
        right.dataframe(pd.DataFrame(explore.nearest(sae, feature), columns=["feature", "cosine"]), hide_index=True)
        try:
            strength = float(index.top_values[feature][0]) or 1.0
            up, down = explore.logit_effect(lm.model, lm.tokenizer, sae, feature, index.mean, strength)
            st.caption(f"The feature's direction added to the layer's mean hidden state at its strongest held-out "
                       f"activation ({strength:.2f}) and read through the MLM head, as a logit lens would: the "
                       "words it promotes (green) and suppresses (red).")
            widgets.plotly_chart(figs.logit_bars(up, down, feature), key="feat_logits")
        except FillMaskError:
            st.caption("This model has no MLM head: no logit effect.")
        st.markdown("**How label-pure are the SAE's features?** The share of directions whose top 20 held-out tokens "
                    "share one spaCy label at 80% or more, against random directions and single neurons of the "
                    "same layer. *Varied words* counts only the lists where no single word makes up more than half: "
                    "twenty copies of \"the\" are pure by the word alone, and in the last layers a few frequent "
                    "tokens have such long hidden states that most random directions point at them.")
        widgets.plotly_chart(figs.purity_bars(index.purity), key="feat_purity")

with search:
    phrase = st.text_input("Word or phrase", "president", key="feat_search")
    try:
        found = explore.search(lm.model, lm.tokenizer, sae, layer, phrase)
    except TextError as exc:
        widgets.show_error(exc)
        found = []
    st.caption("The features with the largest mean activation over the phrase's WordPieces.")
    st.dataframe(pd.DataFrame(found, columns=["feature", "mean activation"]), hide_index=True)
    if found:
        st.button(f"Open feature #{found[0][0]}", on_click=_pick, args=(found[0][0],), key="feat_open_search")

with steer:
    st.markdown("Change one feature at this layer and compare fill-mask with and without the change. **Add** adds the "
                "feature's direction times the amount to every token; **clamp** sets the feature's activation to the "
                "amount wherever it is computed.")
    s_text = st.text_input("Sentence with [MASK]", "The keys to the cabinet [MASK] on the table.",
                           key="feat_steer_text")
    c1, c2, c3 = st.columns(3)
    s_feature = int(c1.number_input("Feature", 0, cfg["d_sae"] - 1, value=min(st.session_state.get("feat_id", 0),
                                                                            cfg["d_sae"] - 1), key="feat_steer_f"))
    mode = c2.radio("How", ["add", "clamp"], horizontal=True, key="feat_steer_mode")
    amount = c3.slider("Amount", -20.0, 20.0, 8.0, 0.5, key="feat_steer_amount")
    try:
        res = explore.steered_fill_mask(lm.model, lm.tokenizer, s_text, layer,
                                        explore.steering_edit(sae, s_feature, mode, amount), max_length=lm.max_length)
    except (FillMaskError, TextError) as exc:
        st.info(str(exc))
    else:
        for i, (p, q) in enumerate(zip(res.plain, res.steered)):
            left, right = st.columns(2)
            left.markdown(f"**[MASK] {i + 1}, unsteered**")
            left.dataframe(pd.DataFrame({"word": p.tokens, "probability": p.probs}), hide_index=True)
            right.markdown(f"**[MASK] {i + 1}, feature #{s_feature} {mode} {amount:g}**")
            right.dataframe(pd.DataFrame({"word": q.tokens, "probability": q.probs}), hide_index=True)
