"""AppTest of the Masking, Embeddings, Positional embeddings and Model anatomy pages: default and
bad inputs give a message in the page, never a traceback; the views show what the user relies on."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from streamlit.testing.v1 import AppTest

import numpy as np

from bertcore import fill_mask, masking, positional
from bertcore.config import PRESETS
from bertcore.sources import ModelSource, load, packaged_model_dir
from bertcore.tokenizer import encode

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "explorer" / "app_pages"

BAD_TEXTS = {
    "empty": "",
    "whitespace": "   \n\t  ",
    "20k_chars": ("Long text keeps going. " * 900)[:20_000],
    "over_max_positions": "token " * 600,
    "emoji": "😀🎉 emoji only then words 👍🏽",
    "rtl": "مرحبا بالعالم שלום עולם",
    "zero_width_control": "zero\u200bwidth\u200c and\u0000 control\x07 chars\u200d",
    "only_zero_width": "\u200b\u200c\u200d",
    "no_maskable_token": "[MASK] [SEP] [CLS]",
    "typed_mask": "The capital of France is [MASK].",
    "lower_mask": "the [mask] sat on the mat",
    "html": "<script>alert(1)</script> <b>bold</b>",
}


# ----------------------------------------------------------------------------- helpers
def page(name: str, source: ModelSource | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=120)
    if source is not None:
        at.session_state["model_source"] = source
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def messages(at: AppTest) -> dict[str, list[str]]:
    return {kind: [str(e.value) for e in getattr(at, kind)] for kind in ("error", "warning", "info", "success")}


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    texts = [str(m.value) for m in at.markdown] + sum(messages(at).values(), [])
    assert not any("Traceback" in t for t in texts)


def array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or a typed array ``{"dtype", "bdata", "shape"}`` (plotly >= 6)."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(x) for x in shape.split(",")]
        return data.reshape(shape) if shape else data
    return np.asarray(value, dtype=float)


def chart_specs(at: AppTest) -> list[dict]:
    """The Plotly figures of the page, as the JSON Streamlit sends to the browser."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def dataframes(at: AppTest) -> list:
    return [d.value for d in at.dataframe]


@pytest.fixture(scope="module")
def mlm_source(tmp_path_factory) -> ModelSource:
    """A tiny transformers BertForMaskedLM (random weights) with the packaged WordPiece tokenizer."""
    folder = tmp_path_factory.mktemp("tiny_mlm")
    src = packaged_model_dir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, folder / name)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=512)
    torch.manual_seed(0)
    transformers.BertForMaskedLM(cfg).eval().save_pretrained(folder)
    return ModelSource("local", str(folder), "tiny MLM")


# ----------------------------------------------------------------------------- every page, default and bad text
@pytest.mark.parametrize("name", ["masking", "embeddings", "positions", "anatomy"])
def test_page_runs_with_defaults(name):
    at = page(name)
    assert_clean(at)
    assert not messages(at)["error"]


@pytest.mark.parametrize("name,key", [("masking", "msk_text"), ("embeddings", "emb_text")])
def test_text_pages_handle_bad_text(name, key):
    """Every bad input in turn on one page session (as a user would type them)."""
    at = page(name, **({"emb_pair_on": False} if name == "embeddings" else {}))
    for case, text in BAD_TEXTS.items():
        at.text_area(key=key).input(text).run()
        assert_clean(at)
        msgs = messages(at)
        if case in ("empty", "whitespace"):
            assert any("empty" in w for w in msgs["warning"]), (case, msgs)
        elif case == "only_zero_width":
            assert any("no token" in w for w in msgs["warning"]), (case, msgs)
        elif case in ("20k_chars", "over_max_positions"):
            assert any("cut off" in w for w in msgs["warning"]), (case, msgs)
        elif case == "no_maskable_token" and name == "masking":
            assert any("no token that can be masked" in i for i in msgs["info"]), (case, msgs)
        else:
            assert not msgs["error"] and not msgs["warning"], (case, msgs)
        if case == "html":  # user text is escaped in every figure, never rendered as markup
            dumped = json.dumps(chart_specs(at), ensure_ascii=False)
            assert "<script>" not in dumped and "<b>bold" not in dumped
            assert "&lt;" in dumped  # the tokens "<", ">" are shown, escaped


# ----------------------------------------------------------------------------- masking
def selected_table(at: AppTest):
    for df in dataframes(at):
        if "decision" in df.columns:
            return df
    return None


