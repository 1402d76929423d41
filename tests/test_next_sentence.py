"""bertcore.next_sentence and the Next sentence page: P(IsNext) equals transformers' NSP head on the
same weights; models without the head get a message and a one-click switch; bad input is a message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import next_sentence, sources
from tests.test_fill_mask import hf_folder

PAGE = Path(__file__).resolve().parents[1] / "explorer" / "app_pages" / "next_sentence.py"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder, hf = hf_folder(tmp_path_factory.mktemp("nsp"), "BertForPreTraining", seed=3)
    return sources.load(sources.ModelSource("local", str(folder), "tiny NSP")), hf


def test_p_is_next_equals_transformers(tiny):
    loaded, hf = tiny
    pred = next_sentence.predict(loaded.model, loaded.tokenizer, "the cat sat on the mat .", "a dog ran to a rug .")
    with torch.no_grad():
        out = hf(**pred.encoding.tensors(), output_attentions=True)
    expected = out.seq_relationship_logits[0].softmax(-1)[0].item()
    assert pred.p_is_next == pytest.approx(expected, abs=1e-5)
    assert pred.logits == pytest.approx(out.seq_relationship_logits[0].tolist(), abs=1e-5)
    cls_rows = torch.stack([a[0, :, 0, :] for a in out.attentions]).numpy()  # (L, heads, T)
    np.testing.assert_allclose(pred.cls_attention, cls_rows, atol=1e-5)
    np.testing.assert_allclose(pred.cls_attention.sum(-1), 1.0, atol=1e-5)


def test_segments_are_a_then_b(tiny):
    loaded, _ = tiny
    enc = next_sentence.predict(loaded.model, loaded.tokenizer, "the cat sat .", "a dog ran .").encoding
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2
    assert enc.token_type_ids == [0] * 6 + [1] * 5  # [CLS] the cat sat . [SEP] | a dog ran . [SEP]


def test_model_without_nsp_head_is_refused(packaged):
    assert not next_sentence.has_nsp_head(packaged.model)
    with pytest.raises(next_sentence.NextSentenceError, match="no next-sentence head"):
        next_sentence.predict(packaged.model, packaged.tokenizer, "A.", "B.")


def _page(source=None, **state) -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=120)
    if source is not None:
        at.session_state["model_source"] = source
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def test_page_without_head_offers_the_switch():
    at = _page()
    assert not at.exception
    assert any("no next-sentence head" in str(i.value) for i in at.info)
    assert at.button(key="nsp_switch").label.startswith("Use the packaged MiniLM-MLM")


def test_page_shows_p_is_next_and_cls_attention(tiny):
    loaded, hf = tiny
    at = _page(loaded.source, nsp_a="the cat sat on the mat .", nsp_b="a dog ran to a rug .")
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
def test_page_bad_input_is_a_message(tiny, a, b):
    loaded, _ = tiny
    at = _page(loaded.source, nsp_a=a, nsp_b=b)
    assert not at.exception, [e.value for e in at.exception]
    if not a.strip() or not b.strip():
        assert at.warning, "an empty sentence must get a message"
