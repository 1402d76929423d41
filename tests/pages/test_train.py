"""AppTest of the Train page (and the Evolution page) against a temporary runs root.

Hand-written run directories (the contract of docs/CONTRACTS.md) test the views quickly; one real
tiny pretraining run, launched from the page, tests the whole loop (launch -> listed -> second
launch refused -> done -> curves and probe), and a second real run is cancelled from the page.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.config import BertConfig
from bertcore.heads import BertForPreTraining
from bertcore.sources import packaged_model_dir
from bertcore.training.config import field_info

ROOT = Path(__file__).resolve().parents[2]
TRAIN_PAGE = str(ROOT / "explorer" / "app_pages" / "train.py")
EVO_PAGE = str(ROOT / "explorer" / "app_pages" / "evolution.py")


# ----------------------------------------------------------------------------- helpers
@pytest.fixture
def root(tmp_path, monkeypatch):
    """A temporary runs root; at teardown every run still alive there is stopped (even if the test failed)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(folder))
    yield folder
    for info in runs.list_runs(folder):
        status = runs.read_json(info.path / "status.json") or {}
        pid = status.get("pid")
        if status.get("state") in ("queued", "running") and runs.pid_alive(pid) and pid != os.getpid():
            runs.cancel(info.path, timeout_s=20)
            if runs.pid_alive(pid):
                os.killpg(status.get("pgid") or pid, signal.SIGKILL)


def app(page: str = TRAIN_PAGE, recipe: str = "custom") -> AppTest:
    """The page with the launch form on ``recipe`` ('custom' shows every option, as these tests need)."""
    at = AppTest.from_file(page, default_timeout=60)
    at.session_state["train_recipe"] = recipe
    return at.run()


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def fake_run(root: Path, run_id: str, task: str = "pretrain", state: str = "done", steps=(0, 10, 20),
             error: str | None = None, pid: int | None = None, max_positions: int = 64) -> Path:
    """A run directory as bertcore.train writes it, with tiny (random) checkpoints."""
    d = root / run_id
    (d / "checkpoints").mkdir(parents=True)
    runs.write_json(d / "run.json", {"run_id": run_id, "task": task, "created": "2026-11-22T10:00:00Z", "argv": [],
                                     "args": {"max_steps": 20, "max_seq_len": 32}, "model_config": {}, "device": "cpu"})
    runs.write_json(d / "status.json", {"state": state, "step": 20 if state == "done" else 8, "total_steps": 20,
                                        "pid": pid, "error": error, "started": "2026-11-22T10:00:00Z",
                                        "updated": "2026-11-22T10:01:00Z", "eta_s": 30.0, "tokens_per_s": 1234.0})
    for s in range(1, 21):
        rec = {"step": s, "time": s, "split": "train", "lr": 1e-3, "tokens_per_s": 1000, "loss": 10 - s * 0.2}
        if task == "pretrain":
            rec.update(mlm_loss=9 - s * 0.2, mlm_acc=s / 40, nsp_loss=0.7, nsp_acc=0.5)
        else:
            rec.update(acc=0.5 + s / 50, f1=0.4 + s / 50)
        runs.append_jsonl(d / "metrics.jsonl", rec)
    runs.append_jsonl(d / "metrics.jsonl", {**rec, "split": "val", "loss": 7.0})
    if task == "pretrain":
        for s, p in ((10, 0.3), (20, 0.6)):
            runs.append_jsonl(d / "probe.jsonl", {"step": s, "text": "the [MASK] sat .",
                                                  "predictions": [[["cat", p], ["dog", 0.2]]]})
    else:
        rep = {"negative": {"precision": 0.8, "recall": 0.7, "f1-score": 0.75, "support": 30},
               "positive": {"precision": 0.9, "recall": 0.93, "f1-score": 0.91, "support": 70},
               "accuracy": 0.87, "macro avg": {"precision": 0.85, "recall": 0.82, "f1-score": 0.83, "support": 100}}
        runs.write_json(d / "results.json", {  # as bertcore.training writes it
            "step": 20, "labels": ["negative", "positive"], "majority_fraction": 0.7,
            "test": {"loss": 0.4, "acc": 0.86, "f1": 0.83, "n": 100},
            "confusion_matrix": [[21, 9], [5, 65]], "classification_report": rep,
            "baseline": {"name": "TF-IDF (1-2 grams) + logistic regression", "acc": 0.85, "f1": 0.8,
                         "confusion_matrix": [[20, 10], [5, 65]], "classification_report": rep}})
    (d / "log.txt").write_text("loading corpus\nstep 1\nTraceback (most recent call last):\nRuntimeError: boom\n")
    config = BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=max_positions)
    for s in steps:
        torch.manual_seed(s)
        c = d / "checkpoints" / f"step-{s:06d}"
        BertForPreTraining(config).save_pretrained(c)
        shutil.copy(packaged_model_dir() / "vocab.txt", c / "vocab.txt")
        torch.save({"step": s}, c / "trainer_state.pt")
    return d


