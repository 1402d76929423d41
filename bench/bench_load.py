"""A classroom on one server: N students, each a separate browser session, follow the same path at once.

    python bench/bench_load.py --students 1 5 10 20                       # needs /usr/bin/chromium
    python bench/bench_load.py --students 10 --server-cpus 0 --client-cpus 1   # the server's share alone

One server (``streamlit run app.py``, every default), opened once by the teacher before the class
(as a teacher checks the server), the students arriving once the server's warm-up has finished (``--warm 0``: they
meet a cold server); one Chromium (Playwright's async API),
one browser context per student (its own Streamlit session). Every student follows the path below, all starting
together; a step's time runs from the action (navigation, a click on the sidebar link, Ctrl+Enter in a text box) to
the end of the script run it started (Streamlit's ``notRunning`` state, every chart drawn, then the last DOM
change: the clock and the "settled" rule of ``bench/bench_page_load.py``; the 0.3 s quiet wait is not counted).
Reported per step and overall: median and 95th percentile, exception boxes (``stException``) seen after the step,
timeouts (a step not settled within ``--timeout`` seconds), and the server's peak memory (resident set of the
server process and its children, sampled every 0.2 s).

The clients' own CPU (Chromium renders N pages) is part of the machine's load on a 2-core machine: the script
prints the load average beside the numbers, and the CPU seconds the server and the browsers used during the class
(so the server's share of the machine is measured, not guessed). ``--server-cpus`` / ``--client-cpus`` pin the
server and Chromium to separate cores (``taskset``); ``--client-nice 19`` runs the browsers at the lowest CPU
priority (their nice and their autogroup's, see ``classroom``).

The server's part of each step is clocked too: the server runs under ``bench/run_clock.py``, which logs every
script run (session, page, start, end), and each run's wall time is reported by page, alone and in the class.
On a class's own laptops the browsers' drawing is not the server's: that is the time a student's step waits on the
server.
"""

from __future__ import annotations

import harness

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench_page_load import SETTLED, WATCH
from screenshot_pages import serve

ROOT = harness.ROOT

# Also note when a script run starts (the app's script-state attribute is or was "running"), so that a step waits
# for the run its action started, not for the quiet page before it.
RUN_WATCH = WATCH + """
window.__lastRunStart = -1;
new MutationObserver((records) => {
    for (const r of records) {
        if (r.attributeName === 'data-test-script-state'
                && (r.target.getAttribute(r.attributeName) === 'running' || r.oldValue === 'running'))
            window.__lastRunStart = performance.now();
    }
}).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
// A run that starts and ends within one of a starved browser's frames may never draw the "running" state (React
// renders the two messages at once): a change of the page's content outside the text box counts as its start too.
window.__lastContentChange = -1;
new MutationObserver((records) => {
    for (const r of records) {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (el && !el.closest('[data-testid="stTextArea"]')) { window.__lastContentChange = performance.now(); return; }
    }
}).observe(document, {subtree: true, childList: true, characterData: true});"""

# (step name, page slug or None for "stay", new text for the page's first text box or None)
PATH = [
    ("first page", "", None),
    ("Attention", "attention", None),
    ("Masking", "masking", None),
    ("Masking, new sentence", None, "The students opened the [MASK] and started to read."),
    ("Grammar", "grammar", None),
    ("Activation patching", "patching", None),
    ("Word senses", "word_senses", None),
]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between ranks, as numpy's default."""
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


