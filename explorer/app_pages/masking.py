"""Masking: which tokens BERT's masked-LM task hides, how, and what a model with an MLM head guesses."""

import pandas as pd
import streamlit as st
import torch

from bertcore.readouts import fill_mask
from bertcore.tokenization import masking
from bertcore.readouts import next_sentence
from bertcore.analysis.representations import logit_lens
from bertcore.modeling.embeddings import InputError
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError, encode
from explorer import as_code, heldout, resources, widgets
from explorer.server import heavy
from explorer.server import share
from explorer import context_mixing as what_flows
from explorer import edited_input as whatif
from explorer.as_code import tasks
from explorer.figures import lens as lens_figures
from explorer.figures import masking as mask_figures

DEFAULT = "The film won the award for best actor at the ceremony in London on Sunday night."
DEFAULT_B = "Its director [MASK] the prize to his mother."
MAX_SEED = 2**31 - 1
MAX_PANELS = 12

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
    mask_fraction, random_fraction = float(split[0]), float(split[1]) - float(split[0])
    st.caption(f"[MASK] {mask_fraction:.0%} · random {random_fraction:.0%} · unchanged "
               f"{1 - mask_fraction - random_fraction:.0%}")
with c3:
    seed = st.number_input("Seed", step=1, key="msk_seed", persist_state="session",
                           help="The same seed and settings give the same draw. Any whole number.")
    st.button("Re-sample", on_click=_resample, key="msk_resample", icon=":material/casino:",
              help="Draw again with the next seed.")

# ----------------------------------------------------------------------------- encode and mask
limit = lm.max_length
try:
    enc = encode(tok, fill_mask.normalise_mask_markers(text, tok),
                 None if text_pair is None else fill_mask.normalise_mask_markers(text_pair, tok), max_length=limit)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, limit)

t = enc.tensors()
eligible = masking.eligible_positions(tok, t["input_ids"], t["attention_mask"])  # (1, T)
word_ids = masking.whole_word_ids(tok, t["input_ids"], eligible) if whole_word else None  # as the training collator
draw_seed = int(seed) % MAX_SEED
try:
    result = masking.mask_tokens(t["input_ids"], eligible, mask_token_id=tok.mask_token_id, vocab_size=len(tok),
                                 mlm_probability=rate, mask_fraction=mask_fraction, random_fraction=random_fraction,
                                 word_ids=word_ids, generator=torch.Generator().manual_seed(draw_seed))
except masking.MaskingError as exc:
    widgets.show_error(exc)
    st.stop()

counts = result.counts()
decisions = result.decision[0].tolist()
fed_tokens = tok.convert_ids_to_tokens(result.input_ids[0].tolist())
typed_masks = fill_mask.mask_token_positions(tok, t["input_ids"])

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
widgets.plotly_chart(mask_figures.decision_grid(enc.tokens, decisions, eligible[0].tolist(), fed_tokens,
                                           per_row=12 if len(enc) <= 120 else 16), key="msk_grid")

m = st.columns(4)
selected_share = counts["selected"] / counts["eligible"] if counts["eligible"] else 0.0
m[0].metric("Selected", f"{counts['selected']} of {counts['eligible']}", f"{selected_share:.1%} (target {rate:.0%})",
            delta_color="off", delta_arrow="off")
for col, key, name, frac in ((m[1], "masked", "→ [MASK]", mask_fraction), (m[2], "random", "→ random", random_fraction),
                             (m[3], "unchanged", "unchanged", 1 - mask_fraction - random_fraction)):
    got = counts[key] / counts["selected"] if counts["selected"] else 0.0
    col.metric(name, counts[key], f"{got:.0%} of selected (target {max(frac, 0):.0%})", delta_color="off",
               delta_arrow="off")

st.markdown("**Counts against the recipe.** The light bars are what the parameters predict for this many "
            "tokens, with the range a single random draw stays in about 95% of the time (±2 standard errors).")
widgets.plotly_chart(mask_figures.counts_figure(counts, rate, mask_fraction, max(random_fraction, 0.0)),
                     key="msk_counts")