def table_rows(at: AppTest) -> list[dict]:
    df = at.dataframe[0].value  # the runs table is the page's first data frame
    return df.to_dict("records")


# ----------------------------------------------------------------------------- hand-written runs
def test_empty_root_says_how_to_start(root):
    at = app()
    assert not at.exception
    assert any("No run yet" in t for t in texts(at.info))
    assert at.button(key="train_start") is not None


def test_run_list_shows_state_task_step_started_and_errors(root):
    fake_run(root, "20261122-100000-pretrain-aaaa", steps=())
    fake_run(root, "20261122-100100-finetune-bbbb", task="finetune", steps=())
    fake_run(root, "20261122-100200-pretrain-cccc", state="failed", error="boom: out of memory", steps=())
    at = app()
    assert not at.exception
    rows = table_rows(at)
    assert [r["run"] for r in rows] == ["20261122-100200-pretrain-cccc", "20261122-100100-finetune-bbbb",
                                         "20261122-100000-pretrain-aaaa"]
    assert rows[0]["state"].endswith("failed") and rows[0]["task"] == "pretrain" and "boom" in rows[0]["error"]
    assert rows[1]["step"] == "20 / 20" and rows[1]["started"] == "2026-11-22 10:00:00"
    # the failed run is shown first (newest): its error and the last lines of its log
    assert any("boom" in t for t in texts(at.error))
    assert any("RuntimeError: boom" in c.value for c in at.code)
    assert any("why it failed" in e.label for e in at.expander)


def test_finished_pretraining_run_shows_curves_and_probe(root):
    d = fake_run(root, "20261122-100000-pretrain-aaaa")
    at = app()
    assert not at.exception
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # loss, accuracy, probe
    assert "done" in at.get("progress")[0].proto.text
    assert any("Probe sentence" in m.value for m in at.markdown)
    # use the run's last checkpoint as the model of every page
    at.button(key="train_use").click().run()
    src = at.session_state["model_source"]
    assert src.kind == "run" and src.ref == str(d / "checkpoints" / "step-000020")
    assert at.session_state["model_kind"] == "run"


def test_finished_finetuning_run_shows_confusion_matrix_report_and_baseline(root):
    fake_run(root, "20261122-100100-finetune-bbbb", task="finetune", steps=())
    at = app()
    assert not at.exception
    charts = at.get("plotly_chart")
    assert len(charts) == 5  # loss, accuracy, baseline comparison, 2 confusion matrices
    reports = list(at.dataframe)[1:]  # after the runs table
    assert len(reports) == 2
    assert "macro avg" in list(reports[0].value["class"])


