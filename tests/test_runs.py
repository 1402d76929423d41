"""bertcore.runs: tolerant readers, device lock, and the run as a process (launch, SIGKILL, resume, SIGTERM)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertcore import runs as R

from .conftest import ROOT, SCRATCH, TINY_CORPUS, TINY_RUN, wait_for


def test_the_tests_write_runs_and_caches_in_a_temporary_folder():
    """tests/conftest.py points the runs root and the derived-data cache of every test (and of the runs and
    pages the tests start, which inherit the environment) at a folder of the session, not ./runs or ~/.cache."""
    from bertcore import data

    assert R.runs_root().is_relative_to(SCRATCH) and data.cache_dir().is_relative_to(SCRATCH)
    assert os.environ["BERT_EXPLORER_RUNS"].startswith(str(SCRATCH))


def test_jsonl_reader_ignores_a_partial_last_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1}\n{"step": 2}\nnot json\n{"step": 3, "lo')
    assert R.read_jsonl(p) == [{"step": 1}, {"step": 2}]
    rows, seen = R.iter_new_metrics(tmp_path, 0)
    assert [r["step"] for r in rows] == [1, 2] and seen == 3
    with open(p, "a") as fh:
        fh.write('ss": 0.5}\n')
    rows, seen = R.iter_new_metrics(tmp_path, seen)
    assert rows == [{"step": 3, "loss": 0.5}] and seen == 4
    assert R.read_jsonl(tmp_path / "missing.jsonl") == []
    assert R.read_json(tmp_path / "missing.json") is None


def test_stale_running_status_reads_as_failed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    R.write_json(tmp_path / "status.json", {"state": "running", "pid": dead.pid, "step": 3})
    status = R.read_status(tmp_path)
    assert status["state"] == "failed" and status["stale"] and "resume" in status["error"]


def test_a_run_cancelled_while_starting_up_reads_cancelled_not_killed(tmp_path):
    """Cancel right after Start: the process has no SIGTERM handler yet (still importing torch), so the signal
    kills it before it writes ``cancelled``; the status must still say what the user did, not "killed?"."""
    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        R.RunWriter(tmp_path).set_status(state="queued", step=0)
        R.write_json(tmp_path / "status.json", dict(R.read_json(tmp_path / "status.json"), pid=starting.pid,
                                                     pgid=starting.pid))
        assert R.cancel(tmp_path, timeout_s=10)
        assert starting.wait(10) == -signal.SIGTERM
        status = R.read_status(tmp_path)
        assert status["state"] == "cancelled" and status["error"] is None
        # a later process of the run (resumed, then killed) is not covered by that old Cancel
        R.write_json(tmp_path / "status.json", dict(status, state="running", pid=starting.pid + 10**6,
                                                     pgid=starting.pid + 10**6))
        assert R.read_status(tmp_path)["state"] == "failed"
    finally:
        starting.kill()


def test_device_lock_refuses_then_a_dead_holders_lock_is_free(tmp_path):
    mine = R.DeviceLock(tmp_path, "cpu", "run-a")
    assert mine.try_acquire() is None and mine.try_acquire() is None  # the holder asking again
    other = R.DeviceLock(tmp_path, "cpu", "run-b")
    assert other.try_acquire()["run_id"] == "run-a"  # another lock object, in this process too, is refused
    holder = R.lock_holder(tmp_path, "cpu")
    assert holder["run_id"] == "run-a" and holder["pid"] == os.getpid()
    with pytest.raises(R.RunBusyError, match="busy with run run-a"):
        R.launch("pretrain", {"max_steps": 1}, root=tmp_path, device="cpu")
    assert R.lock_holder(tmp_path, "cuda:0") is None  # another device is free
    mine.release()
    assert R.lock_holder(tmp_path, "cpu") is None and not R.holder_path(tmp_path, "cpu").exists()
    # a process that took the lock and was killed: the system released its lock; its holder file stays behind
    code = ("import os, sys, time; from bertcore.runs import DeviceLock; "
            f"lock = DeviceLock({str(tmp_path)!r}, 'cpu', 'ghost'); lock.try_acquire(); print('held', flush=True); "
            "time.sleep(60)")
    ghost = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert ghost.stdout.readline().strip() == "held"
        assert R.lock_holder(tmp_path, "cpu")["run_id"] == "ghost"
        assert R.DeviceLock(tmp_path, "cpu", "run-c").try_acquire()["run_id"] == "ghost"
    finally:
        ghost.kill()
        ghost.wait()
    assert R.read_json(R.holder_path(tmp_path, "cpu"))["run_id"] == "ghost"  # left behind, and ignored
    assert R.lock_holder(tmp_path, "cpu") is None
    lock = R.DeviceLock(tmp_path, "cpu", "run-c")
    assert lock.try_acquire() is None and R.read_json(R.holder_path(tmp_path, "cpu"))["run_id"] == "run-c"
    lock.release()


def test_waiting_runs_take_the_lock_first_come_first_served(tmp_path):
    """Runs that wait for a device hold tickets in its queue; only the first tries the lock (so a later one never
    overtakes it), a process that waits no more leaves it, and a dead process's ticket is dropped."""
    import threading

    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(4)]
    threads = []
    try:
        holder = R.DeviceLock(tmp_path, "cpu", "hold", pid=procs[0].pid)
        assert holder.try_acquire() is None
        got: list[str] = []

        def wait(lock):
            lock.acquire(wait=True, poll_s=0.02)
            got.append(lock.run_id)

        b, c = (R.DeviceLock(tmp_path, "cpu", name, pid=p.pid) for name, p in (("b", procs[1]), ("c", procs[2])))
        for lock, place in ((b, (1, 1)), (c, (2, 2))):
            threads.append(threading.Thread(target=wait, args=(lock,), daemon=True))
            threads[-1].start()
            wait_for(lambda lock=lock, place=place: R.queue_position(tmp_path, "cpu", lock.run_id) == place, 30,
                     what=f"{lock.run_id} to queue")
        assert [q["run_id"] for q in R.lock_queue(tmp_path, "cpu")] == ["b", "c"]
        # a launch that does not wait is refused while others wait, even at an instant the lock is free
        holder.release()
        with pytest.raises(R.RunBusyError):
            R.DeviceLock(tmp_path, "cpu", "d", pid=procs[3].pid).acquire()
        wait_for(lambda: got, 30, what="the first waiter to take the lock")
        assert got == ["b"] and R.lock_holder(tmp_path, "cpu")["run_id"] == "b"
        assert R.queue_position(tmp_path, "cpu", "c") == (1, 1) and R.queue_position(tmp_path, "cpu", "b") is None
        b.release()
        wait_for(lambda: len(got) == 2, 30, what="the second waiter to take the lock")
        assert got == ["b", "c"] and R.lock_queue(tmp_path, "cpu") == []
        c.release()
        # the ticket of a process that died while waiting does not block the queue
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        ticket = R.DeviceLock(tmp_path, "cpu", "ghost", pid=dead.pid)._enqueue()
        assert R.lock_queue(tmp_path, "cpu") == [] and not ticket.exists()
        assert R.DeviceLock(tmp_path, "cpu", "e", pid=procs[3].pid).acquire(wait=True, poll_s=0.02)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for t in threads:
            t.join(timeout=5)


