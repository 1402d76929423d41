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
prints the load average beside the numbers. ``--server-cpus`` / ``--client-cpus`` pin the server and Chromium to
separate cores (``taskset``), so that the server's share is visible on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_page_load import SETTLED, WATCH  # noqa: E402

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
                      attributeFilter: ['data-test-script-state']});"""

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


def serve(port: int, cpus: str | None, env_extra: dict[str, str]) -> subprocess.Popen:
    import socket

    env = {**os.environ, "BERT_EXPLORER_RUNS": tempfile.mkdtemp(), "HF_HUB_OFFLINE": "1", **env_extra}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
           str(port), "--server.address", "127.0.0.1"]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    log = open(server_log(port), "w")
    srv = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(480):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return srv
        except OSError:
            time.sleep(0.5)
    srv.terminate()
    raise RuntimeError("the app did not start in 4 minutes")


async def settle(tab, t0: float, timeout_s: float) -> float:
    """Seconds from ``t0`` (the page's performance.now(), ms) to the last DOM change of the run the action
    started."""
    await tab.wait_for_function("(t0) => window.__lastRunStart >= t0", arg=t0, timeout=timeout_s * 1000,
                                polling=50)
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
            if slug == "":
                t0 = 0.0  # navigation start
                await tab.goto(f"http://127.0.0.1:{port}/", timeout=timeout_s * 1000)
                await tab.wait_for_selector('[data-testid="stSidebarNavLink"]', timeout=timeout_s * 1000)
            elif slug is not None:
                link = tab.locator(f'[data-testid="stSidebarNavLink"][href$="/{slug}"]').first
                t0 = await tab.evaluate("() => performance.now()")
                await link.click(timeout=timeout_s * 1000)
            else:
                box = tab.locator('[data-testid="stTextArea"] textarea').first
                await box.fill(text, timeout=timeout_s * 1000)
                t0 = await tab.evaluate("() => performance.now()")
                await box.press("Control+Enter")
            row["seconds"] = await settle(tab, t0, timeout_s)
        except PlaywrightTimeout:
            row["timeout"] = True
        row["exceptions"] = await tab.locator('[data-testid="stException"]').count()
        results.append(row)
    await context.close()


WARMED = "BERT Explorer: warm-up done"  # what explorer/warmup.py prints when it has finished


async def classroom(n: int, port: int, timeout_s: float, client_cpus: str | None, warm_s: float,
                    log: Path) -> list[dict]:
    from playwright.async_api import async_playwright

    results: list[dict] = []
    async with async_playwright() as p:
        exe = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        browser = await p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        if warm_s > 0:  # the teacher opens the app once before the class (its first page pays the model load)
            teacher = await browser.new_context()
            tab = await teacher.new_page()
            await tab.add_init_script(RUN_WATCH)
            await tab.goto(f"http://127.0.0.1:{port}/", timeout=timeout_s * 1000)
            await settle(tab, 0.0, timeout_s)
            await teacher.close()
            for _ in range(int(warm_s * 4)):  # the server's warm-up thread (explorer/warmup.py) imports the rest
                if WARMED in log.read_text(errors="replace"):
                    break
                await asyncio.sleep(0.25)
        if client_cpus:  # pin Chromium's processes (the browser and its renderers, started per context)
            pid_pin = asyncio.create_task(pin_chromium(client_cpus))
        start = asyncio.Event()
        tasks = [asyncio.create_task(student(browser, port, timeout_s, results, start)) for _ in range(n)]
        await asyncio.sleep(1.0)
        start.set()
        await asyncio.gather(*tasks)
        if client_cpus:
            pid_pin.cancel()
        await browser.close()
    return results


async def pin_chromium(cpus: str) -> None:
    """Keep every Chromium process on ``cpus`` (renderers start as students open pages)."""
    import psutil

    ids = [int(c) for c in cpus.split(",")]
    while True:
        for proc in psutil.process_iter(["name"]):
            if "chrom" in (proc.info["name"] or ""):
                try:
                    proc.cpu_affinity(ids)
                except psutil.Error:
                    pass
        await asyncio.sleep(0.5)


def summarise(n: int, results: list[dict], peak: int, load: tuple[float, float]) -> dict:
    steps = {}
    for name, _, _ in PATH:
        rows = [r for r in results if r["step"] == name]
        secs = [r["seconds"] for r in rows if r["seconds"] is not None]
        steps[name] = {"median_s": statistics.median(secs) if secs else None, "p95_s": percentile(secs, 95),
                       "exceptions": sum(r["exceptions"] > 0 for r in rows),
                       "timeouts": sum(r["timeout"] for r in rows)}
    secs = [r["seconds"] for r in results if r["seconds"] is not None]
    return {"students": n, "steps": steps, "median_s": statistics.median(secs) if secs else None,
            "p95_s": percentile(secs, 95), "exceptions": sum(r["exceptions"] > 0 for r in results),
            "timeouts": sum(r["timeout"] for r in results), "server_peak_gb": peak / 2**30,
            "load_before": load[0], "load_after": load[1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, nargs="+", default=[1, 5, 10, 20])
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds a step may take before it counts as a "
                    "timeout (default 180)")
    ap.add_argument("--warm", type=float, default=120.0, help="at most this many seconds between the teacher's "
                    "first visit and the students': until the server's warm-up has finished (0: the students meet a "
                    "cold server; default 120)")
    ap.add_argument("--server-cpus", help="taskset CPU list for the server, e.g. 0")
    ap.add_argument("--client-cpus", help="CPU list for Chromium, e.g. 1")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    ap.add_argument("--out", type=Path, help="write every result as JSON here")
    ap.add_argument("--py-spy", type=Path, help="profile the server with py-spy (pip install py-spy) into this "
                    "folder: one collapsed-stack file per N (flamegraph.pl / speedscope read it)")
    a = ap.parse_args()
    env_extra = dict(kv.split("=", 1) for kv in a.env)
    print(f"{os.cpu_count()} CPUs; server on {a.server_cpus or 'all'}, clients on {a.client_cpus or 'all'}; "
          f"server env {env_extra or '{}'}", flush=True)
    summaries = []
    for n in a.students:
        srv = serve(a.port, a.server_cpus, env_extra)  # a fresh server for each N: its first page pays the load
        mem = PeakMemory(srv.pid)
        before = os.getloadavg()[0]
        spy = None
        if a.py_spy:
            a.py_spy.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(srv.pid), "--format", "raw", "--rate", "50",
                                    "--gil", "--output", str(a.py_spy / f"server-{n}.txt")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            results = asyncio.run(classroom(n, a.port, a.timeout, a.client_cpus, a.warm, server_log(a.port)))
        finally:
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its file
                spy.wait(60)
            peak = mem.stop()
            srv.terminate()
            srv.wait(30)
        s = summarise(n, results, peak, (before, os.getloadavg()[0]))
        summaries.append(s)
        print(f"\nN = {n}: median {s['median_s']:.2f} s, p95 {s['p95_s']:.2f} s, exception boxes {s['exceptions']}, "
              f"timeouts {s['timeouts']}, server peak {s['server_peak_gb']:.2f} GB, load {s['load_before']:.2f} -> "
              f"{s['load_after']:.2f}", flush=True)
        for name, st in s["steps"].items():
            med = "-" if st["median_s"] is None else f"{st['median_s']:.2f}"
            print(f"  {name:24s} median {med:>6s} s  p95 {st['p95_s']:6.2f} s  exceptions {st['exceptions']}  "
                  f"timeouts {st['timeouts']}", flush=True)
        time.sleep(5)
    if a.out:
        a.out.write_text(json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
