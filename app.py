"""BERT Explorer: run with ``streamlit run app.py``.

The shared sidebar (model picker) is drawn here; each page lives in ``explorer/app_pages/``.
Add a page with one ``st.Page(...)`` line in PAGES.
"""

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import streamlit as st  # noqa: E402

from explorer import widgets  # noqa: E402

st.set_page_config(page_title="BERT Explorer", page_icon=":material/hub:", layout="wide")

PAGES = [
    st.Page("explorer/app_pages/overview.py", title="Overview", icon=":material/home:", default=True),
    st.Page("explorer/app_pages/tokenization.py", title="Tokenization", icon=":material/text_fields:"),
    st.Page("explorer/app_pages/attention.py", title="Attention", icon=":material/grid_on:"),
    st.Page("explorer/app_pages/ablation.py", title="Head ablation", icon=":material/content_cut:"),
    st.Page("explorer/app_pages/word_senses.py", title="Word senses", icon=":material/scatter_plot:"),
    st.Page("explorer/app_pages/masking.py", title="Masking", icon=":material/visibility_off:"),
    st.Page("explorer/app_pages/next_sentence.py", title="Next sentence", icon=":material/low_priority:"),
    st.Page("explorer/app_pages/embeddings.py", title="Embeddings", icon=":material/stacks:"),
    st.Page("explorer/app_pages/positions.py", title="Positional embeddings", icon=":material/linear_scale:"),
    st.Page("explorer/app_pages/anatomy.py", title="Model anatomy", icon=":material/account_tree:"),
    st.Page("explorer/app_pages/train.py", title="Train", icon=":material/model_training:"),
    st.Page("explorer/app_pages/evolution.py", title="Evolution", icon=":material/timeline:"),
    st.Page("explorer/app_pages/findings.py", title="Findings", icon=":material/fact_check:"),
]

pg = st.navigation(PAGES)
widgets.model_picker()
widgets.export_picker()
pg.run()
