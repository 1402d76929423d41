"""explorer.server.heavy: the server-wide queue of heavy jobs (a cap, FIFO order, identical keys computed once)."""

import threading
import time

import pytest

from explorer.server.heavy import HeavyJobs


def _slow(seconds, value, log=None, name=None):
    def compute(progress):
        if log is not None:
            log.append(("start", name))
        for i in range(4):
            time.sleep(seconds / 4)
            progress((i + 1) / 4)
        if log is not None:
            log.append(("end", name))
        return value
    return compute


def _in_threads(*calls):
    out, threads = {}, []
    for i, call in enumerate(calls):
        threads.append(threading.Thread(target=lambda i=i, call=call: out.__setitem__(i, call())))
        threads[-1].start()
        time.sleep(0.05)  # a fixed arrival order
    for t in threads:
        t.join()
    return out


def test_at_most_slots_run_at_once_in_arrival_order():
    jobs, log = HeavyJobs(slots=1), []
    reports = {name: [] for name in "abc"}

    def call(name):
        return lambda: jobs.run(name, _slow(0.3, name.upper(), log, name),
                                lambda state, value: reports[name].append((state, value)))

    out = _in_threads(call("a"), call("b"), call("c"))
    assert out == {0: "A", 1: "B", 2: "C"}
    assert log == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b"), ("start", "c"), ("end", "c")]
    assert ("queued", 2) in reports["c"] and ("queued", 1) in reports["c"]  # its place in the queue, counting down
    assert not any(state == "queued" for state, _ in reports["a"])
    progress = [v for state, v in reports["a"] if state == "progress"]
    assert progress == sorted(progress) and progress[-1] >= 0.5  # its own job's progress, as it moves
    assert jobs.status() == (0, 0)


def test_two_slots_run_two_jobs_together():
    jobs, log = HeavyJobs(slots=2), []
    _in_threads(*(lambda n=n: jobs.run(n, _slow(0.3, n, log, n)) for n in "ab"))
    assert log[:2] == [("start", "a"), ("start", "b")]


def test_the_same_key_is_computed_once_and_shared():
    jobs, log, shared = HeavyJobs(slots=1), [], []
    out = _in_threads(lambda: jobs.run("k", _slow(0.4, [1, 2], log, "first")),
                      lambda: jobs.run("k", _slow(0.4, [3], log, "second"), lambda s, v: shared.append(s)))
    assert out[0] is out[1] and out[0] == [1, 2]
    assert log == [("start", "first"), ("end", "first")]
    assert "shared" in shared
    assert jobs.run("k", _slow(0.1, "new", log, "third")) == [1, 2]  # kept for later sessions
    assert jobs.run("other", _slow(0.1, "x")) == "x"  # another key is computed
    assert jobs.run("lens", _slow(0.1, 1), keep=False) == 1 and jobs.run("lens", _slow(0.1, 2), keep=False) == 2


def test_an_error_reaches_every_waiter_and_is_not_kept():
    jobs = HeavyJobs(slots=1)

    def failing(progress):
        time.sleep(0.2)
        raise ValueError("bad input")

    errors = []

    def call():
        try:
            jobs.run("k", failing)
        except ValueError as exc:
            errors.append(str(exc))

    _in_threads(call, call)
    assert errors == ["bad input", "bad input"]
    assert jobs.run("k", _slow(0.05, "ok")) == "ok"


class _Stopped(BaseException):
    """What Streamlit raises inside a script whose session left or reran."""


def test_a_session_that_leaves_does_not_stop_the_job_and_a_queued_one_nobody_waits_for_is_dropped():
    """A job runs in the queue's worker, not in the session's script: a session that leaves (Streamlit raises in its
    script) leaves the job running for the session that waits for the same key, which gets its result."""
    jobs, log = HeavyJobs(slots=1), []
    left = {"n": 0}

    def leave_while_running(state, value):
        if state == "progress" and value >= 0.25:
            left["n"] += 1
            raise _Stopped

    def leaver():
        with pytest.raises(_Stopped):
            jobs.run("k", _slow(0.4, "from the leaver", log, "leaver"), leave_while_running)
        return "left"

    out = _in_threads(leaver, lambda: jobs.run("k", _slow(0.2, "from the waiter", log, "waiter")))
    assert out == {0: "left", 1: "from the leaver"} and left["n"] == 1
    assert log == [("start", "leaver"), ("end", "leaver")]
    assert jobs.status() == (0, 0)

    def leave_while_queued(state, value):
        if state == "queued":
            raise _Stopped

    def queued_leaver():
        with pytest.raises(_Stopped):
            jobs.run("q", _slow(0.1, "never", log, "never"), leave_while_queued)

    _in_threads(lambda: jobs.run("busy", _slow(0.3, 1)), queued_leaver)
    time.sleep(0.2)
    assert ("start", "never") not in log and jobs.status() == (0, 0)
    assert jobs.run("q", _slow(0.05, "asked again")) == "asked again"  # dropped, not kept half-done


def test_the_apps_torch_threads_default_to_half_the_cores_and_follow_the_env(monkeypatch):
    import os

    from bertcore.settings import SettingsError
    from explorer.server.heavy import default_threads

    monkeypatch.delenv("BERT_EXPLORER_THREADS", raising=False)
    assert default_threads() == max(1, (os.cpu_count() or 2) // 2)
    monkeypatch.setenv("BERT_EXPLORER_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("BERT_EXPLORER_THREADS", "")  # empty: unset
    assert default_threads() == max(1, (os.cpu_count() or 2) // 2)
    for junk in ("0", "-2", "two"):  # a typo is said, not silently replaced by the default
        monkeypatch.setenv("BERT_EXPLORER_THREADS", junk)
        with pytest.raises(SettingsError, match=f"BERT_EXPLORER_THREADS='{junk}'"):
            default_threads()


def test_the_app_sets_its_torch_threads_before_a_page_runs(monkeypatch):
    """app.py limits the server's torch threads on its first run, before any page computes (the test process keeps
    torch's default through BERT_EXPLORER_THREADS in tests/conftest.py; here the env asks for 1)."""
    from pathlib import Path

    import torch
    from streamlit.testing.v1 import AppTest

    before = torch.get_num_threads()
    monkeypatch.setenv("BERT_EXPLORER_THREADS", "1")
    try:
        torch.set_num_threads(2)
        at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120).run()
        assert not at.exception
        seen = []  # pages compute in Streamlit's script threads: a new thread reads torch's process-wide count
        reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        reader.start()
        reader.join()
        assert seen == [1]
    finally:
        torch.set_num_threads(before)
