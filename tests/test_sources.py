"""bertcore.loading.sources: local folders (head detected), clear errors, run checkpoints as sources."""

import json

import pytest

from bertcore import BertModel
from bertcore.loading import sources

from .conftest import tiny_config


def test_sources_load_a_local_folder_with_auto_head(tmp_path, packaged):
    from bertcore import BertForMaskedLM

    model = BertForMaskedLM(tiny_config(vocab_size=packaged.config.vocab_size))
    model.save_pretrained(tmp_path)
    packaged.tokenizer.save_pretrained(tmp_path)
    loaded = sources.load(sources.ModelSource("local", str(tmp_path)))
    assert loaded.head == "mlm" and loaded.has_mlm_head and isinstance(loaded.encoder, BertModel)
    assert not packaged.has_mlm_head


def test_sources_give_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(sources.SourceError, match="no folder"):
        sources.load(sources.ModelSource("local", str(tmp_path / "nope")))
    with pytest.raises(sources.SourceError, match="config.json"):
        sources.load(sources.ModelSource("local", str(tmp_path)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(sources.SourceError, match="hub"):
        sources.load(sources.ModelSource("hub", "bert-base-uncased"))


def test_run_checkpoints_are_listed_as_sources(tmp_path):
    done = tmp_path / "run1" / "checkpoints" / "step-000020"
    done.mkdir(parents=True)
    (done / "config.json").write_text(json.dumps({}))
    (done / "model.safetensors").write_bytes(b"")
    (done / "trainer_state.pt").write_bytes(b"")
    (tmp_path / "run1" / "checkpoints" / ".tmp-step-000030").mkdir()
    no_state = tmp_path / "run1" / "checkpoints" / "step-000040"  # incomplete by the one rule (bertcore.runs.RunDir)
    no_state.mkdir()
    (no_state / "config.json").write_text(json.dumps({}))
    (no_state / "model.safetensors").write_bytes(b"")
    found = sources.list_run_sources(tmp_path)
    assert [s.ref for s in found] == [str(done)] and "step 20" in found[0].label
    assert sources.list_run_sources(tmp_path / "missing") == []
