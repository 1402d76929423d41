"""Config, tokenizer, checkpoint loading and model sources."""

import json

import pytest
import torch
from safetensors.torch import save_file

from bertcore import BertConfig, BertForSequenceClassification, BertModel, ConfigError, InputError, TextError, encode
from bertcore import sources
from bertcore.checkpoint import CheckpointError
from bertcore.config import PRESETS, preset

from .conftest import tiny_config


@pytest.mark.parametrize("bad", [dict(hidden_size=30, num_attention_heads=4), dict(num_hidden_layers=0),
                                 dict(hidden_dropout_prob=1.5), dict(hidden_act="tanhh"), dict(pad_token_id=10**6)])
def test_config_rejects_invalid_fields_with_a_message(bad):
    with pytest.raises(ConfigError) as err:
        BertConfig(**bad)
    assert any(k in str(err.value) for k in bad)


def test_config_reads_hf_json_and_roundtrips(packaged, tmp_path):
    cfg = BertConfig.from_json_file(packaged.path / "config.json")
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (384, 6, 12)
    cfg.save_json(tmp_path / "config.json")
    assert BertConfig.from_json_file(tmp_path / "config.json") == cfg
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read config"):
        BertConfig.from_json_file(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="roberta"):
        BertConfig.from_dict({"model_type": "roberta"})


def test_presets_and_unknown_preset_message():
    assert {"nano", "mini", "base", "large"} <= set(PRESETS)
    assert preset("nano").num_hidden_layers == 2 and preset("nano").hidden_size == 256
    with pytest.raises(ConfigError, match="nano"):
        preset("gigantic")


def test_tokenizer_encodes_pairs_with_segments_and_unique_word_ids(packaged):
    enc = encode(packaged.tokenizer, "Unbelievably HUGE", "second part")
    assert enc.tokens[0] == packaged.tokenizer.cls_token and enc.tokens.count(packaged.tokenizer.sep_token) == 2
    assert "huge" in enc.tokens  # uncased normalisation
    assert any(t.startswith("##") for t in enc.tokens)
    sep = enc.tokens.index(packaged.tokenizer.sep_token)
    assert set(enc.token_type_ids[: sep + 1]) == {0} and set(enc.token_type_ids[sep + 1:]) == {1}
    words = [w for w in enc.word_ids if w is not None]
    assert words == sorted(words) and len(enc.words) == len(set(words)) == 4
    assert enc.num_truncated == 0


def test_tokenizer_truncates_to_max_positions_and_reports_it(packaged):
    enc = encode(packaged.tokenizer, "word " * 1000)
    assert len(enc) == 512 and enc.num_truncated == 1002 - 512
    assert enc.tokens[-1] == packaged.tokenizer.sep_token


@pytest.mark.parametrize("text", ["", "   \n\t", "\x00\x01\x02", None, "a" * 200_001])
def test_tokenizer_refuses_unreadable_text_with_a_message(packaged, text):
    with pytest.raises(TextError):
        encode(packaged.tokenizer, text)


@pytest.mark.parametrize("text", ["🙂 emoji 🚀", "שלום עולם", "zero\u200bwidth\u200d joiner", "ctrl\x07char\x00s"])
def test_tokenizer_handles_odd_unicode(packaged, text):
    enc = encode(packaged.tokenizer, text)
    assert len(enc) >= 3 and "\x00" not in "".join(enc.tokens)


def test_model_refuses_too_long_or_out_of_vocab_inputs(packaged):
    with pytest.raises(InputError, match="512 positions"):
        packaged.model(torch.zeros(1, 513, dtype=torch.long))
    with pytest.raises(InputError, match="input_ids must lie"):
        packaged.model(torch.tensor([[101, 40000, 102]]))


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
