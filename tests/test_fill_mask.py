"""bertcore.readouts.fill_mask: predictions from a checkpoint saved by transformers equal transformers' own."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertcore.readouts import fill_mask
from bertcore.loading import sources
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.tokenization.masking import NOT_SELECTED, mask_for_tokenizer
from bertcore.tokenization.tokenizer import encode

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


# ----------------------------------------------------------------------------- decoding: temperature, top-k, top-p
def shipped_logits() -> torch.Tensor:
    """MLM logits (2, V) of the shipped MiniLM-MLM at two [MASK]s: a real, peaked distribution."""
    loaded = sources.load(sources.PACKAGED_MLM)
    tok = loaded.tokenizer
    ids = encode(tok, "The film won the [MASK] for best actor at the [MASK] in London.").tensors()["input_ids"]
    return fill_mask.mlm_logits_at(loaded.model, ids, fill_mask.mask_token_positions(tok, ids))


@pytest.mark.parametrize("temperature", [0.25, 0.7, 1.0, 1.5, 4.0])
def test_probabilities_are_the_softmax_at_that_temperature(temperature):
    logits = shipped_logits()
    probs = fill_mask.decoded_probs(logits, fill_mask.Decoding(temperature=temperature))
    torch.testing.assert_close(probs, torch.softmax(logits / temperature, dim=-1), atol=1e-7, rtol=1e-5)
    if temperature != 1.0:  # the temperature is really applied: not the plain softmax
        assert (probs - torch.softmax(logits, -1)).abs().max() > 1e-3


def reference_filter(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Written out, independent of transformers: softmax(logits / T); keep the top_k largest; of those keep the
    shortest most-probable prefix whose (renormalised) mass reaches top_p; renormalise."""
    out = []
    for row in logits.double():
        p = torch.softmax(row / temperature, -1)
        order = p.argsort(descending=True)
        keep = order[:top_k] if top_k else order
        q = p[keep] / p[keep].sum()
        n = int((q.cumsum(0) < top_p - 1e-12).sum()) + 1  # the prefix that reaches top_p
        kept = torch.zeros_like(p)
        kept[keep[:n]] = p[keep[:n]]
        out.append(kept / kept.sum())
    return torch.stack(out).float()


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 5, 1.0), (0.5, 0, 0.9), (2.0, 10, 0.5),
                                                        (1.0, 0, 0.3), (3.0, 40, 0.95)])
def test_top_k_and_top_p_equal_the_transformers_warpers_and_a_written_out_filter(temperature, top_k, top_p):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    logits = shipped_logits()
    probs = fill_mask.decoded_probs(logits, fill_mask.Decoding(temperature, top_k, top_p))
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    scores = TopKLogitsWarper(top_k)(None, scores) if top_k else scores
    scores = TopPLogitsWarper(top_p)(None, scores) if top_p < 1 else scores
    torch.testing.assert_close(probs, scores.softmax(-1), atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(probs, reference_filter(logits, temperature, top_k, top_p), atol=1e-6, rtol=1e-4)
    kept = (probs > 0).sum(-1)
    assert (kept >= 1).all() and (not top_k or (kept <= top_k).all())
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(probs)), atol=1e-5, rtol=0)


def test_predictions_show_the_decoded_probabilities(tiny):
    loaded, _ = tiny
    tok = loaded.tokenizer
    ids = encode(tok, "the cat sat on the [MASK] .").tensors()["input_ids"]
    pos = fill_mask.mask_token_positions(tok, ids)
    d = fill_mask.Decoding(temperature=0.5, top_k=3)
    logits = fill_mask.mlm_logits_at(loaded.model, ids, pos)
    [p] = fill_mask.predict(loaded.model, tok, ids, pos, k=5, decoding=d)
    top_p, top_i = fill_mask.decoded_probs(logits, d)[0].topk(5)
    assert p.ids[:3] == top_i[:3].tolist() and p.probs == pytest.approx(top_p.tolist(), abs=1e-7)
    assert p.probs[3:] == [0.0, 0.0] and sum(p.probs) == pytest.approx(1.0, abs=1e-6)


def test_a_seeded_sample_repeats_and_stays_inside_the_kept_words():
    logits = shipped_logits()
    d = fill_mask.Decoding(temperature=2.0, top_k=4)
    draws = [tuple(fill_mask.sample(logits, d, seed)) for seed in range(60)]
    assert draws[:10] == [tuple(fill_mask.sample(logits, d, seed)) for seed in range(10)]  # repeatable
    assert len(set(draws)) > 1  # the seed matters
    allowed = logits.topk(4, dim=-1).indices
    assert all(draw[i] in allowed[i].tolist() for draw in draws for i in range(2))
    greedy = fill_mask.sample(logits, fill_mask.Decoding(top_k=1), seed=123)
    assert greedy == logits.argmax(-1).tolist()


def test_a_seeded_sample_follows_the_probabilities():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1, 0.0]]))
    counts = torch.bincount(torch.tensor([fill_mask.sample(logits, None, s)[0] for s in range(2000)]), minlength=4)
    torch.testing.assert_close(counts / 2000, torch.tensor([0.6, 0.3, 0.1, 0.0]), atol=0.04, rtol=0)


@pytest.mark.parametrize("kwargs, match", [({"temperature": 0}, "temperature"), ({"temperature": float("nan")},
                                           "temperature"), ({"top_k": -1}, "top_k"), ({"top_k": 2.5}, "top_k"),
                                          ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p")])
def test_bad_decoding_settings_are_clear_errors(kwargs, match):
    with pytest.raises(FillMaskError, match=match):
        fill_mask.Decoding(**kwargs)
    with pytest.raises(FillMaskError, match="seed"):
        fill_mask.sample(torch.zeros(1, 4), None, seed=-1)
