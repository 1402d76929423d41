"""AppTest of the Evolution page: checkpoints of a run compared (hand-written runs), and the published
patterns tracked across checkpoints, on hand-written runs and on a real 20-step run made with the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.modeling.heads import BertForPreTraining

from ..conftest import ROOT, mark_complete
from .conftest import PAGES, array, assert_clean, fake_run, page, texts, tiny_folder
from .test_next_sentence import chart_data


def test_evolution_page_compares_checkpoints(runs_root):
    at = page("evolution")
    assert any("No run has a checkpoint" in t for t in texts(at.info))
    fake_run(runs_root, "20261122-100000-pretrain-aaaa", steps=(0, 10, 20, 30))
    at = page("evolution")
    assert not at.exception and not at.error
    charts = at.get("plotly_chart")
    assert len(charts) == 3
    assert at.multiselect(key="evo_steps_20261122-100000-pretrain-aaaa").value == [0, 10, 20, 30]
    at.slider(key="evo_head").set_value(2).run()
    at.number_input(key="evo_positions").set_value(16).run()
    assert not at.exception and not at.error
    at.text_input(key="evo_text").input("   ").run()
    assert any("empty" in t.lower() or "text" in t.lower() for t in texts(at.warning))


@pytest.mark.parametrize("with_metrics", [True, False])
def test_evolution_page_tracks_findings_across_checkpoints(runs_root, with_metrics):
    d = runs_root / "20261122-100000-pretrain-emrg"
    for s in (0, 10, 20):
        mark_complete(tiny_folder(d / "checkpoints" / f"step-{s:06d}", BertForPreTraining), s)
    runs.write_json(d / "run.json", {"run_id": d.name, "task": "pretrain", "args": {"max_seq_len": 32}})
    runs.write_json(d / "status.json", {"state": "done", "step": 20, "total_steps": 20})
    if with_metrics:
        for s in range(21):
            loss = 7.5 if s < 12 else 4.0  # a plateau, then a sudden drop at step 12
            runs.append_jsonl(d / "metrics.jsonl", {"step": s, "split": "train", "loss": loss, "mlm_loss": loss})
        runs.append_jsonl(d / "metrics.jsonl", {"step": 20, "split": "val", "loss": 4.1, "mlm_loss": 4.1,
                                                "mlm_acc_mask": 0.3})
    at = page("evolution")
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


def test_evolution_findings_on_a_real_tiny_run(runs_root, tmp_path):
    """A 20-step nano pretraining run made with the CLI (checkpoints every 5 steps) -> the Evolution page's
    published-patterns view measures every checkpoint and reads the run's loss."""
    env = {**os.environ, "BERT_EXPLORER_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "bertcore.training", "pretrain", "--preset", "nano", "--max-steps", "20",
           "--save-every", "5", "--keep-checkpoints", "0", "--max-docs", "60", "--max-seq-len", "32",
           "--batch-size", "8", "--lock", "none", "--threads", "1", "--run-dir", str(runs_root / "tiny-run")]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    at = AppTest.from_file(str(PAGES / "evolution.py"), default_timeout=300).run()
    assert_clean(at)
    at.number_input(key="evo_find_segments").set_value(8).run()
    at.toggle(key="evo_findings").set_value(True).run()
    assert_clean(at)
    rows = {r["event"].split(" (")[0]: r["step"] for r in at.dataframe[0].value.to_dict("records")}
    assert "->" in rows["anisotropy of the last layer, first -> last checkpoint"]
    spec = [c for c in at.get("plotly_chart") if "evo_find_chart" in str(c.proto.id)]
    assert spec and "MLM loss" in spec[0].proto.spec
    # Chen et al. 2023's measure: the best head's attachment score against spaCy's parses, one point a checkpoint
    import json

    uas = [t for t in json.loads(spec[0].proto.spec)["data"] if "attachment score" in str(t.get("name", ""))]
    assert uas and all(0 < v <= 1 for v in array(uas[0]["y"]))


def test_attention_by_word(runs_root):
    fake_run(runs_root, "20261122-100000-pretrain-words", steps=(0, 10))
    # "Words, not WordPieces" merges each checkpoint's map; rows keep their sums
    at = page("evolution", evo_text="the cats sat on unbelievably small mats .")
    assert not at.exception, [e.value for e in at.exception]
    pieces = chart_data(at, "evo_att_chart")
    at.toggle(key="evo_words").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    words = chart_data(at, "evo_att_chart")
    assert len(words) == len(pieces) == 2  # one panel per checkpoint
    for p, w in zip(pieces, words):
        zp, zw = array(p["z"]), array(w["z"])
        assert zw.shape[0] == 10 < zp.shape[0]  # [CLS] 8 words [SEP]
        np.testing.assert_allclose(zw.sum(-1), zp.sum(-1)[0], atol=1e-5)  # rows keep their sums


def test_grammar_suite_and_agreement_head_across_checkpoints(runs_root):
    """The Grammar suite tab scores each checkpoint (one panel per paradigm); a run on the generated agreement
    language also gets the agreement head's series in Published patterns, and the unigram-line event is listed."""
    d = runs_root / "20261124-100000-pretrain-gram"
    for s in (0, 10):
        mark_complete(tiny_folder(d / "checkpoints" / f"step-{s:06d}", BertForPreTraining), s)
    runs.write_json(d / "run.json", {"run_id": d.name, "task": "pretrain",
                                     "args": {"max_seq_len": 32, "corpus": "agreement"}})
    runs.write_json(d / "status.json", {"state": "done", "step": 10, "total_steps": 10})
    runs.append_jsonl(d / "metrics.jsonl", {"step": 0, "split": "reference", "unigram_loss": 5.0})
    for s, loss in ((0, 9.0), (10, 4.0)):
        runs.append_jsonl(d / "metrics.jsonl", {"step": s, "split": "val", "loss": loss, "mlm_loss": loss})
    at = page("evolution")
    at.number_input(key="evo_gram_n").set_value(5).run()
    at.toggle(key="evo_gram").set_value(True).run()
    assert_clean(at)
    spec = [c for c in at.get("plotly_chart") if "evo_gram_chart" in str(c.proto.id)]
    assert spec and "agreement: across a relative clause" in spec[0].proto.spec
    at.number_input(key="evo_find_segments").set_value(4).run()
    at.toggle(key="evo_findings").set_value(True).run()
    assert_clean(at)
    rows = {r["event"]: r["step"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows[next(k for k in rows if "unigram line" in k)] == "10"
    spec = [c for c in at.get("plotly_chart") if "evo_find_chart" in str(c.proto.id)]
    assert "Agreement head: verb" in spec[0].proto.spec and "Same head: verb" in spec[0].proto.spec


def test_a_rotary_run_says_it_has_no_position_table(runs_root):
    """A ModernBERT-style run (--architecture modernbert) has rotary positions: the positions tab says so in one
    line instead of an error, and the other tabs still run."""
    from bertcore.modeling.heads import BertForMaskedLM
    from bertcore.training.models import MODERN_FIELDS

    from ..conftest import save_tiny_bert

    d = fake_run(runs_root, "20261122-100000-pretrain-rope", steps=())
    for s in (0, 10):
        c = save_tiny_bert(d / "checkpoints" / f"step-{s:06d}", BertForMaskedLM, seed=s, hidden_size=16,
                           num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                           **{**MODERN_FIELDS, "local_attention": 8})
        mark_complete(c, s)
    at = page("evolution")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("positions are rotary" in t for t in texts(at.info))
