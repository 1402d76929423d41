"""Shared-server mode: what changes when the app is served to people other than its operator.

Off by default: a single user on their own machine sees the app exactly as without this module. The operator
turns it on with the environment variable ``BERT_EXPLORER_SHARED=1`` (``1``/``true``/``yes``/``on``; ``0``,
``false``, ``no``, ``off`` or unset: off). The same key at the top level of ``.streamlit/secrets.toml``
(``BERT_EXPLORER_SHARED = "1"``) works too: Streamlit copies root-level secrets into the environment when the
server starts, and :func:`settings` also reads the key from ``st.secrets``.

The operator's options live in a TOML file named by ``BERT_EXPLORER_SHARED_CONFIG`` (again an environment
variable or a root-level secret); every option is optional::

    allow_hub = false            # may visitors download models / data sets from the Hugging Face Hub?
    max_upload_mb = 10           # largest file one upload may be (MB, > 0)
    upload_quota_mb = 50         # all files of one session together (MB, >= max_upload_mb is sensible)
    max_runs_per_session = 1     # training runs one session may have queued or running at once (>= 1)
    session_folder = "/var/tmp/bert-explorer-sessions"   # parent of the per-session upload folders
                                                        # (default: <system temp>/bert-explorer-sessions)

    [models]                     # model folders visitors may pick, by label (relative paths: from this file)
    "Our fine-tuned BERT" = "/srv/models/ours"

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
import math
import os
import re
import shutil
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import streamlit as st

ENV_FLAG = "BERT_EXPLORER_SHARED"
ENV_CONFIG = "BERT_EXPLORER_SHARED_CONFIG"
SESSION_FOLDER_NAME = "bert-explorer-sessions"
SWEEP_EVERY_S = 60.0  # at most one sweep of ended sessions' folders per this many seconds, server-wide
SWEEP_GRACE_S = 60.0  # a folder younger than this is never swept (its session may be starting)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_OPTIONS = {"allow_hub", "max_upload_mb", "upload_quota_mb", "max_runs_per_session", "session_folder", "models"}


class SharedConfigError(ValueError):
    """The shared mode's switch or its operator file is unusable (the message names the file and the option)."""


@dataclass(frozen=True)
class Settings:
    """The shared mode's settings (:func:`settings`); ``enabled`` False means single-user mode, where the other
    fields are not used.

    Attributes:
        enabled: the mode is on.
        models: ``(label, folder)`` pairs visitors may pick, in the file's order.
        allow_hub: visitors may load models and data sets from the Hugging Face Hub.
        max_upload_mb: largest single upload, MB.
        upload_quota_mb: all files of one session together, MB.
        max_runs_per_session: runs one session may have queued or running at once.
        session_root: the folder that holds one folder per session.
        config_path: the operator's file, None without one.
    """

    enabled: bool = False
    models: tuple[tuple[str, str], ...] = ()
    allow_hub: bool = False
    max_upload_mb: float = 10.0
    upload_quota_mb: float = 50.0
    max_runs_per_session: int = 1
    session_root: Path = Path(tempfile.gettempdir()) / SESSION_FOLDER_NAME
    config_path: Path | None = None

    @property
    def folders(self) -> dict[str, str]:
        """``label -> folder`` of the operator's models."""
        return dict(self.models)

    def label_of(self, folder: str) -> str | None:
        """The operator's label of ``folder`` (compared as resolved paths), or None when it is not listed."""
        try:
            wanted = Path(folder).expanduser().resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        return next((label for label, f in self.models if Path(f).resolve() == wanted), None)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 2**20)

    @property
    def quota_bytes(self) -> int:
        return int(self.upload_quota_mb * 2**20)


SINGLE_USER = Settings()


# ----------------------------------------------------------------------------- reading the settings
def parse_flag(value: str | bool | int | None, where: str = ENV_FLAG) -> bool:
    """``BERT_EXPLORER_SHARED``'s value as a bool. Raises :class:`SharedConfigError` for anything but
    1/true/yes/on or 0/false/no/off/empty (case-insensitive): a typo must not leave a server open."""
    if isinstance(value, bool):
        return value
    text = "" if value is None else str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SharedConfigError(f"{where}={value!r}: use 1 (shared server) or 0 (single user)")


