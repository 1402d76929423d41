"""Head ablation: switch attention heads (or whole layers) off and compare the model before and after."""

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis.attention import ablation
from bertcore.data import DataError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.figures import ablation as abl_figures
from explorer.server import heavy
from explorer.views import ablation as views
from explorer.views.code import snippet

DEFAULT = "The animal didn't cross the street because it was too [MASK]."
DEFAULT_B = "It lay down on the pavement and slept."

st.title("Head ablation")
st.markdown(
    """
Switch attention heads off and see what changes. Michel et al. (2019, "Are Sixteen Heads Really
Better than One?") **zero a head's output** (HF's `head_mask`) and find that most heads can go with
little loss; Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT") instead make a head
**attend uniformly** to every token, which keeps the size of its output. Below: how far each layer's
hidden states and the sentence embedding move (cosine to the unablated run, 1 = unchanged) and, for a
model with the heads, what happens to its predictions: fill-mask at the `[MASK]` tokens, the MLM
loss on a fixed held-out batch of BBC News, P(IsNext), the classifier's probabilities.
"""
)

lm = widgets.current_model()
cfg = lm.config
text, text_pair = widgets.text_or_pair("abl", DEFAULT, DEFAULT_B)
try:
    enc = views.encoded(lm.source, text, text_pair)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, lm.max_length)

c1, c2, c3 = st.columns([2, 3, 2])
with c1:
    mode = st.radio("How", list(ablation.MODES), format_func=ablation.MODES.get, key="abl_mode",
                    persist_state="session")
with c2:
    # label "layer.head" (1-based, as shown and stored) -> the 0-based (block, head) bertcore takes
    names = {f"{widgets.layer_number(lv)}.{widgets.head_number(h)}": (lv, h) for lv in range(cfg.num_hidden_layers)
             for h in range(cfg.num_attention_heads)}
    if "abl_heads" in st.session_state:  # another model may have fewer heads
        st.session_state["abl_heads"] = [n for n in st.session_state["abl_heads"] if n in names]
    chosen = st.multiselect("Heads to switch off (layer.head)", list(names), key="abl_heads",
                            placeholder="e.g. 1.3", persist_state="session")
with c3:
    layer_range = list(range(1, cfg.num_hidden_layers + 1))
    if "abl_layers" in st.session_state:
        st.session_state["abl_layers"] = [lv for lv in st.session_state["abl_layers"] if lv in layer_range]
    layers_off = st.multiselect("Whole layers to switch off", layer_range, key="abl_layers",
                                **({} if "abl_layers" in st.session_state else {"default": [1]}),
                                persist_state="session")
off = tuple(sorted({names[n] for n in chosen}  # 0-based (block, head); layers_off holds the 1-based labels
                   | {(lv - 1, h) for lv in layers_off for h in range(cfg.num_attention_heads)}))
mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off)
widgets.plotly_chart(abl_figures.head_mask_figure(mask.numpy()), key="abl_mask")
if not off:
    st.info("No head is switched off: pick heads or layers above to see their effect.", icon=":material/info:")
    st.stop()

args = (lm.source, text, text_pair, mode, off)
try:
    res = views.ablate(*args)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
before, after, mv, layer_names = res.before, res.after, res.movement, res.layer_names

st.subheader("How far the representations move")
st.caption("Cosine similarity between the unablated and the ablated hidden states (1 = unchanged). "
           "Layers below the first switched-off head stay at 1; the sentence embedding is the last layer's "
           "[CLS] vector, the mean over all tokens, and the pooler output.")
widgets.plotly_chart(views.movement_figure(res), key="abl_move")
as_code.expander("ablation", "Head ablation", snippet("Head ablation: how far the representations move",
                                                      views.ablate, args, draw=[(views.movement_figure, {})]), res)
token_ids = [f"{i}:{tok}" for i, tok in enumerate(enc.tokens)]
widgets.download_csv(pd.DataFrame(mv.per_token.T, index=pd.Index(token_ids, name="token"), columns=layer_names),
                     "ablation_cosine_per_token", key="abl_move_csv", label="CSV (cosine per token and layer)")

st.subheader("Predictions before and after")
if lm.has_mlm_head:
    try:
        loss_before = heavy.run_view(views.mlm_loss, "the MLM loss on the held-out batch", lm.source, mode, ())
        loss_after = heavy.run_view(views.mlm_loss, "the MLM loss on the held-out batch", lm.source, mode, off)
    except DataError as exc:
        widgets.show_error(ValueError(str(exc)))
        st.stop()
    m1, m2 = st.columns(2)
    m1.metric("MLM loss, held-out BBC batch (nats)", f"{loss_after:.3f}", f"{loss_after - loss_before:+.3f}",
              delta_color="inverse", help=f"{ablation.HELDOUT_DOCS} BBC News paragraphs, {ablation.HELDOUT_TOKENS} "
              "tokens each, masked once with seed 0 (15%, 80/10/10). Before: " + f"{loss_before:.3f}")
    m2.metric("Perplexity", f"{np.exp(loss_after):.1f}", f"{np.exp(loss_after) - np.exp(loss_before):+.1f}",
              delta_color="inverse")
    if not before.fill_mask:
        st.info("Type `[MASK]` in the text to see the fill-mask guesses before and after.", icon=":material/info:")
    for pos, (tok_b, p_b) in before.fill_mask.items():
        tok_a, p_a = after.fill_mask[pos]
        table = pd.DataFrame({"before": tok_b, "P before": np.round(p_b, 4), "after": tok_a,
                              "P after": np.round(p_a, 4)}, index=pd.Index(range(1, len(tok_b) + 1), name="rank"))
        st.caption(f"[MASK] at position {pos}: top {len(tok_b)} guesses")
        st.dataframe(table, key=f"abl_fill_{pos}")
else:
    st.info(f"**{widgets.escape_md(lm.source.name)} has no MLM head**, so there is no fill-mask or MLM loss to "
            "compare: use a model with one (the packaged MiniLM-MLM, or a checkpoint of a pretraining run).",
            icon=":material/block:")
    st.button("Use the packaged MiniLM-MLM (has MLM and NSP heads)", key="abl_switch",
              on_click=widgets.use_source, args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
if after.p_is_next is not None:
    if text_pair is None:
        st.caption("P(IsNext) needs a sentence pair: turn on 'Sentence pair' above.")
    else:
        st.metric("P(IsNext): B follows A", f"{after.p_is_next:.3f}", f"{after.p_is_next - before.p_is_next:+.3f}",
                  help=f"Next-sentence head; before: {before.p_is_next:.3f}")
if after.class_probs is not None:
    id2label = cfg.id2label or {}
    classes = [id2label.get(i, f"class {i}") for i in range(len(after.class_probs))]
    widgets.plotly_chart(abl_figures.before_after_bars(classes, before.class_probs, after.class_probs,
                                                       "Classifier probabilities"), key="abl_classes")
    widgets.download_csv(pd.DataFrame({"before": before.class_probs, "after": after.class_probs},
                                      index=pd.Index(classes, name="class")), "ablation_classes", key="abl_classes_csv")
