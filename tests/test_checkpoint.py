"""bertcore.modeling.checkpoint: old LayerNorm names renamed, fresh heads reported, mismatches refused."""

import pytest
import torch
from safetensors.torch import save_file

from bertcore import BertForSequenceClassification, BertModel
from bertcore.modeling.checkpoint import CheckpointError

from .conftest import tiny_config


def _hf_style_folder(tmp_path, model, rename=None):
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if rename:
        state = {rename(k): v for k, v in state.items()}
    save_file(state, str(tmp_path / "model.safetensors"))
    model.config.save_json(tmp_path / "config.json")
    return tmp_path


def test_loader_renames_old_layernorm_names_and_reports_a_fresh_classifier(tmp_path):
    enc = BertModel(tiny_config())
    folder = _hf_style_folder(tmp_path, enc,
                              rename=lambda k: "bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma"))
    clf = BertForSequenceClassification.from_pretrained(folder)
    report = clf.load_report
    assert sorted(report.missing) == ["classifier.bias", "classifier.weight"]
    assert any(old.endswith("gamma") and new.endswith("weight") for old, new in report.renamed)
    torch.testing.assert_close(clf.bert.embeddings.word_embeddings.weight, enc.embeddings.word_embeddings.weight)
    assert "missing" in report.summary()


def test_loader_refuses_mismatched_shapes_and_incomplete_encoders(tmp_path):
    enc = BertModel(tiny_config())
    folder = _hf_style_folder(tmp_path, enc)
    with pytest.raises(CheckpointError, match="shape"):
        BertModel.from_pretrained(folder, config=tiny_config(hidden_size=64))
    state = {k: v for k, v in enc.state_dict().items() if "layer.1." not in k}
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(CheckpointError, match="encoder weights"):
        BertModel.from_pretrained(folder)