def _number(data: dict[str, Any], name: str, default: float, path: Path, integer: bool = False) -> Any:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise SharedConfigError(f"{path}: {name} must be {'a whole' if integer else 'a'} number, not {value!r}")
    if not math.isfinite(value) or value <= 0 or (integer and value < 1):
        raise SharedConfigError(f"{path}: {name} must be {'at least 1' if integer else 'above 0'}, not {value!r}")
    return value


def load_config(path: str | Path) -> dict[str, Any]:
    """The operator's TOML file, checked: a dict of :class:`Settings` field values.

    Raises:
        SharedConfigError: missing or unreadable file, not TOML, an unknown option (a typo), a value of the wrong
            type or range.
    """
    path = Path(path).expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SharedConfigError(f"cannot read the shared-mode file {path} ({ENV_CONFIG}): {exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SharedConfigError(f"{path} is not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - _OPTIONS)
    if unknown:
        raise SharedConfigError(f"{path}: unknown option(s) {unknown}; the options are {sorted(_OPTIONS)}")
    out: dict[str, Any] = {"config_path": path}
    if not isinstance(data.get("allow_hub", False), bool):
        raise SharedConfigError(f"{path}: allow_hub must be true or false, not {data['allow_hub']!r}")
    out["allow_hub"] = data.get("allow_hub", False)
    out["max_upload_mb"] = float(_number(data, "max_upload_mb", Settings.max_upload_mb, path))
    out["upload_quota_mb"] = float(_number(data, "upload_quota_mb", Settings.upload_quota_mb, path))
    out["max_runs_per_session"] = _number(data, "max_runs_per_session", Settings.max_runs_per_session, path, True)
    if "session_folder" in data:
        if not isinstance(data["session_folder"], str) or not data["session_folder"].strip():
            raise SharedConfigError(f"{path}: session_folder must be a folder path")
        out["session_root"] = (path.parent / Path(data["session_folder"]).expanduser()).resolve()
    models = data.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, str) and v.strip() for v in models.values()):
        raise SharedConfigError(f'{path}: [models] must map labels to folder paths ("label" = "/path/to/folder")')
    out["models"] = tuple((str(label), str((path.parent / Path(folder).expanduser()).resolve()))
                          for label, folder in models.items())
    return out


def _secret(name: str) -> Any:
    """A root-level key of ``.streamlit/secrets.toml`` (None without the file or the key)."""
    try:
        if not st.secrets.load_if_toml_exists():
            return None
        return st.secrets.get(name)
    except Exception:  # noqa: BLE001 - a broken secrets file is Streamlit's to report; the environment still works
        return None


def _raw(name: str) -> Any:
    value = os.environ.get(name)
    return value if value not in (None, "") else _secret(name)


@lru_cache(maxsize=8)
def _load(flag: bool, config: str | None, stamp: int | None) -> Settings:
    del stamp  # part of the cache key only: an edited file is read again
    if not flag:
        return SINGLE_USER
    fields = load_config(config) if config else {}
    return Settings(enabled=True, **fields)


def settings() -> Settings:
    """The current settings: single-user (``enabled`` False) unless ``BERT_EXPLORER_SHARED`` is on. Read from the
    environment (or secrets) on every call; the operator's file is parsed again only when it changes.

    Raises:
        SharedConfigError: see :func:`parse_flag` and :func:`load_config` (the app then refuses to serve pages).
    """
    flag = parse_flag(_raw(ENV_FLAG))
    config = _raw(ENV_CONFIG) if flag else None
    config = str(config) if config not in (None, "") else None
    stamp = None
    if config:
        try:
            stamp = Path(config).expanduser().stat().st_mtime_ns
        except OSError:
            stamp = -1  # load_config says why
    return _load(flag, config, stamp)


def enabled() -> bool:
    """True when the shared mode is on (see :func:`settings`, whose errors it raises)."""
    return settings().enabled


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
        st.error(f"The shared-server settings are unusable, so this server shows no page: {exc}",
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
