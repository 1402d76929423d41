"""bertcore.loading.shipped_file: results stored beside a model without pickle, keyed by the model's files and the
computation's parameters; a changed weight, tokenizer or config, other parameters, or a damaged file make
``read`` return None (the app then computes)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from bertcore.loading import shipped_file
from bertcore.analysis.papers.evalset import Segment
from bertcore.analysis.representations.corpus_search import Hit
from bertcore.modeling.heads import BertForPreTraining
from bertcore.loading.shipped_file import ShippedFileError

from .conftest import save_tiny_bert

PARAMS = {"version": 1, "n_segments": 10, "text": "a b"}


@pytest.fixture
def folder(tmp_path):
    return save_tiny_bert(tmp_path / "model", BertForPreTraining, tokenizer="full")


def sample_value():
    return {"hits": [Hit("bank", 0.9, 3, 7, "the [bank] on")], "grid": np.arange(12.0).reshape(3, 4),
            "ids": torch.tensor([[1, 2], [3, 4]]), "pair": (1, "x", None), "nan": float("nan"),
            "by_int": {3: [Segment(["a."], ["b."])]}, "flag": np.bool_(True), "count": np.int64(5)}


def test_a_value_round_trips_exactly(folder):
    shipped_file.write(folder, [("demo", PARAMS, sample_value())], notes={"by": "test"})
    got = shipped_file.read(folder, "demo", PARAMS)
    assert got["hits"] == sample_value()["hits"] and isinstance(got["hits"][0], Hit)
    np.testing.assert_array_equal(got["grid"], np.arange(12.0).reshape(3, 4))
    assert isinstance(got["ids"], torch.Tensor) and got["ids"].tolist() == [[1, 2], [3, 4]]
    assert got["pair"] == (1, "x", None) and np.isnan(got["nan"])
    assert got["by_int"] == {3: [Segment(["a."], ["b."])]} and got["flag"] is True and got["count"] == 5
    assert shipped_file.manifest(folder)["notes"] == {"by": "test"}


def test_other_parameters_or_names_are_not_found(folder):
    shipped_file.write(folder, [("demo", PARAMS, 1)])
    assert shipped_file.read(folder, "demo", PARAMS) == 1
    assert shipped_file.read(folder, "demo", {**PARAMS, "n_segments": 11}) is None
    assert shipped_file.read(folder, "demo", {**PARAMS, "version": 2}) is None
    assert shipped_file.read(folder, "other", PARAMS) is None
    assert shipped_file.read(folder.parent, "demo", PARAMS) is None  # no file there


def changed_weight(folder):
    weights = load_file(folder / "model.safetensors")
    name = next(k for k in weights if k.endswith("attention.self.query.weight"))
    weights[name][0, 0] += 1e-3
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("change", ["weight", "tokenizer", "config"])
def test_a_changed_model_ignores_the_shipped_file(folder, tmp_path, change):
    shipped_file.write(folder, [("demo", PARAMS, 1)])
    copy = shutil.copytree(folder, tmp_path / "copy")
    assert shipped_file.read(copy, "demo", PARAMS) == 1  # the same files elsewhere: still theirs
    if change == "weight":
        changed_weight(copy)
    elif change == "tokenizer":
        vocab = (copy / "vocab.txt").read_text().splitlines()
        vocab[2000], vocab[2001] = vocab[2001], vocab[2000]
        (copy / "vocab.txt").write_text("\n".join(vocab) + "\n")
    else:
        (copy / "config.json").write_text((copy / "config.json").read_text().replace('"layer_norm_eps": 1e-12',
                                                                                     '"layer_norm_eps": 1e-06'))
    assert shipped_file.model_hash(copy) != shipped_file.model_hash(folder)
    assert shipped_file.read(copy, "demo", PARAMS) is None
    assert shipped_file.read(folder, "demo", PARAMS) == 1


def test_a_damaged_or_foreign_file_is_ignored(folder):
    (folder / shipped_file.FILE_NAME).write_bytes(b"not an npz")
    assert shipped_file.read(folder, "demo", PARAMS) is None and shipped_file.manifest(folder) is None


@dataclass
class Foreign:
    x: int


def test_only_data_is_stored_and_only_bertcore_classes_are_built():
    with pytest.raises(ShippedFileError, match="only bertcore"):
        shipped_file.encode(Foreign(1), {})
    with pytest.raises(ShippedFileError, match="cannot store"):
        shipped_file.encode(object(), {})
    with pytest.raises(ShippedFileError, match="Python objects"):
        shipped_file.encode(np.array([object()]), {})
    with pytest.raises(ShippedFileError, match="not a bertcore class"):
        shipped_file.decode({"__dataclass__": "os:PathLike", "fields": {}}, {})
    with pytest.raises(ShippedFileError, match="not a dataclass"):
        shipped_file.decode({"__dataclass__": "bertcore.loading.shipped_file:ShippedFileError", "fields": {}}, {})


def test_a_file_of_the_earlier_name_is_read_and_replaced_by_a_write(folder):
    """Model folders written before the file was named shipped.npz keep their results: precomputed.npz is read,
    and the next write leaves one file of the new name."""
    shipped_file.write(folder, [("demo", PARAMS, 1)])
    (folder / shipped_file.FILE_NAME).rename(folder / "precomputed.npz")
    assert shipped_file.read(folder, "demo", PARAMS) == 1
    shipped_file.write(folder, [("demo", PARAMS, 2)])
    assert not (folder / "precomputed.npz").exists() and shipped_file.read(folder, "demo", PARAMS) == 2