def test_bad_inputs_are_bounded_or_refused_with_a_message(root):
    fake_run(root, "20261122-100000-pretrain-aaaa", steps=(20,), max_positions=64)
    at = app()
    # out-of-range numbers never reach the run: the inputs keep their bounded value
    at.number_input(key="train_pretrain_steps").set_value(10**9).run()
    assert at.number_input(key="train_pretrain_steps").value == field_info("max_steps")["default"]
    at.number_input(key="train_pretrain_batch").set_value(0).run()
    assert at.number_input(key="train_pretrain_batch").value == field_info("batch_size")["default"]
    # a sequence longer than the starting checkpoint's 64 positions
    at.selectbox(key="train_pt_start").set_value("checkpoint").run()
    at.number_input(key="train_pretrain_seqlen").set_value(128).run()
    at.button(key="train_start").click().run()
    assert any("longer than the model's 64 positions" in t for t in texts(at.error))
    # a corpus path that does not exist
    at.selectbox(key="train_pt_start").set_value("scratch").run()
    at.selectbox(key="train_pt_data").set_value("local").run()
    at.text_input(key="train_pretrain_path").input(str(root / "nope.txt")).run()
    at.button(key="train_start").click().run()
    assert any("No file or folder" in t for t in texts(at.error))
    # evaluation interval beyond the run
    at.selectbox(key="train_pt_data").set_value("bbc").run()
    at.number_input(key="train_pretrain_steps").set_value(20).run()
    at.number_input(key="train_pretrain_eval").set_value(500).run()
    at.button(key="train_start").click().run()
    assert any("no validation point" in t for t in texts(at.error))
    assert not at.exception
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == ["20261122-100000-pretrain-aaaa"]


def test_second_launch_is_refused_while_a_run_uses_the_device_and_cancel_stops_it(root):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        d = fake_run(root, "20261122-100000-pretrain-live", state="running", pid=sleeper.pid, steps=())
        at = app()
        assert not at.exception
        # the live view: progress with ETA and tokens/s, curves, the cancel button
        progress = at.get("progress")[0].proto.text
        assert "running" in progress and "ETA 30 s" in progress and "1,234 tokens/s" in progress
        assert any("busy" in t for t in texts(at.info))
        at.button(key="train_start").click().run()
        assert any("only one run at a time" in t for t in texts(at.warning))
        assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [d.name]
        at.button(key="train_cancel").click().run()
        assert sleeper.wait(timeout=10) == -signal.SIGTERM
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    at.run()  # the process is gone without writing a final state: reported as failed (stale)
    assert not at.exception
    assert table_rows(at)[0]["state"].endswith("failed")


