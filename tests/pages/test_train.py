"""AppTest of the Train page's run views (explorer/train/run_view.py) against a temporary runs root.

Hand-written run directories (the contract of docs/CONTRACTS.md) test the views quickly; one real
tiny pretraining run, launched from the page, tests the whole loop (launch -> listed -> second
launch refused -> live curves and probe -> cancelled -> its checkpoints on the Evolution page -> resumed).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.runs.config import field_info

from ..conftest import wait_for
from .conftest import fake_run, page, texts


# ----------------------------------------------------------------------------- helpers
def table_rows(at: AppTest) -> list[dict]:
    df = at.dataframe[0].value  # the runs table is the page's first data frame
    return df.to_dict("records")


# ----------------------------------------------------------------------------- hand-written runs
def test_empty_root_says_how_to_start(runs_root):
    at = page("train", train_recipe="custom")
    assert not at.exception
    assert any("No run yet" in t for t in texts(at.info))
    assert at.button(key="train_start") is not None


def test_run_list_shows_state_task_step_started_and_errors(runs_root):
    fake_run(runs_root, "20261122-100000-pretrain-aaaa", steps=())
    fake_run(runs_root, "20261122-100100-finetune-bbbb", task="finetune", steps=())
    fake_run(runs_root, "20261122-100200-pretrain-cccc", state="failed", error="boom: out of memory", steps=())
    at = page("train", train_recipe="custom")
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


def test_finished_pretraining_run_shows_curves_and_probe(runs_root):
    d = fake_run(runs_root, "20261122-100000-pretrain-aaaa")
    at = page("train", train_recipe="custom")
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


def test_a_calibrated_run_says_what_its_budget_became_and_shows_each_probe_sentence(runs_root):
    """run.json 'calibration' (bertcore.training.calibrate) -> '10 min ≈ 11,500 steps on this machine'; a probe
    of several held-out sentences (--probe auto) -> each sentence with its hidden word, one panel per [MASK]."""
    d = fake_run(runs_root, "20261122-100000-pretrain-aaaa")
    config = runs.read_config(d)
    runs.write_json(d / "run.json", {**config, "calibration": {
        "steps_per_s": 18.91, "timed_steps": 95, "timed_s": 5.02, "eval_s": 0.3, "calibration_s": 5.6,
        "budget_s": 600.0, "estimate": 11347.0, "total_steps": 11500, "time_limit_s": 900.0}})
    status = runs.read_status(d)
    runs.write_json(d / "status.json", {**status, "stopped_early_at": 9000})
    runs.append_jsonl(d / "probe.jsonl", {
        "step": 30, "text": "new [MASK] city . | 300 million [MASK] ago .",
        "sentences": ["new [MASK] city .", "300 million [MASK] ago ."],
        "labels": ["new ___ city …", "… million ___ ago ."],
        "answers": ["york", "years"], "predictions": [[["york", 0.4], ["the", 0.2]], [["years", 0.5], [",", 0.1]]]})
    at = page("train", train_recipe="custom")
    assert not at.exception
    caption = next(t for t in texts(at.caption) if t.startswith("Time budget"))
    assert "10 min ≈ 11,500 steps on this machine (18.9 steps/s measured over 95 steps)" in caption
    assert "15 min 00 s if the machine slows down" in caption and "stopped the run at step 9,000" in caption
    probe = next(m.value for m in at.markdown if "Probe sentences" in m.value)
    assert "1. `new [MASK] city .` (york)" in probe and "2. `300 million [MASK] ago .` (years)" in probe


def test_finished_finetuning_run_shows_confusion_matrix_report_and_baseline(runs_root):
    fake_run(runs_root, "20261122-100100-finetune-bbbb", task="finetune", steps=())
    at = page("train", train_recipe="custom")
    assert not at.exception
    charts = at.get("plotly_chart")
    assert len(charts) == 5  # loss, accuracy, baseline comparison, 2 confusion matrices
    reports = list(at.dataframe)[1:]  # after the runs table
    assert len(reports) == 2
    assert "macro avg" in list(reports[0].value["class"])


def test_bad_inputs_are_bounded_or_refused_with_a_message(runs_root):
    fake_run(runs_root, "20261122-100000-pretrain-aaaa", steps=(20,), max_positions=64)
    at = page("train", train_recipe="custom")
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
    at.text_input(key="train_pretrain_path").input(str(runs_root / "nope.txt")).run()
    at.button(key="train_start").click().run()
    assert any("No file or folder" in t for t in texts(at.error))
    # evaluation interval beyond the run
    at.selectbox(key="train_pt_data").set_value("bbc").run()
    at.number_input(key="train_pretrain_steps").set_value(20).run()
    at.number_input(key="train_pretrain_eval").set_value(500).run()
    at.button(key="train_start").click().run()
    assert any("no validation point" in t for t in texts(at.error))
    assert not at.exception
    assert [p.name for p in runs_root.iterdir() if not p.name.startswith(".")] == ["20261122-100000-pretrain-aaaa"]


def test_second_launch_is_refused_while_a_run_uses_the_device_and_cancel_stops_it(runs_root):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        d = fake_run(runs_root, "20261122-100000-pretrain-live", state="running", pid=sleeper.pid, steps=())
        at = page("train", train_recipe="custom")
        assert not at.exception
        # the live view: progress with ETA and tokens/s, curves, the cancel button
        progress = at.get("progress")[0].proto.text
        assert "running" in progress and "ETA 30 s" in progress and "1,234 tokens/s" in progress
        assert any("busy" in t for t in texts(at.info))
        at.button(key="train_start").click().run()
        assert any("only one run at a time" in t for t in texts(at.warning))
        assert [p.name for p in runs_root.iterdir() if not p.name.startswith(".")] == [d.name]
        at.button(key="train_cancel").click().run()
        assert any("the run saves a checkpoint and stops" in t for t in texts(at.info))  # at step 8
        assert sleeper.wait(timeout=10) == -signal.SIGTERM
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    # the process died of the signal without writing a final state (no handler, like a run still starting up):
    # the Cancel was sent to it, so the table says what the user did, not "failed (killed?)"
    at.run()
    assert not at.exception
    assert table_rows(at)[0]["state"].endswith("cancelled")
    assert any("before its first checkpoint, so it left no model" in t for t in texts(at.info))  # steps=(): none


def test_a_cancelled_run_with_a_checkpoint_offers_to_resume_it(runs_root):
    fake_run(runs_root, "20261122-100000-pretrain-stopped", state="cancelled", steps=(0, 10))
    at = page("train", train_recipe="custom")
    assert not at.exception
    assert any("its last checkpoint (step 10) is kept" in t for t in texts(at.info))
    assert at.button(key="train_resume").label == "Resume from step 10"


def test_queued_launch_waits_for_the_busy_device(runs_root):
    """With 'Queue if the device is busy', a launch starts a process that waits for the lock."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    run_dir = None
    try:
        hold = runs.DeviceLock(runs_root, "cpu", "20261122-100000-pretrain-hold", pid=sleeper.pid)
        assert hold.try_acquire() is None  # held while ``hold`` lives (the flock goes with the object)
        at = page("train", train_recipe="custom")
        at.selectbox(key="train_device").set_value("cpu")
        at.checkbox(key="train_queue").check().run()
        at.button(key="train_start").click().run()
        assert not at.exception
        assert any("queued until the device is free" in s.value for s in at.success)
        [run_dir] = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
        assert any("busy with run 20261122-100000-pretrain-hold" in t for t in texts(at.info))
        assert "queued" in at.get("progress")[0].proto.text
    finally:
        if run_dir is not None:
            runs.cancel(run_dir, timeout_s=10)
        sleeper.kill()
        sleeper.wait()


