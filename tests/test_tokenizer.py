"""Tokenizer loading checks and the corpus WordPiece trainer (bertcore.tokenization.tokenizer,
bertcore.tokenization.wordpiece)."""

import json
from pathlib import Path

import pytest
import transformers

from bertcore.loading import sources
from bertcore.tokenization.tokenizer import (TextError, TokenizerError, check_tokenizer, encode,
    is_bert_base_uncased, load_tokenizer, save_tokenizer, vocab_md5)
from bertcore.data.vocabularies import corpus_tokenizer, parse_tokenizer_spec, resolve_tokenizer
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, train_wordpiece

from .conftest import TINY_CORPUS

TEXTS = [b for b in TINY_CORPUS.read_text(encoding="utf-8").split("\n\n") if b.strip()]
PAIR = ("The Village Council met on Monday.", "Farmers brought pumpkins to the fair!")


@pytest.fixture(scope="module")
def trained():
    return train_wordpiece(TEXTS, 300)


def test_specials_first_and_read_from_the_tokenizer(trained):
    vocab = trained.get_vocab()
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (trained.pad_token_id, trained.unk_token_id, trained.cls_token_id, trained.sep_token_id,
            trained.mask_token_id) == (0, 1, 2, 3, 4)
    enc = encode(trained, *PAIR)
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and enc.tokens.count("[SEP]") == 2
    first_sep = enc.tokens.index("[SEP]")
    assert set(enc.token_type_ids[:first_sep + 1]) == {0} and set(enc.token_type_ids[first_sep + 1:]) == {1}
    assert any(t.startswith("##") for t in trained.get_vocab()), "continuation pieces use the ## prefix"
    assert 5 < len(trained) <= 300


def test_lower_cases_and_strips_accents(trained):
    assert trained.tokenize("VILLAGE Fair") == trained.tokenize("village fair")
    assert trained.tokenize("Café") == trained.tokenize("cafe")
    assert not any(c.isupper() for t in trained.get_vocab() if t not in SPECIAL_TOKENS for c in t)
    cased = train_wordpiece(TEXTS, 300, lowercase=False)
    assert cased.tokenize("Village") != cased.tokenize("village")


def test_deterministic(trained):
    """Same corpus -> same vocabulary and ids (a tiny corpus has many equally frequent merges, where
    the bare trainer's hash-map order showed through)."""
    for size in (200, 300):
        first = train_wordpiece(TEXTS, size)
        for _ in range(3):
            again = train_wordpiece(list(TEXTS), size)
            assert again.get_vocab() == first.get_vocab() and vocab_md5(again) == vocab_md5(first)
    assert vocab_md5(first) == vocab_md5(trained)


def test_folder_loads_in_transformers_with_the_same_ids(trained, tmp_path):
    files = {p.name for p in save_tokenizer(trained, tmp_path / "tok")}
    assert {"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"} <= files
    hf = transformers.BertTokenizerFast.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    want = trained(*PAIR)
    for other in (hf, auto, load_tokenizer(tmp_path / "tok")):
        assert len(other) == len(trained)
        assert other(*PAIR)["input_ids"] == want["input_ids"]
        assert other(*PAIR)["token_type_ids"] == want["token_type_ids"]
    vocab_only = tmp_path / "vocab_only"
    vocab_only.mkdir()
    (vocab_only / "vocab.txt").write_bytes((tmp_path / "tok" / "vocab.txt").read_bytes())
    assert transformers.BertTokenizerFast.from_pretrained(str(vocab_only))(*PAIR)["input_ids"] == want["input_ids"]


