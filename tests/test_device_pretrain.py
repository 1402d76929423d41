"""bench/device_pretrain.py: a run's data packed here and replayed where no corpus can be read gives the same rows
(and a run on them), and a replay with other data options is refused."""

from __future__ import annotations

import json
import sys

import pytest

from bertcore.data import corpora

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import device_pretrain as DP  # noqa: E402

DATA = ["pretrain", "--init", "models/minilm-mlm", "--corpus", "bbc", "--max-docs", "40", "--agreement-pairs", "8",
        "--max-seq-len", "64", "--seed", "0"]
RUN = ["--batch-size", "2", "--max-steps", "1", "--eval-batches", "1", "--lock", "none", "--threads", "1"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    out = tmp_path_factory.mktemp("pack")
    return out, DP.pack(out, DATA)


def test_a_replay_reads_no_corpus_and_builds_the_packed_rows(packed, tmp_path, monkeypatch, capsys):
    src, digest = packed
    index = json.loads((src / "index.json").read_text())
    assert index["digest"] == digest and index["mine"]  # agreement pairs were mined and recorded

    def no_corpus(*a, **k):
        raise AssertionError("a replay read a corpus")

    monkeypatch.setattr(corpora, "load_documents", no_corpus)
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "empty-cache"))  # no token cache to fall back on
    rc = DP.replay(src, DATA + RUN + ["--run-dir", str(tmp_path / "run")])
    assert rc == 0
    assert f"replayed data from {src} (digest {digest})" in capsys.readouterr().out
    assert (tmp_path / "run" / "checkpoints" / "step-000001").is_dir()
    # the readers are put back after the replay
    from bertcore.data import agreement_training, nsp
    assert nsp.tokenized_corpus is corpora.tokenized_corpus and agreement_training.mine.__module__.endswith(
        "counterfactual")


def test_other_data_options_are_refused(packed, tmp_path):
    src, _ = packed
    changed = [*DATA[:-1], "1"]  # --seed 1: another split, whose tokens the pack does not hold as such
    assert DP.replay(src, changed + RUN + ["--run-dir", str(tmp_path / "run")]) == 1  # FAILED: no such tokens
    changed = DATA + ["--data-seed", "5"]  # the same files, other training pairs: the digest differs
    with pytest.raises(SystemExit, match="digest"):
        DP.replay(src, changed + RUN + ["--run-dir", str(tmp_path / "run2")])