def test_masking_rate_zero_and_one():
    at = page("masking", msk_rate=0.0)
    assert_clean(at)
    assert any("rate is 0" in i for i in messages(at)["info"])
    assert at.metric[0].value.startswith("0 of ")
    at.slider(key="msk_rate").set_value(1.0).run()
    assert_clean(at)
    sel, _, elig = at.metric[0].value.partition(" of ")
    assert sel == elig and int(sel) > 0
    assert len(selected_table(at)) == int(sel)


def test_masking_split_all_mask_and_all_random():
    at = page("masking", msk_rate=1.0, msk_split=(1.0, 1.0))
    assert_clean(at)
    table = selected_table(at)
    assert set(table["decision"]) == {"[MASK]"} and set(table["model sees"]) == {"[MASK]"}
    at.slider(key="msk_split").set_value((0.0, 1.0)).run()
    table = selected_table(at)
    assert set(table["decision"]) == {"random token"}


def test_masking_matches_bertcore_for_the_seed_and_resample_changes_the_draw(packaged):
    at = page("masking", msk_rate=0.5)
    assert_clean(at)
    before = selected_table(at)
    tok = packaged.tokenizer
    enc = encode(tok, at.text_area(key="msk_text").value)
    t = enc.tensors()
    r = masking.mask_for_tokenizer(tok, t["input_ids"], t["attention_mask"], mlm_probability=0.5,
                                   generator=torch.Generator().manual_seed(0))
    assert list(before["position"]) == torch.nonzero(r.decision[0]).reshape(-1).tolist()
    at.button(key="msk_resample").click().run()
    assert at.number_input(key="msk_seed").value == 1
    after = selected_table(at)
    assert list(before["position"]) != list(after["position"]) or list(before["decision"]) != list(after["decision"])


def test_masking_whole_word_option_runs(packaged):
    at = page("masking", msk_wwm=True, msk_rate=0.5)
    at.text_area(key="msk_text").input("Unbelievably tokenization embeddings").run()
    assert_clean(at)
    table = selected_table(at)
    enc = encode(packaged.tokenizer, "Unbelievably tokenization embeddings")
    assert table is not None, "seed 0 at rate 0.5 selects some of the 3 words"
    chosen = {enc.word_ids[p] for p in table["position"]}
    expected = [p for p, w in enumerate(enc.word_ids) if w in chosen]
    assert sorted(table["position"]) == expected
    assert any(len([p for p, w in enumerate(enc.word_ids) if w == c]) > 1 for c in chosen), "a multi-piece word"


def test_masking_without_mlm_head_says_so():
    at = page("masking")
    info = " ".join(messages(at)["info"])
    assert "no MLM head" in info and "Train page" in info and "MiniLM-MLM" in info
    assert at.button(key="msk_switch").label.startswith("Use the packaged MiniLM-MLM")


def test_masking_predictions_with_an_mlm_model(mlm_source):
    at = page("masking", source=mlm_source, msk_rate=0.3)
    at.text_area(key="msk_text").input("The cat sat on the [MASK] near the warm fire place.").run()
    assert_clean(at)
    preds = [df for df in dataframes(at) if "top guess" in df.columns]
    assert len(preds) == 1
    table = preds[0]
    assert "(your [MASK])" in set(table["original"])
    assert table["probability"].between(0, 1).all()
    # the page shows what bertcore.fill_mask computes for the same draw
    loaded = load(mlm_source)
    tok = loaded.tokenizer
    enc = encode(tok, "The cat sat on the [MASK] near the warm fire place.")
    t = enc.tensors()
    r = masking.mask_for_tokenizer(tok, t["input_ids"], t["attention_mask"], mlm_probability=0.3,
                                   generator=torch.Generator().manual_seed(0))
    positions = sorted(set(torch.nonzero(r.decision[0]).reshape(-1).tolist()) |
                       set(fill_mask.mask_token_positions(tok, t["input_ids"])))
    expected = fill_mask.predict(loaded.model, tok, r.input_ids, positions, labels=r.labels,
                                 attention_mask=t["attention_mask"], token_type_ids=t["token_type_ids"])
    assert list(table["position"]) == positions
    assert list(table["top guess"]) == [p.tokens[0] for p in expected]
    assert list(table["recovered"]) == [p.recovered for p in expected]
    assert any(m.label.startswith("Original token recovered") for m in at.metric)


