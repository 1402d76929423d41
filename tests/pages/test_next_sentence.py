"""AppTest of the Next sentence page: P(IsNext) and the [CLS] attention equal transformers' on the same
weights; models without the head get a message and a one-click switch; bad input is a message."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertcore.readouts import next_sentence
from bertcore.loading import sources

from ..conftest import hf_folder
from .conftest import array, page


def test_page_without_head_offers_the_switch():
    at = page("next_sentence", sources.PACKAGED)
    assert not at.exception
    assert any("no next-sentence head" in str(i.value) for i in at.info)
    assert at.button(key="nsp_switch").label.startswith("Use the packaged MiniLM-MLM")


def test_page_shows_p_is_next_and_cls_attention(tiny_nsp):
    loaded, hf = tiny_nsp
    at = page("next_sentence", loaded.source, nsp_a="the cat sat on the mat .", nsp_b="a dog ran to a rug .")
    assert not at.exception, [e.value for e in at.exception]
    with torch.no_grad():
        p = hf(**next_sentence.predict(loaded.model, loaded.tokenizer, "the cat sat on the mat .",
                                       "a dog ran to a rug .").encoding.tensors()).seq_relationship_logits
    assert at.metric[0].value == f"{p[0].softmax(-1)[0].item():.1%}"
    assert len(at.get("plotly_chart")) == 2
    at.button(key="nsp_ex_random").click().run()
    assert not at.exception
    assert at.text_area(key="nsp_b").value.startswith("The striker")
    at.button(key="nsp_draw_next").click().run()  # a pair of consecutive sentences from BBC News
    assert not at.exception
    a, b = at.text_area(key="nsp_a").value, at.text_area(key="nsp_b").value
    assert any(a in d and d[d.index(a) + 1] == b for d in resources_sentences() if a in d[:-1])


def resources_sentences():
    from bertcore import data

    return [data.split_sentences(t) for t in data.load_documents("bbc")["text"]]


@pytest.mark.parametrize("a,b", [("", "a dog ran ."), ("the cat .", "   "), ("word " * 600, "word " * 600),
                                 ("😀🎉", "مرحبا بالعالم"), ("<script>alert(1)</script>", "\u200b\u0000x")])
def test_page_bad_input_is_a_message(tiny_nsp, a, b):
    loaded, _ = tiny_nsp
    at = page("next_sentence", loaded.source, nsp_a=a, nsp_b=b)
    assert not at.exception, [e.value for e in at.exception]
    if not a.strip() or not b.strip():
        assert at.warning, "an empty sentence must get a message"


def test_switches_to_the_packaged_mlm_in_one_click():
    at = page("next_sentence", sources.PACKAGED)
    at.button(key="nsp_switch").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric[0].label == "P(IsNext)"
    # what a new user sees with every default: the true-next example is called a next sentence,
    # and the random example a random one
    assert at.metric[0].delta == "B follows A", at.metric[0].value
    at.button(key="nsp_ex_random").click().run()
    assert at.metric[0].delta == "B is a random sentence", at.metric[0].value


@pytest.fixture(scope="module")
def nsp_source(tmp_path_factory):
    folder, _ = hf_folder(tmp_path_factory.mktemp("words"), "BertForPreTraining", seed=5)
    return sources.ModelSource("local", str(folder), "tiny NSP")


def chart_data(at, key: str) -> list[dict]:
    [chart] = [c for c in at.get("plotly_chart") if key in str(c.proto.id)]
    return json.loads(chart.proto.spec)["data"]


def test_cls_attention_by_word(nsp_source):
    # "Words, not WordPieces": a word's column is the sum of its pieces', rows still sum to 1
    at = page("next_sentence", nsp_source, nsp_a="the cats sat on the mats .", nsp_b="a dogs ran .")  # cat ##s ...
    assert not at.exception, [e.value for e in at.exception]
    pieces = chart_data(at, "nsp_cls_attention")[0]
    at.toggle(key="nsp_words").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    words = chart_data(at, "nsp_cls_attention")[0]
    assert len(pieces["x"]) == 17 and len(words["x"]) == 14  # three words of two pieces each
    assert [x.split(":", 1)[1] for x in words["x"]][:7] == ["[CLS]", "the", "cats", "sat", "on", "the", "mats"]
    assert words["x"][10].endswith("B:dogs")
    zp, zw = array(pieces["z"]), array(words["z"])  # (L, T) and (L, W), mean over heads
    np.testing.assert_allclose(zw.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(zw[:, 2], zp[:, 2] + zp[:, 3], atol=1e-6)  # cats = cat + ##s
