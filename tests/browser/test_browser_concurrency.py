"""Several people on one server, in a real browser: sessions opening a model page at once load the model once, and
two sessions pressing "Start training" together never get two runs training on one device.

Run:  python -m pytest tests/browser/test_browser_concurrency.py -v -s
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from bertcore.loading.sources import packaged_model_dir

from .helpers import (  # noqa: F401 - fixtures used by name
    MAIN,
    expand_all,
    find_page,
    message_in_page,
    nav_pages,
    new_session_module,
    open_page,
    problems,
    results,
    wait_charts,
    wait_idle,
)


def test_concurrent_sessions_share_one_model(server, nav_pages, new_session):  # noqa: F811
    """Three sessions open a model page at once: all render, the model is loaded once."""
    nav = find_page(nav_pages, r"attention")
    assert nav is not None, "no Attention page in the navigation"
    warm = new_session()  # the model is loaded once before measuring: what follows must not load it again
    warm.page.goto(nav.url, wait_until="commit")
    wait_idle(warm.page, start_ms=5_000, need_content=True)
    wait_charts(warm.page)
    model_mb = sum(f.stat().st_size for f in packaged_model_dir().glob("*.safetensors")) / 2**20
    sessions = [new_session() for _ in range(3)]
    rss_before = server.rss_mb()
    log_start = len(server.log_tail(100_000))
    t0 = time.perf_counter()
    for s in sessions:
        s.page.goto(nav.url, wait_until="commit")
    failures = []
    for i, s in enumerate(sessions):
        wait_idle(s.page, start_ms=5_000, need_content=True)
        wait_charts(s.page)
        found = problems(s, server)
        if found:
            failures.append(f"session {i + 1}: {'; '.join(found)}")
    took = time.perf_counter() - t0
    rss_after = server.rss_mb()
    log = server.log_tail(100_000)[log_start:]
    print(f"\n3 concurrent sessions on {nav.title!r}: {took:.1f} s; server RSS {rss_before} -> {rss_after} MB")
    assert not failures, "\n".join(failures)
    assert rss_before and rss_after, "the server's memory could not be read"
    # three sessions of a model already loaded: less than one more copy of its weights
    assert rss_after - rss_before < model_mb, (f"memory grew {rss_after - rss_before:.0f} MB for 3 sessions "
                                               f"(the model is {model_mb:.0f} MB): a session loaded its own copy?")
    assert log.count("Traceback") == 0, log


def _set_number(page, label: str, value: str) -> bool:
    loc = page.locator(f'{MAIN} [data-testid="stNumberInput"] input[aria-label="{label}"]')
    if not loc.count():
        return False
    loc.first.fill(value)
    loc.first.press("Enter")
    wait_idle(page)
    return True


def _run_states(runs_dir: Path) -> dict[str, dict]:
    """Each run's status (``bertcore.runs.read_status``: a run whose process died reads as failed)."""
    from bertcore import runs

    out = {}
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        try:
            status = runs.read_status(run_dir)
        except (OSError, ValueError):
            status = None
        if status is not None:
            out[run_dir.name] = status
    return out


