"""The UI's cached resources: the model of a source (from the one model cache of :mod:`explorer.views.core`, with a
spinner) and a corpus split into sentences. Every computation a page shows is a view (:mod:`explorer.views`),
cached there; :func:`source_key` is the key of a model's files.
"""

from __future__ import annotations

import streamlit as st

from bertcore.loading.sources import LoadedModel, ModelSource
from explorer.views import core as views_core
from explorer.views.core import source_key

__all__ = ["corpus_sentences", "load_model", "source_key"]


def load_model(source: ModelSource) -> LoadedModel:
    """The model of ``source`` from the server's one model cache (:func:`explorer.views.core.load`: once per
    process per version of its files, shared by every session and view; never mutate it), with a spinner while it
    loads.

    Raises:
        bertcore.loading.sources.SourceError: the model cannot be found or read (not cached: a later
            call tries again).
    """
    with st.spinner("Loading the model ...", show_time=True):
        return views_core.load(source)


@st.cache_resource(show_spinner="Reading and splitting the corpus into sentences ...", max_entries=2)
def corpus_sentences(corpus: str = "bbc") -> list[list[str]]:
    """Each document of a pretraining corpus as its list of sentences (NLTK Punkt), read once per process."""
    from bertcore import data

    return [data.split_sentences(text) for text in data.load_documents(corpus)["text"]]
