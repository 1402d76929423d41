"""Embeddings: the embedding layer taken apart (token + position + segment, sum, LayerNorm)."""

import pandas as pd
import streamlit as st

from bertcore.modeling.embeddings import InputError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.figures import embeddings as emb_figures
from explorer.views import embeddings as views
from explorer.views.code import snippet

DEFAULT = "The bank raised interest rates."
DEFAULT_B = "We sat on the river bank."
MAX_ROWS = 48  # tokens per heatmap window
MAX_DIMS = 96  # dimensions per heatmap window
COMPONENTS = views.COMPONENTS

st.title("Embeddings")
st.markdown(
    """
Before the first encoder layer, BERT turns each token into a vector by **adding three learned
vectors** (Devlin et al. 2019, section 3.2 and figure 2): the **token** (WordPiece) embedding,
looked up by the token's id; the **position** embedding, looked up by its index 0, 1, 2 ...; and
the **segment** embedding, one vector for sentence A and one for sentence B. The sum then goes
through **LayerNorm**: each token's vector is shifted to mean 0 and scaled to variance 1
(*normalised*), then multiplied by a learned gain γ and shifted by a learned bias β (*output*).
Dropout follows during training only. Below, each of these steps is computed by hand from the
model's weights and checked against what the model itself produces.
"""
)

lm = widgets.current_model()
tok = lm.tokenizer
hidden = lm.config.hidden_size
text, text_pair = widgets.text_or_pair("emb", DEFAULT, DEFAULT_B, pair_default=True)
limit = lm.max_length
try:
    parts = views.parts(lm.source, text, text_pair)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
n = len(parts.tokens)
if parts.num_truncated:
    widgets.truncation_notice(n + parts.num_truncated, limit)

missing = [what for name, what in (("position", "no position table (its positions are rotary: see the Positional "
                                                "embeddings page)"),
                                   ("segment", "no segment table (one sentence type: the segment part is 0)"))
           if name in parts.missing]
if missing:
    st.info(f"This {lm.config.family} model has " + " and ".join(missing) + ", so those parts are all zeros below.",
            icon=":material/info:")

# ----------------------------------------------------------------------------- the check
st.subheader("Does the recomposition equal the model's embedding output?")
diff = parts.max_abs_diff
if parts.matches:
    st.success(f"Yes: token + position + segment, then LayerNorm, equals the model's embedding output "
               f"(`hidden_states[0]`) for all {n} tokens; largest difference {diff['model']:.1e} "
               "(float32 rounding).", icon=":material/check_circle:")
else:
    st.error(f"No: the recomposition differs from the model's embedding output by up to {diff['model']:.3g} "
             f"(LayerNorm written out vs the module: {diff['layernorm']:.3g}).", icon=":material/error:")

# ----------------------------------------------------------------------------- norms
st.subheader("Size of each part, token by token")
st.caption("L2 norm of each vector. The three summands are small (~1) and the same position always gets the "
           "same position vector, whatever the token; LayerNorm rescales every token to a similar size, set by "
           f"γ. Segment vectors change only where sentence B starts. (Not drawn: the normalised vector, whose "
           f"norm is always √H = {hidden ** 0.5:.1f}.)")
widgets.plotly_chart(views.norms_figure(parts), key="emb_norms")
as_code.expander("embeddings", "Embeddings", snippet("Embeddings: the size of each part, token by token", views.parts,
                                                     (lm.source, text, text_pair), draw=[(views.norms_figure, {})]),
                 parts)

# ----------------------------------------------------------------------------- heatmaps
st.subheader("The vectors themselves")
st.caption("Rows are tokens, columns are hidden dimensions; red is positive, blue negative. Each panel has its "
           "own colour range (up to its 99th percentile: a few outlier dimensions saturate), so compare patterns, "
           "not shades, across panels; hover for exact values.")
c1, c2, c3 = st.columns([2, 2, 3])
with c1:
    first_tok = widgets.clamped_slider("First token shown", "emb_first_tok", 0, max(0, n - 1), 0)
with c2:
    first_dim = widgets.clamped_slider("First dimension shown", "emb_first_dim", 0, max(0, hidden - 1), 0)
with c3:
    chosen = st.multiselect("Parts", COMPONENTS, default=["token", "position", "segment", "sum", "output"],
                            key="emb_parts", persist_state="session")
rows = slice(first_tok, min(first_tok + MAX_ROWS, n))
dims = slice(first_dim, min(first_dim + MAX_DIMS, hidden))
tensors = parts.parts  # (T, H) each
if not chosen:
    st.info("Choose at least one part to draw.", icon=":material/info:")
else:
    st.caption(f"Tokens {rows.start}–{rows.stop - 1} of {n}, dimensions {dims.start}–{dims.stop - 1} of "
               f"{hidden}.")
    widgets.plotly_chart(emb_figures.component_heatmaps({k: tensors[k][rows, dims] for k in chosen},
                                                        parts.tokens[rows], first_token=rows.start,
                                                        first_dim=dims.start), key="emb_heatmaps")

# ----------------------------------------------------------------------------- one token
st.subheader("One token, step by step")
labels = [f"{i}: {tk}" for i, tk in enumerate(parts.tokens)]
pick = st.selectbox("Token", range(n), format_func=labels.__getitem__, key="emb_token", persist_state="session",
                    index=min(1, n - 1))
pick = min(int(pick), n - 1)
vectors = {k: tensors[k][pick] for k in ("token", "position", "segment", "sum", "output")}
widgets.plotly_chart(emb_figures.token_vectors_figure(vectors, f"token {pick}: {parts.tokens[pick]}"),
                     key="emb_vectors")
total = tensors["sum"][pick]
st.dataframe(pd.DataFrame(views.token_steps(parts, pick)), hide_index=True, key="emb_steps")
st.caption(f"LayerNorm subtracts the mean ({float(total.mean()):.4f}) and divides by the standard deviation "
           f"({float(total.std()):.4f}, with ε = {lm.config.layer_norm_eps:g}) of the sum, so the "
           "normalised vector has mean 0 and standard deviation 1.")
