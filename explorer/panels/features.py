"""The Features page's tabs: your text, one feature's dashboard, a search by text and steering (SAEs; a transcoder's
features are steered on the Circuits page)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
import streamlit as st

from bertcore.readouts.fill_mask import FillMaskError
from bertcore.loading.sources import ModelSource
from bertcore.sae import features as sae_features
from bertcore.sae import io as sae_io
from bertcore.sae.report import QUICK_SENTENCES
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.figures import features as figs
from explorer.views import features as views
from explorer.views.code import snippet


def metrics(card: views.SAECard, num_layers: int) -> None:
    """The card's row of metrics: where it reads, how many features, and what its ``metrics.json`` measured (an SAE's
    or a transcoder's fields, whichever are there)."""
    layer, shown = card.layer, widgets.layer_number(card.layer)  # the 0-based block; "layer {layer + 1}" in text
    m = card.metrics
    cols = st.columns(5)
    if card.kind == "transcoder":
        cols[0].metric("Block", f"{layer} (layer {shown})", help=f"block {layer} of 0..{num_layers - 1}: reads the "
                       f"feed-forward input of layer {shown} and predicts its output")
        trained = f" (of {m['d_sae_trained']:,} trained; the never-active ones dropped)" if "d_sae_trained" in m else ""
        cols[1].metric("Features", f"{card.d_sae:,}",
                       help=f"k = {card.k} kept per token on average in training{trained}")
        if "fvu" in m:
            cols[2].metric("Unexplained variance", f"{100 * m['fvu']:.1f}%",
                           help="FVU of the feed-forward output on held-out State of the Union text")
        if "dead" in m:
            cols[3].metric("Dead features", f"{100 * m['dead']:.1f}%", help="never active on the held-out tokens")
        if "delta_ce" in m:
            cols[4].metric("MLM loss with the transcoder", f"+{m['delta_ce']:.2f} nats",
                           help=f"the MLM loss with the transcoder spliced in: layer {shown}'s feed-forward output "
                                "replaced by its prediction")
        return
    cols[0].metric("Layer", f"{shown} of {num_layers}", help=f"reads {sae_io.hook_name(layer)}'s output")
    cols[1].metric("Features", f"{card.d_sae:,}", help=f"k = {card.k} kept per token")
    if "fvu" in m:
        cols[2].metric("Unexplained variance", f"{100 * m['fvu']:.1f}%", help="FVU on held-out State of the Union text")
        cols[3].metric("Dead features", f"{100 * m['dead']:.1f}%",
                       help=f"never active on {m['tokens']:,} held-out tokens")
    if "delta_ce_sae" in m:
        cols[4].metric("MLM loss with the SAE", f"+{m['delta_ce_sae']:.2f} nats",
                       help=f"layer {shown}'s output replaced by the reconstruction; zeroing the layer costs "
                            f"+{m['delta_ce_zero']:.2f}, its mean +{m['delta_ce_mean']:.2f}")


def _with_labels(table: pd.DataFrame, source: ModelSource, folder: Path) -> pd.DataFrame:
    """``table`` with each feature's stored label beside its number (unchanged when the index holds none)."""
    names = views.feature_labels(source, folder)
    if names is not None and len(table):
        table.insert(1, "label", [names[int(f)] for f in table["feature"]])
    return table


def _pick(feature: int) -> None:
    st.session_state["feat_id"] = int(feature)


def your_text(source: ModelSource, folder: Path) -> None:
    """The token strip of a typed sentence and the active features of one of its tokens."""
    text = st.text_input("Sentence", "The dogs in the park are barking at the mailman.", key="feat_text")
    try:
        result = views.text_features(source, folder, text)
    except TextError as exc:
        widgets.show_error(exc)
        return
    tf, strongest = result.features, result.strongest
    if tf.num_truncated:
        widgets.truncation_notice(len(tf.tokens) + tf.num_truncated, len(tf.tokens))
    if strongest:
        st.session_state.setdefault("feat_id", strongest[0])  # the dashboard opens on this sentence's strongest
    st.caption("Rows: the 12 features that fire most anywhere in the sentence; darker = stronger. Pick a token "
               "to list all its active features.")
    widgets.plotly_chart(views.strip_figure(result), key="feat_strip")
    as_code.expander("features", "Features",
                     snippet("Features: an SAE's or transcoder's features on your text", views.text_features,
                             (source, folder, text), draw=[(views.strip_figure, {})]), result)
    pos = st.selectbox("Token", range(len(tf.tokens)), format_func=lambda i: f"{i}: {tf.tokens[i]}",
                       index=min(2, len(tf.tokens) - 1), key="feat_token")
    rows = tf.at(pos, 12)
    st.dataframe(_with_labels(pd.DataFrame(rows, columns=["feature", "activation"]), source, folder),
                 hide_index=True)
    if rows:
        st.button(f"Open feature #{rows[0][0]}", on_click=_pick, args=(rows[0][0],), key="feat_open_top")


