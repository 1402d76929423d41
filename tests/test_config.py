"""bertcore.modeling.config: BertConfig checks, HF config.json round trip, presets."""

import pytest

from bertcore import BertConfig, ConfigError
from bertcore.modeling.config import PRESETS, preset


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
