"""bertcore.data: sentences, NSP pairs, truncation, classification splits, per-batch masking."""


import numpy as np
import pytest
import torch

from bertcore import data as D
from bertcore.modeling.heads import IGNORE_INDEX

from .conftest import FIXTURES, TINY_CORPUS


@pytest.fixture(scope="module")
def tok(packaged):
    return packaged.tokenizer


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def test_punkt_english_parameters_keep_abbreviations():
    text = ("Dr. Smith met Mr. Brown in Washington, D.C. at 5 p.m. on Monday. They talked for an hour.\n"
            "New paragraph here.")
    assert D.split_sentences(text) == [
        "Dr. Smith met Mr. Brown in Washington, D.C. at 5 p.m. on Monday.", "They talked for an hour.",
        "New paragraph here."]


def test_load_documents_file_and_folder(tmp_path):
    docs = D.load_documents(str(TINY_CORPUS))
    assert len(docs) == 12 and docs.column_names == ["text", "source"]
    for i, t in enumerate(["one. two.", "three. four.", ""]):
        (tmp_path / f"d{i}.txt").write_text(t)
    assert len(D.load_documents(str(tmp_path))) == 2  # the empty file is dropped
    with pytest.raises(D.DataError, match="unknown corpus"):
        D.load_documents(str(tmp_path / "nope"))


def test_hub_corpus_offline_is_a_clear_error():
    with pytest.raises(D.DataError, match="internet"):
        D.load_documents("hub:wikitext:wikitext-2-raw-v1")


def _synthetic_docs(n_docs=40, n_sents=8, sent_len=7):
    """Token id = 1000 + doc*100 + sentence*10 + k: every token says where it came from."""
    return [[[1000 + d * 100 + s * 10 + k for k in range(sent_len)] for s in range(n_sents)] for d in range(n_docs)]


def test_nsp_pairs_structure_labels_and_contiguity():
    docs = _synthetic_docs()
    pairs = D.create_nsp_pairs(docs, 40, cls_id=101, sep_id=102, seed=3)
    n = len(pairs["input_ids"])
    assert n > 50
    labels = torch.tensor(pairs["next_sentence_label"], dtype=torch.float)
    assert 0.4 < labels.mean().item() < 0.65  # about half NotNext
    for ids, types, label, doc in zip(pairs["input_ids"], pairs["token_type_ids"], pairs["next_sentence_label"],
                                      pairs["doc"]):
        assert len(ids) <= 40 and len(ids) == len(types)
        assert ids[0] == 101 and ids[-1] == 102 and ids.count(102) == 2
        sep = ids.index(102)
        a, b = ids[1:sep], ids[sep + 1:-1]
        assert types == [0] * (sep + 1) + [1] * (len(b) + 1)
        assert a and b
        assert all((t - 1000) // 100 == doc for t in a)
        b_docs = {(t - 1000) // 100 for t in b}
        if label == 0:  # IsNext: B is the text right after A in the same document
            assert b_docs == {doc}
            assert b[0] == a[-1] + 1 or (b[0] - 1000) % 10 == 0 and (b[0] - 1000) // 10 == (a[-1] - 1000) // 10 + 1
        else:
            assert doc not in b_docs


def test_nsp_balance_holds_the_notnext_share_of_one_sentence_documents_at_a_half():
    # a mixture like `everyday`: many one-sentence documents (no true next sentence: always a random B) beside
    # documents of several sentences
    docs = _synthetic_docs(n_docs=60, n_sents=6) + [[[5000 + d * 10 + k for k in range(7)]] for d in range(40)]
    plain = D.create_nsp_pairs(docs, 40, cls_id=101, sep_id=102, seed=3)
    balanced = D.create_nsp_pairs(docs, 40, cls_id=101, sep_id=102, seed=3, balance=True)
    assert np.mean(plain["next_sentence_label"]) > 0.58  # the lone sentences push NotNext up
    assert abs(np.mean(balanced["next_sentence_label"]) - 0.5) < 0.02
    for ids, label, doc in zip(balanced["input_ids"], balanced["next_sentence_label"], balanced["doc"]):
        sep = ids.index(102)
        a, b = ids[1:sep], ids[sep + 1:-1]
        if label == 0:  # an IsNext pair is still the text right after A in A's own document
            assert a and b and doc < 60 and {(t - 1000) // 100 for t in b} == {doc}
            assert b[0] == a[-1] + 1 or (b[0] - 1000) // 10 == (a[-1] - 1000) // 10 + 1
    # balance off: the pairs are the ones earlier runs trained on
    assert D.create_nsp_pairs(docs, 40, cls_id=101, sep_id=102, seed=3, balance=False) == plain


def test_truncation_keeps_the_boundary():
    a, b, cut = D.truncate_pair(list(range(10)), list(range(100, 104)), 8)
    assert cut == 6 and a == [6, 7, 8, 9] and b == [100, 101, 102, 103]
    a, b, cut = D.truncate_pair([1, 2], list(range(100, 110)), 6)
    assert a == [1, 2] and b == [100, 101, 102, 103]


def test_pretraining_data_from_fixture(tok):
    d = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    assert d.stats["val_documents"] == 2 and d.stats["train_documents"] == 10
    assert len(d.train) > 10 and len(d.val) >= 1
    assert max(len(x) for x in d.train["input_ids"]) <= 32
    again = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)  # from the cache
    assert again.train["input_ids"] == d.train["input_ids"]


def test_pair_seed_draws_new_training_pairs_on_the_same_split(tok):
    d0 = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    d1 = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, pair_seed=1, val_fraction=0.2)
    same = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, pair_seed=0, val_fraction=0.2)
    assert same.train["input_ids"] == d0.train["input_ids"]  # pair_seed defaults to seed
    assert d1.train["input_ids"] != d0.train["input_ids"]  # new NotNext partners / segment lengths
    assert d1.val["input_ids"] == d0.val["input_ids"]  # the held-out documents and pairs stay
    assert d1.stats["train_documents"] == d0.stats["train_documents"]
    assert d1.stats["sentences"] == d0.stats["sentences"]


