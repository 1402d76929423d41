"""The Train page's uploads: the uploader with its checks (size, quota, content, checked once per content) and, on a
shared server, the run's own copy of a session's upload (``explorer.server.shared_mode``). The launch form:
:mod:`explorer.train.form`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import streamlit as st

from bertcore import data as D
from bertcore import runs
from explorer.server import shared_mode
from explorer import widgets


def upload_input(task: str) -> tuple[str | None, str | None, str | None]:
    """The uploader; returns (saved path, text_pair column, problem). A file is checked once per content.

    On a shared server (``explorer.server.shared_mode``) a file over the size limit or past the session's quota is
    refused, and an accepted one is saved in the session's own folder (removed when the session ends)."""
    suffix = D.UPLOAD_TYPES[task]
    s = shared_mode.settings()
    limit_mb = min(D.UPLOAD_MAX_MB, s.max_upload_mb) if s.enabled else D.UPLOAD_MAX_MB
    limit = shared_mode.size_text(limit_mb * 2**20) if s.enabled else f"{D.UPLOAD_MAX_MB} MB"
    up = st.file_uploader(f"Your {suffix} file (at most {limit})", type=[suffix.lstrip(".")],
                          key=f"train_{task}_upload",
                          help="Pretraining: plain UTF-8 text, documents separated by blank lines. Fine-tuning: a "
                               "UTF-8 CSV with a header row and columns 'text' and 'label' (optional 'text_pair'). "
                               + ("On this shared server accepted files are kept in a folder of your session, "
                                  "removed when you leave; a run you start gets its own copy." if s.enabled else
                                  "Accepted files are kept in the runs folder, under uploads/."),
                          **({"max_upload_size": max(1, int(limit_mb + 0.999))} if s.enabled else {}))
    if up is None:
        return None, None, "Upload a file first (or choose another data source)."
    raw = up.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    cache_key = (task, up.name, digest)
    cached = st.session_state.get("train_upload_checked")
    if cached and cached[0] == cache_key and (cached[1].path is None or cached[1].path.is_file()):
        check = cached[1]
    else:
        refusal = None
        root = None
        if s.enabled:
            root = shared_mode.session_folder(s)
            held = list((root / "uploads").glob(f"{digest[:16]}-*"))  # the same content again costs nothing
            refusal = None if held else shared_mode.upload_refusal(up.name, len(raw), shared_mode.folder_bytes(root),
                                                                   s)
        if refusal is not None:
            check = D.UploadCheck(None, refusal)
        else:
            with st.spinner("Checking the file ..."):
                check = D.check_upload(task, up.name, raw, root=root)
        st.session_state["train_upload_checked"] = (cache_key, check)
    path, message, pair = (None if check.path is None else str(check.path)), check.message, check.text_pair_column
    if path is None:
        st.error(widgets.escape_md(message), icon=":material/error:")
        return None, None, ("The uploaded file was refused (see the message under the uploader): fix it or upload "
                            "another.")
    shown = Path(path).name if s.enabled else path  # a shared server does not show its folders
    st.success(f"Accepted: {widgets.escape_md(message)}. Saved as {widgets.escape_md(shown)}.",
               icon=":material/check_circle:")
    return path, pair, None


def run_copy(path: str) -> str:
    """Shared mode: the run's own copy of a session upload, under ``<runs root>/uploads/`` (the same
    content-addressed name), so that the run keeps its data after the session's folder is removed. Other paths
    are returned unchanged.

    Raises:
        OSError: the copy cannot be written.
    """
    s = shared_mode.settings()
    if not s.enabled or not path:
        return path
    src = Path(path)
    try:
        src.relative_to(s.session_root)
    except ValueError:
        return path
    dest = runs.runs_root() / "uploads" / src.name
    if not dest.is_file() or dest.stat().st_size != src.stat().st_size:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    return str(dest)
