"""AppTest of the Next sentence page: P(IsNext) and the [CLS] attention equal transformers' on the same
weights; models without the head get a message and a one-click switch; bad input is a message."""

from __future__ import annotations

import pytest
import torch

from bertcore import next_sentence

from .conftest import page


def test_page_without_head_offers_the_switch():
    at = page("next_sentence")
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
    at = page("next_sentence")
    at.button(key="nsp_switch").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.metric[0].label == "P(IsNext)"
