"""Probe sentences chosen from a run's held-out documents (bertcore.training.probe_choice), and the probe of
several sentences (PretrainTask.probe): batched like one at a time, labelled, recomputed the same from a
checkpoint loaded fresh."""

from __future__ import annotations

import pytest
import torch

from bertcore import runs as R
from bertcore.loading import sources
from bertcore.training import probe_choice as P
from bertcore.runs.config import TrainConfig
from bertcore.training.evaluate import evaluate_checkpoint
from bertcore.training.tasks import PretrainTask

from .conftest import TINY_CORPUS
from .test_training import run_trainer, tiny_pretrain_argv


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def ids(tok, *sentences: str) -> list[list[int]]:
    return [tok(s, add_special_tokens=False)["input_ids"] for s in sentences]


def test_the_chosen_word_is_the_one_its_neighbours_predict_in_training(packaged, monkeypatch):
    """In training, 'new _ city' holds 'york' 30 times and 'jersey' 10 times (P = 0.75), 'of _ ago' holds 'years'
    40 times (P = 1), 'york _ .' holds 'city' 30 times (P = 1). Best first, one probe per held-out document and
    per word: 'city' wins the museum document (1.0 > 0.75), so 'york' is the third document's probe."""
    monkeypatch.setattr(P, "MIN_WORD_COUNT", 5)
    monkeypatch.setattr(P, "MIN_CONTEXT_COUNT", 5)
    tok = packaged.tokenizer
    train = ([ids(tok, "she lives in new york city .")] * 30 + [ids(tok, "he moved to new jersey city .")] * 10
             + [ids(tok, "it happened millions of years ago .")] * 40)
    val = [ids(tok, "the museum of new york city .", "the cat sat on the mat ."),
           ids(tok, "this rock formed millions of years ago ."),
           ids(tok, "a visit to new york city ."),
           ids(tok, "a house in new jersey today .")]  # no neighbour pair of this one was seen in training
    chosen = P.choose_probes(train, val, tok, max_tokens=30)
    assert [(c["text"], c["answer"], c["score"], c["context_count"]) for c in chosen] == [
        ("this rock formed millions of [MASK] ago.", "years", 1.0, 40),
        ("the museum of new york [MASK].", "city", 1.0, 30),
        ("a visit to new [MASK] city.", "york", 0.75, 40)]
    assert chosen[2]["word_count"] == 30
    assert P.choose_probes(train, val, tok, max_tokens=30) == chosen  # deterministic
    assert P.choose_probes(train, val, tok, max_tokens=30, n=1) == chosen[:1]
    assert P.choose_probes(train, val, tok, max_tokens=5) == []  # no held-out sentence fits
    monkeypatch.setattr(P, "MIN_CONTEXT_COUNT", 41)
    assert P.choose_probes(train, val, tok, max_tokens=30) == []  # no neighbour pair seen often enough


def test_mask_labels():
    assert P.mask_label("the most [MASK] city of the state.") == "the most ___ city of …"
    assert P.mask_label("a [MASK] b [MASK] c d e", 1) == "… [MASK] b ___ c d …"
    assert P.mask_labels(["x [MASK] y", "p [MASK] q [MASK]"], [0, 1, 1]) == ["x ___ y", "p ___ q [MASK]",
                                                                              "… [MASK] q ___"]


def test_a_probe_of_several_sentences_is_batched_like_one_at_a_time():
    """The packaged MiniLM-MLM (sharp predictions, so a padding mistake shows) on two sentences of different
    lengths at once gives what it gives on each alone."""
    loaded = sources.load(sources.PACKAGED_MLM)
    model, tok = loaded.model.eval(), loaded.tokenizer
    first, second = "the cat sat on the [MASK].", "a [MASK] dog ran to the [MASK] of the park."
    many = PretrainTask(TrainConfig.create("pretrain", probe=f"{first} | {second}"))
    rec = many.probe(model, tok, torch.device("cpu"), 7)
    assert rec["step"] == 7 and rec["sentences"] == [first, second] and len(rec["predictions"]) == 3
    assert rec["labels"] == ["… on the ___ .", "a ___ dog ran …", "… to the ___ of the …"]
    assert "answers" not in rec and rec["text"] == f"{first} | {second}"
    for text, preds in ((first, rec["predictions"][:1]), (second, rec["predictions"][1:])):
        one = PretrainTask(TrainConfig.create("pretrain", probe=text)).probe(model, tok, torch.device("cpu"), 7)
        assert "sentences" not in one and [[t for t, _ in p] for p in one["predictions"]] == [
            [t for t, _ in p] for p in preds]  # padding the shorter sentence changes nothing
        for a, b in zip(one["predictions"], preds):
            assert [p for _, p in a] == pytest.approx([p for _, p in b], abs=2e-4)
    assert PretrainTask(TrainConfig.create("pretrain", probe="no mask here")).probe(model, tok, "cpu", 0) is None


def test_probe_auto_in_a_run_and_from_its_checkpoint_loaded_fresh(tmp_path, monkeypatch):
    """A corpus of 12 documents that repeat two collocations: the run's held-out documents give the probes,
    run.json records them with their answers, and a checkpoint loaded fresh probes the same sentences."""
    monkeypatch.setattr(P, "MIN_WORD_COUNT", 5)
    monkeypatch.setattr(P, "MIN_CONTEXT_COUNT", 5)
    corpus = tmp_path / "collocations.txt"
    corpus.write_text("\n\n".join(f"Document {i} is here. The rocks formed millions of years ago. Anna lives in "
                                    f"new york city. Item {i} ends it." for i in range(12)))
    run = tmp_path / "auto"
    argv = [a if a != str(TINY_CORPUS) else str(corpus) for a in tiny_pretrain_argv(run, "--probe", "auto")]
    _, state = run_trainer(argv + ["--max-steps", "2"])
    assert state == "done"
    chosen = R.read_config(run)["data"]["probe_sentences"]
    assert len(chosen) == 2  # one per held-out document (20% of 12), each a sentence of the corpus
    for c in chosen:
        assert c["text"].count("[MASK]") == 1 and c["text"].replace("[MASK]", c["answer"]) in corpus.read_text().lower()
    last = R.read_probe(run)[-1]
    assert last["answers"] == [c["answer"] for c in chosen] and len(last["predictions"]) == 2
    assert last["sentences"] == [c["text"] for c in chosen]
    fresh = evaluate_checkpoint(R.last_checkpoint(run))
    assert fresh["probe"]["text"] == last["text"] and fresh["probe"]["predictions"] == last["predictions"]
