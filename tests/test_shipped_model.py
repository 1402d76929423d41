"""The packaged fill-mask model (models/minilm-mlm): small enough to ship, loads in bertcore and in
transformers with the same logits, fills an easy [MASK] (the pages switch to it in one click:
tests/pages/test_masking.py, tests/pages/test_next_sentence.py)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertcore.readouts import fill_mask
from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM, BertForPreTraining

from .conftest import assert_parity, double

FOLDER = sources.SHIPPED_MLM_DIR


@pytest.fixture(scope="module")
def shipped():
    return sources.load(sources.PACKAGED_MLM)


def test_folder_is_small_and_documented():
    size = sum(f.stat().st_size for f in FOLDER.iterdir()) / 2**20
    assert size <= 50, f"{size:.1f} MiB"
    card = (FOLDER / "README.md").read_text(encoding="utf-8")
    for words in ("accuracy at [MASK]", "top-5", "NSP accuracy", "python -m bertcore.training", "Licences",
                  "cloze_everyday.tsv", "minimal-pair suite", "WordNet"):
        assert words in card
    measured = json.loads((FOLDER / "eval.json").read_text())
    for corpus in ("bbc", "wiki", "wordnet", "fortunes"):  # a held-out split per corpus
        m = measured["heldout"][corpus]
        assert m["acc_mask"] > 2 * m["most_frequent_token_rate"], corpus
    assert {"news", "everyday"} <= set(measured["cloze"]) and len(measured["grammar"]) == 8
    stages = json.loads((FOLDER / "training.json").read_text())["stages"]
    assert len(stages) >= 5 and all(s["argv"].startswith("python") for s in stages)


def test_loads_as_pretraining_model_in_fp32(shipped):
    assert shipped.head == "pretraining" and shipped.has_mlm_head
    assert all(p.dtype == torch.float32 for p in shipped.model.parameters())
    report = shipped.model.load_report
    assert report.missing == [] and report.unexpected == [], report.summary()


@pytest.mark.parametrize("ours_cls,hf_name", [(BertForPreTraining, "BertForPreTraining"),
                                              (BertForMaskedLM, "BertForMaskedLM")])
def test_transformers_gives_the_same_logits(shipped, ours_cls, hf_name):
    tok = shipped.tokenizer
    enc = tok(["The central bank raised interest [MASK] again.", "Shares fell."], ["Markets were calm.", "Why?"],
              return_tensors="pt", padding=True)
    ours = double(ours_cls.from_pretrained(FOLDER))
    hf = getattr(transformers, hf_name).from_pretrained(str(FOLDER), attn_implementation="eager").eval()
    assert hf.dtype == torch.float32  # the fp16 file loads as float32; compared in float64 (exact casts)
    hf = double(hf)
    with torch.no_grad():
        a = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        b = hf(**enc)
    got = a.prediction_logits if hasattr(a, "prediction_logits") else a.logits
    want = b.prediction_logits if hasattr(b, "prediction_logits") else b.logits
    assert_parity(got, want)
    if hasattr(a, "seq_relationship_logits"):
        assert_parity(a.seq_relationship_logits, b.seq_relationship_logits)


@pytest.mark.parametrize("sentence,answer", [
    ("The central bank raised interest [MASK] for the third time.", "rates"),
    ("Voters will go to the polls in the general [MASK] next week.", "election")])
def test_fills_an_easy_mask(shipped, sentence, answer):
    tok = shipped.tokenizer
    ids = tok(sentence.replace("[MASK]", tok.mask_token), return_tensors="pt")["input_ids"]
    pos = fill_mask.mask_token_positions(tok, ids)
    preds = fill_mask.predict(shipped.model, tok, ids, pos, k=5)
    assert answer in preds[0].tokens, preds[0].tokens