selected_positions = [i for i, d in enumerate(decisions) if d != masking.NOT_SELECTED]
if selected_positions:
    with st.expander(f"The {len(selected_positions)} selected positions"):
        st.dataframe(pd.DataFrame({
            "position": selected_positions,
            "original token": [enc.tokens[i] for i in selected_positions],
            "decision": [masking.DECISION_NAMES[decisions[i]] for i in selected_positions],
            "model sees": [fed_tokens[i] for i in selected_positions],
            "label (original id)": [int(result.labels[0, i]) for i in selected_positions],
        }), hide_index=True, key="msk_selected_table")
        st.caption("Every other position has the label -100, which the loss ignores (PyTorch / Hugging Face "
                   "convention).")

# ----------------------------------------------------------------------------- predictions
st.subheader("What the model predicts")
positions = sorted(set(selected_positions) | set(typed_masks))
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
if not positions:
    st.info("Nothing to predict: no token was selected and the text has no [MASK]. Raise the rate, re-sample, "
            "or type [MASK] in the text.", icon=":material/info:")
    st.stop()

try:
    logits = fill_mask.mlm_logits_at(lm.model, result.input_ids, positions, t["attention_mask"],
                                      t["token_type_ids"])  # (N, V): one forward, every redraw below reuses it
except (FillMaskError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
shown_positions = positions[:MAX_PANELS]


def _title(p: fill_mask.Prediction, drawn: str | None) -> str:
    orig = enc.tokens[p.position]
    seen = fed_tokens[p.position]
    head = (f"pos {p.position}: your [MASK]" if p.original_id is None
            else f"pos {p.position}: {orig}" + ("" if seen == orig else f" → {seen}"))
    return head if drawn is None else f"{head} · drew {drawn}"


def _draw(seed: int) -> None:
    """The Sample button: the first press draws with the seed in the box, each later press with the next seed."""
    if st.session_state.get("msk_sampled"):
        st.session_state["msk_sample_seed"] = (int(seed) + 1) % MAX_SEED
    st.session_state["msk_sampled"] = True


@st.fragment
def _predictions() -> None:
    """Decoding controls, bars and table: moving a control reruns this section only (one forward, kept above)."""
    share.sync(DECODING)  # read from the link at the top of the page; kept current on this section's own reruns
    st.markdown("**Decoding.** The bars are the softmax of the MLM head's logits divided by the **temperature** "
                "(below 1 sharpens, above 1 flattens), then cut to the **top-k** most probable words and to the "
                "smallest set whose probability reaches **top-p**, renormalised (Hugging Face's "
                "`TemperatureLogitsWarper`, `TopKLogitsWarper`, `TopPLogitsWarper`, in that order). 1, off, 1 "
                "is the model's own distribution.")
    d1, d2, d3, d4 = st.columns(4)
    temperature = d1.slider("Temperature T", 0.1, 3.0, 1.0, 0.05, key="msk_temp", persist_state="session",
                            help="p = softmax(logits / T).")
    top_k = d2.slider("Top-k (0 = off)", 0, 50, 0, key="msk_topk", persist_state="session",
                      help="Keep only the k most probable words, then renormalise.")
    top_p = d3.slider("Top-p (1 = off)", 0.05, 1.0, 1.0, 0.05, key="msk_topp", persist_state="session",
                      help="Keep the most probable words until their probability reaches p (nucleus), renormalise.")
    k = d4.slider("Guesses shown per position", 1, 10, 5, key="msk_k", persist_state="session")
    try:
        decoding = fill_mask.Decoding(float(temperature), int(top_k), float(top_p))
        preds = fill_mask.predictions_from_logits(tok, result.input_ids, positions, logits, result.labels, k,
                                                  decoding)
    except FillMaskError as exc:
        widgets.show_error(exc)
        return
    s1, s2 = st.columns([1, 3], vertical_alignment="bottom")
    seed = s1.number_input("Sampling seed", 0, MAX_SEED, step=1, key="msk_sample_seed", persist_state="session",
                           help="The same seed, text and settings draw the same words.")
    s2.button("Sample", key="msk_sample", on_click=_draw, args=(seed,), icon=":material/casino:",
              help="Draw one word at each position from the bars' distribution (a torch.Generator seeded with the "
                   "seed). Press again for the next seed.")
    drawn = None
    if st.session_state.get("msk_sampled"):
        drawn = tok.convert_ids_to_tokens(fill_mask.sample(logits, decoding, int(seed)))
        st.caption(f"Drawn with seed {int(seed)} at T = {temperature:g}, top-k {top_k or 'off'}, top-p {top_p:g}: "
                   + ", ".join(f"pos {p} → {widgets.escape_md(w)}" for p, w in zip(positions, drawn)))

    hits, known = fill_mask.accuracy(preds)
    if known:
        st.metric("Original token recovered (top-1)", f"{hits} of {known}", f"{hits / known:.0%}", delta_color="off",
                  delta_arrow="off",
                  help="Among the selected positions. Unchanged tokens are easy: the model sees the answer.")
    if typed_masks:
        st.caption(f"{len(typed_masks)} [MASK] typed by you: the model's guesses are shown, there is no original to "
                   "compare with.")
    shown = preds[:MAX_PANELS]
    if len(preds) > MAX_PANELS:
        st.caption(f"The first {MAX_PANELS} of {len(preds)} positions are drawn; the table below lists all of them.")
    st.caption("Bars: the probabilities of the top guesses at this temperature, top-k and top-p (the axis zooms in "
               "when no guess passes 50%). Green: the original token.")
    widgets.plotly_chart(mask_figures.topk_figure(
        [_title(p, None if drawn is None else drawn[i]) for i, p in enumerate(shown)], [p.tokens for p in shown],
        [p.probs for p in shown], [None if p.original_id is None else enc.tokens[p.position] for p in shown]),
        key="msk_topk_chart")
    as_code.expander("masking", "Masking", tasks.masking(
        lm.source, text, text_pair, float(rate), bool(whole_word), mask_fraction, random_fraction, draw_seed,
        float(temperature), int(top_k), float(top_p), int(k), MAX_PANELS),
        {"input_ids": result.input_ids[0].numpy(), "probs": [p.probs for p in preds]})
    columns = {
        "position": [p.position for p in preds],
        "original": [enc.tokens[p.position] if p.original_id is not None else "(your [MASK])" for p in preds],
        "model sees": [fed_tokens[p.position] for p in preds],
        "top guess": [p.tokens[0] for p in preds],
        "probability": [p.probs[0] for p in preds],
        "recovered": [p.recovered for p in preds],
        "rank of original": pd.array([p.original_rank for p in preds], dtype="Int64"),
        "p(original)": [p.original_prob for p in preds],
    }
    if drawn is not None:
        columns[f"drawn (seed {int(seed)})"] = drawn
    st.dataframe(pd.DataFrame(columns), hide_index=True, key="msk_pred_table",
                 column_config={"probability": st.column_config.NumberColumn(format="%.3g"),
                                "p(original)": st.column_config.NumberColumn(format="%.3g")})


_predictions()
what_flows.masking_panel(lm, text, text_pair)  # which words made this prediction (DecompX and others)

# ----------------------------------------------------------------------------- logit lens
LENS_ALL_POSITIONS = 32  # longer inputs: the lens grid shows the predicted positions unless asked for all
st.subheader("Layer by layer: the logit lens")
st.markdown(
    "What would the model guess if it stopped after layer *k*? The **logit lens** (nostalgebraist 2020) decodes "
    "every layer's hidden state with the model's own MLM head (`cls.predictions`). Each cell is that layer's top "
    "guess at that position (colour: its probability; hover: the top 5); **bold** marks layers whose guess is "
    "already the model's final one. BERT's head was trained on the last layer only, so early layers decode "
    "poorly: read the picture as *when the final answer becomes readable*, not as all a layer knows. The "
    "**tuned lens** (Belrose et al. 2023) fixes that with one small affine map per layer, fitted so each layer's "
    "decoding comes as close as it can to the final one."
)
if len(enc) > logit_lens.MAX_TOKENS:
    st.info(f"The logit lens reads at most {logit_lens.MAX_TOKENS} tokens; this input has {len(enc)}. Shorten the "
            "text to see it.", icon=":material/info:")
    st.stop()


@st.cache_resource(show_spinner="Decoding every layer ...", max_entries=8, ttl="1h")
def _lens(key: tuple, input_ids: tuple, token_type_ids: tuple, tuned_stamp: str | None, _tuned):
    """The lens of one fed sequence, cached per model, input and tuned-lens file (its size and mtime)."""
    return logit_lens.logit_lens(lm.model, torch.tensor([input_ids]), None, torch.tensor([token_type_ids]), k=5,
                                 tuned=_tuned)


@st.fragment
def _lens_section() -> None:
    """The lens's toggles rerun this section only (the charts above stay as they are)."""
    share.shareable({"msk_tuned": share.boolean})
    lens_path = logit_lens.tuned_lens_path(repr(resources.source_key(lm.source)))
    use_tuned = st.toggle("Decode through the tuned lens", key="msk_tuned", persist_state="session",
                          help="Fitted once per model on held-out BBC text (a few minutes on a CPU), then kept on "
                               "disk.")
    tuned = None
    if use_tuned:
        if lens_path.is_file():
            try:
                tuned = logit_lens.load_tuned_lens(lens_path)
            except ValueError as exc:
                st.warning(f"{widgets.escape_md(exc)}: fit it again.", icon=":material/warning:")
        if tuned is None and st.button("Fit the tuned lens for this model (a few minutes)", key="msk_fit_lens",
                                       type="primary", icon=":material/tune:"):
            def fit(progress):
                segments = heldout.findings_segments(resources.source_key(lm.source), 40, 128, lm)
                encodings = [tok(s.text_a, s.text_b, return_tensors="pt") for s in segments]
                lens = logit_lens.train_tuned_lens(lm.model, encodings, progress=lambda i, n, loss: progress(i / n))
                logit_lens.save_tuned_lens(lens, lens_path)
                return lens

            # queued beside other heavy jobs; two sessions asking for the same model's lens fit it once
            tuned = heavy.run_with_status(("tuned-lens", str(lens_path)), fit, "the tuned lens", keep=False)
        if tuned is None:
            st.caption("Not fitted yet for this model: the charts below show the plain logit lens.")
    stamp = None if tuned is None else f"{lens_path.stat().st_size}-{lens_path.stat().st_mtime_ns}"
    lens = _lens(resources.source_key(lm.source), tuple(result.input_ids[0].tolist()),
                 tuple(t["token_type_ids"][0].tolist()), stamp, tuned)
    top_tokens = [[tok.convert_ids_to_tokens(row) for row in layer] for layer in lens.top_ids.tolist()]
    cols = list(shown_positions)
    every = len(fed_tokens) <= LENS_ALL_POSITIONS or not cols or st.toggle(
        "Every position in the grid", key="msk_lens_all", persist_state="session",
        help=f"Inputs longer than {LENS_ALL_POSITIONS} tokens show the positions the model predicts (the table "
             "above); every position makes cells too narrow to read (hover them).")
    title = (("Tuned lens" if tuned is not None else "Logit lens") + ": each layer's best guess at "
             + ("each position" if every else f"the {len(cols)} predicted positions"))
    widgets.plotly_chart(lens_figures.lens_grid(fed_tokens, top_tokens, lens.top_probs.numpy(),
                                                lens.final_rank.numpy(), title=title,
                                                positions=None if every else cols), key="msk_lens")
    final_words = tok.convert_ids_to_tokens(lens.final_ids[cols].tolist())
    widgets.plotly_chart(lens_figures.final_guess_by_layer(
        [f"pos {c}: {fed_tokens[c]} → {w}" for c, w in zip(cols, final_words)],
        lens.final_prob[:, cols].numpy(), lens.final_rank[:, cols].numpy()), key="msk_lens_lines")
    if tuned is not None:
        widgets.plotly_chart(lens_figures.kl_by_layer(tuned.kl_logit.numpy(), tuned.kl_tuned.numpy()),
                             key="msk_lens_kl")


_lens_section()
