"""BERT Explorer: run with ``streamlit run app.py``.

The shared sidebar (model picker) is drawn here; each page lives in ``explorer/app_pages/``.
Add a page with one ``page(...)`` line in its PAGES section (the sidebar shows the sections, all expanded).
"""

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import streamlit as st  # noqa: E402

from explorer.server import heavy  # noqa: E402
from explorer.server import share  # noqa: E402
from explorer.server import shared_mode  # noqa: E402
from explorer.tour import banner as tour  # noqa: E402
from explorer.server import warmup  # noqa: E402
from explorer import widgets  # noqa: E402

st.set_page_config(page_title="BERT Explorer", page_icon=":material/hub:", layout="wide")
# BERT_EXPLORER_SHARED: a server for others (explorer/server/shared_mode.py); stops on a bad config
SERVER = shared_mode.guard()
# BERT_EXPLORER_DEVICE (or the operator's device): where models load and views compute; stops on a bad one
widgets.use_device(SERVER.device)
heavy.limit_threads()  # the server's torch threads, before any page computes (explorer/server/heavy.py: measured)

FILES: dict[str, str] = {}  # page title -> file stem (the tour's banner needs to know which page is open)


def page(file: str, title: str, icon: str, **kwargs) -> st.Page:
    FILES[title] = file
    return st.Page(f"explorer/app_pages/{file}.py", title=title, icon=f":material/{icon}:", **kwargs)


# Sections follow a first visit: the guided tour and the overview, what BERT reads, what it computes, its two
# training tasks, what the papers measured, and training your own. The Overview stays the default page (a shared
# link to "/" keeps opening it); its first lines send a new user to "Start here".
PAGES = {
    "Start": [page("tour", "Start here: guided tour", "tour"), page("overview", "Overview", "home", default=True)],
    "Inside BERT": [
        page("tokenization", "Tokenization", "text_fields"),
        page("embeddings", "Embeddings", "stacks"),
        page("positions", "Positional embeddings", "linear_scale"),
        page("attention", "Attention", "grid_on"),
        page("anatomy", "Model anatomy", "account_tree"),
        page("forward_pass", "One forward pass", "calculate"),
    ],
    "BERT's tasks": [
        page("masking", "Masking", "visibility_off"),
        page("next_sentence", "Next sentence", "low_priority"),
    ],
    "Analyses": [
        page("word_senses", "Word senses", "scatter_plot"),
        page("grammar", "Grammar", "spellcheck"),
        page("findings", "Findings", "fact_check"),
        page("ablation", "Head ablation", "content_cut"),
        page("attribution", "Attribution", "insights"),
        page("patching", "Activation patching", "swap_calls"),
        page("query_key", "Query-key map", "scatter_plot"),
        page("features", "Features (SAEs)", "category"),
        page("circuits", "Circuits", "hub"),
        page("corpus_search", "Corpus search", "manage_search"),
        page("projector", "Embedding projector", "bubble_chart"),
        page("compare", "Compare models", "compare_arrows"),
    ],
    "Train your own": [
        page("train", "Train", "model_training"),
        page("evolution", "Evolution", "timeline"),
    ],
}

pg = st.navigation(PAGES, expanded=True)
share.model_from_url(widgets.use_source, widgets.current_source)  # a shared link's model, before the sidebar
widgets.model_picker()
widgets.export_picker()
tour.banner(FILES[pg.title])  # the tour's panel above the page, when a tour is under way
pg.run()
warmup.start()  # once per server, after its first page: imports and loads the other pages need
