"""Masking: which tokens BERT's masked-LM task hides, how, and what a model with an MLM head guesses."""

import pandas as pd
import streamlit as st

from bertcore.loading.sources import PACKAGED_MLM
from bertcore.readouts import fill_mask, next_sentence
from bertcore.tokenization import masking
from bertcore.tokenization.tokenizer import TextError
from explorer import widgets
from explorer import whatif
from explorer.figures import masking as mask_figures
from explorer.panels import masking as panels
from explorer.server import share
from explorer.views import masking as views

DEFAULT = "The film won the award for best actor at the ceremony in London on Sunday night."
DEFAULT_B = "Its director [MASK] the prize to his mother."
MAX_SEED = panels.MAX_SEED

st.title("Masking")
st.markdown(
    """
BERT learns by filling in blanks (Devlin et al. 2019, section 3.1, "Masked LM"). For each
training sequence it **selects 15%** of the ordinary tokens (never `[CLS]`, `[SEP]` or padding)
and asks the model to predict the original token at each of them. Of the selected tokens,
**80% are replaced by `[MASK]`**, **10% by a random token** and **10% are left unchanged**, so
the model cannot rely on seeing `[MASK]` (which never occurs when it is used later) and must keep
a good representation of every token. Selection is a coin flip per token, so a short text can
get more or fewer than 15%; over many sequences the fractions converge. Type your own `[MASK]`
to ask the model directly.
"""
)

lm = widgets.current_model()
tok = lm.tokenizer
DECODING = {"msk_k": share.integer(1, 10), "msk_temp": share.number(0.1, 3.0), "msk_topk": share.integer(0, 50),
            "msk_topp": share.number(0.05, 1.0), "msk_sample_seed": share.integer(0, MAX_SEED),
            "msk_sampled": share.boolean}
share.shareable({"msk_rate": share.number(0.0, 1.0), "msk_wwm": share.boolean, "msk_seed": share.integer(0, MAX_SEED),
                 **DECODING})  # msk_tuned: in the lens section below
text, text_pair = widgets.text_or_pair("msk", DEFAULT, DEFAULT_B)
if text_pair is not None and lm.config.family in next_sentence.FAMILY_WITHOUT_NSP:
    st.caption(next_sentence.FAMILY_WITHOUT_NSP[lm.config.family] + ": the pair is read as one text ("
               f"`{tok.cls_token} A {tok.sep_token}` … `B {tok.sep_token}`), and no pair task was learnt"
               + (" nor segment embedding" if lm.encoder.embeddings.token_type_embeddings is None else "") + ".")
whatif.section(lm, "msk", text, text_pair, prepare=lambda s: fill_mask.normalise_mask_markers(s, tok))

# ----------------------------------------------------------------------------- parameters
if "msk_seed" not in st.session_state:
    st.session_state["msk_seed"] = 0


def _resample() -> None:
    st.session_state["msk_seed"] = (int(st.session_state.get("msk_seed", 0)) + 1) % MAX_SEED


c1, c2, c3 = st.columns([3, 3, 2])
with c1:
    rate = st.slider("Selection rate (share of eligible tokens)", 0.0, 1.0, 0.15, 0.01, key="msk_rate",
                     persist_state="session",
                     help="BERT uses 15%. 0 selects nothing, 1 selects every ordinary token.")
    whole_word = st.toggle("Whole-word masking", key="msk_wwm", persist_state="session",
                           help="Select all WordPiece pieces of a word together (Google's later BERT release); "
                                "each piece still gets its own [MASK] / random / unchanged decision.")
with c2:
    split = st.slider("Split of the selected tokens: [MASK] | random | unchanged", 0.0, 1.0, (0.8, 0.9), 0.01,
                      key="msk_split", persist_state="session",
                      help="Left handle: share replaced by [MASK]; between the handles: share "
                           "replaced by a random token; the rest stays unchanged. BERT: 80 | 10 | 10.")
    mask_replace_prob, random_replace_prob = float(split[0]), float(split[1]) - float(split[0])
    st.caption(f"[MASK] {mask_replace_prob:.0%} · random {random_replace_prob:.0%} · unchanged "
               f"{1 - mask_replace_prob - random_replace_prob:.0%}")
with c3:
    seed = st.number_input("Seed", step=1, key="msk_seed", persist_state="session",
                           help="The same seed and settings give the same draw. Any whole number.")
    st.button("Re-sample", on_click=_resample, key="msk_resample", icon=":material/casino:",
              help="Draw again with the next seed.")

# ----------------------------------------------------------------------------- the draw
draw_args = (lm.source, text, text_pair, float(rate), bool(whole_word), mask_replace_prob, random_replace_prob,
             int(seed) % MAX_SEED)
try:
    d = views.draw(*draw_args)
except (TextError, masking.MaskingError) as exc:
    widgets.show_error(exc)
    st.stop()
if d.num_truncated:
    widgets.truncation_notice(len(d.tokens) + d.num_truncated, lm.max_length)
counts = d.counts

