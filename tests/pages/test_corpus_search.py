"""AppTest of the Corpus search page: with every default the hits are bertcore's search over the held-out BBC
segments, and the index is built once then read from disk; bad input gets a message."""

from __future__ import annotations

import torch

from bertcore.loading import sources
from bertcore.analysis.representations import corpus_search as CS

from .conftest import BAD_TEXTS, assert_clean, messages, page


def test_defaults_are_bertcores_hits_and_the_index_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    at = page("corpus_search", cs_segments=20)
    assert_clean(at)
    shown = next(d.value for d in at.dataframe if "cosine" in d.value.columns)
    files = list((tmp_path / "corpus-index").glob("*.npz"))
    assert len(files) == 1
    index = CS.load_index(files[0])
    lm = sources.load(sources.DEFAULT)
    enc = lm.tokenizer("She deposited the cheque at the bank on Monday.", return_tensors="pt")
    pos = lm.tokenizer.convert_ids_to_tokens(enc["input_ids"][0]).index("bank")
    with torch.no_grad():
        q = lm.encoder(**enc, output_hidden_states=True).hidden_states[4][0, pos].numpy()
    hits = CS.search(index, q, 20)
    assert list(shown["token"]) == [h.token for h in hits]
    assert abs(shown["cosine"].iloc[0] - hits[0].cosine) < 1e-6
    stamp = files[0].stat().st_mtime_ns
    at.number_input(key="cs_k").set_value(10).run()  # another k: the same index, not rebuilt
    assert_clean(at)
    assert files[0].stat().st_mtime_ns == stamp and len(next(d.value for d in at.dataframe)) == 10
    at.number_input(key="cs_layer").set_value(2).run()  # another layer: another index
    assert len(list((tmp_path / "corpus-index").glob("*.npz"))) == 2


def test_bad_input(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    at = page("corpus_search", cs_segments=20)
    for name, text in BAD_TEXTS.items():
        at.text_input(key="cs_text").input(text).run()
        assert_clean(at)
        if name in ("empty", "whitespace", "only_zero_width", "no_maskable_token"):
            assert messages(at)["warning"], name
        cut = [w for w in messages(at)["warning"] if "cut off" in w]
        assert bool(cut) == (name in ("20k_chars", "over_max_positions")), (name, cut)
        if cut:  # the search reads 128 tokens of the sentence, as of each corpus segment
            assert "this search reads at most 128" in cut[0], cut
    at.radio(key="cs_corpus").set_value("upload").run()
    assert_clean(at)
    assert any("Upload a .txt" in i for i in messages(at)["info"])


def test_the_default_view_is_shipped_with_the_model_and_nothing_is_indexed(monkeypatch, tmp_path):
    from bertcore.analysis import shipped
    from bertcore.analysis.papers import evalset

    def refuse(*args, **kwargs):
        raise AssertionError("indexed on a first visit: the shipped default view was not used")

    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setattr(CS, "build_index", refuse)
    monkeypatch.setattr(evalset, "build_segments", refuse)
    at = page("corpus_search")
    assert_clean(at)
    lm = sources.load(sources.DEFAULT)
    found = shipped.shipped(lm, shipped.corpus_search(lm, shipped.CORPUS_TEXT, shipped.corpus_default_position(lm),
                                                      shipped.CORPUS_LAYER, shipped.CORPUS_K, shipped.CORPUS_SEGMENTS))
    shown = next(d.value for d in at.dataframe if "cosine" in d.value.columns)
    assert list(shown["token"]) == [h.token for h in found["hits"]]
    assert list(shown["cosine"]) == [h.cosine for h in found["hits"]]
    assert any("shipped with the model" in c.value for c in at.caption)
    assert not list(tmp_path.glob("corpus-index/*.npz"))
