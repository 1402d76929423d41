"""Reusable inputs shared by the pages: the sidebar model picker, text / sentence-pair input,
layer and head pickers, and :func:`show_error` for bertcore's errors.

Session-state keys: the model choice lives in ``model_*`` keys; a page's own keys start with
its prefix (``tok_``, ``att_``, ``ws_`` ...), passed to these helpers.
"""

from __future__ import annotations

import re

import streamlit as st

from bertcore.modeling.checkpoint import CheckpointError
from bertcore.modeling.config import ConfigError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import DEFAULT, PACKAGED_SOURCES, LoadedModel, ModelSource, SourceError, list_run_sources
from bertcore.tokenization.tokenizer import TextError

from . import resources
from .server import share
from .server import shared_mode

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

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")


def escape_md(text: str) -> str:
    """Backslash-escape Markdown punctuation so user text shows literally inside st.markdown / st.warning."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


# ----------------------------------------------------------------------------- errors
def show_error(exc: BaseException, where: str = "") -> None:
    """Show a bertcore error as a message in the page (never a traceback).

    ``TextError`` / ``InputError`` (what the user typed) -> ``st.warning``; ``SourceError``,
    ``CheckpointError``, ``ConfigError`` (a model that cannot be loaded) -> ``st.error``;
    a ``ValueError`` from a figure -> ``st.error``; anything else is re-raised.
    """
    prefix = f"{where}: " if where else ""
    message = prefix + escape_md(str(exc))
    if isinstance(exc, (TextError, InputError)):
        st.warning(message, icon=":material/edit_note:")
    elif isinstance(exc, (SourceError, CheckpointError, ConfigError)):
        st.error(message, icon=":material/error:")
    elif isinstance(exc, ValueError):
        st.error(message, icon=":material/error:")
    else:
        raise exc


# ----------------------------------------------------------------------------- model
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


def truncation_notice(n_tokens: int, max_length: int, note: str = "", reader: str = "this model") -> None:
    """The one message for an input longer than ``reader`` reads (``n_tokens`` before the cut; ``reader``: "this
    page" where a page reads less than the model); ``note``: what the cut means on this page, appended."""
    st.warning(f"The input has {n_tokens:,} tokens but {reader} reads at most {max_length}: the last "
               f"{n_tokens - max_length:,} were cut off.{' ' + note if note else ''}", icon=":material/content_cut:")


def lines_phrase(lines: list[int]) -> str:
    """"Line 2 was" / "Lines 2, 5 were" (1-based ``lines``): the start of a sentence that says what happened to some
    lines of a multi-line input."""
    return f"Line {lines[0]} was" if len(lines) == 1 else f"Lines {', '.join(map(str, lines))} were"


# ----------------------------------------------------------------------------- text inputs
def text_or_pair(prefix: str, default: str, default_pair: str, pair_default: bool = False,
                 label: str = "Text") -> tuple[str, str | None]:
    """A text area, and a second one for sentence B when the pair toggle is on.

    Returns ``(text, text_pair)``; ``text_pair`` is None without the toggle. Values are
    returned raw: :func:`bertcore.tokenization.tokenizer.encode` checks them (empty, too long ...). The three are
    kept in
    the URL (:func:`explorer.server.share.shareable`).
    """
    share.shareable({f"{prefix}_text": share.text, f"{prefix}_pair_on": share.boolean, f"{prefix}_text_b": share.text})
    pair = st.toggle("Sentence pair (A + B, as in next-sentence prediction)", value=pair_default,
                     key=f"{prefix}_pair_on", persist_state="session")
    text = st.text_area("Sentence A" if pair else label, value=default, key=f"{prefix}_text",
                        height=100, persist_state="session")
    text_pair = None
    if pair:
        text_pair = st.text_area("Sentence B", value=default_pair, key=f"{prefix}_text_b", height=100,
                                 persist_state="session")
    return text or "", (text_pair or "") if pair else None


def clamped_slider(label: str, key: str, lo: int, hi: int, default: int, help: str | None = None,
                   format_func=None, compact: bool = False) -> int:
    """An int slider ``lo..hi`` whose value is kept across pages and clamped when the range
    shrinks (another model, a shorter text); a fixed caption when ``lo == hi``. ``compact``: a
    selectbox instead (two sliders cost ~0.3 s per rerun in the browser; use it where every rerun
    counts)."""
    if hi <= lo:
        st.caption(f"{label}: {format_func(lo) if format_func else lo} (the only one)")
        return lo
    if key in st.session_state:  # keep the user's choice, clamped to this model's range
        if not lo <= st.session_state[key] <= hi:
            st.session_state[key] = min(max(st.session_state[key], lo), hi)
        value = {}
    else:
        value = {"index": min(max(default, lo), hi) - lo} if compact else {"value": min(max(default, lo), hi)}
    if compact:
        return int(st.selectbox(label, range(lo, hi + 1), key=key, help=help, persist_state="session", **value))
    return int(st.slider(label, lo, hi, key=key, help=help, persist_state="session", **value))


def layer_number(block: int) -> int:
    """The number the UI shows for the 0-based encoder block ``block`` (``encoder.layer[block]``): block 0 is
    "layer 1". The one conversion for text; :func:`layer_picker` is the one for widgets."""
    return block + 1


def head_number(head: int) -> int:
    """The number the UI shows for the 0-based head ``head``: head 0 is "head 1"."""
    return head + 1


def layer_label(block: int) -> str:
    """``"layer 4"`` for block 3: the 1-based label of a 0-based encoder block (see :func:`layer_number`)."""
    return f"layer {layer_number(block)}"


def layer_picker(prefix: str, num_layers: int, include_embeddings: bool = False, default: int | None = None,
                 label: str = "Layer", compact: bool = False) -> int:
    """A layer slider labelled "Layer" 1..num_layers, or 0..num_layers with ``include_embeddings`` (0 = the
    embedding output, before any layer); ``st.session_state[f"{prefix}_layer"]`` keeps the label's number.

    Returns (the only place the UI's 1-based layer numbers become bertcore's):
        without ``include_embeddings``: the 0-based BLOCK (``encoder.layer[i]``, 0..num_layers-1; label "Layer 1"
        is block 0); with it: the HIDDEN_STATES INDEX (0..num_layers, 0 = the embeddings; label "Layer k" is
        ``hidden_states[k]``, the output of block k-1). ``default`` is in the same numbering as the return value
        (None: the last layer)."""
    if include_embeddings:
        return clamped_slider(label, f"{prefix}_layer", 0, num_layers, num_layers if default is None else default,
                              help="0 is the embedding layer's output", compact=compact)
    shown = clamped_slider(label, f"{prefix}_layer", 1, num_layers,
                           num_layers if default is None else layer_number(default), compact=compact)
    return shown - 1


WORDS_HELP = ("Merge the pieces of each word: attention to a word is the sum over its pieces, attention from a "
              "word the mean over its pieces (Clark et al. 2019, section 4.1).")


def words_toggle(prefix: str, where=None) -> bool:
    """The "Words, not WordPieces" toggle of every token-level attention view (key ``<prefix>_words``,
    kept across pages); merging is :mod:`bertcore.analysis.attention.words`."""
    return bool((where or st).toggle("Words, not WordPieces", key=f"{prefix}_words", persist_state="session",
                                     help=WORDS_HELP))


def head_picker(prefix: str, num_heads: int, default: int = 0, compact: bool = False) -> int:
    """A head slider labelled "Head" 1..num_heads (``compact``: a selectbox; the session state keeps the label's
    number); returns the chosen head 0-based (0..num_heads-1), as bertcore takes it. ``default``: 0-based."""
    return clamped_slider("Head", f"{prefix}_head", 1, num_heads, head_number(default), compact=compact) - 1


# ----------------------------------------------------------------------------- export
EXPORT_FORMAT_KEY = "export_format"  # the image format of every chart's toolbar download
EXPORT_FORMATS = {"png": "PNG (2x, for slides)", "svg": "SVG (vector, for papers)"}


def export_picker() -> None:
    """Sidebar: the format the camera button of every chart's toolbar downloads (PNG or SVG)."""
    st.sidebar.radio("Chart downloads", list(EXPORT_FORMATS), format_func=EXPORT_FORMATS.__getitem__,
                     key=EXPORT_FORMAT_KEY, horizontal=True, persist_state="session",
                     help="The camera icon in a chart's toolbar (top right, on hover) saves the chart in this "
                          "format. Tables have their own CSV button.")


def chart_config(name: str) -> dict:
    """Plotly config for :func:`plotly_chart`: the toolbar's download saves ``name``.png / .svg
    (plotly.js ``toImageButtonOptions``; scale 2 for PNG)."""
    fmt = st.session_state.get(EXPORT_FORMAT_KEY, "png")
    return {"displaylogo": False, "toImageButtonOptions": {
        "format": fmt if fmt in EXPORT_FORMATS else "png", "filename": _file_stem(name), "scale": 2}}


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("_") or "chart"


def plotly_chart(fig, key: str, where=None, **kwargs):
    """``st.plotly_chart`` with the export config of :func:`chart_config` (the one place every page
    draws a Plotly figure). ``where``: a container or column (default: ``st``)."""
    return (where or st).plotly_chart(fig, key=key, config=chart_config(key), **kwargs)


def download_csv(df, name: str, key: str, label: str = "CSV", index: bool = True, where=None) -> None:
    """A download button for a table (``pandas.DataFrame`` with labelled rows and columns) as ``name``.csv.

    The CSV is built only when the button is clicked (a callable ``data``), so a big matrix costs
    nothing on reruns.
    """
    (where or st).download_button(label, data=lambda: df.to_csv(index=index).encode("utf-8"),
                                  file_name=f"{_file_stem(name)}.csv", mime="text/csv", key=key,
                                  icon=":material/download:", on_click="ignore",
                                  help="Download this table as a CSV file (rows and columns labelled).")


def standalone_html(fig) -> str:
    """A figure as one self-contained HTML file that opens offline (plotly.js inlined, no CDN)."""
    return fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})


def download_html(fig, name: str, key: str, label: str = "HTML", where=None) -> None:
    """A download button for :func:`standalone_html` of ``fig`` (built only when clicked; ~4 MB)."""
    (where or st).download_button(label, data=lambda: standalone_html(fig).encode("utf-8"),
                                  file_name=f"{_file_stem(name)}.html", mime="text/html", key=key,
                                  icon=":material/download:", on_click="ignore",
                                  help="An interactive HTML file of this chart that opens offline in any browser.")