def test_collator_masks_anew_per_step_and_never_specials(tok):
    d = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    rows = [d.train[i] for i in range(len(d.train))]
    col = D.PretrainCollator(tok)
    b1 = col(rows, D.batch_generator(0, 1))
    b1_again = col(rows, D.batch_generator(0, 1))
    b2 = col(rows, D.batch_generator(0, 2))
    assert torch.equal(b1["labels"], b1_again["labels"])
    assert not torch.equal(b1["labels"], b2["labels"])
    orig = D.pad_batch(rows, tok.pad_token_id)["input_ids"]
    selected = b1["labels"] != IGNORE_INDEX
    special = torch.isin(orig, torch.tensor(tok.all_special_ids))
    assert not (selected & special).any()
    assert torch.equal(b1["labels"][selected], orig[selected])
    assert torch.equal(b1["input_ids"][~selected], orig[~selected])
    frac = selected.sum().item() / (~special).sum().item()
    assert 0.10 < frac < 0.20
    assert (b1["input_ids"][selected] == tok.mask_token_id).float().mean() > 0.6


def test_whole_word_masking_selects_all_pieces_at_the_word_rate(tok):
    """Word boundaries come from the tokenizer's own pre-tokenization (``word_ids``), not from the
    function under test; each word is selected whole, at about the selection rate."""
    enc = tok(["unbelievably extraordinary tokenization " * 6] * 128, truncation=True, max_length=40)
    rows = [{"input_ids": i, "token_type_ids": t, "next_sentence_label": 0}
            for i, t in zip(enc["input_ids"], enc["token_type_ids"])]
    col = D.PretrainCollator(tok, mlm_probability=0.3, whole_word_mask=True)
    b = col(rows, D.batch_generator(0, 0))
    sel = b["labels"] != IGNORE_INDEX
    words = chosen = 0
    for r in range(len(rows)):
        wids = enc.word_ids(r)
        for w in {w for w in wids if w is not None}:
            pos = [i for i, x in enumerate(wids) if x == w]
            s = sel[r, pos]
            assert s.all() or not s.any(), (r, w, s)
            words += 1
            chosen += int(s.all())
    assert words > 1000 and abs(chosen / words - 0.3) < 0.05  # binomial sd ~0.014


