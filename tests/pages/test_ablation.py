"""AppTest of the Head ablation page: movement per layer on the MiniLM, the MLM loss and P(IsNext) of a
pretraining model, a classifier's classes before and after; bad text gives a message."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore import BertForPreTraining, BertForSequenceClassification
from bertcore.loading import sources
from bertcore.loading.sources import ModelSource

from ..conftest import save_tiny_bert
from .conftest import BAD_TEXTS, array, assert_clean, chart_specs, messages, page

BAD = {k: BAD_TEXTS[k] for k in ("empty", "whitespace", "over_max_positions", "emoji", "zero_width_control",
                                  "only_zero_width", "html", "typed_mask")}
WARN = {"empty", "whitespace", "only_zero_width", "over_max_positions"}


def _tiny_folder(tmp_path_factory, name: str, model_cls, **cfg_extra) -> ModelSource:
    folder = save_tiny_bert(tmp_path_factory.mktemp(name), model_cls, tokenizer="full", max_position_embeddings=512,
                            **cfg_extra)
    return ModelSource("local", str(folder), name)


@pytest.fixture(scope="module")
def pretraining_source(tmp_path_factory) -> ModelSource:
    """A tiny BertForPreTraining (random weights, MLM + NSP heads) with the packaged tokenizer."""
    return _tiny_folder(tmp_path_factory, "tiny_pretraining", BertForPreTraining)


@pytest.fixture(scope="module")
def classifier_source(tmp_path_factory) -> ModelSource:
    return _tiny_folder(tmp_path_factory, "tiny_classifier", BertForSequenceClassification,
                        num_labels=3, id2label={0: "sport", 1: "tech", 2: "politics"})


def test_ablation_page_on_the_minilm_shows_movement_and_says_there_is_no_mlm_head():
    at = page("ablation", sources.PACKAGED)
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