@pytest.mark.parametrize("max_length", [6, 9, 12, 17, 18, 40])
def test_pair_truncated_to_max_length_keeps_cls_a_sep_b_sep(packaged, max_length):
    """``encode(tok, a, b, max_length)``: at most ``max_length`` tokens, laid out [CLS] A [SEP] B [SEP] with
    segment 0 up to the first [SEP] and 1 after it; each sentence keeps a prefix of its pieces, cut
    longest first (so both keep some), and ``num_truncated`` counts what went."""
    tok = packaged.tokenizer
    full = encode(tok, *PAIR)
    enc = encode(tok, *PAIR, max_length=max_length)
    assert len(full) == 18  # [CLS] + 7 pieces + [SEP] + 8 pieces (pumpkin ##s) + [SEP]: 18 and 40 cut nothing
    assert len(enc) == min(max_length, len(full)) and enc.num_truncated == len(full) - len(enc)
    sep = [i for i, t in enumerate(enc.tokens) if t == tok.sep_token]
    assert enc.tokens[0] == tok.cls_token and len(sep) == 2 and sep[1] == len(enc) - 1
    a, b = enc.tokens[1:sep[0]], enc.tokens[sep[0] + 1:-1]
    assert a and b and abs(len(a) - len(b)) <= 1  # longest first: the longer is cut until they are level
    full_sep = full.tokens.index(tok.sep_token)
    assert a == full.tokens[1:1 + len(a)] and b == full.tokens[full_sep + 1:full_sep + 1 + len(b)]
    assert enc.token_type_ids == [0] * (sep[0] + 1) + [1] * (len(enc) - sep[0] - 1)
    assert enc.sequence_ids == [None] + [0] * len(a) + [None] + [1] * len(b) + [None]
    assert enc.special_tokens_mask == [1] + [0] * len(a) + [1] + [0] * len(b) + [1]
    assert enc.attention_mask == [1] * len(enc)


def test_pair_that_cannot_fit_is_refused(packaged):
    with pytest.raises(TextError, match="no room"):
        encode(packaged.tokenizer, *PAIR, max_length=4)


def test_packaged_vocab_is_bert_base_uncased(trained):
    tok = load_tokenizer(sources.packaged_model_dir())
    assert len(tok) == 30522 and is_bert_base_uncased(tok)
    assert not is_bert_base_uncased(trained)


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def _tokenizer_json(trained, tmp_path) -> dict:
    trained.save_pretrained(str(tmp_path / "good"))
    return json.loads((tmp_path / "good" / "tokenizer.json").read_text(encoding="utf-8"))


