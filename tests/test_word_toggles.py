"""The "Words, not WordPieces" toggle outside the Attention page: the Next sentence page's [CLS]
attention and the Evolution page's per-checkpoint maps merge WordPieces into words
(:mod:`bertcore.analysis.words`): a word's column is the sum of its pieces, rows still sum to 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertcore import sources
from tests.test_fill_mask import hf_folder
from tests.test_next_sentence import PAGE as NSP_PAGE
from tests.test_pages_issue3 import array
from tests.test_pages_train import EVO_PAGE, fake_run, root  # noqa: F401 - root is a fixture


def spec(at: AppTest, key: str) -> dict:
    [chart] = [c for c in at.get("plotly_chart") if key in str(c.proto.id)]
    return json.loads(chart.proto.spec)


@pytest.fixture(scope="module")
def nsp_source(tmp_path_factory):
    folder, _ = hf_folder(tmp_path_factory.mktemp("words"), "BertForPreTraining", seed=5)
    return sources.ModelSource("local", str(folder), "tiny NSP")


def test_next_sentence_cls_attention_by_word(nsp_source):
    at = AppTest.from_file(str(NSP_PAGE), default_timeout=120)
    at.session_state["model_source"] = nsp_source
    at.session_state["nsp_a"] = "the cats sat on the mats ."  # cats = cat ##s, mats = mat ##s
    at.session_state["nsp_b"] = "a dogs ran ."
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    pieces = spec(at, "nsp_cls_attention")["data"][0]
    at.toggle(key="nsp_words").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    words = spec(at, "nsp_cls_attention")["data"][0]
    assert len(pieces["x"]) == 17 and len(words["x"]) == 14  # three words of two pieces each
    assert [x.split(":", 1)[1] for x in words["x"]][:7] == ["[CLS]", "the", "cats", "sat", "on", "the", "mats"]
    assert words["x"][10].endswith("B:dogs")
    zp, zw = array(pieces["z"]), array(words["z"])  # (L, T) and (L, W), mean over heads
    np.testing.assert_allclose(zw.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(zw[:, 2], zp[:, 2] + zp[:, 3], atol=1e-6)  # cats = cat + ##s


def test_evolution_attention_by_word(root):  # noqa: F811 - the fixture
    fake_run(root, "20261122-100000-pretrain-words", steps=(0, 10))
    at = AppTest.from_file(EVO_PAGE, default_timeout=120)
    at.session_state["evo_text"] = "the cats sat on unbelievably small mats ."
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    pieces = spec(at, "evo_att_chart")["data"]
    at.toggle(key="evo_words").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    words = spec(at, "evo_att_chart")["data"]
    assert len(words) == len(pieces) == 2  # one panel per checkpoint
    for p, w in zip(pieces, words):
        zp, zw = array(p["z"]), array(w["z"])
        assert zw.shape[0] == 10 < zp.shape[0]  # [CLS] 8 words [SEP]
        np.testing.assert_allclose(zw.sum(-1), zp.sum(-1)[0], atol=1e-5)  # rows keep their sums