def test_masking_mlm_model_with_nothing_to_predict(mlm_source):
    at = page("masking", source=mlm_source, msk_rate=0.0)
    assert_clean(at)
    assert any("Nothing to predict" in i for i in messages(at)["info"])


# ----------------------------------------------------------------------------- embeddings
def test_embeddings_check_and_views(packaged):
    at = page("embeddings")
    assert_clean(at)
    assert any(s.startswith("Yes") for s in messages(at)["success"])
    steps = [df for df in dataframes(at) if "step" in df.columns][0]
    assert list(steps["step"])[-1].startswith("output")
    at.multiselect(key="emb_parts").set_value([]).run()
    assert any("at least one part" in i for i in messages(at)["info"])
    at.slider(key="emb_first_dim").set_value(packaged.config.hidden_size - 1).run()
    assert_clean(at)


# ----------------------------------------------------------------------------- positions
@pytest.mark.parametrize("start,end,match", [(300, 600, "512 positions"), (100, 50, "empty"),
                                             (600, 700, "512 positions"), (-5, 10, ">= 0"),
                                             (0, 99_999_999, "512 positions"), (0, 0, None), (510, 511, None)])
def test_positions_ranges(start, end, match):
    at = page("positions", pos_start=start, pos_end=end)
    assert_clean(at)
    warnings = messages(at)["warning"]
    if match:
        assert any(match in w and "Showing positions" in w for w in warnings), warnings
    else:
        assert not warnings
    assert not messages(at)["error"]


def test_positions_learned_beside_sinusoids_of_the_same_size(packaged):
    at = page("positions", pos_start=10, pos_end=41, pos_base=100.0)
    assert_clean(at)
    specs = chart_specs(at)
    assert len(specs) == 5  # values, cosine, PCA, offsets, linear read-out (Wang & Chen 2020)
    tables = specs[0]
    titles = [a["text"] for a in tables["layout"]["annotations"]]
    assert titles == ["learned (this model)", "sinusoidal (base 100)"]
    learned, sinus = (array(tables["data"][i]["z"]) for i in (0, 1))
    assert learned.shape == sinus.shape == (32, packaged.config.hidden_size)
    np.testing.assert_allclose(learned, packaged.encoder.embeddings.position_embeddings.weight[10:42].detach().numpy(),
                               atol=1e-6)
    np.testing.assert_allclose(sinus, positional.sinusoidal(32, packaged.config.hidden_size, base=100.0, start=10),
                               atol=1e-6)


@pytest.mark.parametrize("base", [1.0, -3.0, 0.0])
def test_positions_bad_sinusoid_base_gets_a_message(base):
    at = page("positions", pos_base=base)
    assert_clean(at)
    assert any("base must be above 1" in w for w in messages(at)["warning"])


def test_masking_any_whole_number_is_a_seed():
    at = page("masking", msk_seed=-7)
    assert_clean(at)
    at.number_input(key="msk_seed").set_value(10**12).run()
    assert_clean(at)
    assert not messages(at)["error"] and not messages(at)["warning"]


def test_positions_with_small_model(mlm_source):
    at = page("positions", source=mlm_source)
    assert_clean(at)


# ----------------------------------------------------------------------------- anatomy
def test_anatomy_counts_and_presets(packaged):
    at = page("anatomy")
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
            assert not messages(at)["warning"] and not messages(at)["error"], case
        assert any("was cut" in str(c.value) for c in at.caption) == (case == "20k_chars"), case


def test_anatomy_of_an_mlm_model(mlm_source):
    at = page("anatomy", source=mlm_source)
    assert_clean(at)
    info = " ".join(messages(at)["info"])
    assert "no pooler" in info and "cls.predictions.decoder.weight" in info


def test_pages_are_registered_in_the_app():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    for name in ("masking", "embeddings", "positions", "anatomy"):
        at.switch_page(f"explorer/app_pages/{name}.py").run()
        assert not at.exception, (name, [e.value for e in at.exception])
        assert at.title and at.title[0].value


def test_settings_survive_a_page_switch():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page("explorer/app_pages/masking.py").run()
    at.slider(key="msk_rate").set_value(0.5).run()
    at.switch_page("explorer/app_pages/positions.py").run()
    at.number_input(key="pos_end").set_value(40).run()
    at.switch_page("explorer/app_pages/masking.py").run()
    assert not at.exception
    assert at.slider(key="msk_rate").value == 0.5
    at.switch_page("explorer/app_pages/positions.py").run()
    assert at.number_input(key="pos_end").value == 40
