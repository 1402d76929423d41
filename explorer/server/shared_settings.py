"""The shared-server mode's settings: the switch, the operator's file, and what they hold (:class:`Settings`).

The switch is the environment variable ``BERT_EXPLORER_SHARED=1`` (``1``/``true``/``yes``/``on``; ``0``,
``false``, ``no``, ``off`` or unset: off), or the same key at the top level of ``.streamlit/secrets.toml``
(``BERT_EXPLORER_SHARED = "1"``): Streamlit copies root-level secrets into the environment when the server starts,
and :func:`settings` also reads the key from ``st.secrets``.

The operator's options live in a TOML file named by ``BERT_EXPLORER_SHARED_CONFIG`` (again an environment
variable or a root-level secret); every option is optional::

    allow_hub = false            # may visitors download models / data sets from the Hugging Face Hub?
    max_upload_mb = 10           # largest file one upload may be (MB, > 0)
    upload_quota_mb = 50         # all files of one session together (MB, >= max_upload_mb is sensible)
    max_runs_per_session = 1     # training runs one session may have queued or running at once (>= 1)
    session_folder = "/var/tmp/bert-explorer-sessions"   # parent of the per-session upload folders
                                                        # (default: <system temp>/bert-explorer-sessions)
    device = "cuda:0"            # where the app computes (default: BERT_EXPLORER_DEVICE's, itself auto)

    [models]                     # model folders visitors may pick, by label (relative paths: from this file)
    "Our fine-tuned BERT" = "/srv/models/ours"

What the mode does with them is :mod:`explorer.server.shared_mode`'s. The environment is read by
:mod:`bertcore.settings` (the one reader of every ``BERT_EXPLORER_*`` variable). This module imports no torch.
"""

from __future__ import annotations

import math
import tempfile
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import streamlit as st

from bertcore.settings import PREFIX, SettingsError
from bertcore.settings import settings as environment

ENV_FLAG = "BERT_EXPLORER_SHARED"
ENV_CONFIG = "BERT_EXPLORER_SHARED_CONFIG"
SESSION_FOLDER_NAME = "bert-explorer-sessions"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_OPTIONS = {"allow_hub", "max_upload_mb", "upload_quota_mb", "max_runs_per_session", "session_folder", "models",
            "device"}


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
        device: where the app computes, a device name (:func:`bertcore.device.resolve`); None: the environment's
            ``BERT_EXPLORER_DEVICE``.
    """

    enabled: bool = False
    models: tuple[tuple[str, str], ...] = ()
    allow_hub: bool = False
    max_upload_mb: float = 10.0
    upload_quota_mb: float = 50.0
    max_runs_per_session: int = 1
    session_root: Path = Path(tempfile.gettempdir()) / SESSION_FOLDER_NAME
    config_path: Path | None = None
    device: str | None = None

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
    if "device" in data:
        if not isinstance(data["device"], str) or not data["device"].strip():
            raise SharedConfigError(f'{path}: device must be a device name ("auto", "cpu", "cuda", "cuda:0")')
        out["device"] = data["device"].strip()
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
    """The environment's value of ``name`` (parsed by :mod:`bertcore.settings`), else the root-level secret."""
    env = environment()
    field = name.removeprefix(PREFIX).lower()
    return getattr(env, field) if field in env.model_fields_set else _secret(name)


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
        SharedConfigError: see :func:`parse_flag` and :func:`load_config`, or a ``BERT_EXPLORER_*`` variable
            :mod:`bertcore.settings` refuses (the app then refuses to serve pages).
    """
    try:
        raw = _raw(ENV_FLAG)
    except SettingsError as exc:
        raise SharedConfigError(str(exc)) from None
    flag = parse_flag(raw)
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