st.subheader("What the model is fed")
st.caption("Each cell is one token of your text; the colour is its fate in this draw, and below it is what "
           "the model receives instead. Grey cells ([CLS], [SEP], your own [MASK]s) can never be selected. "
           "Hover a cell for details.")
if counts["eligible"] == 0:
    st.info("This text has no token that can be masked: it holds only special tokens ([CLS], [SEP], [MASK] ...). "
            "Type some words.", icon=":material/info:")
elif counts["selected"] == 0:
    st.info("No token was selected in this draw" + (" (the rate is 0)." if rate == 0 else
            ": press Re-sample or raise the rate."), icon=":material/info:")
widgets.plotly_chart(views.grid_figure(d), key="msk_grid")

m = st.columns(4)
selected_share = counts["selected"] / counts["eligible"] if counts["eligible"] else 0.0
m[0].metric("Selected", f"{counts['selected']} of {counts['eligible']}", f"{selected_share:.1%} (target {rate:.0%})",
            delta_color="off", delta_arrow="off")
for col, key, name, frac in ((m[1], "masked", "→ [MASK]", mask_replace_prob),
                             (m[2], "random", "→ random", random_replace_prob),
                             (m[3], "unchanged", "unchanged", 1 - mask_replace_prob - random_replace_prob)):
    got = counts[key] / counts["selected"] if counts["selected"] else 0.0
    col.metric(name, counts[key], f"{got:.0%} of selected (target {max(frac, 0):.0%})", delta_color="off",
               delta_arrow="off")

st.markdown("**Counts against the recipe.** The light bars are what the parameters predict for this many "
            "tokens, with the range a single random draw stays in about 95% of the time (±2 standard errors).")
widgets.plotly_chart(mask_figures.counts_figure(counts, rate, mask_replace_prob, max(random_replace_prob, 0.0)),
                     key="msk_counts")

selected = [i for i, x in enumerate(d.decisions) if x != masking.NOT_SELECTED]
if selected:
    with st.expander(f"The {len(selected)} selected positions"):
        st.dataframe(pd.DataFrame({
            "position": selected, "original token": [d.tokens[i] for i in selected],
            "decision": [masking.DECISION_NAMES[d.decisions[i]] for i in selected],
            "model sees": [d.fed_tokens[i] for i in selected],
            "label (original id)": [int(d.labels[i]) for i in selected],
        }), hide_index=True, key="msk_selected_table")
        st.caption("Every other position has the label -100, which the loss ignores (PyTorch / Hugging Face "
                   "convention).")

# ----------------------------------------------------------------------------- predictions
st.subheader("What the model predicts")
if lm.head == "rtd":
    st.info(f"**{widgets.escape_md(lm.source.name)} is an ELECTRA discriminator**: it says which tokens were "
            "replaced (one logit per token, Clark et al. 2020), not which word fills [MASK]; ELECTRA's generator "
            "(`ElectraForMaskedLM`) fills masks.", icon=":material/block:")
if not lm.has_mlm_head:
    st.info(f"**{widgets.escape_md(lm.source.name)} has no MLM head**, so it cannot predict masked tokens "
            "(the packaged all-MiniLM-L6-v2 was trained for sentence embeddings; its masked-LM weights were not "
            "published). The packaged **MiniLM-MLM** is the same encoder trained further here with masked-LM + "
            "NSP, so it fills [MASK]. Other choices in the sidebar: a checkpoint of a pretraining run (Train page), "
            "or a Hugging Face folder saved from `BertForMaskedLM` / `BertForPreTraining` such as "
            "`bert-base-uncased`. Without an MLM head, **Which words made this prediction** (DecompX, integrated "
            "gradients, occlusion) has no prediction to explain either.", icon=":material/block:")
    st.button("Use the packaged MiniLM-MLM to see predictions", key="msk_switch", type="primary",
              on_click=widgets.use_source, args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
    st.stop()
if not d.positions:
    st.info("Nothing to predict: no token was selected and the text has no [MASK]. Raise the rate, re-sample, "
            "or type [MASK] in the text.", icon=":material/info:")
    st.stop()


panels.predictions(lm, draw_args, d, DECODING)

# ----------------------------------------------------------------------------- below the fold: on demand
st.subheader("Why this prediction, and when in the model")
about, why, lens_tab = st.tabs(["About these panels", "Which words made this prediction",
                                "Layer by layer: the logit lens"], key="msk_panel", on_change="rerun")
with about:
    st.markdown("Two deeper views, computed when you open their tab (each takes a few seconds of the server, "
                "shared by every student who asks the same): **Which words made this prediction** splits the "
                "logit into one share per input word (DecompX, integrated gradients, occlusion, value zeroing); "
                "**the logit lens** decodes every layer's hidden state to show when the final answer becomes "
                "readable.")
if why.open:
    with why:
        panels.which_words(lm, text, text_pair)  # DecompX and the others, through the heavy-job queue
if lens_tab.open:
    with lens_tab:
        panels.lens(lm, draw_args, d)
