"""Safety of loading: checkpoints never run code, bad files fail clearly, nothing on disk changes.

- A corrupt / truncated safetensors file and a pickle bomb (an object whose ``__reduce__`` would
  run code) are refused by ``bertcore.modeling.checkpoint.read_state_dict`` and ``bertcore.loading.sources.load``
  with a clear error, and the bomb's code never runs.
- A failed load changes no file on disk (names, sizes, contents, times) and creates none.
- No project source unpickles: every ``torch.load`` says ``weights_only=True``; no ``pickle.load``,
  ``trust_remote_code=True``, ``np.load(allow_pickle=True)``, ``eval`` or ``exec``.
- ``.streamlit/config.toml`` binds the server to localhost and limits uploads.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from bertcore.loading import sources
from bertcore.modeling import checkpoint
from bertcore.modeling.checkpoint import CheckpointError, read_state_dict, save_safetensors
from bertcore.modeling.model import BertModel

from .conftest import ROOT, save_tiny_bert

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "."]


# ----------------------------------------------------------------------------- helpers
class Bomb:
    """Unpickling this runs ``exec`` that writes a marker file (what a malicious .bin would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def write_bomb(path: Path, marker: Path) -> None:
    """A ``.bin`` that looks like a state dict but carries a code-running object."""
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(2, 2), "evil": Bomb(marker)}, path)


def tiny_model_folder(folder: Path) -> Path:
    """A complete, loadable HF-style BERT folder (config.json, model.safetensors, vocab.txt)."""
    return save_tiny_bert(folder, BertModel, tokenizer=VOCAB, vocab_size=len(VOCAB), hidden_size=16,
                          num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder``: (size, mtime_ns, sha256), keyed by relative path."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


# ----------------------------------------------------------------------------- the bomb is real
def test_bomb_would_run_code_if_unpickled(tmp_path):
    """Control: the bomb does run code under a plain unpickler, so the refusals below mean something."""
    marker = tmp_path / "marker"
    path = tmp_path / "pytorch_model.bin"
    write_bomb(path, marker)
    torch.load(path, map_location="cpu", weights_only=False)  # what unsafe code would do
    assert marker.read_text() == "pwned"


# ----------------------------------------------------------------------------- read_state_dict
def test_pickle_bomb_bin_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "pytorch_model.bin"
    write_bomb(path, marker)
    before = snapshot(tmp_path)
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        read_state_dict(path)
    assert not marker.exists(), "unpickling ran the bomb's code"
    assert snapshot(tmp_path) == before


def test_raw_pickle_bomb_is_refused(tmp_path):
    """A plain pickle (not torch.save's zip) with the same trick."""
    marker = tmp_path / "marker"
    path = tmp_path / "weights.bin"
    path.write_bytes(pickle.dumps({"w": Bomb(marker)}, protocol=2))
    with pytest.raises(CheckpointError):
        read_state_dict(path)
    assert not marker.exists()


def test_bomb_named_safetensors_is_refused(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "model.safetensors"
    write_bomb(path, marker)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        read_state_dict(path)
    assert not marker.exists()


def test_bin_of_non_tensors_is_refused(tmp_path):
    """weights_only allows plain containers; a dict of strings is still not a state dict."""
    path = tmp_path / "pytorch_model.bin"
    torch.save({"a": "not a tensor", "b": [1, 2]}, path)
    with pytest.raises(CheckpointError, match="not a state dict"):
        read_state_dict(path)


@pytest.mark.parametrize("damage", ["random", "truncated", "empty", "huge_header", "bad_json_header", "text"])
def test_corrupt_safetensors_is_refused(tmp_path, damage):
    path = tmp_path / "model.safetensors"
    save_safetensors({"w": torch.arange(64, dtype=torch.float32).reshape(8, 8)}, path)
    good = path.read_bytes()
    if damage == "random":
        data = os.urandom(len(good))
    elif damage == "truncated":
        data = good[: len(good) // 2]
    elif damage == "empty":
        data = b""
    elif damage == "huge_header":  # header length far past the end of the file
        data = struct.pack("<Q", 1 << 40) + good[8:]
    elif damage == "bad_json_header":
        header = b"{not json" + b" " * 20
        data = struct.pack("<Q", len(header)) + header + b"\0" * 16
    else:
        data = "this is a text file, not weights\n".encode()
    path.write_bytes(data)
    with pytest.raises(CheckpointError, match="cannot read weights model.safetensors"):
        read_state_dict(path)
    assert path.read_bytes() == data  # untouched


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError):
        read_state_dict(tmp_path / "nope.safetensors")


# ----------------------------------------------------------------------------- sources.load
def test_good_tiny_folder_loads(tmp_path):
    """Control: the folder the bad cases below start from loads, and loading changes nothing."""
    folder = tiny_model_folder(tmp_path / "m")
    before = snapshot(folder)
    loaded = sources.load(sources.ModelSource("local", str(folder)))
    assert loaded.config.hidden_size == 16
    assert snapshot(folder) == before


def _break(folder: Path, how: str, marker: Path) -> None:
    weights = folder / "model.safetensors"
    if how == "truncated_safetensors":
        weights.write_bytes(weights.read_bytes()[:100])
    elif how == "random_safetensors":
        weights.write_bytes(os.urandom(4096))
    elif how == "pickle_bomb_bin":
        weights.unlink()
        write_bomb(folder / "pytorch_model.bin", marker)
    elif how == "bomb_as_safetensors":
        write_bomb(weights, marker)
    elif how == "no_weights":
        weights.unlink()
    elif how == "corrupt_config":
        (folder / "config.json").write_text("{ not json", encoding="utf-8")
    elif how == "config_out_of_range":
        cfg = json.loads((folder / "config.json").read_text())
        cfg["num_attention_heads"] = 5  # does not divide hidden_size 16
        (folder / "config.json").write_text(json.dumps(cfg))
    elif how == "config_wrong_shapes":
        cfg = json.loads((folder / "config.json").read_text())
        cfg["hidden_size"], cfg["intermediate_size"] = 32, 64
        (folder / "config.json").write_text(json.dumps(cfg))
    elif how == "shard_index_bomb":
        weights.unlink()
        write_bomb(folder / "evil.bin", marker)
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"x": "evil.bin"}}))
    elif how == "no_tokenizer":
        (folder / "vocab.txt").unlink()
    elif how == "empty_vocab":
        (folder / "vocab.txt").write_text("", encoding="utf-8")
    elif how == "non_utf8_vocab":
        (folder / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\xfa\x80 not utf-8\n" + bytes(range(128, 256)))
    elif how == "tokenizer_json_garbage":
        (folder / "tokenizer.json").write_text("{garbage", encoding="utf-8")
    elif how == "tokenizer_json_wrong_shape":
        (folder / "tokenizer.json").write_text('{"a": 1}', encoding="utf-8")
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated_safetensors", "random_safetensors", "pickle_bomb_bin",
                                 "bomb_as_safetensors", "no_weights", "corrupt_config", "config_out_of_range",
                                 "config_wrong_shapes", "shard_index_bomb", "no_tokenizer", "empty_vocab",
                                 "non_utf8_vocab", "tokenizer_json_garbage", "tokenizer_json_wrong_shape"])