# ----------------------------------------------------------------------------- real runs
def wait_status(run_dir: Path, ok, what: str, timeout: float) -> dict:
    """Poll the run's status.json until ``ok(status)``; a timeout shows the status and the end of the log."""
    def reached():
        status = runs.read_status(run_dir) or {}
        return status if ok(status) else None

    return wait_for(reached, timeout, poll=0.3, what=lambda: f"run {run_dir.name} to reach {what}: "
                    f"{runs.read_status(run_dir)}\n{runs.read_log(run_dir, 3000)}")


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


def test_real_tiny_run_from_the_page(runs_root):
    """One real run (tiny preset, 4-token batches of 32 tokens, 40 documents): launch, refuse a second
    launch, survive a refresh, show live curves, cancel, then the final view and the Evolution page.
    (A run that ends by itself is shown the same way; see the hand-written 'done' runs above.)"""
    at = _set_tiny(page("train", train_recipe="custom"), steps=5000)
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    assert any("Started run" in s.value for s in at.success), texts(at.error) + texts(at.warning)
    [run_dir] = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
    row = table_rows(at)[0]
    assert row["run"] == run_dir.name and row["task"] == "pretrain"
    # a second launch while the first one is starting / running is refused with a message
    at.button(key="train_start").click().run()
    assert any("only one run at a time" in t or "busy" in t for t in texts(at.warning))
    assert len([p for p in runs_root.iterdir() if not p.name.startswith(".")]) == 1
    # a browser refresh / app restart is a new session: the run is listed and shown live
    fresh = page("train", train_recipe="custom")
    assert not fresh.exception
    assert table_rows(fresh)[0]["run"] == run_dir.name
    assert fresh.selectbox(key="train_view").value == str(run_dir)
    # live: past the first evaluation (step 3: validation metrics, probe, checkpoint)
    status = wait_status(run_dir, lambda s: s.get("step", 0) >= 4 or s.get("state") in runs.FINAL_STATES,
                         "step 4", timeout=240)
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
    status = wait_status(run_dir, lambda s: s.get("state") in runs.FINAL_STATES, "a final state", timeout=120)
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
    evo = page("evolution")
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