def test_queued_launch_waits_for_the_busy_device(root):
    """With 'Queue if the device is busy', a launch starts a process that waits for the lock."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    run_dir = None
    try:
        assert runs.DeviceLock(root, "cpu", "20261122-100000-pretrain-hold", pid=sleeper.pid).try_acquire() is None
        at = app()
        at.selectbox(key="train_device").set_value("cpu")
        at.checkbox(key="train_queue").check().run()
        at.button(key="train_start").click().run()
        assert not at.exception
        assert any("queued until the device is free" in s.value for s in at.success)
        [run_dir] = [p for p in root.iterdir() if not p.name.startswith(".")]
        assert any("busy with run 20261122-100000-pretrain-hold" in t for t in texts(at.info))
        assert "queued" in at.get("progress")[0].proto.text
    finally:
        if run_dir is not None:
            runs.cancel(run_dir, timeout_s=10)
        sleeper.kill()
        sleeper.wait()


# ----------------------------------------------------------------------------- evolution page
def test_evolution_page_compares_checkpoints(root):
    at = app(EVO_PAGE)
    assert any("No run has a checkpoint" in t for t in texts(at.info))
    fake_run(root, "20261122-100000-pretrain-aaaa", steps=(0, 10, 20, 30))
    at = app(EVO_PAGE)
    assert not at.exception and not at.error
    charts = at.get("plotly_chart")
    assert len(charts) == 3
    assert at.multiselect(key="evo_steps_20261122-100000-pretrain-aaaa").value == [0, 10, 20, 30]
    at.slider(key="evo_head").set_value(2).run()
    at.number_input(key="evo_positions").set_value(16).run()
    assert not at.exception and not at.error
    at.text_input(key="evo_text").input("   ").run()
    assert any("empty" in t.lower() or "text" in t.lower() for t in texts(at.warning))


# ----------------------------------------------------------------------------- real runs
def _wait_state(run_dir: Path, states: tuple[str, ...], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = runs.read_status(run_dir) or {}
        if status.get("state") in states:
            return status
        time.sleep(0.3)
    log = runs.read_log(run_dir, 3000)
    raise AssertionError(f"run {run_dir.name} did not reach {states}: {runs.read_status(run_dir)}\n{log}")


def _set_tiny(at: AppTest, steps: int) -> AppTest:
    at.selectbox(key="train_pretrain_preset").set_value("tiny")
    at.number_input(key="train_pretrain_steps").set_value(steps)
    at.number_input(key="train_pretrain_batch").set_value(4)
    at.number_input(key="train_pretrain_seqlen").set_value(32)
    at.number_input(key="train_pretrain_eval").set_value(3)
    at.number_input(key="train_pretrain_log").set_value(1)
    at.number_input(key="train_pretrain_save").set_value(3)
    at.number_input(key="train_pretrain_docs").set_value(40)
    return at.run()


def _wait_step(run_dir: Path, step: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = runs.read_status(run_dir) or {}
        if status.get("step", 0) >= step or status.get("state") in runs.FINAL_STATES:
            return status
        time.sleep(0.3)
    raise AssertionError(f"run {run_dir.name} did not reach step {step}: {runs.read_status(run_dir)}\n"
                         f"{runs.read_log(run_dir, 3000)}")


def test_real_tiny_run_from_the_page(root):
    """One real run (tiny preset, 4-token batches of 32 tokens, 40 documents): launch, refuse a second
    launch, survive a refresh, show live curves, cancel, then the final view and the Evolution page.
    (A run that ends by itself is shown the same way; see the hand-written 'done' runs above.)"""
    at = _set_tiny(app(), steps=5000)
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    assert any("Started run" in s.value for s in at.success), texts(at.error) + texts(at.warning)
    [run_dir] = [p for p in root.iterdir() if not p.name.startswith(".")]
    row = table_rows(at)[0]
    assert row["run"] == run_dir.name and row["task"] == "pretrain"
    # a second launch while the first one is starting / running is refused with a message
    at.button(key="train_start").click().run()
    assert any("only one run at a time" in t or "busy" in t for t in texts(at.warning))
    assert len([p for p in root.iterdir() if not p.name.startswith(".")]) == 1
    # a browser refresh / app restart is a new session: the run is listed and shown live
    fresh = app()
    assert not fresh.exception
    assert table_rows(fresh)[0]["run"] == run_dir.name
    assert fresh.selectbox(key="train_view").value == str(run_dir)
    # live: past the first evaluation (step 3: validation metrics, probe, checkpoint)
    status = _wait_step(run_dir, 4, timeout=240)
    assert status["state"] == "running", runs.read_log(run_dir, 3000)
    fresh.run()
    progress = fresh.get("progress")[0].proto.text
    assert "running" in progress and "/ 5,000" in progress and "tokens/s" in progress
    loss = fresh.get("plotly_chart")[0]
    assert "Loss" in loss.proto.spec and "validation" in loss.proto.spec
    assert any("Probe sentence" in m.value for m in fresh.markdown)
    # cancel from the page: the run saves a checkpoint and ends as cancelled
    fresh.button(key="train_cancel").click().run()
    assert any("Cancelling" in t for t in texts(fresh.info))
    status = _wait_state(run_dir, runs.FINAL_STATES, timeout=120)
    assert status["state"] == "cancelled", runs.read_log(run_dir, 3000)
    fresh.run()
    assert not fresh.exception
    assert table_rows(fresh)[0]["state"].endswith("cancelled")
    assert "cancelled" in fresh.get("progress")[0].proto.text
    assert any("cancelled" in t for t in texts(fresh.info))
    assert len(fresh.get("plotly_chart")) == 3  # loss, accuracy, probe
    steps = [runs.checkpoint_step(c) for c in runs.checkpoints(run_dir)]
    assert steps[0] == 3 and steps[-1] >= 4
    # its checkpoints feed the Evolution page
    evo = app(EVO_PAGE)
    assert not evo.exception and not evo.error
    assert len(evo.get("plotly_chart")) == 3
    # a cancelled run can be resumed from its last checkpoint (then cancelled again here)
    fresh.button(key="train_resume").click().run()
    try:
        assert not fresh.exception
        assert (runs.read_status(run_dir) or {}).get("state") in ("queued", "running")
        assert fresh.button(key="train_cancel") is not None  # the live view again
    finally:
        runs.cancel(run_dir, timeout_s=30)
