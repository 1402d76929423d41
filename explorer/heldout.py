"""The held-out evaluation set of the analyses that read many segments (Findings, syntax heads, probes, the
Evolution page's per-checkpoint summaries) and the results computed on it, kept per process.

Segments are the held-out BBC documents (never trained on) packed by
:func:`bertcore.analysis.papers.evalset.build_segments`,
cached per tokenizer; results live in one store (at most 8, the oldest dropped) so that a progress bar can be shown
on the first computation only.
"""

from __future__ import annotations

import streamlit as st

from bertcore.sources import LoadedModel, ModelSource, load


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


def findings_cached(key: tuple[str, ...], n_segments: int):
    """The cached :class:`~bertcore.analysis.papers.evalset.FindingsResult` of ``(key, n_segments)``, or None."""
    return _findings_store()["results"].get((key, n_segments))


def findings(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel, progress=None):
    """:func:`bertcore.analysis.papers.evalset.run_findings` of ``_loaded`` on ``n_segments`` held-out segments,
    computed once per process and kept (at most 8 results; the oldest is dropped).

    Not an ``st.cache_*`` function on purpose: ``progress(done, total)`` drives a progress bar in the
    page, which a cached function would replay on every later hit.

    Raises:
        bertcore.data.DataError: the packaged BBC corpus is missing; ValueError: no segment.
    """
    from bertcore.analysis.papers import evalset

    def compute():
        segments = findings_segments(key, n_segments, min(evalset.MAX_TOKENS, _loaded.max_length), _loaded)
        return evalset.run_findings(_loaded.encoder, _loaded.tokenizer, segments, progress=progress)

    return _kept((key, n_segments), compute)


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
    """:func:`bertcore.analysis.representations.syntax.run_syntax` on the Findings page's held-out segments, computed
    once per
    process per ``(key, n_segments)`` and kept beside the Findings results (same store, same limit).

    Raises:
        bertcore.analysis.representations.syntax.SyntaxUnavailable: no spaCy; ValueError: too few arcs.
    """
    from bertcore.analysis.papers import evalset
    from bertcore.analysis.representations import syntax

    def compute():
        segments = findings_segments(key, n_segments, min(evalset.MAX_TOKENS, _loaded.max_length), _loaded)
        return syntax.run_syntax(_loaded.encoder, _loaded.tokenizer, segments, progress=progress, with_probe=True)

    return _kept(("syntax", key, n_segments), compute)


def probes(key: tuple[str, ...], n_segments: int, _loaded: LoadedModel, progress=None) -> dict:
    """Probing classifiers (:func:`bertcore.analysis.representations.probes.probe`, POS and dependency label) on the
    parsed
    segments of :func:`syntax_heads`, kept in the same store. Raises as :func:`syntax_heads`."""
    from bertcore.analysis.representations import probes as probes_mod

    run = syntax_heads(key, n_segments, _loaded)  # outside the store's lock (it takes it itself)

    def compute():
        feats = probes_mod.word_features(_loaded.encoder, _loaded.tokenizer, run.segments)
        return {task: probes_mod.probe(feats, task, progress=None if progress is None else (
            lambda done, n, i=i: progress(i * n + done, n * len(probes_mod.TASKS))))
            for i, task in enumerate(probes_mod.TASKS)}

    return _kept(("probes", key, n_segments), compute)


@st.cache_data(show_spinner=False, max_entries=64)
def checkpoint_summary(folder: str, stamp: str, run_key: str, n_segments: int, max_tokens: int) -> dict[str, float]:
    """:func:`bertcore.analysis.papers.emergence.summary` of one run checkpoint on ``n_segments`` held-out segments
    of at most ``max_tokens`` tokens (the model is loaded, run and dropped, not kept). The segments are keyed
    on ``run_key`` (the run folder) and the tokenizer's vocabulary; ``stamp`` (:func:`bertcore.sources.files_stamp`)
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