def one_feature(source: ModelSource, folder: Path, card: views.SAECard) -> None:
    """One feature's dashboard, or the button that indexes held-out text for it."""
    default = st.session_state.get("feat_id", 0)
    feature = int(st.number_input("Feature", 0, card.d_sae - 1, value=min(default, card.d_sae - 1), key="feat_num"))
    what = "SAE" if card.kind == "sae" else "transcoder"
    if not card.indexed:
        st.info(f"This {what} has no indexed held-out text yet. Indexing runs the model and spaCy over "
                f"{QUICK_SENTENCES} State of the Union sentences (about a minute) and stores the result beside the "
                f"{what}.")
        if st.button("Index held-out text", key="feat_index"):
            bar = st.progress(0.0, text="Parsing and running the model ...")
            try:
                views.write_index(source, folder, progress=lambda f: bar.progress(f, text="Running the model ..."))
            except Exception as exc:  # noqa: BLE001 - spaCy missing, a folder not writable: say so in the page
                st.error(f"Indexing failed: {exc}")
            else:
                st.rerun()
        return
    d = views.dashboard(source, folder, feature)
    if d.label is not None:
        _label(d.label)
    st.markdown(f"**Fires on {d.fired:,} of {d.tokens:,} held-out tokens.** "
                "Its strongest held-out contexts (the token framed; the shading is the feature's activation on "
                "each neighbour):")
    peak = max((float(c.activations.max()) for c in d.contexts), default=1.0) or 1.0
    for c in d.contexts:
        spans = [f"<span style='background: rgba(76,120,168,{min(1.0, float(a) / peak):.2f});"
                 f"{'border: 2px solid #e45756;' if j == c.here else ''} padding: 0 2px'>{html.escape(w)}</span>"
                 for j, (w, a) in enumerate(zip(c.words, c.activations)) if w not in ("[CLS]", "[SEP]")]
        st.markdown(f"<div style='line-height: 1.9'>{float(c.activations[c.here]):.2f} &nbsp; {' '.join(spans)}</div>",
                    unsafe_allow_html=True)
    left, right = st.columns(2)
    widgets.plotly_chart(figs.histogram(sae_features.HIST_EDGES, d.hist, feature), key="feat_hist", where=left)
    if d.profile is None:
        right.caption("Fewer than 20 held-out activations: no label profile.")
    else:
        right.markdown("**spaCy labels of its top 20 tokens** (the most common value of each kind)")
        right.dataframe(pd.DataFrame([(k, v or "none", f"{100 * share:.0f}%") for k, (v, share) in d.profile.items()],
                                     columns=["label", "most common", "share"]), hide_index=True)
    right.markdown("**Nearest features** (cosine of decoder directions)")
    right.dataframe(pd.DataFrame(d.nearest, columns=["feature", "cosine"]), hide_index=True)
    if d.promoted is None:
        st.caption(f"No logit effect: {widgets.escape_md(d.no_logits)}")
    else:
        where = ("the layer's mean hidden state" if card.kind == "sae" else
                 f"the mean feed-forward output of block {card.layer} (layer {widgets.layer_number(card.layer)}), "
                 "then that block's LayerNorm,")
        st.caption(f"The feature's direction added to {where} at its strongest held-out "
                   f"activation ({d.strength:.2f}) and read through the MLM head, as a logit lens would: the "
                   "words it promotes (green) and suppresses (red).")
        widgets.plotly_chart(figs.logit_bars(d.promoted, d.suppressed, feature), key="feat_logits")
    scale = "the same layer" if card.kind == "sae" else "the feed-forward input it reads"
    st.markdown(f"**How label-pure are the {what}'s features?** The share of directions whose top 20 held-out tokens "
                "share one spaCy label at 80% or more, against random directions and single neurons of "
                f"{scale}. *Varied words* counts only the lists where no single word makes up more than half: "
                "twenty copies of \"the\" are pure by the word alone, and in the last layers a few frequent "
                "tokens have such long hidden states that most random directions point at them.")
    widgets.plotly_chart(figs.purity_bars(d.purity), key="feat_purity")


