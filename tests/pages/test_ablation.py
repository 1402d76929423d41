"""AppTest of the issue-9 views: Attention page's rollout / flow, neuron view and word toggle, the Head
ablation page, and the export helpers (toolbar PNG/SVG, CSV, offline HTML)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import BertConfig, BertForPreTraining, BertForSequenceClassification
from bertcore.analysis import rollout
from bertcore.sources import ModelSource, packaged_model_dir

from .test_masking import BAD_TEXTS, array, assert_clean, chart_specs, messages

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "explorer" / "app_pages"
BAD = {k: BAD_TEXTS[k] for k in ("empty", "whitespace", "over_max_positions", "emoji", "zero_width_control",
                                  "only_zero_width", "html", "typed_mask")}
WARN = {"empty", "whitespace", "only_zero_width", "over_max_positions"}


def page(name: str, source: ModelSource | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=180)
    if source is not None:
        at.session_state["model_source"] = source
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def downloads(at: AppTest) -> list:
    return at.get("download_button")


def _tiny_folder(tmp_path_factory, name: str, model_cls, **cfg_extra) -> ModelSource:
    folder = tmp_path_factory.mktemp(name)
    src = packaged_model_dir()
    for file in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / file).exists():
            shutil.copy(src / file, folder / file)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=512, **cfg_extra)
    torch.manual_seed(0)
    model_cls(cfg).eval().save_pretrained(folder)
    return ModelSource("local", str(folder), name)


@pytest.fixture(scope="module")
def pretraining_source(tmp_path_factory) -> ModelSource:
    """A tiny BertForPreTraining (random weights, MLM + NSP heads) with the packaged tokenizer."""
    return _tiny_folder(tmp_path_factory, "tiny_pretraining", BertForPreTraining)


@pytest.fixture(scope="module")
def classifier_source(tmp_path_factory) -> ModelSource:
    return _tiny_folder(tmp_path_factory, "tiny_classifier", BertForSequenceClassification,
                        num_labels=3, id2label={0: "sport", 1: "tech", 2: "politics"})


# ----------------------------------------------------------------------------- attention: rollout, flow, neuron, words
@pytest.fixture(scope="module")
def att():
    return page("attention", att_tab="Rollout and flow")


def test_rollout_tab_shows_raw_rollout_and_flow_side_by_side(att):
    assert_clean(att)
    spec = chart_specs(att)[0]
    assert [a["text"] for a in spec["layout"]["annotations"]] == list(rollout.METHODS.values())
    for trace in spec["data"]:
        np.testing.assert_allclose(array(trace["z"]).sum(-1), 1.0, atol=1e-5)  # every row is a distribution
    assert {d.label for d in downloads(att)} == {"HTML", "CSV"}


def test_rollout_tab_says_when_flow_is_not_offered_and_word_merge_brings_it_back(att):
    words = " ".join(["Tokenization"] * (rollout.FLOW_MAX_TOKENS // 2))  # 2 pieces per word
    att.text_area(key="att_text").set_value(words).run()
    assert_clean(att)
    assert any(f"up to {rollout.FLOW_MAX_TOKENS} tokens" in m for m in messages(att)["info"])
    assert "not offered" in chart_specs(att)[0]["layout"]["annotations"][2]["text"]
    att.toggle(key="att_words").set_value(True).run()
    assert_clean(att)
    assert not messages(att)["info"]
    spec = chart_specs(att)[0]
    assert len(array(spec["data"][2]["z"]).reshape(6, -1)[0]) == rollout.FLOW_MAX_TOKENS // 2 + 2
    att.toggle(key="att_words").set_value(False)
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


@pytest.mark.parametrize("name", list(BAD))
def test_rollout_and_neuron_tabs_with_bad_inputs(att, name):
    for tab in ("Rollout and flow", "Neuron view"):
        att.session_state["att_tab"] = tab
        att.text_area(key="att_text").set_value(BAD[name]).run()
        assert_clean(att)
        msgs = messages(att)
        assert not msgs["error"], msgs["error"]
        if name in WARN:
            assert msgs["warning"], (tab, msgs)
        else:
            assert len(att.get("plotly_chart")) == 1, tab
    att.session_state["att_tab"] = "Rollout and flow"
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


def test_neuron_view_probabilities_are_the_attention_row(att):
    att.session_state["att_tab"] = "Neuron view"
    att.run()
    att.slider(key="att_layer").set_value(3)
    att.slider(key="att_head").set_value(5)
    att.selectbox(key="att_nq").set_value(4).run()
    assert_clean(att)
    probs = array(chart_specs(att)[0]["data"][4]["z"]).reshape(-1)
    att.session_state["att_tab"] = "One head"
    att.run()
    row = array(chart_specs(att)[0]["data"][0]["z"]).reshape(len(probs), -1)[4]
    np.testing.assert_allclose(probs, row, atol=1e-5)
    att.session_state["att_tab"] = "Rollout and flow"
    att.run()


def test_word_toggle_merges_every_attention_view(att):
    att.text_area(key="att_text").set_value("Snuffleupagus hibernates unbelievably.").run()
    for tab in ("One head", "All heads of a layer", "All layers × heads", "Head view", "Rollout and flow"):
        att.session_state["att_tab"] = tab
        att.toggle(key="att_words").set_value(False).run()
        n_tokens = len(att.selectbox(key="att_query").options) if tab == "Head view" else None
        att.toggle(key="att_words").set_value(True).run()
        assert_clean(att)
        assert any("merged into" in c.value for c in att.caption), tab
        if tab == "Head view":
            assert len(att.selectbox(key="att_query").options) < n_tokens
        if tab == "One head":
            z = array(chart_specs(att)[0]["data"][0]["z"])
            z = z.reshape(int(np.sqrt(z.size)), -1)
            assert z.shape[0] == 6  # [CLS] snuffleupagus hibernates unbelievably . [SEP]
            np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
    att.toggle(key="att_words").set_value(False)
    att.session_state["att_tab"] = "Rollout and flow"
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


# ----------------------------------------------------------------------------- ablation page
def test_ablation_page_on_the_minilm_shows_movement_and_says_there_is_no_mlm_head():
    at = page("ablation")
    assert_clean(at)
    assert not messages(at)["error"]
    assert any("no MLM head" in m for m in messages(at)["info"])
    specs = chart_specs(at)
    assert len(specs) == 2  # head mask + movement
    move = array(specs[1]["data"][0]["y"])
    assert move[0] == pytest.approx(1.0) and move[-1] < 0.999  # embeddings untouched, last layer moved
    assert at.multiselect(key="abl_layers").value == [1]
    at.radio(key="abl_mode").set_value("uniform").run()
    assert_clean(at)
    at.multiselect(key="abl_layers").set_value([]).run()
    assert any("No head is switched off" in m for m in messages(at)["info"])
    at.multiselect(key="abl_heads").set_value(["6.1", "6.2"]).run()
    assert_clean(at)
    move = array(chart_specs(at)[1]["data"][0]["y"])
    np.testing.assert_allclose(move[:6], 1.0, atol=1e-6)  # only layer 6 changed
    assert move[6] < 1.0


@pytest.mark.parametrize("name", list(BAD))
def test_ablation_page_bad_inputs(name):
    at = page("ablation", abl_text=BAD[name])
    assert_clean(at)
    msgs = messages(at)
    assert not msgs["error"], msgs["error"]
    if name in WARN:
        assert msgs["warning"], msgs


def test_ablation_with_mlm_and_nsp_heads(pretraining_source):
    at = page("ablation", pretraining_source, abl_pair_on=True)
    assert_clean(at)
    assert not messages(at)["error"], messages(at)["error"]
    labels = [m.label for m in at.metric]
    assert "MLM loss, held-out BBC batch (nats)" in labels and "P(IsNext): B follows A" in labels
    assert at.dataframe, "fill-mask before/after table"
    assert list(at.dataframe[0].value.columns) == ["before", "P before", "after", "P after"]


def test_ablation_with_a_classifier(classifier_source):
    at = page("ablation", classifier_source)
    assert_clean(at)
    specs = chart_specs(at)
    assert [t["name"] for t in specs[-1]["data"]] == ["before", "after"]
    assert list(specs[-1]["data"][0]["y"]) == ["sport", "tech", "politics"]


# ----------------------------------------------------------------------------- export helpers
def test_every_page_draws_charts_through_the_export_helper():
    for path in [*PAGES.glob("*.py"), *(ROOT / "explorer").glob("*.py")]:
        if path.name == "widgets.py":
            continue
        src = path.read_text()
        assert not re.search(r"(?<!widgets)\.plotly_chart\(", src), f"{path.name}: use widgets.plotly_chart"


def test_chart_toolbar_downloads_png_or_svg(att):
    config = json.loads(att.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "png"
    assert config["toImageButtonOptions"]["filename"] == "att_roll"
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    at.radio(key="export_format").set_value("svg").run()
    at.switch_page("explorer/app_pages/attention.py").run()
    assert_clean(at)
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "svg"


def test_standalone_html_opens_offline():
    from explorer.widgets import standalone_html

    html = standalone_html(go.Figure(go.Heatmap(z=[[0.5, 0.5], [1.0, 0.0]])))
    assert "<html>" in html[:100] and "Plotly.newPlot" in html
    assert not re.search(r"<script[^>]+src=", html), "no external script (CDN)"
    assert len(html) > 1_000_000  # plotly.js is inlined
