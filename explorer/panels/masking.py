"""The Masking page's sections: what the model predicts (decoding, sampling, bars, table), which words made the
prediction (DecompX, integrated gradients, occlusion, faithfulness) and the logit lens."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis import shipped
from bertcore.analysis.causal import faithfulness as faith
from bertcore.analysis.representations import logit_lens
from bertcore.loading.sources import LoadedModel
from bertcore.modeling.embeddings import InputError
from bertcore.readouts import fill_mask
from bertcore.readouts.fill_mask import FillMaskError
from explorer import as_code, resources, widgets
from explorer.figures import lens as lens_figures
from explorer.figures import mixing as mixing_figures
from explorer.server import heavy, share
from explorer.views import masking as views
from explorer.views.code import snippet

MAX_SEED = 2**31 - 1


def _draw(seed: int) -> None:
    """The Sample button: the first press draws with the seed in the box, each later press with the next seed."""
    if st.session_state.get("msk_sampled"):
        st.session_state["msk_sample_seed"] = (int(seed) + 1) % MAX_SEED
    st.session_state["msk_sampled"] = True


@st.fragment
def predictions(lm: LoadedModel, draw_args: tuple, d: views.Draw, DECODING: dict) -> None:
    """The Masking page's "What the model predicts": decoding controls, bars and table, for the draw ``d`` of
    :func:`explorer.views.masking.draw` called with ``draw_args``; ``DECODING``: the shareable decoding widgets.
    Moving a control reruns this section only."""
    share.sync(DECODING)  # read from the link at the top of the page; kept current on this section's own reruns
    st.markdown("**Decoding.** The bars are the softmax of the MLM head's logits divided by the **temperature** "
                "(below 1 sharpens, above 1 flattens), then cut to the **top-k** most probable words and to the "
                "smallest set whose probability reaches **top-p**, renormalised (Hugging Face's "
                "`TemperatureLogitsWarper`, `TopKLogitsWarper`, `TopPLogitsWarper`, in that order). 1, off, 1 "
                "is the model's own distribution.")
    d1, d2, d3, d4 = st.columns(4)
    decoding = dict(
        temperature=float(d1.slider("Temperature T", 0.1, 3.0, 1.0, 0.05, key="msk_temp", persist_state="session",
                                    help="p = softmax(logits / T).")),
        top_k=int(d2.slider("Top-k (0 = off)", 0, 50, 0, key="msk_topk", persist_state="session",
                            help="Keep only the k most probable words, then renormalise.")),
        top_p=float(d3.slider("Top-p (1 = off)", 0.05, 1.0, 1.0, 0.05, key="msk_topp", persist_state="session",
                              help="Keep the most probable words until their probability reaches p (nucleus), "
                                   "renormalise.")),
        k=int(d4.slider("Guesses shown per position", 1, 10, 5, key="msk_k", persist_state="session")))
    try:
        g = views.guesses(*draw_args, **decoding)
    except (FillMaskError, InputError) as exc:
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
        drawn = views.sampled(*draw_args, **decoding, sample_seed=int(seed))
        st.caption(f"Drawn with seed {int(seed)} at T = {decoding['temperature']:g}, top-k "
                   f"{decoding['top_k'] or 'off'}, top-p {decoding['top_p']:g}: "
                   + ", ".join(f"pos {p} → {widgets.escape_md(w)}" for p, w in zip(d.positions, drawn)))
    preds = g.predictions
    hits, known = fill_mask.accuracy(preds)
    if known:
        st.metric("Original token recovered (top-1)", f"{hits} of {known}", f"{hits / known:.0%}", delta_color="off",
                  delta_arrow="off",
                  help="Among the selected positions. Unchanged tokens are easy: the model sees the answer.")
    if d.typed_masks:
        st.caption(f"{len(d.typed_masks)} [MASK] typed by you: the model's guesses are shown, there is no original "
                   "to compare with.")
    if len(preds) > views.MAX_PANELS:
        st.caption(f"The first {views.MAX_PANELS} of {len(preds)} positions are drawn; the table below lists all of "
                   "them.")
    st.caption("Bars: the probabilities of the top guesses at this temperature, top-k and top-p (the axis zooms in "
               "when no guess passes 50%). Green: the original token.")
    widgets.plotly_chart(views.bars_figure(g, drawn), key="msk_topk_chart")
    as_code.expander("masking", "Masking", snippet("Masking: one masking draw and the model's guesses", views.guesses,
                                                   draw_args, decoding, [(views.grid_figure, {}),
                                                                         (views.bars_figure, {"drawn": drawn})]), g)
    columns = {
        "position": [p.position for p in preds],
        "original": [d.tokens[p.position] if p.original_id is not None else "(your [MASK])" for p in preds],
        "model sees": [d.fed_tokens[p.position] for p in preds], "top guess": [p.tokens[0] for p in preds],
        "probability": [p.probs[0] for p in preds], "recovered": [p.recovered for p in preds],
        "rank of original": pd.array([p.original_rank for p in preds], dtype="Int64"),
        "p(original)": [p.original_prob for p in preds]}
    if drawn is not None:
        columns[f"drawn (seed {int(seed)})"] = drawn
    st.dataframe(pd.DataFrame(columns), hide_index=True, key="msk_pred_table",
                 column_config={"probability": st.column_config.NumberColumn(format="%.3g"),
                                "p(original)": st.column_config.NumberColumn(format="%.3g")})


LENS_ALL_POSITIONS = 32  # longer inputs: the lens grid shows the predicted positions unless asked for all


@st.fragment
def lens(lm: LoadedModel, draw_args: tuple, d: views.Draw) -> None:
    """The Masking page's logit lens of the draw ``d`` (:func:`explorer.views.masking.lens` through the heavy-job
    queue) and the tuned lens's toggle and fitting. The toggles rerun this section only."""
    st.markdown(
        "What would the model guess if it stopped after layer *k*? The **logit lens** (nostalgebraist 2020) decodes "
        "every layer's hidden state with the model's own MLM head (`cls.predictions`). Each cell is that layer's "
        "top guess at that position (colour: its probability; hover: the top 5); **bold** marks layers whose guess "
        "is already the model's final one. BERT's head was trained on the last layer only, so early layers decode "
        "poorly: read the picture as *when the final answer becomes readable*, not as all a layer knows. The "
        "**tuned lens** (Belrose et al. 2023) fixes that with one small affine map per layer, fitted so each "
        "layer's decoding comes as close as it can to the final one.")
    if len(d.fed_tokens) > logit_lens.MAX_TOKENS:
        st.info(f"The logit lens reads at most {logit_lens.MAX_TOKENS} tokens; this input has {len(d.fed_tokens)}. "
                "Shorten the text to see it.", icon=":material/info:")
        return
    share.shareable({"msk_tuned": share.boolean})
    lens_path = logit_lens.tuned_lens_path(repr(resources.source_key(lm.source)))
    use_tuned = st.toggle("Decode through the tuned lens", key="msk_tuned", persist_state="session",
                          help="Fitted once per model on held-out BBC text (a few minutes on a CPU), then kept on "
                               "disk.")
    tuned = None
    if use_tuned:
        if lens_path.is_file():
            try:
                logit_lens.load_tuned_lens(lens_path)
                tuned = lens_path
            except ValueError as exc:
                st.warning(f"{widgets.escape_md(exc)}: fit it again.", icon=":material/warning:")
        if tuned is None and st.button("Fit the tuned lens for this model (a few minutes)", key="msk_fit_lens",
                                       type="primary", icon=":material/tune:"):
            def fit(progress):
                segments = shipped.segments(lm, 40, 128)  # held-out BBC text, packed by this tokenizer
                encodings = [lm.tokenizer(s.text_a, s.text_b, return_tensors="pt") for s in segments]
                fitted = logit_lens.train_tuned_lens(lm.model, encodings,
                                                     progress=lambda i, n, loss: progress(i / n))
                logit_lens.save_tuned_lens(fitted, lens_path)
                return lens_path

            # queued beside other heavy jobs; two sessions asking for the same model's lens fit it once
            tuned = heavy.run_with_status(("tuned-lens", str(lens_path)), fit, "the tuned lens", keep=False)
        if tuned is None:
            st.caption("Not fitted yet for this model: the charts below show the plain logit lens.")
    result = heavy.run_view(views.lens, "the logit lens", *draw_args, tuned=tuned)
    cols = list(d.positions[:views.MAX_PANELS])
    every = len(d.fed_tokens) <= LENS_ALL_POSITIONS or not cols or st.toggle(
        "Every position in the grid", key="msk_lens_all", persist_state="session",
        help=f"Inputs longer than {LENS_ALL_POSITIONS} tokens show the positions the model predicts (the table "
             "above); every position makes cells too narrow to read (hover them).")
    title = (("Tuned lens" if tuned is not None else "Logit lens") + ": each layer's best guess at "
             + ("each position" if every else f"the {len(cols)} predicted positions"))
    widgets.plotly_chart(views.lens_figure(result, None if every else cols, title), key="msk_lens")
    ll = result.lens
    final_words = lm.tokenizer.convert_ids_to_tokens(ll.final_ids[cols].tolist())
    widgets.plotly_chart(lens_figures.final_guess_by_layer(
        [f"pos {c}: {d.fed_tokens[c]} → {w}" for c, w in zip(cols, final_words)],
        ll.final_prob[:, cols].cpu().numpy(), ll.final_rank[:, cols].cpu().numpy()), key="msk_lens_lines")
    if tuned is not None:
        fitted = logit_lens.load_tuned_lens(tuned)
        widgets.plotly_chart(lens_figures.kl_by_layer(fitted.kl_logit.numpy(), fitted.kl_tuned.numpy()),
                             key="msk_lens_kl")
    as_code.expander("masking_lens", "Masking: the logit lens", snippet(
        "Masking: the logit lens of one masking draw", views.lens, draw_args, {"tuned": tuned},
        [(views.lens_figure, {"positions": None if every else cols, "title": title})]), result)