class PeakMemory:
    """Samples the resident memory of a process and its children until stopped; ``peak`` in bytes."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        import psutil

        self.proc, self.every, self.peak = psutil.Process(pid), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                rss = self.proc.memory_info().rss + sum(c.memory_info().rss for c in self.proc.children(True))
                self.peak = max(self.peak, rss)
            except psutil.Error:
                pass
            self._stop.wait(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def server_log(port: int) -> Path:
    return Path(tempfile.gettempdir()) / f"bench_load_server_{port}.log"


STARTED = """([t0, path]) => window.__lastRunStart >= t0
    || (path !== null && window.__lastMutation > t0 && location.pathname.endsWith(path))
    || (path === null && window.__lastContentChange > t0)"""


async def settle(tab, t0: float, timeout_s: float, path: str | None = None) -> float:
    """Seconds from ``t0`` (the page's performance.now(), ms) to the last DOM change of the run the action
    started: a run seen to start after ``t0``; or, for a page opened (Streamlit may swap the app's element then, and
    the attribute change is not seen), the DOM changed after ``t0`` with the browser on ``path``; or, on the same
    page (``path`` None), its content changed outside the text box after ``t0``."""
    await tab.wait_for_function(STARTED, arg=[t0, path], timeout=timeout_s * 1000, polling=50)
    await tab.wait_for_function(SETTLED, arg=300, timeout=timeout_s * 1000, polling=100)
    return (await tab.evaluate("() => window.__lastMutation") - t0) / 1000


async def student(browser, port: int, timeout_s: float, results: list[dict], start: asyncio.Event) -> None:
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    tab = await context.new_page()
    await tab.add_init_script(RUN_WATCH)
    await start.wait()
    for name, slug, text in PATH:
        row = {"step": name, "seconds": None, "exceptions": 0, "timeout": False}
        try:
            path = None
            if slug == "":
                t0, path = 0.0, "/"  # navigation start
                await tab.goto(f"http://127.0.0.1:{port}/", timeout=timeout_s * 1000)
                await tab.wait_for_selector('[data-testid="stSidebarNavLink"]', timeout=timeout_s * 1000)
            elif slug is not None:
                link = tab.locator(f'[data-testid="stSidebarNavLink"][href$="/{slug}"]').first
                t0 = await tab.evaluate("() => performance.now()")
                await link.click(timeout=timeout_s * 1000)
                path = f"/{slug}"
            else:
                box = tab.locator('[data-testid="stTextArea"] textarea').first
                await box.fill(text, timeout=timeout_s * 1000)
                # a person types for seconds before Ctrl+Enter; a starved browser may not yet have handed fill's
                # input event to the text area's own state, and Ctrl+Enter then commits the old text (no run):
                # two frames first, so that the press commits what was typed
                await tab.evaluate(NEXT_FRAMES)
                t0 = await tab.evaluate("() => performance.now()")
                await box.press("Control+Enter")
            row["seconds"] = await settle(tab, t0, timeout_s, path)
        except PlaywrightTimeout:
            row["timeout"] = True
            row["state"] = await tab.evaluate(DIAGNOSE, t0)
            if SHOTS is not None:
                SHOTS.mkdir(parents=True, exist_ok=True)
                await tab.screenshot(path=str(SHOTS / f"timeout-{id(tab)}-{name.replace(' ', '_')}.png"))
        row["exceptions"] = await tab.locator('[data-testid="stException"]').count()
        results.append(row)
    await context.close()


SHOTS: Path | None = None  # --shots: a screenshot of each timed-out step
NEXT_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))"
DIAGNOSE = """(t0) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(el => el.offsetParent);
    return {script_state: app && app.getAttribute('data-test-script-state'), run_started: window.__lastRunStart >= t0,
            status_widget: !!document.querySelector('[data-testid="stStatusWidget"]'),
            stale: document.querySelectorAll('[data-stale="true"]').length,
            skeleton: document.querySelectorAll('[data-testid="stSkeleton"]').length,
            charts_undrawn: charts.filter(el => !el.querySelector('.main-svg')).length, url: location.pathname};
}"""
CLIENT_NICE = 0  # --client-nice
WARMED = "BERT Explorer: warm-up done"  # what explorer/server/warmup.py prints when it has finished


async def classroom(n: int, port: int, timeout_s: float, client_cpus: str | None, warm_s: float,
                    log: Path, server_pid: int) -> tuple[list[dict], float]:
    from playwright.async_api import async_playwright

    results: list[dict] = []
    async with async_playwright() as p:
        exe = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        if CLIENT_NICE:  # the browsers at a lower CPU priority (each student's browser runs on their own laptop)
            wrapper = Path(tempfile.mkdtemp()) / "chromium-niced"
            # Playwright starts the browser in a session of its own (setsid); with the kernel's autogroup scheduling
            # each session is a group that gets an equal share of the CPU whatever its processes' nice, so the
            # group is lowered too (/proc/self/autogroup: absent or ignored without autogroup)
            wrapper.write_text(f'#!/bin/sh\necho {CLIENT_NICE} > /proc/self/autogroup 2>/dev/null\n'
                               f'exec nice -n {CLIENT_NICE} {exe} "$@"\n')
            wrapper.chmod(0o755)
            exe = str(wrapper)
        browser = await p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        print(f"  browsers' scheduling group: {chromium_autogroup()}", flush=True)
        if warm_s > 0:  # the teacher opens the app once before the class (its first page pays the model load)
            teacher = await browser.new_context()
            tab = await teacher.new_page()
            await tab.add_init_script(RUN_WATCH)
            await tab.goto(f"http://127.0.0.1:{port}/", timeout=timeout_s * 1000)
            await settle(tab, 0.0, timeout_s, "/")
            await teacher.close()
            for _ in range(int(warm_s * 4)):  # the server's warm-up thread (explorer/server/warmup.py) imports the rest
                if WARMED in log.read_text(errors="replace"):
                    break
                await asyncio.sleep(0.25)
        if client_cpus:  # pin Chromium's processes (the browser and its renderers, started per context)
            pid_pin = asyncio.create_task(pin_chromium(client_cpus))
        start = asyncio.Event()
        tasks = [asyncio.create_task(student(browser, port, timeout_s, results, start)) for _ in range(n)]
        await asyncio.sleep(1.0)
        chromium_before, server_before = chromium_cpu(), process_cpu(server_pid)
        with harness.stopwatch(f"class of {n} students (wall)") as sw:
            class_start = time.monotonic()  # the server's run clock (bench/run_clock.py) reads the same clock
            start.set()
            await asyncio.gather(*tasks)
            CPU["clients"] = chromium_cpu() - chromium_before
            CPU["server"] = process_cpu(server_pid) - server_before
        CPU["wall"] = sw.seconds
        if client_cpus:
            pid_pin.cancel()
        await browser.close()
    return results, class_start


CPU: dict[str, float] = {}  # CPU seconds of the class ("server", "clients") and its wall time ("wall")


def chromium_processes() -> list:
    """Every Chromium process of this machine (``psutil.Process``)."""
    import psutil

    return [proc for proc in psutil.process_iter(["name"]) if "chrom" in (proc.info["name"] or "")]


def chromium_cpu() -> float:
    """CPU seconds (user + system) used so far by every Chromium process of this machine."""
    import psutil

    total = 0.0
    for proc in chromium_processes():
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def chromium_autogroup() -> str:
    """The autogroup line (``/autogroup-N nice K``) of a Chromium process of this machine, or "unknown"."""
    for proc in chromium_processes()[:1]:
        try:
            return Path(f"/proc/{proc.pid}/autogroup").read_text().strip()
        except OSError:
            pass
    return "unknown"


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its children so far."""
    import psutil

    proc = psutil.Process(pid)
    return sum(t.user + t.system for t in [proc.cpu_times(), *(c.cpu_times() for c in proc.children(True))])


