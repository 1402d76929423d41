"""bertcore.fill_mask: predictions from a checkpoint saved by transformers equal transformers' own."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertcore import fill_mask, sources
from bertcore.fill_mask import FillMaskError
from bertcore.masking import NOT_SELECTED, mask_for_tokenizer
from bertcore.tokenizer import encode

from .conftest import SMALL_VOCAB, assert_parity, double, hf_folder


@pytest.fixture(scope="module", params=["BertForMaskedLM", "BertForPreTraining"])
def tiny(request, tmp_path_factory):
    folder, hf = hf_folder(tmp_path_factory.mktemp(request.param), request.param)
    loaded = sources.load(sources.ModelSource("local", str(folder)))
    return loaded, hf


def hf_logits(hf, **inputs):
    with torch.no_grad():
        out = hf(**inputs)
    return out.logits if hasattr(out, "logits") else out.prediction_logits


def test_loaded_checkpoint_has_an_mlm_head(tiny):
    loaded, hf = tiny
    assert loaded.has_mlm_head
    assert loaded.head == ("mlm" if isinstance(hf, transformers.BertForMaskedLM) else "pretraining")


def test_logits_at_positions_equal_transformers(tiny):
    loaded, hf = tiny
    enc = encode(loaded.tokenizer, "the cat sat on the [MASK] . a big dog ran to the rug")
    t = enc.tensors()
    positions = [1, 3, 6, 9, len(enc) - 2]
    ours = fill_mask.mlm_logits_at(double(loaded.model), t["input_ids"], positions, t["attention_mask"],
                                   t["token_type_ids"])
    theirs = hf_logits(double(hf), **t)[0, positions]
    assert_parity(ours, theirs)


def test_topk_predictions_equal_transformers_softmax(tiny):
    loaded, hf = tiny
    tok = loaded.tokenizer
    enc = encode(tok, "the cat sat on the mat . the dog ran to a small rug")
    t = enc.tensors()
    r = mask_for_tokenizer(tok, t["input_ids"], t["attention_mask"], mlm_probability=0.5,
                           generator=torch.Generator().manual_seed(0))
    positions = torch.nonzero(r.decision[0] != NOT_SELECTED).reshape(-1).tolist()
    assert positions
    preds = fill_mask.predict(loaded.model, tok, r.input_ids, positions, labels=r.labels, k=5)
    probs = hf_logits(hf, input_ids=r.input_ids, attention_mask=t["attention_mask"]).softmax(-1)[0]  # (T, V)
    assert [p.position for p in preds] == positions
    for p in preds:
        top_p, top_i = probs[p.position].topk(5)
        assert p.ids == top_i.tolist()
        torch.testing.assert_close(torch.tensor(p.probs), top_p, atol=1e-6, rtol=0)
        assert p.tokens == tok.convert_ids_to_tokens(top_i.tolist())
        assert p.original_id == int(t["input_ids"][0, p.position])
        assert p.input_id == int(r.input_ids[0, p.position])
        orig_p = probs[p.position, p.original_id]
        assert p.original_prob == pytest.approx(float(orig_p), abs=1e-6)
        assert p.original_rank == int((probs[p.position] > orig_p).sum()) + 1
        assert p.recovered == (p.ids[0] == p.original_id) == (p.original_rank == 1)


def test_recovered_flag_follows_the_top_guess(tiny):
    loaded, hf = tiny
    tok = loaded.tokenizer
    enc = encode(tok, "the cat sat on the mat")
    ids = enc.tensors()["input_ids"].clone()
    ids[0, 2] = tok.mask_token_id
    top = int(hf_logits(hf, input_ids=ids)[0, 2].argmax())
    other = (top + 1) % len(SMALL_VOCAB)
    labels = torch.full_like(ids, -100)
    labels[0, 2] = top
    [hit] = fill_mask.predict(loaded.model, tok, ids, [2], labels=labels)
    labels[0, 2] = other
    [miss] = fill_mask.predict(loaded.model, tok, ids, [2], labels=labels)
    assert hit.recovered is True and hit.original_rank == 1
    assert miss.recovered is False and miss.original_rank > 1
    assert fill_mask.accuracy([hit, miss]) == (1, 2)


def test_user_typed_masks_are_found_and_have_no_original(tiny):
    loaded, _ = tiny
    tok = loaded.tokenizer
    text = fill_mask.normalise_mask_markers("the [MASK] sat on the [mask] .", tok)
    assert text == "the [MASK] sat on the [MASK] ."
    enc = encode(tok, text)
    ids = enc.tensors()["input_ids"]
    positions = fill_mask.mask_token_positions(tok, ids)
    assert [enc.tokens[p] for p in positions] == ["[MASK]", "[MASK]"]
    preds = fill_mask.predict(loaded.model, tok, ids, positions, k=3)
    assert len(preds) == 2 and all(p.original_id is None and p.recovered is None for p in preds)
    assert all(len(p.ids) == 3 and p.probs == sorted(p.probs, reverse=True) for p in preds)
    assert fill_mask.accuracy(preds) == (0, 0)


def test_k_larger_than_vocabulary_is_clipped(tiny):
    loaded, _ = tiny
    ids = encode(loaded.tokenizer, "the cat").tensors()["input_ids"]
    [p] = fill_mask.predict(loaded.model, loaded.tokenizer, ids, [1], k=10_000)
    assert len(p.ids) == len(SMALL_VOCAB) and sum(p.probs) == pytest.approx(1.0, abs=1e-5)


def test_bad_positions_and_k_are_clear_errors(tiny):
    loaded, _ = tiny
    ids = encode(loaded.tokenizer, "the cat").tensors()["input_ids"]
    with pytest.raises(FillMaskError, match=r"\[0, 4\)"):
        fill_mask.predict(loaded.model, loaded.tokenizer, ids, [4])
    with pytest.raises(FillMaskError, match="k must be"):
        fill_mask.predict(loaded.model, loaded.tokenizer, ids, [1], k=0)
    assert fill_mask.predict(loaded.model, loaded.tokenizer, ids, []) == []


def test_model_without_mlm_head_says_so(packaged):
    assert not packaged.has_mlm_head
    ids = encode(packaged.tokenizer, "the [MASK] sat").tensors()["input_ids"]
    with pytest.raises(FillMaskError, match="no MLM head") as info:
        fill_mask.predict(packaged.model, packaged.tokenizer, ids, [2])
    assert "Training page" in str(info.value) and "cls.predictions" in str(info.value)
    with pytest.raises(FillMaskError, match="no MLM head"):
        fill_mask.predict(packaged.model, packaged.tokenizer, ids, [])
