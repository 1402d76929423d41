"""Training files uploaded in the UI: checked with the run's own loaders, then saved under
``<runs root>/uploads/<sha256 prefix>-<safe name>`` (atomically; the same content is reused).

Messages are plain text for people (the page escapes them for Markdown).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .corpora import DataError, load_documents
from .labelled import MIN_LABELLED, load_labelled

UPLOAD_MAX_MB = 50  # largest upload accepted as training data (the Streamlit server allows up to 200 MB)
UPLOAD_TYPES = {"pretrain": ".txt", "finetune": ".csv"}
BINARY_MAGIC = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image",
                b"%PDF": "a PDF document", b"PK\x03\x04": "a ZIP archive (or .xlsx/.docx)",
                b"\x1f\x8b": "a gzip archive", b"\xd0\xcf\x11\xe0": "an old Office document (.xls/.doc)"}


@dataclass(frozen=True)
class UploadCheck:
    """The outcome of :func:`check_upload`: ``path`` (None when refused), ``message`` (a summary when
    accepted, the reason when refused), ``text_pair_column`` (``"text_pair"`` for a pair CSV)."""

    path: Path | None
    message: str
    text_pair_column: str | None = None

    @property
    def accepted(self) -> bool:
        return self.path is not None


def safe_upload_name(name: str, suffix: str) -> str:
    """A file name safe to write: letters, digits, '.', '_' and '-' only, at most 80 characters,
    ending in ``suffix``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(name).replace("\\", "/")).name).strip("._-")
    stem = stem[:-len(suffix)] if stem.lower().endswith(suffix) else stem
    return (stem[:80] or "upload") + suffix


def _refuse(message: str) -> UploadCheck:
    return UploadCheck(None, message)


def check_upload(task: str, name: str, data: bytes, root: str | Path | None = None) -> UploadCheck:
    """Validate an uploaded training file (``task`` pretrain: a .txt corpus; finetune: a .csv) and, if
    usable, save it under ``<runs root>/uploads/``. A refused file leaves nothing on disk.

    Quick checks first (size <= ``UPLOAD_MAX_MB``, binary magic bytes / NUL, UTF-8), then the run's
    own loaders (:func:`load_labelled` / :func:`load_documents`) read a temporary copy.
    """
    from ..modeling.checkpoint import atomic_write
    from ..runs import runs_root

    suffix = UPLOAD_TYPES[task]
    shown = Path(str(name).replace("\\", "/")).name
    if len(data) > UPLOAD_MAX_MB * 1024 * 1024:
        return _refuse(f"{shown} is {len(data) / 2**20:,.1f} MB: uploads for training are limited to "
                       f"{UPLOAD_MAX_MB} MB. For bigger data choose the 'Local ...' data source and give "
                       "its path on this machine.")
    if not data.strip():
        return _refuse(f"{shown} is empty: it has no text.")
    kind = next((k for magic, k in BINARY_MAGIC.items() if data.startswith(magic)), None)
    if kind is not None or b"\x00" in data[:8192]:
        return _refuse(f"{shown} is not a text file: it looks like {kind or 'binary data (it holds NUL bytes)'}. "
                       f"Upload a plain-text {suffix} file.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _refuse(f"{shown} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start:,} is "
                       "invalid). Save it as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet) and upload it again.")
    clean = text.encode("utf-8")  # without a BOM, which would rename the first CSV column
    pair = None
    with tempfile.TemporaryDirectory(prefix="bert-upload-") as tmp:
        probe = Path(tmp) / safe_upload_name(name, suffix)
        probe.write_bytes(clean)
        try:
            if task == "finetune":
                lines = text.splitlines()
                header = [c.strip().strip('"') for c in (lines[0] if lines else "").split(",")]
                pair = "text_pair" if "text_pair" in header else None
                ds = load_labelled(str(probe), text_pair_column=pair)
                labels = sorted(set(ds["label"]))
                if len(ds) < MIN_LABELLED:
                    return _refuse(f"{shown} has {len(ds)} usable labelled row(s) (non-empty text and label); "
                                   f"fine-tuning needs at least {MIN_LABELLED}.")
                if len(labels) < 2:
                    return _refuse(f"{shown} has a single label ({labels[0]}): classification "
                                   "needs at least 2 different labels.")
                some = ", ".join(labels[:10]) + (" ..." if len(labels) > 10 else "")
                summary = f"{len(ds):,} labelled rows, {len(labels)} labels ({some})"
                if pair:
                    summary += ", sentence pairs (text_pair)"
            else:
                ds = load_documents(str(probe))
                summary = f"{len(ds):,} documents"
        except DataError as exc:
            reason = str(exc).replace(str(probe), probe.name).split(" Choose them with --")[0]  # no CLI hint here
            return _refuse(f"{shown} cannot be used: {reason}")
        except Exception as exc:  # noqa: BLE001 - any parser failure is a bad file, never a traceback
            return _refuse(f"{shown} cannot be read: {type(exc).__name__}: {exc}")
    folder = runs_root(root) / "uploads"
    dest = folder / f"{hashlib.sha256(clean).hexdigest()[:16]}-{safe_upload_name(name, suffix)}"
    if dest.exists():
        if not dest.is_file() or dest.read_bytes() != clean:
            return _refuse(f"Cannot save {shown}: {dest} already exists with other content.")
    else:
        try:
            atomic_write(dest, lambda p: p.write_bytes(clean))
        except OSError as exc:
            return _refuse(f"Cannot save {shown} under {folder}: {exc}")
    return UploadCheck(dest, summary, pair)
