"""Attribution: integrated gradients (Captum) of a classifier's class, a fill-mask guess, or the
similarity of two sentences, one score per token or word."""

import pandas as pd
import streamlit as st

from bertcore.analysis.causal.attribution import DEFAULT_STEPS, AttributionError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer import whatif
from explorer.panels import attribution as panels
from explorer.server import heavy
from explorer.views import attribution as views
from explorer.views.code import snippet

DEFAULT_CLS = "The striker scored twice as the home side won the cup final."
DEFAULT_MLM = "The capital of France is [MASK]."
DEFAULT_A = "A man is playing a guitar on stage."
DEFAULT_B = "Someone is performing music for a crowd."
KINDS = {"classification": "The classifier's class", "fill_mask": "A fill-mask guess",
         "similarity": "Similarity of two sentences"}

st.title("Attribution")
st.markdown(
    """
Which input tokens does a prediction rest on? **Integrated gradients** (Sundararajan et al. 2017,
"Axiomatic Attribution for Deep Networks") walks in small steps from a *baseline* input (every word
replaced by `[PAD]`; `[CLS]` and `[SEP]` kept) to the real input and adds up the gradient of the
output with respect to each token's input embedding along the way. A token's score is its share of
the change in the output: red pushes the output up, blue pulls it down. The scores add up to
*f(input) − f(baseline)* (the *completeness* axiom), checked below. Computed with Captum's
`LayerIntegratedGradients` on the word embeddings.
"""
)

lm = widgets.current_model()
kinds = (["classification"] if lm.head == "classification" else []) + (["fill_mask"] if lm.has_mlm_head else [])
kinds.append("similarity")
if len(kinds) == 1:
    st.info("This model has no classification or MLM head, so only the similarity of two sentences (mean-pooled "
            "embeddings, as sentence-transformers compare them) can be explained. For a class, fine-tune a model on "
            "the Train page (task: fine-tune) and pick its checkpoint in the sidebar; for a fill-mask guess, pick a "
            "checkpoint of a pretraining run or an HF folder saved from BertForMaskedLM.", icon=":material/info:")
    st.button("Use the packaged MiniLM-MLM to explain fill-mask guesses", key="attr_switch",
              on_click=widgets.use_source, args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
    kind = "similarity"
else:
    kind = st.radio("Explain", kinds, format_func=KINDS.__getitem__, horizontal=True, key="attr_kind")

c1, c2 = st.columns([3, 1])
with c2:
    n_steps = st.slider("Integration steps", 8, 200, DEFAULT_STEPS, step=4, key="attr_steps", persist_state="session",
                        help="More steps: a more exact integral (smaller completeness gap), slower. Each step is "
                             "a forward and a backward pass: on a CPU, 20 steps take seconds for a sentence and "
                             "about a minute for 512 tokens (then the result is cached).")
    per_word = st.toggle("Per word", key="attr_words", persist_state="session",
                         help="Sum the scores of each word's WordPieces (special tokens dropped).")

other = position = target = text_b = None  # text_b: the what-if's input B
with c1:
    if kind == "classification":
        text, other = widgets.text_or_pair("attr_cls", DEFAULT_CLS, "", label="Text to classify")
        text_b = whatif.input_b("attr_cls", text, lm, other)
        names = lm.config.id2label or {i: f"class {i}" for i in range(lm.config.num_labels)}
        choice = st.selectbox("Class to explain", [-1] + list(range(lm.config.num_labels)), key="attr_class",
                              format_func=lambda c: "the predicted class" if c < 0 else str(names.get(c, c)))
        target = None if choice < 0 else int(choice)
    elif kind == "fill_mask":
        text = st.text_area("Text with [MASK]", value=DEFAULT_MLM, key="attr_mlm_text", height=90,
                            persist_state="session")
        text_b = whatif.input_b("attr_mlm", text or "", lm)
        try:
            masks = views.masks(lm.source, text or "")
        except TextError as exc:
            widgets.show_error(exc)
            st.stop()
        if not masks:
            st.info("Type [MASK] where the model should guess a word, e.g. “The capital of France is [MASK].”",
                    icon=":material/edit_note:")
            st.stop()
        position = masks[0]
        if len(masks) > 1:
            position = st.selectbox("Which [MASK]", masks, key="attr_mask_pos",
                                    format_func=lambda p: f"position {p} ([MASK] #{masks.index(p) + 1})")
        guesses = views.guesses(lm.source, text or "", position)
        target = st.selectbox("Guess to explain", guesses.ids, key="attr_guess",
                              format_func=lambda i: f"{guesses.tokens[guesses.ids.index(i)]} "
                                                    f"({guesses.probs[guesses.ids.index(i)]:.3f})")
        target = int(target) if target in guesses.ids else guesses.ids[0]
    else:
        text = st.text_area("Sentence A (scored)", value=DEFAULT_A, key="attr_sim_a", height=80,
                            persist_state="session")
        other = st.text_area("Sentence B (held fixed)", value=DEFAULT_B, key="attr_sim_b", height=80,
                             persist_state="session")

args = (lm.source, kind, text, other, position, target, int(n_steps))
try:
    res = heavy.run_view(views.explain, "integrated gradients", *args)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
except AttributionError as exc:
    st.warning(widgets.escape_md(exc), icon=":material/info:")
    st.stop()

if res.encoding.num_truncated:
    widgets.truncation_notice(len(res.encoding) + res.encoding.num_truncated, lm.max_length)
change = res.f_input - res.f_baseline
m1, m2, m3, m4 = st.columns(4)
m1.metric(f"f(input) = {res.target}", f"{res.f_input:.4f}")
m2.metric("f(baseline)", f"{res.f_baseline:.4f}", help="The same input with every word replaced by [PAD].")
m3.metric("Sum of attributions", f"{res.scores.sum():.4f}", help=f"Should equal f(input) − f(baseline) = {change:.4f}.")
m4.metric("Completeness gap", f"{abs(res.delta):.2e}",
          f"{100 * res.relative_error:.2f}% of the change" if abs(change) > 0 else "f did not change",
          delta_color="off", help="|sum of attributions − (f(input) − f(baseline))|: the integral's error.")
if abs(change) > 0 and res.relative_error > 0.05:
    st.warning(f"The completeness gap is {100 * res.relative_error:.1f}% of the change: raise the integration steps.",
               icon=":material/warning:")

if per_word:
    labels, scores = res.word_scores()
else:
    labels, scores = res.tokens, res.scores
if len(scores) == 0:
    st.info("No word to score.")
    st.stop()
draw = {"per_word": bool(per_word), "unit": "cosine" if kind == "similarity" else "probability"}
widgets.plotly_chart(views.bars_figure(res, **draw), key="attr_bars")
as_code.expander("attribution", "Attribution", snippet(f"Attribution: {kind.replace('_', '-')}", views.explain, args,
                                                       draw=[(views.bars_figure, draw)]), res)
table = pd.DataFrame({"word" if per_word else "token": labels, "attribution": scores})
st.dataframe(table, hide_index=True, key="attr_table")
widgets.download_csv(table, "attribution", key="attr_csv", index=False)
if text_b is not None:
    with st.container(border=True):
        panels.whatif_section(lm, kind, res, text, text_b, other, target, int(n_steps), per_word)
