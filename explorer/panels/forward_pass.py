"""The One forward pass page's steps, one lazy tab each: the embeddings, one attention head, all heads with the
projection and residual, the feed-forward block, every layer, the MLM head; each draws the strips of
:func:`explorer.views.forward_pass.trace`'s result. Keys start with ``fp_``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.loading.sources import PACKAGED_MLM, LoadedModel
from bertcore.readouts.forward_pass import formulas
from explorer import widgets
from explorer.figures import masking as mask_figures
from explorer.views import forward_pass as views


def steps(lm: LoadedModel, result: views.Trace, layer_rows: list[str]) -> list:
    """The six steps of ``result`` as lazy tabs (only the open one computes its figures); ``layer_rows``: the
    labels of the every-layer strip's rows (row 0: the embeddings). Returns the open step's figure as "Show the code"
    draws it: ``[(figure function, its keyword arguments)]``."""
    cfg, tok = lm.config, lm.tokenizer
    tr, enc = result.trace, result.encoding
    tokens, i, layer, head = enc.tokens, tr.token, tr.layer, tr.head
    n = len(tokens)
    shown_layer, shown_head = widgets.layer_number(layer), widgets.head_number(head)  # the labels' numbers, in text
    F = formulas(cfg.pre_layer_norm, cfg.hidden_act)
    H, I_, d, T = cfg.hidden_size, cfg.intermediate_size, cfg.hidden_size // cfg.num_attention_heads, n
    word = tokens[i]


    def vec(x) -> np.ndarray:
        return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


    drawn: list = []  # the open step's figure, for "Show the code"

    def drawn_step(step: str, key: str) -> None:
        widgets.plotly_chart(views.step_figure(result, step, shown_layer, shown_head), key=key)
        drawn.append((views.step_figure, {"step": step, "shown_layer": shown_layer, "shown_head": shown_head}))


    s, h0 = tr.steps, head
    act = {"gelu": "GELU"}.get(cfg.hidden_act, cfg.hidden_act)


    def code(text: str) -> str:
        """A token in a Markdown code span (shown literally; backticks cannot close it)."""
        return "`" + str(text).replace("`", "'") + "`"


    def embeddings() -> None:
        tid, seg = enc.input_ids[i], enc.token_type_ids[i]
        has_position, has_segment = cfg.position_embedding_type == "absolute", cfg.type_vocab_size > 0  # the tables
        n_tables = 1 + has_position + has_segment
        looked_up = {1: "One row is looked up", 2: "Two rows are looked up and added",
                     3: "Three rows are looked up and added"}[n_tables]
        st.markdown(f"{code(word)} is id {tid}, at position {i}, in segment {'AB'[seg]}. {looked_up}; LayerNorm then "
                    "rescales the sum to mean 0 and variance 1 and applies its learned gain"
                    + (" and bias" if cfg.norm_bias else " (this model's norms have no bias)")
                    + ". The last panel is the whole embedding output, one row per token, this token outlined."
                    + (f" ELECTRA's tables are E = {cfg.embedding_width} wide; a linear map projects them to H = {H} "
                       "before layer 1." if cfg.embedding_width != H else ""))
        if not has_position or not has_segment:
            st.caption(f"This {cfg.family} model has " + " and ".join(
                w for w, missing in (("no position table (its positions are rotary, turned inside attention)",
                                      not has_position),
                                     ("no segment table", not has_segment)) if missing) + ".")
        drawn_step("embeddings", "fp_embeddings")


    def one_head() -> None:
        pre = (" after a LayerNorm (this model is pre-LN: it normalises before each sub-layer)" if cfg.pre_layer_norm
               else "")
        st.markdown(f"The layer reads x, the previous layer's output{pre}. Three linear maps give every token a query, "
                    f"a key and a value, split into {cfg.num_attention_heads} heads of d = {d} numbers. This head "
                    "compares "
                    f"the query of {code(word)} with every token's key (`q·k / √d`), turns the scores into "
                    "weights that sum to 1 (softmax), and returns the weighted sum of the values.")
        drawn_step("one_head", "fp_one_head")
        top = np.argsort(-vec(s.probs[h0, i]))[:3]
        st.caption(f"Head {shown_head} puts " + ", ".join(
            f"{vec(s.probs[h0, i])[j]:.0%} on {j}: {widgets.escape_md(tokens[j])}" for j in top) + ".")


    def all_heads() -> None:
        st.markdown("Every head does the same with its own weights. Their outputs are put side by side (back to H "
                    "numbers), projected by one more linear map, and **added to x** (the residual connection: the "
                    "layer "
                    "only adds a change to what it received)"
                    + ("; a pre-LN model does not normalise here." if cfg.pre_layer_norm else
                       ", then normalised by LayerNorm."))
        drawn_step("all_heads", "fp_all_heads")


    def feed_forward() -> None:
        st.markdown(f"Each token alone goes through two linear maps with a {act} between them: out to I = {I_} numbers "
                    "and "
                    f"back to H = {H}. The result is added to h (the second residual)"
                    + (" and normalised: this is the layer's output." if not cfg.pre_layer_norm else
                       ": this is the layer's output (pre-LN: the LayerNorm came first)."))
        drawn_step("feed_forward", "fp_ffn")


    def every_layer() -> None:
        st.markdown(f"The same two blocks repeat in each of the {cfg.num_hidden_layers} layers. Row by row: the vector "
                    "of "
                    f"{code(word)} after each layer (row 0: the embeddings), layer {shown_layer} outlined.")
        widgets.plotly_chart(views.layers_figure(result, layer_rows), key="fp_layers")
        drawn.append((views.layers_figure, {"rows": layer_rows}))


    def mlm_head() -> None:
        if tr.mlm is None:
            st.info(f"**{widgets.escape_md(lm.source.name)} has no MLM head**, so the trace ends at the last layer: "
                    + widgets.escape_md(tr.no_mlm_reason) + " The packaged MiniLM-MLM has one.",
                    icon=":material/block:")
            st.button("Use the packaged MiniLM-MLM to follow the token to a word", key="fp_switch", type="primary",
                      on_click=widgets.use_source, args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
            return
        m = tr.mlm
        st.markdown(f"The last layer's vector of {code(word)} goes through one more dense layer, {act} and "
                    f"LayerNorm, then is compared with every word's embedding (the decoder is the word-embedding "
                    "matrix, "
                    f"tied) plus a bias: {cfg.vocab_size:,} logits, and their softmax is the model's guess.")
        drawn_step("mlm_head", "fp_mlm")
        words = result.top_words
        widgets.plotly_chart(mask_figures.topk_figure([f"top 5 at {i}: {word}"], [words], [m.top_probs],
                                                      [None if word == tok.mask_token else word], cols=1),
                             key="fp_top5")
        st.dataframe(pd.DataFrame({"word": words, "logit": [float(m.logits[j]) for j in m.top_ids],
                                   "probability": m.top_probs}), hide_index=True, key="fp_top_table",
                     column_config={"probability": st.column_config.NumberColumn(format="%.4f"),
                                    "logit": st.column_config.NumberColumn(format="%.3f")})
        st.caption(f"Logits: shape (T, V) = ({T}, {cfg.vocab_size:,}); {F['logits']}. Probability: {F['top']}.")


    # lazy tabs, one step of the pass each: only the open one computes its figures and draws (DESIGN: lazy tabs)
    STEPS = {"1. Embeddings": embeddings, "2. One attention head": one_head,
             "3. All heads, projection, residual": all_heads, "4. Feed-forward": feed_forward,
             "5. Every layer": every_layer, "6. MLM head": mlm_head}
    for tab, draw in zip(st.tabs(list(STEPS), key="fp_step", on_change="rerun"), STEPS.values()):
        if tab.open:
            with tab:
                draw()
    return drawn
