"""Results shipped beside a model: heavy computations of the app's default views, written once into the model's
folder (``shipped.npz``) and used only while they still belong to that model.

Each entry is keyed by a name and its parameters (a JSON object: segment counts, seeds, the input text, a code
version); the file as a whole is keyed by :func:`model_hash`, a SHA-256 of the model's files (weights, config and
tokenizer: :data:`bertcore.loading.sources.MODEL_FILES`). :func:`read` returns None when the file is missing or
unreadable, the hash differs (a changed weight, another tokenizer) or no entry has those parameters: the caller
then computes as usual. What the entries are and how they are computed: :mod:`bertcore.analysis.shipped`.

Values are stored without pickle: dataclasses of ``bertcore`` (and dicts, lists, tuples, numbers, strings) become
a JSON tree, numpy arrays and torch tensors ``.npz`` arrays. Decoding builds only ``bertcore`` dataclasses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .sources import file_stats

FILE_NAME = "shipped.npz"
OLD_FILE_NAMES = ("precomputed.npz",)  # the file's earlier name: a model folder that still has one is read as before
FORMAT = 1
_CHUNK = 1 << 20


class ShippedFileError(ValueError):
    """A value that cannot be stored (an object that is not data, an array of Python objects)."""


# ----------------------------------------------------------------------------- keys
@lru_cache(maxsize=16)
def _hash(folder: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    for name, size, _ in stamp:
        digest.update(f"{name}\0{size}\0".encode())
        with open(Path(folder) / name, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def model_hash(folder: str | Path) -> str:
    """SHA-256 over the names, sizes and bytes of the model files present in ``folder`` (weights, config,
    tokenizer). Computed once per version of the files (sizes and modification times) in a process.

    Raises:
        OSError: a file that cannot be read.
    """
    folder = Path(folder).resolve()
    return _hash(str(folder), file_stats(folder))


def files_hash(folder: str | Path, patterns: tuple[str, ...] = ("**/cfg.json", "**/*.safetensors")) -> str:
    """SHA-256 over the relative names, sizes and bytes of the files under ``folder`` matching ``patterns`` (by
    default what an SAE or transcoder folder computes with: ``cfg.json`` and weights, not its README or metrics).
    Computed once per version of the files in a process; a parameter of an entry that depends on such files (a
    transcoder set of the Circuits page), so that rewritten files miss the shipped entry.

    Raises:
        OSError: a file that cannot be read.
    """
    folder = Path(folder).resolve()
    found = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    stamp = tuple((p.relative_to(folder).as_posix(), (st := p.stat()).st_size, st.st_mtime_ns) for p in found)
    return _hash(str(folder), stamp)


def entry_id(name: str, params: dict) -> str:
    """The key of one entry: its name and a digest of its parameters (JSON, keys sorted)."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return f"{name}:{hashlib.sha256(blob.encode()).hexdigest()[:20]}"