@pytest.mark.parametrize("split", [(0.8, 0.1), (1.0, 0.0), (0.5, 0.5)])
def test_collator_corruption_split_statistics(tok, split):
    """The decisions of the selected positions follow the asked split ([MASK] / random / unchanged)
    within 4 binomial standard deviations, and the fed ids agree with the decision codes."""
    from bertcore.tokenization.masking import MASKED, NOT_SELECTED, RANDOM, UNCHANGED

    mask_p, random_p = split
    enc = tok(["the quick brown fox jumps over the lazy dog again and again"] * 400, truncation=True, max_length=16)
    rows = [{"input_ids": i, "token_type_ids": t, "next_sentence_label": 0}
            for i, t in zip(enc["input_ids"], enc["token_type_ids"])]
    col = D.PretrainCollator(tok, mlm_probability=0.5, mask_replace_prob=mask_p, random_replace_prob=random_p)
    b = col(rows, D.batch_generator(3, 0))
    orig = D.pad_batch(rows, tok.pad_token_id)["input_ids"]
    d = b["decision"]
    n = int((d != NOT_SELECTED).sum())
    assert n > 2000
    for code, p in ((MASKED, mask_p), (RANDOM, random_p), (UNCHANGED, 1 - mask_p - random_p)):
        share = float((d == code).sum()) / n
        assert abs(share - p) <= 4 * (p * (1 - p) / n) ** 0.5 + 1e-9, (code, share, p)
    assert (b["input_ids"][d == MASKED] == tok.mask_token_id).all()
    assert torch.equal(b["input_ids"][d == UNCHANGED], orig[d == UNCHANGED])
    assert torch.equal(b["labels"] != IGNORE_INDEX, d != NOT_SELECTED)


def test_classification_csv_split_is_fixed_and_disjoint():
    c = D.build_classification_data(str(FIXTURES / "tiny_labels.csv"), seed=1)
    assert c.labels == ["negative", "positive"]
    assert (c.stats["train"], c.stats["val"], c.stats["test"]) == (64, 8, 8)
    c2 = D.build_classification_data(str(FIXTURES / "tiny_labels.csv"), seed=1)
    assert c2.test["text"] == c.test["text"]
    assert sorted(c.test["label"]) == [0, 0, 0, 0, 1, 1, 1, 1]  # stratified
    assert all(c.labels[y] == n for y, n in zip(c.train["label"], c.train["label_name"]))
    with pytest.raises(D.DataError, match="lacks column"):
        D.build_classification_data(str(FIXTURES / "tiny_labels.csv"), label_column="sentiment")


def test_packaged_tweets_positive_negative_deduplicated():
    c = D.build_classification_data("tweets")
    assert c.labels == ["negative", "positive"]
    assert c.stats["examples"] == 22812
    assert abs(c.stats["majority_fraction"] - 0.700) < 0.005
    # the CSV is sorted by sentiment: the first validation batches must still hold both classes
    first = c.val["label"][:64]
    assert 0.15 < sum(first) / len(first) < 0.45


def test_batches_resume_and_split_over_ranks():
    ds = __import__("datasets").Dataset.from_dict({"x": list(range(20))})
    full = D.iterate_batches(ds, 4, seed=0)
    seq = [next(full) for _ in range(8)]
    resumed = D.iterate_batches(ds, 4, seed=0, start_step=5)
    assert [r for _, _, r in [next(resumed) for _ in range(3)]] == [r for _, _, r in seq[5:8]]
    r0 = next(D.iterate_batches(ds, 4, seed=0, rank=0, world_size=2))[2]
    r1 = next(D.iterate_batches(ds, 4, seed=0, rank=1, world_size=2))[2]
    assert sorted(x["x"] for x in r0 + r1) == sorted(x["x"] for x in seq[0][2])
    assert seq[4][1] == 0 and seq[5][1] == 1  # 5 batches per epoch, then a new permutation


def test_group_by_length_keeps_every_example_and_resumes():
    lengths = [(i * 7) % 23 + 1 for i in range(200)]
    batches = D.epoch_batches(200, 8, 0, 0, lengths)
    assert sorted(i for b in batches for i in b) == list(range(200))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 3  # similar lengths together
    ds = __import__("datasets").Dataset.from_dict({"x": list(range(200))})
    full = D.iterate_batches(ds, 8, seed=0, lengths=lengths)
    seq = [next(full)[2] for _ in range(30)]
    resumed = D.iterate_batches(ds, 8, seed=0, lengths=lengths, start_step=27)
    assert [next(resumed)[2] for _ in range(3)] == seq[27:30]
