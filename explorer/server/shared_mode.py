"""Shared-server mode: what changes when the app is served to people other than its operator.

Off by default: a single user on their own machine sees the app exactly as without this module. The operator
turns it on with ``BERT_EXPLORER_SHARED=1`` and sets its options in a TOML file: both are
:mod:`explorer.server.shared_settings`'s (:func:`settings`, re-exported here with its names, so the pages import one
module).

What the mode does (the pages call the helpers below):

- **No local paths typed by a visitor.** The model picker offers the packaged models, run checkpoints and the
  ``[models]`` folders (the hub only with ``allow_hub``); a ``local:`` or ``run:`` reference from a URL or any
  other way in is refused unless it is one of those (:func:`source_refusal`). The Train page drops its path
  inputs.
- **Runs belong to the session that started them** (``owner`` in ``run.json``: :func:`owner_token` of the
  Streamlit session id, never the id itself). Every session can watch every run; only the owner cancels,
  resumes or rewrites it (:func:`can_control`; a run without an owner is watch-only). A session has at most
  ``max_runs_per_session`` runs queued or running; a launch on a busy device joins the device's queue
  (``bertcore.runs.lock``: first come, first served) and the run view shows its place in it.
- **Uploads** are refused over ``max_upload_mb`` or past ``upload_quota_mb`` for the session
  (:func:`upload_refusal`), and are written to the session's own folder (:func:`session_folder`), removed when
  the session ends (a session-scoped ``st.cache_resource`` whose release removes it; :func:`sweep` removes the
  folders of sessions that ended without it, e.g. after a server restart).

This module imports neither torch nor bertcore, only Streamlit (the pages pass it what they know of models and runs).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from explorer.server.shared_settings import (  # noqa: F401 - re-exported: the pages read the mode through this module
    ENV_CONFIG,
    ENV_FLAG,
    SINGLE_USER,
    Settings,
    SharedConfigError,
    enabled,
    load_config,
    parse_flag,
    settings,
)

SWEEP_EVERY_S = 60.0  # at most one sweep of ended sessions' folders per this many seconds, server-wide
SWEEP_GRACE_S = 60.0  # a folder younger than this is never swept (its session may be starting)


# ----------------------------------------------------------------------------- models
def source_refusal(kind: str, ref: str, run_refs: set[str] | frozenset[str] = frozenset(),
                   s: Settings | None = None) -> str | None:
    """Why a visitor may not load the model ``kind:ref`` on this server, or None when it is allowed.

    Single-user mode allows everything. Shared mode allows packaged models, the operator's ``[models]`` folders,
    the run checkpoints in ``run_refs`` (what the runs list holds: a typed checkpoint path is a typed path) and,
    with ``allow_hub``, Hub ids.
    """
    s = settings() if s is None else s
    if not s.enabled or kind == "packaged":
        return None
    if kind == "local":
        if s.label_of(ref) is not None:
            return None
        return ("This is a shared server: a model cannot be opened by typing a folder path. Pick a packaged model, "
                "a training run's checkpoint" + (" or one of the models listed by the operator" if s.models else "")
                + " in the sidebar.")
    if kind == "run":
        if ref in run_refs:
            return None
        return ("This is a shared server: a checkpoint cannot be opened by typing its path. Pick one from the "
                "sidebar's list of training runs.")
    if kind == "hub":
        if s.allow_hub:
            return None
        return "This shared server does not download models from the Hugging Face Hub: pick one in the sidebar."
    return f"Unknown model source {kind!r}."


# ----------------------------------------------------------------------------- sessions and runs
def owner_token(session_id: str) -> str:
    """The ``owner`` written into a run's ``run.json``: a hash of the Streamlit session id (the id itself would let
    anyone who reads the file take over the session's reconnection)."""
    return "session-" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:20]


