"""The model every page reads: the sidebar's model picker and the session state that holds the choice
(``model_*`` keys)."""

from __future__ import annotations

import streamlit as st

from bertcore.device import DeviceError
from bertcore.modeling.checkpoint import CheckpointError
from bertcore.modeling.config import ConfigError
from bertcore.loading.sources import DEFAULT, PACKAGED_SOURCES, LoadedModel, ModelSource, SourceError, list_run_sources

from .. import resources
from ..server import shared_mode
from .messages import escape_md, show_error


SOURCE_KEY = "model_source"  # the ModelSource every page uses
ERROR_KEY = "model_error"  # message of the last failed load (shown in the sidebar)
PACKAGED_KEY = "model_packaged"  # ref of the chosen packaged model ('' MiniLM, 'mlm' the fill-mask model)
KINDS = {
    "packaged": "Packaged with the app (offline)",
    "local": "Local Hugging Face folder",
    "hub": "Hugging Face Hub id",
    "run": "Checkpoint of a training run",
}
SERVER_KIND = "server"  # shared mode: the folders the operator lists (explorer.server.shared_mode), by label
SERVER_LABEL = "Listed by this server's operator"


def picker_kinds(settings: shared_mode.Settings | None = None) -> dict[str, str]:
    """The model picker's sources: :data:`KINDS` for a single user; on a shared server (``explorer.server.shared_mode``)
    the packaged models, the operator's folders (if any), run checkpoints, and the hub only if the operator
    allows it (no typed folder path)."""
    s = shared_mode.settings() if settings is None else settings
    if not s.enabled:
        return KINDS
    kinds = {"packaged": KINDS["packaged"]}
    if s.models:
        kinds[SERVER_KIND] = SERVER_LABEL
    kinds["run"] = KINDS["run"]
    if s.allow_hub:
        kinds["hub"] = KINDS["hub"]
    return kinds


def source_refusal(source: ModelSource) -> str | None:
    """Why this session may not load ``source`` (shared mode: a typed path, a hub id without the operator's
    leave), or None. :func:`explorer.server.shared_mode.source_refusal` with this server's run checkpoints."""
    s = shared_mode.settings()
    if not s.enabled or source.kind in ("packaged", "hub", "local"):
        return shared_mode.source_refusal(source.kind, source.ref, s=s)
    return shared_mode.source_refusal(source.kind, source.ref, {r.ref for r in list_run_sources()}, s)


def _listed(source: ModelSource) -> ModelSource:
    """Shared mode: an operator's folder under its label (a link gives only the path)."""
    s = shared_mode.settings()
    label = s.label_of(source.ref) if s.enabled and source.kind == "local" else None
    return ModelSource("local", s.folders[label], label) if label is not None else source


# ----------------------------------------------------------------------------- model
def use_device(name: str | None = None) -> None:
    """For ``app.py``, before any page: where models load and views compute (``name``: the shared-server
    operator's device; else ``BERT_EXPLORER_DEVICE``, :func:`explorer.views.core.choose_device`). A device that is
    not here stops every page with an ``st.error`` saying why (never a traceback)."""
    try:
        resources.views_core.choose_device(name)
    except DeviceError as exc:
        st.error(f"The server's device setting is unusable, so this server shows no page: {escape_md(str(exc))}",
                 icon=":material/error:")
        st.stop()


def current_source() -> ModelSource:
    """The model source chosen in the sidebar (the packaged MiniLM-MLM until the user picks another)."""
    return st.session_state.get(SOURCE_KEY, DEFAULT)


def current_model() -> LoadedModel:
    """The loaded model of the sidebar's choice; on failure shows ``st.error`` and ``st.stop()``s."""
    source = current_source()
    refusal = source_refusal(source)
    if refusal is not None:  # never reached through the picker; a session state set some other way
        st.error(escape_md(refusal), icon=":material/block:")
        st.stop()
    try:
        return resources.load_model(source)
    except (SourceError, CheckpointError, ConfigError) as exc:
        show_error(exc, f"Cannot load {source.name}")
        st.info("Pick another model in the sidebar (the packaged MiniLM always works offline).")
        st.stop()
        raise  # unreachable: st.stop() raises


def _use(source: ModelSource, source_key: str = SOURCE_KEY, error_key: str = ERROR_KEY) -> None:
    """Try to load ``source``; store it in ``st.session_state[source_key]`` only if that works
    (else the reason goes to ``st.session_state[error_key]``). On a shared server a source the visitor may not
    open (:func:`source_refusal`) is refused before anything is read."""
    source = _listed(source)
    refusal = source_refusal(source)
    if refusal is not None:
        st.session_state[error_key] = f"Cannot load {source.name}: {refusal}"
        return
    try:
        resources.load_model(source)
    except (SourceError, CheckpointError, ConfigError) as exc:
        st.session_state[error_key] = f"Cannot load {source.name}: {exc}"
        return
    except Exception as exc:  # noqa: BLE001 - a user-chosen folder can fail in any library; say so, keep the app
        st.session_state[error_key] = f"Cannot load {source.name}: unexpected {type(exc).__name__}: {exc}"
        return
    st.session_state[source_key] = source
    st.session_state.pop(error_key, None)


