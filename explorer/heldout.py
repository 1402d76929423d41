"""The held-out evaluation set of the analyses that read many segments (Findings, syntax heads, probes, the
Evolution page's per-checkpoint summaries) and the results computed on it, kept per process.

Segments are the held-out BBC documents (never trained on) packed by
:func:`bertcore.analysis.papers.evalset.build_segments`,
cached per tokenizer; results live in one store (at most 8, the oldest dropped) so that a progress bar can be shown
on the first computation only.
"""

from __future__ import annotations

import streamlit as st

from bertcore.analysis import shipped
from bertcore.loading.sources import LoadedModel, ModelSource, load


@st.cache_resource(show_spinner=False)
def _findings_store() -> dict:
    """Process-wide store of Findings results: ``{(key, n_segments): FindingsResult}`` plus a lock."""
    import threading

    return {"lock": threading.Lock(), "results": {}}


@st.cache_resource(show_spinner="Reading the held-out BBC documents ...", max_entries=4)
def findings_segments(tokenizer_key: tuple[str, ...], n_segments: int, max_tokens: int,
                      _loaded: LoadedModel) -> list:
    """:func:`bertcore.analysis.papers.evalset.build_segments` over the held-out BBC documents (seed 0),
    cached per tokenizer (``tokenizer_key``: :func:`explorer.resources.source_key` of the model that owns it)."""
    from bertcore.analysis.papers import evalset

    return evalset.build_segments(_loaded.tokenizer, evalset.heldout_documents(), n_segments, max_tokens)


def findings_cached(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel | None = None):
    """The kept :class:`~bertcore.analysis.papers.evalset.FindingsResult` of ``(key, n_segments)``, or the one shipped
    beside ``_loaded`` (:mod:`bertcore.analysis.shipped`; then kept too), or None: the page then shows a progress
    bar while :func:`findings` computes it."""
    return _cached(("findings", key, n_segments), _loaded, lambda: _findings(key, n_segments, _loaded))


def syntax_cached(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel):
    """:func:`syntax_heads` when it is kept or shipped (no computation), else None."""
    return _cached(("syntax", key, n_segments), _loaded, lambda: _syntax(key, n_segments, _loaded))


def probes_cached(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel):
    """:func:`probes` when it is kept or shipped (no computation), else None."""
    return _cached(("probes", key, n_segments), _loaded, lambda: _probes(key, n_segments, _loaded))


def _cached(store_key: tuple, loaded: LoadedModel | None, computation):
    store = _findings_store()
    with store["lock"]:
        if store_key in store["results"]:
            return store["results"][store_key]
    if loaded is None:
        return None
    value = shipped.shipped(loaded, computation())
    if value is not None:
        _kept(store_key, lambda: value)
    return value


def _segments_of(key: tuple[str, ...], loaded: LoadedModel):
    return lambda n, max_tokens: findings_segments(key, n, max_tokens, loaded)


def _findings(key, n_segments, loaded):
    return shipped.findings(loaded, n_segments, _segments_of(key, loaded))


def _syntax(key, n_segments, loaded):
    return shipped.syntax(loaded, n_segments, _segments_of(key, loaded))


def _probes(key, n_segments, loaded):
    return shipped.probes(loaded, n_segments, lambda n: syntax_heads(key, n, loaded).segments)


def findings(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel, progress=None):
    """:func:`bertcore.analysis.papers.evalset.run_findings` of ``_loaded`` on ``n_segments`` held-out segments
    (or the result shipped beside the model, :mod:`bertcore.analysis.shipped`), computed once per process and
    kept (at most 8 results; the oldest is dropped).

    Not an ``st.cache_*`` function on purpose: ``progress(done, total)`` drives a progress bar in the
    page, which a cached function would replay on every later hit.

    Raises:
        bertcore.data.DataError: the packaged BBC corpus is missing; ValueError: no segment.
    """
    return _kept(("findings", key, n_segments), lambda: shipped.get(_loaded, _findings(key, n_segments, _loaded),
                                                                     progress))


def _kept(store_key: tuple, compute):
    """The store's result under ``store_key``, computed by ``compute()`` under the store's lock the first time and
    kept (at most 8 results in the store; the oldest is dropped)."""
    store = _findings_store()
    with store["lock"]:
        results = store["results"]
        if store_key not in results:
            results[store_key] = compute()
            while len(results) > 8:
                results.pop(next(iter(results)))
        return results[store_key]


def syntax_heads(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel, progress=None):
    """:func:`bertcore.analysis.representations.syntax.run_syntax` on the Findings page's held-out segments (or the
    shipped result), computed once per process per ``(key, n_segments)`` and kept beside the Findings results
    (same store, same limit).

    Raises:
        bertcore.analysis.representations.syntax.SyntaxUnavailable: no spaCy; ValueError: too few arcs.
    """
    return _kept(("syntax", key, n_segments), lambda: shipped.get(_loaded, _syntax(key, n_segments, _loaded),
                                                                   progress))


def probes(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel, progress=None) -> dict:
    """Probing classifiers (:func:`bertcore.analysis.representations.probes.probe_all`, POS and dependency label) on
    the parsed segments of :func:`syntax_heads` (or the shipped result), kept in the same store. Raises as
    :func:`syntax_heads`."""
    found = probes_cached(key, n_segments, _loaded)
    if found is not None:
        return found
    run = syntax_heads(key, n_segments, _loaded)  # outside the store's lock (it takes it itself)
    computation = shipped.probes(_loaded, n_segments, lambda n: run.segments)
    return _kept(("probes", key, n_segments), lambda: computation.compute(progress))


@st.cache_data(show_spinner=False, max_entries=64)
def checkpoint_summary(folder: str, stamp: str, run_key: str, n_segments: int, max_tokens: int) -> dict[str, float]:
    """:func:`bertcore.analysis.papers.emergence.summary` of one run checkpoint on ``n_segments`` held-out segments
    of at most ``max_tokens`` tokens (the model is loaded, run and dropped, not kept). The segments are keyed
    on ``run_key`` (the run folder) and the tokenizer's vocabulary; ``stamp``
    (:func:`bertcore.loading.sources.files_stamp`)
    keys the cache only.
    """
    from bertcore.analysis.papers import emergence, evalset

    loaded = load(ModelSource("run", folder))
    limit = min(max_tokens, evalset.MAX_TOKENS, loaded.max_length)
    from bertcore.data.corpora import tokenizer_fingerprint

    # the segments depend on the tokenizer only: keyed on its vocabulary, so a run folder reused by a run with
    # another vocabulary gets its own segments, and every checkpoint of one run shares them
    segments = findings_segments(("run-tokenizer", run_key, tokenizer_fingerprint(loaded.tokenizer)), n_segments,
                                 limit, loaded)
    out = emergence.summary(evalset.run_findings(loaded.encoder, loaded.tokenizer, segments))
    # Chen et al. 2023: the best head's unlabelled attachment score against spaCy's parses (NaN without spaCy)
    from bertcore.analysis.representations import syntax

    try:
        run = syntax.run_syntax(loaded.encoder, loaded.tokenizer, segments, min_count=1)
        out["syntax_uas"] = float(run.heads.uas.max())
    except (syntax.SyntaxUnavailable, ValueError):
        out["syntax_uas"] = float("nan")
    return out