def _all_files_readable(run: Path, litter_allowed: bool) -> None:
    """Every file of a run directory parses: JSON, JSONL (complete lines), safetensors, trainer state.

    Right after a SIGKILL a write may have been cut: litter is allowed inside a dot-named temp
    checkpoint folder and as atomic-write temp files (readers ignore both); a run that resumed and
    ended must have removed it all (``litter_allowed=False``)."""
    assert R.read_json(run / "run.json") is not None
    assert R.read_json(run / "status.json") is not None
    for name in ("metrics.jsonl", "probe.jsonl"):
        raw = (run / name).read_bytes()
        for line in raw.split(b"\n")[:-1]:
            json.loads(line)
    for ckpt in R.checkpoints(run):
        load_file(str(ckpt / "model.safetensors"))
        json.loads((ckpt / "config.json").read_text())
        torch.load(ckpt / "trainer_state.pt", weights_only=True)
    hidden = [p for p in run.rglob("*") if any(part.startswith(".") for part in p.relative_to(run).parts)]
    if litter_allowed:
        def expected(p: Path) -> bool:
            top = p.relative_to(run).parts
            in_temp_ckpt = len(top) >= 2 and top[0] == "checkpoints" and ".tmp-" in top[1] and top[1].startswith(".")
            return in_temp_ckpt or (p.name.startswith(".") and p.name.endswith(".tmp"))
        assert all(expected(p) for p in hidden), hidden
    else:
        assert hidden == [] and R.RunDir(run).litter() == []


