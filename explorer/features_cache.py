"""Cached SAE resources of the Features page: the SAE objects and their stored indexes (``st.cache_resource``,
shared read-only by every session, keyed by the files' sizes and modification times so a rewritten SAE is
re-read)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertcore.sae import explore
from bertcore.sae import features as sae_features
from bertcore.sae import io as sae_io
from bertcore.sae.report import QUICK_SENTENCES, SHIPPED_SENTENCES, feature_params
from bertcore.loading.sources import LoadedModel


def stamp(folder: str | Path) -> tuple:
    """Sizes and modification times of an SAE folder's files (part of every cache key below)."""
    out = []
    for name in (sae_io.CFG_FILE, sae_io.WEIGHTS_FILE, sae_features.FILE_NAME):
        p = Path(folder) / name
        out.append((name, p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (name, None, None))
    return tuple(out)


@st.cache_resource(show_spinner="Loading the SAE ...", max_entries=8)
def load_sae(folder: str, file_stamp: tuple):
    """``(sae, cfg)`` of an SAE folder (raises :class:`bertcore.sae.io.SAEError`)."""
    return sae_io.load(folder)


@st.cache_resource(show_spinner="Reading the stored top contexts ...", max_entries=8)
def stored_index(folder: str, model_folder: str, layer: int, file_stamp: tuple):
    """The SAE's ``features.npz`` if it belongs to these files: the shipped size first, then the page's quick one
    (``layer``: the 0-based block the SAE reads, ``cfg["layer"]``)."""
    for n in (SHIPPED_SENTENCES, QUICK_SENTENCES):
        index = sae_features.read(folder, model_folder, feature_params(layer, n))
        if index is not None:
            return index
    return None


@st.cache_resource(show_spinner=False, max_entries=16, ttl="1h")
def text_features(key: tuple, folder: str, file_stamp: tuple, layer: int, text: str, _lm: LoadedModel, _sae):
    """The SAE's activations on each token of ``text`` (:func:`bertcore.sae.explore.text_features`)."""
    return explore.text_features(_lm.model, _lm.tokenizer, _sae, layer, text, max_length=_lm.max_length)