def test_five_token_tokenizer_refused(tmp_path):
    """transformers 5's BertTokenizerFast(vocab_file=...) ignores the file and saves a 5-token tokenizer."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, "the", "cat"]) + "\n", encoding="utf-8")
    broken = transformers.BertTokenizerFast(vocab_file=str(vocab))
    broken.save_pretrained(str(tmp_path / "five"))
    with pytest.raises(TokenizerError, match="only its 5 special tokens"):
        load_tokenizer(tmp_path / "five")


@pytest.mark.parametrize("special", ["[CLS]", "[SEP]", "[MASK]", "[PAD]"])
def test_missing_special_refused(tmp_path, special):
    tokens = [t for t in [*SPECIAL_TOKENS, "the", "cat", "sat"] if t != special]
    folder = _write(tmp_path / "v", "vocab.txt", "\n".join(tokens) + "\n")
    with pytest.raises(TokenizerError, match=rf"lacks the special token\(s\) {__import__('re').escape(special)}"):
        load_tokenizer(folder)


def test_not_wordpiece_refused(trained, tmp_path):
    spec = _tokenizer_json(trained, tmp_path)
    spec["model"] = {"type": "BPE", "vocab": {"a": 0}, "merges": []}
    folder = _write(tmp_path / "bpe", "tokenizer.json", json.dumps(spec))
    with pytest.raises(TokenizerError, match="BPE model, not WordPiece"):
        load_tokenizer(folder)


def test_unreadable_json_and_empty_folder_refused(tmp_path):
    with pytest.raises(TokenizerError, match="not readable JSON"):
        load_tokenizer(_write(tmp_path / "bad", "tokenizer.json", "{not json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerError, match="no tokenizer in"):
        load_tokenizer(tmp_path / "empty")
    with pytest.raises(TokenizerError, match="not a folder"):
        load_tokenizer(tmp_path / "nowhere")


def test_post_processor_not_bert_refused(trained):
    """transformers re-installs BERT's post-processor when it loads a folder; a tokenizer object
    built otherwise is checked too."""
    import copy

    tok = copy.deepcopy(trained)
    tok.backend_tokenizer.post_processor = None
    with pytest.raises(TokenizerError, match=r"\[CLS\] A \[SEP\] B \[SEP\]"):
        check_tokenizer(tok)
    check_tokenizer(trained)


def test_vocab_size_range():
    with pytest.raises(TokenizerError, match="outside"):
        train_wordpiece(TEXTS, 10)


def test_corpus_tokenizer_cached_per_corpus_and_size(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "c.txt"
    corpus.write_text(TINY_CORPUS.read_text(encoding="utf-8"), encoding="utf-8")
    a = corpus_tokenizer(str(corpus), 300)
    folders = sorted((tmp_path / "cache" / "wordpiece").iterdir())
    assert len(folders) == 1 and (folders[0] / "vocab.txt").is_file()
    info = json.loads((folders[0] / "wordpiece.json").read_text())
    assert info["vocab_size"] == len(a) and info["documents"] == len(TEXTS)
    assert corpus_tokenizer(str(corpus), 300).get_vocab() == a.get_vocab()  # from the cache
    assert len(list((tmp_path / "cache" / "wordpiece").iterdir())) == 1
    corpus_tokenizer(str(corpus), 200)
    assert len(list((tmp_path / "cache" / "wordpiece").iterdir())) == 2
    corpus.write_text(TINY_CORPUS.read_text(encoding="utf-8") + "\n\nA brand new document about zebras.\n")
    corpus_tokenizer(str(corpus), 300)  # the content changed: a new fingerprint, a new folder
    assert len(list((tmp_path / "cache" / "wordpiece").iterdir())) == 3


@pytest.mark.parametrize("spec, size, want", [
    ("packaged", None, ("packaged", None)), ("", None, ("packaged", None)),
    ("corpus", None, ("corpus", 8000)), ("corpus", 4000, ("corpus", 4000)), ("corpus:2,000", 4000, ("corpus", 2000)),
    ("/some/folder", None, ("folder", "/some/folder")),
])
def test_parse_tokenizer_spec(spec, size, want):
    assert parse_tokenizer_spec(spec, size) == want


@pytest.mark.parametrize("spec, match", [("corpus:many", "whole number"), ("corpus:12", "outside"),
                                         ("corpus:1000000", "outside")])
def test_parse_tokenizer_spec_refuses(spec, match):
    with pytest.raises(TokenizerError, match=match):
        parse_tokenizer_spec(spec)


def test_resolve_tokenizer(tmp_path, monkeypatch, trained):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "c.txt"
    corpus.write_text(TINY_CORPUS.read_text(encoding="utf-8"), encoding="utf-8")
    assert is_bert_base_uncased(resolve_tokenizer("packaged"))
    assert resolve_tokenizer("corpus:300", str(corpus)).get_vocab() == trained.get_vocab()
    save_tokenizer(trained, tmp_path / "folder")
    assert resolve_tokenizer(str(tmp_path / "folder")).get_vocab() == trained.get_vocab()
    with pytest.raises(TokenizerError, match="no tokenizer in"):
        resolve_tokenizer(str(tmp_path))


# ----------------------------------------------------------------------------- encode
def test_tokenizer_encodes_pairs_with_segments_and_unique_word_ids(packaged):
    enc = encode(packaged.tokenizer, "Unbelievably HUGE", "second part")
    assert enc.tokens[0] == packaged.tokenizer.cls_token and enc.tokens.count(packaged.tokenizer.sep_token) == 2
    assert "huge" in enc.tokens  # uncased normalisation
    assert any(t.startswith("##") for t in enc.tokens)
    sep = enc.tokens.index(packaged.tokenizer.sep_token)
    assert set(enc.token_type_ids[: sep + 1]) == {0} and set(enc.token_type_ids[sep + 1:]) == {1}
    words = [w for w in enc.word_ids if w is not None]
    assert words == sorted(words) and len(enc.words) == len(set(words)) == 4
    assert enc.num_truncated == 0


def test_tokenizer_truncates_to_max_positions_and_reports_it(packaged):
    enc = encode(packaged.tokenizer, "word " * 1000)
    assert len(enc) == 512 and enc.num_truncated == 1002 - 512
    assert enc.tokens[-1] == packaged.tokenizer.sep_token


@pytest.mark.parametrize("text", ["", "   \n\t", "\x00\x01\x02", None, "a" * 200_001])
def test_tokenizer_refuses_unreadable_text_with_a_message(packaged, text):
    with pytest.raises(TextError):
        encode(packaged.tokenizer, text)


@pytest.mark.parametrize("text", ["🙂 emoji 🚀", "שלום עולם", "zero\u200bwidth\u200d joiner", "ctrl\x07char\x00s"])
def test_tokenizer_handles_odd_unicode(packaged, text):
    enc = encode(packaged.tokenizer, text)
    assert len(enc) >= 3 and "\x00" not in "".join(enc.tokens)


def _hammer(tok, seconds: float = 1.0) -> list[str]:
    """Thread A encodes a padded batch to tensors while thread B encodes single texts unpadded, as two browser
    sessions do on one cached tokenizer. Setting the padding and encoding are two steps; a short sleep between them
    widens the window in which B's call would reset the padding A set."""
    import threading
    import time

    setter = tok.set_truncation_and_padding

    def slow_setter(*args, **kwargs):
        setter(*args, **kwargs)
        time.sleep(0.002)

    tok.set_truncation_and_padding = slow_setter
    texts = ["word " * n for n in range(1, 30, 4)]
    problems: list[str] = []
    want = encode(tok, "one two three").input_ids
    end = time.monotonic() + seconds

    def padded():
        while time.monotonic() < end:
            try:
                batch = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
                assert batch["input_ids"].shape[0] == len(texts)
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                problems.append(f"padded batch: {type(exc).__name__}: {str(exc)[:80]}")

    def single():
        while time.monotonic() < end:
            try:
                if encode(tok, "one two three").input_ids != want:
                    problems.append("single text: other ids (padded?)")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"single text: {type(exc).__name__}: {str(exc)[:80]}")

    threads = [threading.Thread(target=padded), threading.Thread(target=single)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        del tok.set_truncation_and_padding
    return problems


@pytest.mark.parametrize("loader", ["load_tokenizer", "train_wordpiece"])
def test_two_threads_share_one_tokenizer(loader, trained, tmp_path):
    """The loaders' tokenizers serialise each call: transformers sets the Rust tokenizer's padding as state before
    encoding, and another thread's call in between left a padded batch ragged ("Unable to create tensor")."""
    import copy
    import pickle

    if loader == "load_tokenizer":
        save_tokenizer(trained, tmp_path)
        tok = load_tokenizer(tmp_path)
    else:
        tok = train_wordpiece(TEXTS, 300)
    assert not (problems := _hammer(tok)), f"{len(problems)} calls failed: {problems[:3]}"
    for twin in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):  # copies keep their own, working lock
        assert twin("Farmers brought pumpkins")["input_ids"] == tok("Farmers brought pumpkins")["input_ids"]
        assert twin._encode_plus.args[0] is twin


def test_a_plain_transformers_tokenizer_races(trained):
    """What the loaders guard against is real: the same two threads on an unguarded tokenizer fail."""
    plain = copy_unguarded(trained)
    assert _hammer(plain), "two threads on one plain transformers tokenizer never raced: the guard tests nothing"


def copy_unguarded(tok):
    import copy

    plain = copy.deepcopy(tok)
    del plain.__dict__["_encode_plus"]
    return plain