def test_litter_of_a_killed_write_is_listed_and_removed(tmp_path):
    rd = R.RunDir(tmp_path / "run")
    (rd.checkpoints_dir / ".step-000006.tmp-999999").mkdir(parents=True)
    (rd.checkpoints_dir / ".step-000006.tmp-999999" / ".tmpIH0m6o").write_bytes(b"half")
    (rd.path / ".status.json.abc.tmp").write_text("{")
    (rd.checkpoints_dir / "step-000004").mkdir()  # incomplete (no files): not a checkpoint, not litter
    assert len(rd.litter()) == 2 and rd.checkpoints() == []
    assert len(rd.litter(keep_pid=999999)) == 1  # the live writer's folder is not litter
    assert rd.remove_litter() == 2 and rd.litter() == []
    assert (rd.checkpoints_dir / "step-000004").is_dir()


def test_launch_sigkill_resume_then_sigterm(tmp_path):
    env = {"BERT_EXPLORER_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    args = {"corpus": str(TINY_CORPUS), "model_overrides": json.dumps(TINY_RUN), "max_seq_len": 32,
            "batch_size": 4, "max_steps": 400, "log_every": 1, "eval_every": 1000, "eval_batches": 1,
            "save_every": 2, "dropout": 0.0, "val_fraction": 0.2, "threads": 1, "keep_checkpoints": 3}
    run = R.launch("pretrain", args, root=tmp_path / "runs", run_id="killme", device="cpu", env=env,
                   owner="session-0123")  # who may control it (the app's shared mode): kept through every rewrite
    assert run == tmp_path / "runs" / "killme"
    pid = R.read_json(run / "status.json")["pid"]
    wait_for(lambda: len(R.checkpoints(run)) >= 2, alive=lambda: R.pid_alive(pid))
    assert R.lock_holder(tmp_path / "runs", "cpu")["run_id"] == "killme"
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not R.pid_alive(pid))
    status = R.read_status(run)
    assert status["state"] == "failed" and status["stale"]
    _all_files_readable(run, litter_allowed=True)
    # what a kill inside a checkpoint write leaves (made here so the test does not depend on timing)
    (run / "checkpoints" / f".step-000099.tmp-{pid}").mkdir(exist_ok=True)
    (run / "checkpoints" / f".step-000099.tmp-{pid}" / ".tmpIH0m6o").write_bytes(b"half a file")
    (run / ".status.json.x1y2.tmp").write_text("{")
    _all_files_readable(run, litter_allowed=True)
    last = R.checkpoint_step(R.last_checkpoint(run))
    assert last >= 4

    R.resume(run, env=env)  # the dead run's lock is stale: taken over
    pid2 = R.read_json(run / "status.json")["pid"]
    wait_for(lambda: (R.read_status(run) or {}).get("state") == "running" and
             (R.read_status(run) or {}).get("step", 0) >= last + 2, alive=lambda: R.pid_alive(pid2))
    steps = [r["step"] for r in R.read_metrics(run, "train")]
    assert steps == list(range(1, len(steps) + 1))  # lines after the checkpoint were dropped, then re-logged
    assert R.cancel(run)
    wait_for(lambda: not R.pid_alive(pid2))
    status = R.read_status(run)
    assert status["state"] == "cancelled" and status["error"] is None
    assert R.checkpoint_step(R.last_checkpoint(run)) == status["step"] > last
    assert len(R.checkpoints(run)) <= 3  # --keep-checkpoints 3
    assert R.lock_holder(tmp_path / "runs", "cpu") is None
    _all_files_readable(run, litter_allowed=False)
    assert "resumed at step" in R.read_log(run)
    [info] = R.list_runs(tmp_path / "runs")
    assert info.state == "cancelled" and info.run_id == "killme"
    assert info.owner == "session-0123" and R.read_config(run)["model_config"] is not None
