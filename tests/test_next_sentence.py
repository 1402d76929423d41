"""bertcore.readouts.next_sentence: P(IsNext) equals transformers' NSP head on the same weights, segments are A
then B, a model without the head is refused (the page: tests/pages/test_next_sentence.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.readouts import next_sentence


def test_p_is_next_equals_transformers(tiny_nsp):
    loaded, hf = tiny_nsp
    pred = next_sentence.predict(loaded.model, loaded.tokenizer, "the cat sat on the mat .", "a dog ran to a rug .")
    with torch.no_grad():
        out = hf(**pred.encoding.tensors(), output_attentions=True)
    expected = out.seq_relationship_logits[0].softmax(-1)[0].item()
    assert pred.p_is_next == pytest.approx(expected, abs=1e-5)
    assert pred.logits == pytest.approx(out.seq_relationship_logits[0].tolist(), abs=1e-5)
    cls_rows = torch.stack([a[0, :, 0, :] for a in out.attentions]).numpy()  # (L, heads, T)
    np.testing.assert_allclose(pred.cls_attention, cls_rows, atol=1e-5)
    np.testing.assert_allclose(pred.cls_attention.sum(-1), 1.0, atol=1e-5)


def test_segments_are_a_then_b(tiny_nsp):
    loaded, _ = tiny_nsp
    enc = next_sentence.predict(loaded.model, loaded.tokenizer, "the cat sat .", "a dog ran .").encoding
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2
    assert enc.token_type_ids == [0] * 6 + [1] * 5  # [CLS] the cat sat . [SEP] | a dog ran . [SEP]


def test_model_without_nsp_head_is_refused(packaged):
    assert not next_sentence.has_nsp_head(packaged.model)
    with pytest.raises(next_sentence.NextSentenceError, match="no next-sentence head"):
        next_sentence.predict(packaged.model, packaged.tokenizer, "A.", "B.")
