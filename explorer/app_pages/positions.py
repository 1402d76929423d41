"""Positional embeddings: the model's learned position table beside sinusoidal encodings, then rotary positions."""

import streamlit as st

from bertcore.readouts import positional
from explorer import as_code, widgets
from explorer.figures import findings as finding_figures
from explorer.figures import positions as pos_figures
from explorer.panels import positions as panels
from explorer.server import heavy
from explorer.views import positions as views
from explorer.views.code import snippet

st.title("Positional embeddings")
st.markdown(
    """
Attention by itself ignores word order: shuffle the tokens and every token gets the same
context. So each position gets a vector that is added to the token's embedding. BERT
**learns** one vector per position (a table of `max_position_embeddings` rows, trained like
any weight). The original Transformer (Vaswani et al. 2017, section 3.5) used fixed
**sinusoids** instead: dimension pair *i* of position *p* is sin / cos of *p · 10000^(-2i/d)*, a set of
clocks running at geometrically spaced speeds. Below, the loaded model's learned table is shown
beside sinusoids of the same size, with the same three views.
"""
)

lm = widgets.current_model()
n_pos, hidden = lm.config.max_position_embeddings, lm.config.hidden_size
has_table = lm.config.position_embedding_type == "absolute"  # rotary models have no position table
if not has_table:
    st.info(f"This {lm.config.family} model has no position table: its positions are rotary (applied inside "
            "attention), shown in the **Rotary positions** section below.", icon=":material/info:")

if has_table:
    if "pos_start" not in st.session_state:
        st.session_state["pos_start"] = 0
    if "pos_end" not in st.session_state:
        st.session_state["pos_end"] = min(127, n_pos - 1)
    c1, c2, c3 = st.columns(3)
    with c1:  # no bounds on the widgets: any number reaches the check below and gets a message
        start = st.number_input("First position", step=1, key="pos_start", persist_state="session")
    with c2:
        end = st.number_input("Last position", step=1, key="pos_end", persist_state="session",
                              help=f"This model has positions 0 to {n_pos - 1}.")
    with c3:
        base = st.number_input("Sinusoid base", value=10000.0, step=1000.0, key="pos_base", persist_state="session",
                               help="10000 in the paper: the longest wavelength is 2π · base. Must be above 1.")

    def shown(start: int, stop: int, base: float) -> views.Positions:
        """The view of the range and base asked for, or, with a warning, of the nearest ones that fit."""
        try:
            return views.positions(lm.source, start, stop, base)
        except positional.PositionRangeError as exc:
            shown_start = min(max(start, 0), n_pos - 1)
            shown_stop = min(max(stop, shown_start + 1), n_pos)
            st.warning(f"{exc} Showing positions {shown_start} to {shown_stop - 1} instead.",
                       icon=":material/straighten:")
            return shown(shown_start, shown_stop, base)
        except views.BaseError as exc:
            st.warning(f"{exc} Using 10000, as in the paper.", icon=":material/straighten:")
            return shown(start, stop, 10000.0)

    result = shown(int(start), int(end) + 1, float(base))
    start, stop, base = result.start, result.stop, result.base
    lv, sv = result.learned, result.sinusoidal
    as_code.expander("positions", "Positional embeddings", snippet(
        "Positional embeddings: cosine similarity between positions", views.positions, (lm.source, start, stop, base),
        draw=[(views.cosine_figure, {})]), result)
    titles = views.titles(result)
    st.caption(f"Positions {start} to {stop - 1} ({stop - start} of this model's {n_pos}), {hidden} dimensions.")

    tab_values, tab_cos, tab_pca, tab_offset, tab_reg = st.tabs(
        ["Values", "Cosine similarity", "PCA path", "Similarity vs offset", "Linear read-out"])
    with tab_values:
        st.caption("Each row is one position's vector (red positive, blue negative). The sinusoids' left columns "
                   "oscillate fast and the right ones slowly; a learned table has no imposed pattern, but training "
                   "often gives it smooth waves too. Each panel has its own colour range, up to its 99th percentile "
                   "(learned values are much smaller, with a few outlier dimensions that saturate).")
        widgets.plotly_chart(pos_figures.compare_tables(lv.table, sv.table, start, titles), key="pos_tables")
    with tab_cos:
        st.caption("Cosine similarity of every pair of positions. A bright band along the diagonal means nearby "
                   "positions have similar vectors, so the model can tell near from far.")
        widgets.plotly_chart(views.cosine_figure(result), key="pos_cosine")
    with tab_pca:
        st.caption("Each position's vector projected on the two directions of largest variance (PCA), joined in "
                   "order and coloured from first (dark) to last (yellow). A smooth curve means position varies "
                   "smoothly; the axis titles say how much of the variance the plane keeps. In trained BERTs "
                   "position 0, where [CLS] always sits, often lies far from all the others.")
        if stop - start < 3:
            st.info("Choose at least 3 positions for a meaningful path.", icon=":material/info:")
        widgets.plotly_chart(pos_figures.compare_pca(lv.pca.coords, sv.pca.coords, start,
                                                [lv.pca.explained, sv.pca.explained], titles), key="pos_pca")
    with tab_offset:
        if stop - start < 2:
            st.info("Choose at least 2 positions to compare offsets.", icon=":material/info:")
        else:
            max_off = min(views.MAX_OFFSET, stop - start - 1)
            st.caption(f"Mean cosine similarity between positions 1 to {max_off} apart. For sinusoids it depends only "
                       "on the offset (their dot product is a sum of cos(offset · frequency)).")
            widgets.plotly_chart(pos_figures.offset_similarity(*result.offsets, titles), key="pos_offset")
    with tab_reg:
        st.markdown("Does a position's vector *encode its index linearly*? Wang & Chen 2020 (*What do position "
                    "embeddings learn?*, EMNLP, Table 1) fit a linear regression from each vector of the **whole** "
                    "table to its position, 5-fold cross-validated, and report the mean absolute error of the held-"
                    "out predictions: sinusoids are read out almost exactly, bert-base's learned table poorly (tens "
                    "of positions). The same test on this model (all its positions, whatever the range chosen above):")
        try:
            reg = heavy.run_view(views.regression, "the position regression (5-fold, both tables)", lm.source)
        except ValueError as exc:
            widgets.show_error(exc, "Cannot fit the regression")
        else:
            c1, c2 = st.columns(2)
            c1.metric("Learned table: mean absolute error", f"{reg.mae['learned']:.1f} positions")
            c2.metric("Sinusoidal table: mean absolute error", f"{reg.mae['sinusoidal']:.1f} positions")
            widgets.plotly_chart(finding_figures.position_regression_figure(reg.predictions, reg.mae),
                                 key="pos_regression")
            st.caption("Each dot is one position, predicted by a regression that never saw it. The **Findings** page "
                       "puts this number beside the other published measures.")

panels.rotary_section(lm)
