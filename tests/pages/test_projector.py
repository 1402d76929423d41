"""AppTest of the Embedding projector page: the default view is the one shipped with MiniLM-MLM
(nothing computed), and bad input gets a message, never an exception: texts with one label, fewer points than asked,
odd Unicode, nothing typed, a colour the corpus cannot give."""

from __future__ import annotations

import json

import pytest

from bertcore.loading import sources
from bertcore.analysis import projector_view as PV
from bertcore.analysis import shipped
from bertcore.analysis.representations import projector as P
from bertcore.modeling.heads import BertForMaskedLM

from ..conftest import save_tiny_bert
from .conftest import assert_clean, messages, page


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory):
    folder = save_tiny_bert(tmp_path_factory.mktemp("projpage") / "m", BertForMaskedLM)
    return sources.ModelSource("local", str(folder))


def _figure(at) -> dict:
    (chart,) = at.get("plotly_chart")
    return json.loads(chart.proto.spec)


def test_the_default_view_is_the_shipped_one(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    at = page("projector")
    assert_clean(at)
    caption = " ".join(c.value for c in at.caption)
    assert f"{shipped.PROJECTOR_POINTS:,} points" in caption and "shipped with the model" in caption
    fig = _figure(at)
    assert len(fig["frames"]) == sources.load(sources.PACKAGED_MLM).config.num_hidden_layers + 1  # the layer slider
    assert not (tmp_path / "projector").exists()  # nothing computed
    at.number_input(key="proj_point").set_value(17).run()  # a point typed (as clicked): its neighbours, exact
    assert_clean(at)
    view = shipped.shipped(sources.load(sources.PACKAGED_MLM), shipped.projector(sources.load(sources.PACKAGED_MLM)))
    ids, cos = P.neighbours(view.projection, 17)
    table = next(d.value for d in at.dataframe if "cosine" in d.value.columns)
    assert list(table["token"]) == [view.projection.tokens[i] for i in ids]
    assert table["cosine"].to_numpy() == pytest.approx(cos, abs=1e-6)


def test_bad_input_gets_a_message(tiny_source, monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    at = page("projector", tiny_source, proj_corpus="yours", proj_points=5000, proj_colour="label",
              proj_own="pos | A fine day.\npos | A great day.\npos | The best day of all.")
    assert_clean(at)
    info = " ".join(messages(at)["info"])
    assert "fewer than the 5,000 asked" in info and "same label" in info
    for block, said in (("", "type some texts"), ("  \n\t", "type some texts"),
                        ("just one line without a label\nand another", "no labels")):
        at.text_area(key="proj_own").set_value(block).run()
        assert_clean(at)
        shown = messages(at)
        assert said in " ".join(shown["info"] + shown["error"] + shown["warning"]), shown
    at.selectbox(key="proj_colour").set_value("word").run()
    at.text_area(key="proj_own").set_value("😀🎉 emoji 👍🏽\nمرحبا بالعالم שלום\nzero\u200bwidth\u0000 ctrl\x07\n"
                                           + "word " * 600).run()
    assert_clean(at)
    assert at.get("plotly_chart")
    at.text_area(key="proj_own").set_value("\u200b\n\u200c").run()  # no ordinary token at all
    assert_clean(at)
    assert "no ordinary token" in " ".join(messages(at)["error"])
    at.text_area(key="proj_own").set_value("A fine day.\nA bad day.").run()
    at.selectbox(key="proj_colour").set_value("correct").run()  # not a classifier
    assert_clean(at)
    assert "classification head" in " ".join(messages(at)["error"])
    at.selectbox(key="proj_colour").set_value("word").run()
    at.radio(key="proj_method").set_value("axis").run()
    at.text_input(key="proj_axis_a").set_value("").run()
    assert_clean(at)
    assert "Type a word at each end" in " ".join(messages(at)["info"])


def test_an_sae_beside_the_model_adds_its_features_to_the_colours(tmp_path, monkeypatch):
    from bertcore.sae import io as sae_io
    from bertcore.sae.model import TopKSAE

    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM)
    source = sources.ModelSource("local", str(folder))
    at = page("projector", source, proj_corpus="yours")
    assert "sae" not in at.selectbox(key="proj_colour").options  # no SAE for this model: not offered
    sae_io.save(TopKSAE(32, 16, 4, seed=1), folder / "sae" / "layer-1", layer=1)
    at = page("projector", source, proj_corpus="yours", proj_colour="sae")
    assert_clean(at)
    at.number_input(key="proj_feature").set_value(5).run()
    assert_clean(at)
    fig = _figure(at)
    assert fig["data"][0]["marker"]["colorbar"]["title"]["text"] == PV.COLOURS["sae"]