# ----------------------------------------------------------------------------- values <-> JSON tree + arrays
def encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``value`` as a JSON-able tree; its arrays are added to ``arrays`` under fresh names.

    Raises:
        ShippedFileError: an object that is not a dataclass, container, number, string, array or tensor.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("torch"):
        is_tensor = not isinstance(value, np.ndarray)
        arr = value.detach().cpu().numpy() if is_tensor else value
        if arr.dtype == object:
            raise ShippedFileError("arrays of Python objects cannot be stored")
        ref = f"a{len(arrays)}"
        arrays[ref] = arr
        return {"__tensor__" if is_tensor else "__array__": ref}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith("bertcore."):
            raise ShippedFileError(f"only bertcore dataclasses are stored, not {cls.__module__}.{cls.__name__}")
        fields = {f.name: encode(getattr(value, f.name), arrays) for f in dataclasses.fields(value) if f.init}
        return {"__dataclass__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [encode(v, arrays) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {"__dict__": {k: encode(v, arrays) for k, v in value.items()}}
        return {"__items__": [[encode(k, arrays), encode(v, arrays)] for k, v in value.items()]}
    raise ShippedFileError(f"cannot store a {type(value).__name__}")


def decode(tree: Any, arrays) -> Any:
    """Inverse of :func:`encode` (``arrays``: a mapping name -> array, e.g. an open ``.npz``).

    Raises:
        ShippedFileError: a class outside ``bertcore`` or one that is not a dataclass.
    """
    if isinstance(tree, list):
        return [decode(v, arrays) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "__array__" in tree:
        return np.asarray(arrays[tree["__array__"]])
    if "__tensor__" in tree:
        import torch

        return torch.from_numpy(np.array(arrays[tree["__tensor__"]]))
    if "__tuple__" in tree:
        return tuple(decode(v, arrays) for v in tree["__tuple__"])
    if "__dict__" in tree:
        return {k: decode(v, arrays) for k, v in tree["__dict__"].items()}
    if "__items__" in tree:
        return {decode(k, arrays): decode(v, arrays) for k, v in tree["__items__"]}
    if "__dataclass__" in tree:
        module, _, qualname = tree["__dataclass__"].partition(":")
        if not module.startswith("bertcore."):
            raise ShippedFileError(f"refusing to build {tree['__dataclass__']}: not a bertcore class")
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not dataclasses.is_dataclass(cls):
            raise ShippedFileError(f"{tree['__dataclass__']} is not a dataclass")
        return cls(**{k: decode(v, arrays) for k, v in tree["fields"].items()})
    raise ShippedFileError(f"unknown node {sorted(tree)}")


# ----------------------------------------------------------------------------- the file
def write(folder: str | Path, entries: list[tuple[str, dict, Any]], notes: dict | None = None) -> Path:
    """Write ``folder/shipped.npz`` (compressed, atomically) holding each ``(name, params, value)`` of
    ``entries``, keyed by :func:`model_hash` of ``folder``; a file of an earlier name (:data:`OLD_FILE_NAMES`) is
    removed. ``notes``: free JSON for people (what wrote it).

    Raises:
        ShippedFileError: a value that cannot be stored; OSError: the folder cannot be written.
    """
    folder = Path(folder)
    arrays: dict[str, np.ndarray] = {}
    manifest = {"format": FORMAT, "model_hash": model_hash(folder), "notes": notes or {}, "entries": {}}
    for name, params, value in entries:
        manifest["entries"][entry_id(name, params)] = {"name": name, "params": params, "value": encode(value, arrays)}
    buf = io.BytesIO()
    head = np.frombuffer(json.dumps(manifest, separators=(",", ":")).encode(), dtype=np.uint8)  # UTF-8 bytes
    np.savez_compressed(buf, __manifest__=head, **arrays)
    path = folder / FILE_NAME
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{FILE_NAME}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(buf.getvalue())
    os.chmod(tmp, 0o644)  # a file of the repository, readable by whoever serves the app
    os.replace(tmp, path)
    for old in OLD_FILE_NAMES:  # the new file holds what the old one did, and is read first
        (folder / old).unlink(missing_ok=True)
    return path


@lru_cache(maxsize=8)
def _open(path: str, size: int, mtime_ns: int) -> tuple[dict, Any] | None:
    try:
        npz = np.load(path, allow_pickle=False)
        manifest = json.loads(npz["__manifest__"].tobytes().decode())
    except (OSError, ValueError, KeyError, UnicodeDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    return manifest, npz


def manifest(folder: str | Path) -> dict | None:
    """The manifest of ``folder``'s file (format, model hash, notes, entries with their params), or None."""
    opened = _opened(Path(folder))
    return None if opened is None else opened[0]


def _opened(folder: Path):
    for name in (FILE_NAME, *OLD_FILE_NAMES):
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            continue
        return _open(str(path.resolve()), st.st_size, st.st_mtime_ns)
    return None


def read(folder: str | Path, name: str, params: dict) -> Any | None:
    """The shipped value of ``(name, params)`` for the model in ``folder``, or None: no file, an unreadable one,
    a model whose files changed since it was written (:func:`model_hash`), or no entry with those parameters."""
    folder = Path(folder)
    opened = _opened(folder)
    if opened is None:
        return None
    head, npz = opened
    entry = head["entries"].get(entry_id(name, params))
    if entry is None or entry["params"] != json.loads(json.dumps(params, default=str)):
        return None
    try:
        if head["model_hash"] != model_hash(folder):
            return None
        return decode(entry["value"], npz)
    except (OSError, KeyError, ValueError):
        return None