def session_id() -> str | None:
    """The Streamlit session id of the script run on this thread, None outside one."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def session_owner() -> str | None:
    """:func:`owner_token` of this session (None outside a script run)."""
    sid = session_id()
    return None if sid is None else owner_token(sid)


def can_control(owner: str | None, s: Settings | None = None) -> bool:
    """May this session cancel, resume or rewrite a run whose ``run.json`` names ``owner``? Always in single-user
    mode; in shared mode only the session that started it (a run without an owner is watch-only)."""
    s = settings() if s is None else s
    if not s.enabled:
        return True
    mine = session_owner()
    return owner is not None and mine is not None and owner == mine


# ----------------------------------------------------------------------------- uploads and session folders
def size_text(n_bytes: float) -> str:
    """``'1.2 KB'`` below a MB, else ``'12.0 MB'`` (1 KB = 1024 bytes)."""
    return f"{n_bytes / 1024:,.1f} KB" if n_bytes < 2**20 else f"{n_bytes / 2**20:,.1f} MB"


def upload_refusal(name: str, size: int, used: int, s: Settings | None = None) -> str | None:
    """Why an upload of ``size`` bytes is refused when the session holds ``used`` bytes already, or None.
    Single-user mode refuses nothing here (the pages keep their own limits)."""
    s = settings() if s is None else s
    if not s.enabled:
        return None
    shown = Path(str(name).replace("\\", "/")).name
    if size > s.max_upload_bytes:
        return (f"{shown} is {size_text(size)}: uploads on this shared server are limited to "
                f"{size_text(s.max_upload_bytes)} per file.")
    if used + size > s.quota_bytes:
        return (f"{shown} ({size_text(size)}) would take this session past its upload quota of "
                f"{size_text(s.quota_bytes)} on this shared server ({size_text(used)} used). The files go when "
                "you close the tab; open the app again for a fresh quota.")
    return None


def folder_bytes(folder: str | Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    total = 0
    for p in Path(folder).rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            pass
    return total


_REGISTRY: dict[str, str] = {}  # folder name -> session id, for the sessions this server process has seen
_REGISTRY_LOCK = threading.Lock()
_last_sweep = [0.0]


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _release(marker: "_Folder") -> None:
    with _REGISTRY_LOCK:
        _REGISTRY.pop(marker.path.name, None)
    _remove(marker.path)


@dataclass(frozen=True)
class _Folder:
    path: Path


@st.cache_resource(scope="session", on_release=_release, show_spinner=False)
def _register(folder: str) -> _Folder:
    """A session-scoped resource whose release (the session disconnects or ends) removes ``folder``."""
    return _Folder(Path(folder))


def session_folder(s: Settings | None = None) -> Path:
    """This session's own folder for uploads and what is derived from them (created on demand): removed when the
    session ends, and never shared with another session.

    Raises:
        RuntimeError: outside a Streamlit script run (no session).
        OSError: the folder cannot be created.
    """
    s = settings() if s is None else s
    sid = session_id()
    if sid is None:
        raise RuntimeError("session_folder() needs a Streamlit session")
    folder = s.session_root / owner_token(sid)
    folder.mkdir(parents=True, exist_ok=True)
    with _REGISTRY_LOCK:
        _REGISTRY[folder.name] = sid
    _register(str(folder))
    return folder


def sweep(s: Settings | None = None, force: bool = False) -> list[Path]:
    """Remove the folders of sessions that have ended (this server does not know them, or they are no longer
    active), unless younger than :data:`SWEEP_GRACE_S`. At most once per :data:`SWEEP_EVERY_S` unless ``force``;
    nothing without a Streamlit runtime (AppTest). Returns the folders removed."""
    s = settings() if s is None else s
    now = time.time()
    if not s.enabled or (not force and now - _last_sweep[0] < SWEEP_EVERY_S):
        return []
    _last_sweep[0] = now
    try:
        from streamlit import runtime

        if not runtime.exists():
            return []
        rt = runtime.get_instance()
    except Exception:  # noqa: BLE001 - no runtime, nothing to compare with
        return []
    removed = []
    try:
        folders = [p for p in s.session_root.iterdir() if p.is_dir() and re.fullmatch(r"session-[0-9a-f]{20}", p.name)]
    except OSError:
        return []
    for folder in folders:
        with _REGISTRY_LOCK:
            sid = _REGISTRY.get(folder.name)
        try:
            young = now - folder.stat().st_mtime < SWEEP_GRACE_S
        except OSError:
            continue
        if young or (sid is not None and rt.is_active_session(sid)):
            continue
        with _REGISTRY_LOCK:
            _REGISTRY.pop(folder.name, None)
        _remove(folder)
        removed.append(folder)
    return removed


def guard() -> Settings:
    """For ``app.py``, before any page: the settings, and a :func:`sweep` of ended sessions' folders. Under
    unusable settings no page is served: an ``st.error`` saying why, then ``st.stop()``."""
    try:
        s = settings()
    except SharedConfigError as exc:
        st.error(f"The server's settings are unusable, so this server shows no page: {exc}",
                 icon=":material/error:")
        st.stop()
        raise  # unreachable: st.stop() raises
    sweep(s)
    return s


# ----------------------------------------------------------------------------- what the Overview says
def describe(s: Settings | None = None) -> str | None:
    """The Overview's paragraph on the mode (Markdown), None in single-user mode."""
    s = settings() if s is None else s
    if not s.enabled:
        return None
    models = "packaged models, training runs' checkpoints" + (
        f" and {len(s.models)} model(s) listed by the operator" if s.models else "")
    return (f"**Shared server mode is on.** Models: {models}" + (", or a Hugging Face Hub id" if s.allow_hub else "")
            + "; folder paths cannot be typed. Runs: everyone can watch every run, only the session that started a "
            f"run can cancel or resume it, at most {s.max_runs_per_session} run(s) per session at a time, and a busy "
            "device queues runs first come, first served. Uploads: at most "
            f"{size_text(s.max_upload_bytes)} per file and {size_text(s.quota_bytes)} per session, kept in a folder "
            "of this session that is removed when it ends.")
