"""The corpus vocabulary in training runs: --tokenizer corpus:<N> builds / reuses the cached WordPiece
vocabulary, every checkpoint carries it and loads in transformers; an unusable --tokenizer is refused
at launch (CLI exit code 2 and a message, no run directory), and by the Train page's checks."""

import json

import pytest
import torch
import transformers

from bertcore import runs as R
from bertcore.training.cli import main
from bertcore.runs.config import ExitCode
from bertcore.training.models import validate
from bertcore.data.vocabularies import corpus_tokenizer
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS

from .conftest import TINY_CORPUS, TINY_RUN

TINY = json.dumps(TINY_RUN)


@pytest.fixture(autouse=True)
def _dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path / "runs"))


def argv(run_dir, *extra):
    return ["pretrain", "--run-dir", str(run_dir), "--corpus", str(TINY_CORPUS), "--model-overrides", TINY,
            "--max-seq-len", "32", "--batch-size", "8", "--max-steps", "2", "--log-every", "1", "--eval-every", "2",
            "--eval-batches", "1", "--save-every", "2", "--lock", "none", "--device", "cpu", "--val-fraction", "0.2",
            *extra]


@pytest.fixture
def five_token_folder(tmp_path):
    """What transformers 5's BertTokenizerFast(vocab_file=...) saves: a 5-token tokenizer.json."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, "the", "cat"]) + "\n", encoding="utf-8")
    folder = tmp_path / "five"
    transformers.BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(str(folder))
    return folder


def test_corpus_vocab_run_saves_a_checkpoint_that_loads_in_transformers(tmp_path):
    run = tmp_path / "runs" / "corpus-vocab"
    assert main(argv(run, "--tokenizer", "corpus:300")) == ExitCode.DONE
    ckpt = R.last_checkpoint(run)
    names = {p.name for p in ckpt.iterdir()}
    assert {"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "config.json",
            "model.safetensors"} <= names
    cached = corpus_tokenizer(str(TINY_CORPUS), 300)  # the same vocabulary, from the cache
    hf_tok = transformers.BertTokenizerFast.from_pretrained(str(ckpt), local_files_only=True)
    assert hf_tok.get_vocab() == cached.get_vocab()
    hf = transformers.BertForPreTraining.from_pretrained(str(ckpt), local_files_only=True).eval()
    assert hf.config.vocab_size == len(cached) < 30522
    enc = hf_tok("The village council met.", "Farmers brought sheep.", return_tensors="pt")
    with torch.no_grad():
        out = hf(**enc)
    assert out.prediction_logits.shape == (1, enc["input_ids"].shape[1], len(cached))
    assert R.read_config(run)["args"]["tokenizer"] == "corpus:300"
    assert len(list((tmp_path / "cache" / "wordpiece").iterdir())) == 1


def test_vocab_size_option_with_plain_corpus(tmp_path):
    run = tmp_path / "runs" / "vs"
    assert main(argv(run, "--tokenizer", "corpus", "--vocab-size", "200")) == ExitCode.DONE
    tok = transformers.BertTokenizerFast.from_pretrained(str(R.last_checkpoint(run)))
    assert tok.get_vocab() == corpus_tokenizer(str(TINY_CORPUS), 200).get_vocab()


def test_unusable_tokenizer_folder_refused_at_launch(tmp_path, five_token_folder, capsys):
    run = tmp_path / "runs" / "refused"
    assert main(argv(run, "--tokenizer", str(five_token_folder))) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "only its 5 special tokens" in err and str(five_token_folder) in err
    assert not run.exists()  # refused before a run directory is made
    assert main(argv(run, "--tokenizer", "corpus:12")) == ExitCode.USAGE
    assert "outside" in capsys.readouterr().err
    assert main(argv(run, "--tokenizer", str(tmp_path / "nowhere"))) == ExitCode.USAGE
    assert "not a folder" in capsys.readouterr().err


def test_train_page_checks_refuse_it_too(five_token_folder):
    opts = {"corpus": "bbc", "max_steps": 100, "eval_every": 50}
    assert validate("pretrain", {**opts, "tokenizer": "corpus:8000"}) == []
    assert validate("pretrain", {**opts, "tokenizer": "packaged"}) == []
    [problem] = validate("pretrain", {**opts, "tokenizer": str(five_token_folder)})
    assert "only its 5 special tokens" in problem
    [problem] = validate("pretrain", {**opts, "tokenizer": "corpus:5"})
    assert "outside" in problem
    # continued pretraining keeps its model's own tokenizer: the option is not checked
    assert validate("pretrain", {**opts, "init": "packaged", "tokenizer": str(five_token_folder)}) == []


@pytest.mark.parametrize("name", ["sotu", "wiki", "bbc+sotu", "all"])
def test_train_page_accepts_the_named_corpora(name):
    assert validate("pretrain", {"corpus": name, "max_steps": 100, "eval_every": 50}) == []
