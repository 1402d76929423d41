"""Findings: published analyses of BERT recomputed on the selected model, beside the published numbers.

Widgets -> ``explorer.views.findings`` (held-out BBC segments, one forward each, cached server-wide) -> the table
and ``explorer.panels.findings``' tabs. Keys start with ``find_``.
"""

import time

import pandas as pd
import streamlit as st

from bertcore import runs
from bertcore.analysis.papers import evalset, published
from bertcore.data import DataError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import PACKAGED_MLM
from explorer import as_code, widgets
from explorer.panels import findings as panels
from explorer.server import heavy, share
from explorer.views import findings as views
from explorer.views.code import snippet

COLUMNS = {"measure": "Measure", "ours": "This model", "published": "bert-base (published)", "source": "Source"}

st.title("Findings: does this model agree with the papers?")
st.markdown(
    "Analyses that made BERT's inner workings famous, recomputed on the model chosen in the sidebar over a fixed "
    "evaluation set: segments of the packaged **BBC News** articles that pretraining here holds out (never trained "
    "on), each `[CLS] part 1 [SEP] part 2 [SEP]` of at most 128 tokens, as in Clark et al. 2019. Our number "
    "stands beside the published one and its source."
)

lm = widgets.current_model()
config = lm.config
source = lm.source
if published.comparable(config):
    st.success("This model has bert-base's shape (12 layers x 12 heads): the columns compare directly "
               "(the text differs: BBC News here, Wikipedia in Clark et al.).", icon=":material/check:")
else:
    diffs = "; ".join(published.differences(config))
    if source == PACKAGED_MLM:
        training = ("MiniLM-MLM is all-MiniLM-L6-v2 (a 6-layer MiniLM distilled from a larger BERT-style model and "
                    "fine-tuned for sentence embeddings) with MLM and NSP heads, trained further in this project with "
                    "BERT's own objectives on news, encyclopedic and everyday English (about 4M words; its model card "
                    "lists the corpora), including the BBC training articles but never the held-out ones used here. "
                    "A short MLM training on top of a sentence-embedding model: expect some of bert-base's attention "
                    "habits, weaker or moved.")
    elif source.kind == "packaged":
        training = ("all-MiniLM-L6-v2 is a 6-layer MiniLM (distilled from a larger BERT-style model), then fine-tuned "
                    "for sentence embeddings with a contrastive objective on ~1B sentence pairs, with no MLM or NSP "
                    "head: expect the attention habits of MLM pretraining to be weaker or moved.")
    elif source.kind == "run":
        step = runs.checkpoint_step(lm.path)
        training = (f"This is a checkpoint of a run trained here (step {step}); at step 0 it is a random "
                    "initialisation, so no published pattern is expected yet." if step is not None
                    else "This is a checkpoint of a run trained here.")
    else:
        training = "Its training may differ from bert-base's (MLM + NSP on books and Wikipedia)."
    lo, hi = published.relative_layers(5, 9, config.num_hidden_layers)  # 0-based blocks: bert-base's layers 6-10
    st.info(f"The papers measured bert-base. This model differs: {diffs}. {training} Layer ranges are mapped to "
            f"the same relative depth (bert-base's layers 6-10 of 12 are layers {widgets.layer_number(lo)}-"
            f"{widgets.layer_number(hi)} of "
            f"{config.num_hidden_layers} here).", icon=":material/info:")

share.shareable({"find_segments": share.integer(10, 300)})
n_segments = int(st.number_input(
    "Segments in the evaluation set", min_value=10, max_value=300, value=evalset.DEFAULT_SEGMENTS, step=10,
    key="find_segments", help="More segments give steadier numbers but take longer the first time (about 0.15 s "
                              "per segment for the MiniLM on one CPU thread); results are kept afterwards."))
try:
    first = views.measures.cached(source, n_segments) is None and views.shipped_measures(source, n_segments) is None
    t0 = time.perf_counter()
    result = heavy.run_view(views.measures, f"the measures on {n_segments} held-out segments", source, n_segments)
    if first:
        st.caption(f"First computation: {time.perf_counter() - t0:.1f} s (kept for this session and others).")
    regression = heavy.run_view(views.position_regression, "the position regression", source)
    table = views.table(source, n_segments)
except DataError as exc:
    st.error("Cannot build the evaluation set: " + widgets.escape_md(str(exc)), icon=":material/error:")
    st.stop()
except (ValueError, InputError) as exc:
    widgets.show_error(exc, "Cannot run the model on the evaluation set")
    st.stop()
st.caption(f"{result.n_segments} segments, {result.n_tokens:,} tokens, {result.info.get('sentences', 0)} sentences; "
           f"the forward passes took {result.seconds:.1f} s when first computed.")

st.subheader("Ours beside the papers")
st.table(pd.DataFrame(table.rows).rename(columns=COLUMNS))
as_code.expander("findings", "Findings", snippet("Findings: the papers' measures beside ours", views.table,
                                                 (source, n_segments), draw=[(views.tokens_figure, {})]), table)
with st.expander("The papers"):
    for paper in (published.CLARK, published.KOVALEVA, published.ETHAYARAJH, published.WANG_CHEN):
        st.markdown(f"- {paper.short}, *{paper.title}*, {paper.venue}. {paper.url}")


panels.tabs(panels.Page(lm, n_segments, result, regression))