def test_bad_folder_fails_clearly_and_changes_nothing(tmp_path, how):
    folder = tiny_model_folder(tmp_path / "m")
    marker = tmp_path / "marker"
    _break(folder, how, marker)
    before = snapshot(tmp_path)
    with pytest.raises(sources.SourceError) as info:
        sources.load(sources.ModelSource("local", str(folder)))
    message = str(info.value)
    assert str(folder) in message or folder.name in message, message
    assert "Traceback" not in message
    assert not marker.exists(), "loading ran code from the checkpoint"
    assert snapshot(tmp_path) == before, "a failed load changed files on disk"


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(sources.SourceError, match="no folder"):
        sources.load(sources.ModelSource("local", str(tmp_path / "absent")))


@pytest.mark.parametrize("ref", ["a" * 20_000, "/" + "b" * 300, "abc\x00def", "~nosuchuser/x", "/tmp/🤖/مرحبا"])
def test_odd_folder_names_are_a_clear_error(ref):
    """What a person might type or paste as a folder: a SourceError, never OSError / ValueError."""
    with pytest.raises(sources.SourceError):
        sources.load(sources.ModelSource("local", ref))


# ----------------------------------------------------------------------------- no unpickling in the code
def _project_sources() -> list[Path]:
    files = [ROOT / "app.py"] if (ROOT / "app.py").exists() else []
    for pkg in ("bertcore", "explorer", "bench"):
        files += sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else []
    return files


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return "?"


def _kw(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def unsafe_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        short = name.rsplit(".", 1)[-1]
        if name == "torch.load" and not _is_true(_kw(node, "weights_only")):
            found.append((node.lineno, "torch.load without weights_only=True"))
        elif name in ("pickle.load", "pickle.loads", "pickle.Unpickler", "dill.load", "dill.loads",
                      "joblib.load", "cloudpickle.load", "cloudpickle.loads", "marshal.loads"):
            found.append((node.lineno, name))
        elif name in ("np.load", "numpy.load") and _is_true(_kw(node, "allow_pickle")):
            found.append((node.lineno, f"{name}(allow_pickle=True)"))
        elif name in ("eval", "exec"):
            found.append((node.lineno, name))
        elif _is_true(_kw(node, "trust_remote_code")):
            found.append((node.lineno, f"{short}(trust_remote_code=True)"))
    return found


def test_unsafe_call_detector_works():
    code = ("import torch, pickle\ntorch.load('a')\ntorch.load('a', weights_only=False)\n"
            "torch.load('a', weights_only=True)\npickle.loads(b'')\nx.from_pretrained('a', trust_remote_code=True)\n")
    assert [line for line, _ in unsafe_calls(ast.parse(code))] == [2, 3, 5, 6]


def test_project_code_never_unpickles():
    problems = []
    for path in _project_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        problems += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in unsafe_calls(tree)]
    assert not problems, "unsafe loading in project code:\n" + "\n".join(problems)


def test_checkpoint_module_reads_only_safely():
    """The reader's own code: safetensors or torch.load(weights_only=True), nothing else."""
    tree = ast.parse(Path(checkpoint.__file__).read_text(encoding="utf-8"))
    loads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "torch.load"]
    assert loads and all(_is_true(_kw(n, "weights_only")) for n in loads)


# ----------------------------------------------------------------------------- server defaults
def test_streamlit_config_binds_to_localhost_and_limits_uploads():
    path = ROOT / ".streamlit" / "config.toml"
    cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    server = cfg["server"]
    assert server["address"] in ("127.0.0.1", "localhost")
    assert server["headless"] is True
    assert 1 <= server["maxUploadSize"] <= 200
    assert server.get("enableXsrfProtection", True) is True
    assert server.get("enableCORS", True) is True
    assert cfg["browser"]["gatherUsageStats"] is False


def test_streamlit_reads_the_project_config(tmp_path):
    """Streamlit itself, started from the repository root, picks these values up."""
    code = ("from streamlit import config as c; c.get_config_options(force_reparse=True); "
            "print(c.get_option('server.address'), c.get_option('server.maxUploadSize'), "
            "c.get_option('browser.gatherUsageStats'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    address, upload, stats = out.stdout.split()[-3:]
    assert address == "127.0.0.1" and int(upload) <= 200 and stats == "False"