# ----------------------------------------------------------------------------- the Masking page
MAX_TOKENS = 256  # bertcore.analysis.attention.decompx.MAX_TOKENS: integrated gradients and occlusion grow with T too
EXAMPLE = "The keys to the cabinet [MASK] on the table."


def which_words(lm: LoadedModel, text: str, text_pair: str | None) -> None:
    """The Masking page's "Which words made this prediction": DecompX bars that sum to the logit, beside
    integrated gradients and occlusion, and the faithfulness table. Works on the [MASK]s typed in the text (or, if
    there is none, on an example sentence)."""
    st.subheader("Which words made this prediction")
    tok = lm.tokenizer
    first = views.draw(lm.source, text, text_pair, 0.0, False, 0.8, 0.1, 0)  # the text as the model reads it
    masks = first.typed_masks
    if not masks:
        st.caption(f"Your text has no [MASK] of its own, so this section explains the example “{EXAMPLE}”. Type "
                   "[MASK] in your text to explain your own sentence.")
        text, text_pair = EXAMPLE, None
        masks = views.draw(lm.source, text, None, 0.0, False, 0.8, 0.1, 0).typed_masks
    n_tokens = len(first.tokens) if text != EXAMPLE else 0
    if n_tokens > MAX_TOKENS:
        st.info(f"This section explains inputs of up to {MAX_TOKENS} tokens (DecompX's memory grows as the square "
                f"of the length); this one has {n_tokens}. Shorten the text.", icon=":material/info:")
        return
    st.markdown(
        "**DecompX** (Modarressi et al. 2023) follows every input token's share of the hidden state through "
        "every layer and the MLM head, so the prediction's logit splits exactly into one term per input token "
        "plus a rest term (the biases): the bars add up to the logit. Beside it, two other answers to the same "
        "question: **integrated gradients** (gradients along a path from [PAD]s to your words) and **occlusion** "
        "(replace the word by [MASK] and see how much the logit drops).")
    c1, c2, c3 = st.columns([1, 2, 2])
    position = c1.selectbox("[MASK] at", masks, key="msk_dx_pos", format_func=lambda p: f"position {p}") \
        if len(masks) > 1 else masks[0]
    cand = views.candidates(lm.source, text, text_pair, position)
    ids, words = cand.ids, cand.tokens
    choice = c2.selectbox("Explain the guess", range(len(ids)), key="msk_dx_guess",
                          format_func=lambda i: f"#{i + 1}: {words[i]}")
    pair = c3.text_input("… or a pair of words (logit difference)", key="msk_dx_pair", placeholder="are/is",
                         help="Two words separated by '/', each one WordPiece: the bars then explain "
                              "logit(first) − logit(second), e.g. are/is.")
    token_id, bad_id, what = ids[choice], None, f"the logit of “{words[choice]}”"
    if pair.strip():
        parts = [w.strip().lower() for w in pair.split("/")]
        pair_ids = tok.convert_tokens_to_ids(parts) if len(parts) == 2 else []
        if len(parts) != 2 or tok.unk_token_id in pair_ids or not all(parts):
            st.warning("Type two words separated by '/', each a single WordPiece of the vocabulary (e.g. are/is).",
                       icon=":material/edit_note:")
        else:
            token_id, bad_id = pair_ids
            what = f"logit(“{parts[0]}”) − logit(“{parts[1]}”)"
    result = heavy.run_view(views.explanations, "the explanations", lm.source, text, text_pair, position,
                            token_id, bad_id)
    tokens = result.tokens
    words_of = [widgets.escape_md(t) for t in tokens]
    left, right = st.columns(2)
    dx = result.decompx
    if dx is None:
        left.info("DecompX is not shown: " + widgets.escape_md(result.decompx_error.split(";")[0]) + ".",
                  icon=":material/info:")
    else:
        c = dx.contributions[:, 0]
        title = html.escape(f"DecompX: {what} at position {position}")
        widgets.plotly_chart(mixing_figures.contribution_bars(tokens, c[:-1], float(c[-1]), float(dx.value[0]),
                                                              title=title), key="msk_dx_bars", where=left)
        left.caption(f"The {len(tokens)} token bars plus the rest bar sum to {float(dx.value[0]):.3f}, the "
                     "model's own number. Blue pushes towards the guess, orange against.")
    with right:
        widgets.plotly_chart(mixing_figures.rankings(tokens, {"Integrated gradients": result.ig,
                                                              "Occlusion ([MASK] in its place)": result.occlusion}),
                             key="msk_dx_rank")
        st.caption("Each panel scaled to its own largest bar (hover for the value). Occlusion leaves [CLS], [SEP] "
                   "and the [MASK] itself out (0).")
    table = pd.DataFrame({"token": words_of, "DecompX": np.nan if dx is None else dx.contributions[:-1, 0],
                          "integrated gradients": result.ig, "occlusion": result.occlusion})
    widgets.download_csv(table, f"which_words_{position}", key="msk_dx_csv")

    st.markdown("**Which explanation is faithful? Measured, not asserted.** Each method ranks the input tokens; "
                "a faithful one ranks first the tokens whose removal changes the prediction most. The table gives "
                "Spearman's rank correlation (magnitudes, 1 = the same order) of each ranking with two ways of "
                "removing a token: occlusion, and zeroing its value vectors in every layer at once.")
    if bad_id is not None:
        st.caption("Measured for the guess chosen on the left, not for the pair.")
    fa = heavy.run_view(views.faithfulness_table, "the faithfulness table", lm.source, text, text_pair, position,
                        ids[choice])
    frame = pd.DataFrame(fa.correlations, index=pd.Index(list(faith.METHODS.values()), name="method"),
                         columns=list(faith.EFFECTS.values()))
    st.dataframe(frame, key="msk_faith_table",
                 column_config={c: st.column_config.NumberColumn(format="%.2f") for c in frame.columns})
    if fa.skipped:
        st.caption("n/a: " + "; ".join(f"{faith.METHODS[m]}: {widgets.escape_md(why)}" for m, why in
                                        fa.skipped.items()))
    if len(fa.positions) < 3:
        st.caption("Fewer than 3 ordinary tokens to rank: a correlation needs at least 3.")