def test_two_users_start_training_at_once(server, nav_pages, new_session, results):  # noqa: F811
    """Two sessions press "Start training" at the same moment: one run trains, the other is
    refused (a message in its page) or waits (queued, or failed with a 'busy' error); never two
    runs training on one device at once. The runs are tiny (2 steps, 20 documents)."""
    nav = find_page(nav_pages, r"^train")
    if nav is None:
        pytest.fail("no Train page in the navigation (renamed? update the pattern)")
    earlier = set(_run_states(server.runs_dir))  # runs other tests of the session left in the server's folder

    def new_runs() -> dict[str, dict]:
        return {k: v for k, v in _run_states(server.runs_dir).items() if k not in earlier}

    users = [new_session(), new_session()]
    for user in users:
        open_page(user, nav)
        custom = user.page.locator(f'{MAIN} [data-testid="stRadio"] label').filter(has_text="Custom: every option")
        assert custom.count(), "the Train page has no 'Custom: every option' recipe (renamed? update the label)"
        custom.first.click()
        wait_idle(user.page)
        expand_all(user.page)
        if not _set_number(user.page, "Steps", "2"):
            pytest.fail("the Train page has no 'Steps' field (renamed? update the label)")
        _set_number(user.page, "Documents to use (0: all)", "20")
        _set_number(user.page, "Evaluate every (steps)", "1")
    buttons = [u.page.locator(f"{MAIN} button").filter(has_text=re.compile("start training", re.I)).first
               for u in users]
    # sample the runs' states from before the clicks until they have all ended (a thread: the page
    # waits below must not leave gaps): at most one may be training at any moment
    most = {"running": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            states = [v.get("state") for v in new_runs().values()]
            most["running"] = max(most["running"], states.count("running"))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    alerts = f'{MAIN} [data-testid="stAlert"]'

    def notes(page) -> list[str]:  # read in one go in the page: elements may go away between two reads
        return page.evaluate("""(sel) => [...document.querySelectorAll(sel)].filter(el => el.offsetParent !== null)
                                 .map(el => el.innerText.split(/\\s+/).join(' ').trim()).filter(t => t)""", alerts)

    before = [set(notes(u.page)) for u in users]  # e.g. "No run yet: start one above."
    for b in buttons:  # both clicks go out before either script run has finished
        b.click(no_wait_after=True)
    # read what each page says as soon as it says it: a 2-step run can end within seconds, and its end
    # triggers a full rerun of both pages (the polling fragments), which clears the Started / Not started notes;
    # so collect every new note each page shows until both have shown one
    said: list[list[str]] = [[], []]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(said):
        for i, u in enumerate(users):
            said[i] += [t for t in notes(u.page) if t not in before[i] and t not in said[i]]
        time.sleep(0.05)
    for u in users:
        wait_idle(u.page, timeout_ms=60_000, quiet_ms=200)
    started = new_runs()
    # wait until each run has met the device lock (running, or failed: busy) before cancelling: a Cancel while
    # both processes still import torch (a slow CI machine) ends both before either asks for the lock
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(v.get("state") == "queued"
                                               for v in new_runs().values()):
        time.sleep(0.25)
    # the test needs no finished run: stop it from the page that started it (Cancel run). The run's view redraws
    # every 2 s; on a loaded machine the button may be redrawn before a click lands: then cancel the run directly
    from bertcore import runs

    for u in users:
        cancel = u.page.locator(f"{MAIN} button").filter(has_text=re.compile("cancel run", re.I))
        if cancel.count() and cancel.first.is_enabled():
            try:
                cancel.first.click(timeout=15_000)
                wait_idle(u.page, timeout_ms=30_000, quiet_ms=200)
            except PlaywrightTimeout:
                for run_dir, status in new_runs().items():
                    if status.get("state") in ("queued", "running"):
                        runs.cancel(server.runs_dir / run_dir, timeout_s=30)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until every run has ended
        states = {k: v.get("state") for k, v in new_runs().items()}
        if states and all(s in ("done", "failed", "cancelled") for s in states.values()):
            break
        time.sleep(0.25)
    stop.set()
    sampler.join()
    max_running = most["running"]
    final = new_runs()
    states = {k: v.get("state") for k, v in final.items()}
    errors = {k: str(v.get("error"))[:160] for k, v in final.items() if v.get("state") == "failed"}
    line = (f"runs started: {len(started)}; end states: {states}; most training at once: {max_running}; "
            f"user 1 was told {said[0][:2]}; user 2 was told {said[1][:2]}; failed runs' errors: {errors}")
    print("\n" + line)
    results.add(nav.title, "Start training (2 sessions at once)", "simultaneous clicks", line)
    assert max_running <= 1, line
    assert started, "no run was started at all: " + line
    assert all(s in ("done", "failed", "cancelled") for s in states.values()), "a run did not stop: " + line
    for u in users:
        assert not problems(u, server), line
    # the second user heard about it: refused in the page, or its run failed saying the device is busy
    refused_in_page = any(re.search(r"not started|busy|one run at a time", " ".join(t), re.I) for t in said)
    busy_failure = any(re.search(r"busy|lock|another run", e, re.I) for e in errors.values())
    assert len(started) == 1 and refused_in_page or busy_failure, line
