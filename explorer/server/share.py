"""Shareable views: the model and each page's main controls live in the URL's query string
(``st.query_params``), so a copied link reopens the same view (exBERT keeps its view in the URL too).

The page is already in the URL path (``st.navigation``). :func:`model_from_url` (called by ``app.py`` before
the sidebar is drawn) and :func:`shareable` (called by a page before its widgets) read the parameters on the
first run of a session, and write the current values back on every run. A parameter that does not parse, is out
of range or names a model that does not load is ignored, with a notice: the view falls back to its default.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from bertcore.loading.sources import DEFAULT, PACKAGED_SOURCES, ModelSource

MAX_URL_TEXT = 1000  # longer texts are not put in the URL (browsers cut URLs of a few thousand characters)
MODEL_PARAM = "model"
_APPLIED = "_share_applied"


# ----------------------------------------------------------------------------- parsers (str -> value or ValueError)
def text(value: str) -> str:
    if len(value) > 20_000:
        raise ValueError("too long")
    return value


def integer(lo: int, hi: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        n = int(value)
        if not lo <= n <= hi:
            raise ValueError(f"outside {lo}..{hi}")
        return n
    return parse


def number(lo: float, hi: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        x = float(value)
        if not lo <= x <= hi:
            raise ValueError(f"outside {lo}..{hi}")
        return x
    return parse


def boolean(value: str) -> bool:
    if value.lower() in ("1", "true"):
        return True
    if value.lower() in ("0", "false"):
        return False
    raise ValueError("not 0/1")


def url_value(value) -> str | None:
    """``value`` as a query-string value (bools as 1/0), or None when it does not go into a URL (not a bool, int,
    float or str, or a text longer than :data:`MAX_URL_TEXT`)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        s = str(value)
        return s if len(s) <= MAX_URL_TEXT else None
    return None


def first_run(token: str) -> bool:
    """True the first time ``token`` is asked about in this session (then False): when a link's parameters apply."""
    applied = st.session_state.setdefault(_APPLIED, set())
    if token in applied:
        return False
    applied.add(token)
    return True


def shareable(spec: dict[str, Callable[[str], object]]) -> list[str]:
    """Keep the session keys of ``spec`` (key -> parser) in the URL. On the first run of this page in a session,
    valid URL values are put into ``st.session_state`` (before the widgets exist), invalid ones are ignored
    with an ``st.info`` notice; then the current values are written to the URL. Returns the ignored names."""
    ignored = []
    if first_run("page:" + ",".join(sorted(spec))):
        for key, parse in spec.items():
            if key not in st.query_params:
                continue
            try:
                st.session_state[key] = parse(st.query_params[key])
            except (ValueError, TypeError):
                ignored.append(key)
        if ignored:
            st.info("This link's " + ", ".join(f"`{k}`" for k in ignored) + " could not be used (a stale or "
                    "edited link?): the page's defaults are shown instead.", icon=":material/link_off:")
    sync(spec)
    return ignored


def sync(keys) -> None:
    """Write the current values of the session keys ``keys`` to the URL (a key without a value, or one too long
    for a URL, is removed). :func:`shareable` calls it; a fragment whose widgets were declared shareable at the top
    of the page calls it alone, so its own reruns keep the URL current."""
    for key in keys:
        value = url_value(st.session_state.get(key)) if key in st.session_state else None
        if value is None:
            st.query_params.pop(key, None)
        elif st.query_params.get(key) != value:
            st.query_params[key] = value


def source_param(source: ModelSource) -> str | None:
    """``kind:ref`` of a model source, None for the default model (a clean URL)."""
    return None if source == DEFAULT else f"{source.kind}:{source.ref}"


def parse_source(value: str) -> ModelSource:
    """``kind:ref`` -> a :class:`ModelSource` (packaged ones by their ref). Raises ValueError."""
    kind, sep, ref = value.partition(":")
    if not sep or kind not in ("packaged", "local", "hub", "run"):
        raise ValueError(f"not a model: {value!r}")
    if kind == "packaged":
        match = [s for s in PACKAGED_SOURCES if s.ref == ref]
        if not match:
            raise ValueError(f"no packaged model {ref!r}")
        return match[0]
    if not ref.strip():
        raise ValueError("empty model reference")
    return ModelSource(kind, ref, ref)  # type: ignore[arg-type]


def model_from_url(use_source: Callable[[ModelSource], bool], current: Callable[[], ModelSource]) -> None:
    """The ``model`` parameter: on a session's first run, switch to it (``use_source``, which loads it and sets the
    sidebar's widgets; a model that does not load keeps the default and the sidebar says why); on every run,
    write the model in use back (nothing for the default)."""
    if first_run("model") and MODEL_PARAM in st.query_params:
        try:
            source = parse_source(st.query_params[MODEL_PARAM])
        except ValueError as exc:
            st.sidebar.info(f"This link's model could not be used ({exc}): the default model is shown.",
                            icon=":material/link_off:")
        else:
            if source != current() and not use_source(source):
                st.sidebar.info("This link's model could not be loaded: the default model is shown.",
                                icon=":material/link_off:")
    param = source_param(current())
    if param is None:
        st.query_params.pop(MODEL_PARAM, None)
    elif st.query_params.get(MODEL_PARAM) != param:
        st.query_params[MODEL_PARAM] = param