async def pin_chromium(cpus: str) -> None:
    """Keep every Chromium process on ``cpus`` (renderers start as students open pages)."""
    import psutil

    ids = [int(c) for c in cpus.split(",")]
    while True:
        for proc in chromium_processes():
            try:
                proc.cpu_affinity(ids)
            except psutil.Error:
                pass
        await asyncio.sleep(0.5)


def server_runs(clock: Path, since: float) -> list[dict]:
    """The students' script runs logged by ``bench/run_clock.py`` (those that started at or after ``since``, the
    class's start: not the teacher's), each labelled with its page, and ", again" from a session's second run of a
    page on (the Masking page's new sentence)."""
    rows = [json.loads(line) for line in clock.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = sorted((r for r in rows if r["start"] >= since), key=lambda r: r["start"])
    seen: set[tuple[str, str]] = set()
    for r in rows:
        key = (r["session"], r["page"])
        r["label"] = (r["page"] or "first page") + (", again" if key in seen else "")
        seen.add(key)
    return rows


def summarise_runs(runs: list[dict]) -> dict:
    """Median, p95 and maximum of the server's wall seconds a script run (``end - start``), overall and per
    label; ``cpu_s``: the script threads' CPU seconds (the model's own threads not included)."""
    def stats(rows):
        secs = [r["end"] - r["start"] for r in rows]
        return {"runs": len(secs), "median_s": statistics.median(secs) if secs else None,
                "p95_s": percentile(secs, 95), "max_s": max(secs, default=float("nan")),
                "cpu_s": sum(r["cpu"] for r in rows)}
    labels = dict.fromkeys(r["label"] for r in runs)
    return {"all": stats(runs), **{label: stats([r for r in runs if r["label"] == label]) for label in labels}}


def summarise(n: int, results: list[dict], peak: int, load: tuple[float, float]) -> dict:
    steps = {}
    for name, _, _ in PATH:
        rows = [r for r in results if r["step"] == name]
        secs = [r["seconds"] for r in rows if r["seconds"] is not None]
        steps[name] = {"median_s": statistics.median(secs) if secs else None, "p95_s": percentile(secs, 95),
                       "exceptions": sum(r["exceptions"] > 0 for r in rows),
                       "timeouts": sum(r["timeout"] for r in rows)}
    secs = [r["seconds"] for r in results if r["seconds"] is not None]
    return {"students": n, "steps": steps, "cpu_s": dict(CPU), "median_s": statistics.median(secs) if secs else None,
            "p95_s": percentile(secs, 95), "exceptions": sum(r["exceptions"] > 0 for r in results),
            "timeouts": sum(r["timeout"] for r in results), "server_peak_gb": peak / 2**30,
            "load_before": load[0], "load_after": load[1]}


def main() -> None:
    def options(ap):
        ap.add_argument("--students", type=int, nargs="+", default=[1, 5, 10, 20])
        ap.add_argument("--port", type=int, default=8799)
        ap.add_argument("--timeout", type=float, default=180.0, help="seconds a step may take before it counts as a "
                        "timeout (default 180)")
        ap.add_argument("--warm", type=float, default=120.0, help="at most this many seconds between the teacher's "
                        "first visit and the students': until the server's warm-up has finished (0: the students meet "
                        "a cold server; default 120)")
        ap.add_argument("--server-cpus", help="taskset CPU list for the server, e.g. 0")
        ap.add_argument("--client-cpus", help="CPU list for Chromium, e.g. 1")
        ap.add_argument("--client-nice", type=int, default=0, help="run Chromium at this niceness (19: the lowest "
                        "CPU priority, so the numbers are the server's, as when each student's browser runs on their "
                        "laptop)")
        ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app is served (a worktree of an "
                        "older commit: the before of a before/after)")
        ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
        ap.add_argument("--out", type=Path, help="write every result as JSON here")
        ap.add_argument("--shots", type=Path, help="save a screenshot of every step that timed out here")
        ap.add_argument("--py-spy", type=Path, help="profile the server with py-spy (pip install py-spy) into this "
                        "folder: one collapsed-stack file per N (flamegraph.pl / speedscope read it)")

    a = harness.parse(__doc__, options)
    env_extra = dict(kv.split("=", 1) for kv in a.env)
    global SHOTS, CLIENT_NICE
    SHOTS, CLIENT_NICE = a.shots, a.client_nice
    print(f"{os.cpu_count()} CPUs; server on {a.server_cpus or 'all'}, clients on {a.client_cpus or 'all'}; "
          f"server env {env_extra or '{}'}", flush=True)
    summaries = []
    for n in a.students:
        # a fresh server for each N: its first page pays the load; every script run clocked (bench/run_clock.py)
        clock = Path(tempfile.mkdtemp()) / "runs.jsonl"
        clocked = {"PYTHONPATH": os.pathsep.join([str(a.root), str(ROOT / "bench")]), "BENCH_RUN_CLOCK": str(clock),
                   **env_extra}
        srv = serve(a.root, a.port, a.server_cpus, clocked, server_log(a.port), module="run_clock")
        mem = PeakMemory(srv.pid)
        before = harness.load_average()
        spy = None
        if a.py_spy:
            a.py_spy.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(srv.pid), "--format", "raw", "--rate", "50",
                                    "--gil", "--output", str(a.py_spy / f"server-{n}.txt")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            CPU.clear()
            results, class_start = asyncio.run(classroom(n, a.port, a.timeout, a.client_cpus, a.warm,
                                                         server_log(a.port), srv.pid))
        finally:
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its file
                spy.wait(60)
            peak = mem.stop()
            srv.terminate()
            srv.wait(30)
        s = summarise(n, results, peak, (before, harness.load_average()))
        s["server_runs"] = summarise_runs(server_runs(clock, class_start))
        summaries.append(s)
        print(f"\nN = {n}: median {s['median_s']:.2f} s, p95 {s['p95_s']:.2f} s, exception boxes {s['exceptions']}, "
              f"timeouts {s['timeouts']}, server peak {s['server_peak_gb']:.2f} GB, load {s['load_before']:.2f} -> "
              f"{s['load_after']:.2f}", flush=True)
        cpu = s["cpu_s"]
        print(f"  CPU during the class: server {cpu['server']:.1f} s ({cpu['server'] / (n * len(PATH)):.2f} s a step), "
              f"browsers {cpu['clients']:.1f} s, over {cpu['wall']:.1f} s of wall time on {os.cpu_count()} cores",
              flush=True)
        for r in results:
            if r["timeout"]:
                print(f"  timeout in {r['step']}: {r.get('state')}", flush=True)
        for name, st in s["steps"].items():
            med = "-" if st["median_s"] is None else f"{st['median_s']:.2f}"
            print(f"  {name:24s} median {med:>6s} s  p95 {st['p95_s']:6.2f} s  exceptions {st['exceptions']}  "
                  f"timeouts {st['timeouts']}", flush=True)
        print("  the server's script runs (wall seconds from the request to the run's end, bench/run_clock.py):",
              flush=True)
        for label, st in s["server_runs"].items():
            med = "-" if st["median_s"] is None else f"{st['median_s']:.2f}"
            print(f"  {label:24s} median {med:>6s} s  p95 {st['p95_s']:6.2f} s  max {st['max_s']:6.2f} s  "
                  f"runs {st['runs']:4d}  CPU {st['cpu_s']:6.1f} s", flush=True)
        time.sleep(5)
    if a.out:
        harness.write_json(a.out, summaries)
    harness.save(a.json)


if __name__ == "__main__":
    main()