def _label(label) -> None:
    """A feature's automatic label, and how each of its parts was measured (a caption: no click needed)."""
    st.markdown(f"#### {html.escape(label.text)}")
    parts = [f"**Tokens** ({', '.join(label.tokens) or 'none'}): the WordPieces most frequent among its {label.top} "
             f"strongest held-out activations, {100 * label.token_share:.0f}% of them."]
    if label.spacy is not None:
        kind = {"pos": "part of speech", "dep": "dependency relation", "ent": "entity type"}[label.spacy[0]]
        parts.append(f"**{label.spacy[1]}**: the spaCy {kind} of {100 * label.spacy[2]:.0f}% of those tokens (named "
                     "when one value covers half of them or more).")
    if label.promoted:
        parts.append(f"**→ {', '.join(label.promoted)}**: the words whose masked-LM logit its direction raises most "
                     "(the logit effect below).")
    parts.append("Only measured statistics; `python -m bertcore.sae labels` recomputes them and scores each as a "
                 "detector on other held-out sentences.")
    st.caption(" ".join(parts))


def search(source: ModelSource, folder: Path) -> None:
    """The features a word or phrase turns on."""
    phrase = st.text_input("Word or phrase", "president", key="feat_search")
    try:
        found = views.search(source, folder, phrase).rows
    except TextError as exc:
        widgets.show_error(exc)
        found = []
    st.caption("The features with the largest mean activation over the phrase's WordPieces.")
    st.dataframe(_with_labels(pd.DataFrame(found, columns=["feature", "mean activation"]), source, folder),
                 hide_index=True)
    if found:
        st.button(f"Open feature #{found[0][0]}", on_click=_pick, args=(found[0][0],), key="feat_open_search")


def steering(source: ModelSource, folder: Path, card: views.SAECard) -> None:
    """Fill-mask with and without one feature changed (SAEs; a transcoder gets a pointer to the Circuits page)."""
    if card.kind != "sae":
        st.info("Steering a transcoder feature (scaling it and watching every later block and the prediction "
                "change) is on the **Circuits** page.")
        return
    st.markdown("Change one feature at this layer and compare fill-mask with and without the change. **Add** adds the "
                "feature's direction times the amount to every token; **clamp** sets the feature's activation to the "
                "amount wherever it is computed.")
    s_text = st.text_input("Sentence with [MASK]", "The keys to the cabinet [MASK] on the table.",
                           key="feat_steer_text")
    c1, c2, c3 = st.columns(3)
    s_feature = int(c1.number_input("Feature", 0, card.d_sae - 1, value=min(st.session_state.get("feat_id", 0),
                                                                           card.d_sae - 1), key="feat_steer_f"))
    mode = c2.radio("How", ["add", "clamp"], horizontal=True, key="feat_steer_mode")
    amount = c3.slider("Amount", -20.0, 20.0, 8.0, 0.5, key="feat_steer_amount")
    try:
        res = views.steer(source, folder, s_text, s_feature, mode, float(amount))
    except (FillMaskError, TextError) as exc:
        st.info(str(exc))
        return
    for i, (p, q) in enumerate(zip(res.plain, res.steered)):
        left, right = st.columns(2)
        left.markdown(f"**[MASK] {i + 1}, unsteered**")
        left.dataframe(pd.DataFrame({"word": p.tokens, "probability": p.probs}), hide_index=True)
        right.markdown(f"**[MASK] {i + 1}, feature #{s_feature} {mode} {amount:g}**")
        right.dataframe(pd.DataFrame({"word": q.tokens, "probability": q.probs}), hide_index=True)