def source_picker(where, prefix: str, source_key: str, error_key: str, default: ModelSource = DEFAULT) -> ModelSource:
    """Choose a model source (packaged, local folder, hub id, run checkpoint) inside ``where``
    (``st.sidebar`` or a container); widget keys start with ``prefix``.

    The choice, kept in ``st.session_state[source_key]``, changes only when the new model loads;
    a failure keeps the previous one and shows why. Returns the current choice (``default`` until one is made;
    it must be one of the packaged sources). On a shared server the sources are :func:`picker_kinds`'s.
    """
    kinds = picker_kinds()
    kind = where.radio("Where from", list(kinds), format_func=kinds.__getitem__, key=f"{prefix}_kind",
                       on_change=lambda: st.session_state.pop(error_key, None))

    def use(source):
        return _use(source, source_key, error_key)

    if kind == "packaged":
        packaged = {s.ref: s for s in PACKAGED_SOURCES}
        ref = where.selectbox("Model", list(packaged), format_func=lambda r: packaged[r].name, key=f"{prefix}_packaged",
                              index=list(packaged).index(default.ref),
                              help="MiniLM-MLM: a 6-layer BERT trained here with masked-LM + NSP on news, "
                                   "encyclopedic and everyday English, so it fills [MASK] and scores next "
                                   "sentences. all-MiniLM-L6-v2: the same encoder before that training, a model "
                                   "for sentence embeddings (no MLM head).")
        if st.session_state.get(source_key, default) != packaged[ref]:
            use(packaged[ref])
    elif kind == SERVER_KIND:
        folders = shared_mode.settings().folders
        label = where.selectbox("Model", list(folders), key=f"{prefix}_server")
        if where.button("Use this model", key=f"{prefix}_server_use"):
            use(ModelSource("local", folders[label], label))
    elif kind == "local":
        path = where.text_input("Folder (config.json, model.safetensors, vocab.txt)", key=f"{prefix}_local_path",
                                placeholder="/path/to/bert-folder")
        if where.button("Use this folder", key=f"{prefix}_local_use", disabled=not (path or "").strip()):
            use(ModelSource("local", path.strip(), path.strip()))
    elif kind == "hub":
        hub_id = where.text_input("Hub id", value="bert-base-uncased", key=f"{prefix}_hub_id",
                                  help="Needs internet. Offline, download the model elsewhere and pick it as a "
                                       "local folder.")
        if where.button("Download and use", key=f"{prefix}_hub_use", disabled=not (hub_id or "").strip()):
            use(ModelSource("hub", hub_id.strip(), hub_id.strip()))
    else:
        runs = list_run_sources()
        if not runs:
            where.info("No checkpoint of a training run yet: train one on the Train page.")
        else:
            labels = {r.ref: r.name for r in runs}
            ref = where.selectbox("Checkpoint", list(labels), format_func=labels.__getitem__, key=f"{prefix}_run_ref")
            if where.button("Use this checkpoint", key=f"{prefix}_run_use"):
                use(ModelSource("run", ref, labels[ref]))
    if error_key in st.session_state:
        where.error(escape_md(st.session_state[error_key]), icon=":material/error:")
    chosen = st.session_state.get(source_key, default)
    where.caption("In use: " + escape_md(chosen.name))
    return chosen


def use_source(source: ModelSource) -> bool:
    """Make ``source`` the model of every page, if it loads, and point the sidebar's widgets at it.

    The one owner of the sidebar's session keys: call it from a button's ``on_click`` (Streamlit
    lets a callback set widget keys before the widgets are drawn). Returns True when the model
    changed; on failure the previous model stays and the sidebar says why.
    """
    source = _listed(source)
    _use(source)
    if st.session_state.get(SOURCE_KEY) != source:
        return False
    if source.kind == "local" and shared_mode.settings().enabled:  # an operator's folder, by its label
        st.session_state["model_kind"], st.session_state["model_server"] = SERVER_KIND, source.label
        return True
    st.session_state["model_kind"] = source.kind
    key = {"packaged": PACKAGED_KEY, "run": "model_run_ref", "local": "model_local_path",
           "hub": "model_hub_id"}[source.kind]
    st.session_state[key] = source.ref
    return True


def model_picker() -> None:
    """Sidebar: choose the model every page uses (packaged, local folder, hub id, run checkpoint).

    The choice changes only when the new model loads; a failure keeps the previous model and
    shows why in the sidebar.
    """
    st.sidebar.subheader("Model")
    source_picker(st.sidebar, "model", SOURCE_KEY, ERROR_KEY)  # its packaged selectbox key is PACKAGED_KEY
