"""AppTest of the Model anatomy page: parameter counts and presets equal transformers', the pooler text
input handles bad text, an MLM model has no pooler."""

from __future__ import annotations

from bertcore.loading import sources
from bertcore.modeling.config import PRESETS

from .conftest import BAD_TEXTS, assert_clean, dataframes, messages, page


def test_anatomy_counts_and_presets(packaged):
    at = page("anatomy", sources.PACKAGED)
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    n = packaged.model.num_parameters()
    assert metrics["Parameters"] == f"{n / 1e6:.1f} M"
    assert any(f"{n:,} parameters in {len(list(packaged.model.named_parameters()))} named tensors" in c.value
               for c in at.caption)
    assert metrics["Named tensors"] == str(len(list(packaged.model.named_parameters())))
    presets = [df for df in dataframes(at) if "preset" in df.columns][0]
    assert list(presets["preset"]) == list(PRESETS)
    assert presets["equal to transformers"].all()
    base = presets.set_index("preset").loc["base"]
    assert base["BertModel"] == 109_482_240 and base["named tensors"] == 199
    assert presets.set_index("preset").loc["large", "BertModel"] == 335_141_888
    at.selectbox(key="ana_group").set_value("pooler").run()
    table = [df for df in dataframes(at) if "part" in df.columns][0]
    assert list(table["name"]) == ["pooler.dense.weight", "pooler.dense.bias"]


def test_anatomy_pooler_text_bad_inputs():
    at = page("anatomy")
    for case in ("empty", "whitespace", "20k_chars", "emoji", "rtl", "zero_width_control", "only_zero_width", "html"):
        at.text_input(key="ana_text").input(BAD_TEXTS[case]).run()
        assert_clean(at)
        if case in ("empty", "whitespace", "only_zero_width"):
            assert messages(at)["warning"], case
        else:
            assert not messages(at)["error"], case
            # the one truncation message of every page, only for the long text
            assert any("were cut off" in w for w in messages(at)["warning"]) == (case == "20k_chars"), case


def test_anatomy_of_an_mlm_model(mlm_source):
    at = page("anatomy", source=mlm_source)
    assert_clean(at)
    info = " ".join(messages(at)["info"])
    assert "no pooler" in info and "cls.predictions.decoder.weight" in info
