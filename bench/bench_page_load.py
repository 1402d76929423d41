"""Time a page in Chromium as a user meets it: the app is open, they click the page in the sidebar.

    python bench/bench_page_load.py findings          # needs /usr/bin/chromium (bash .ci/install-browser.sh)
    python bench/bench_page_load.py findings --json out.json   # also save the app start's time (pyperf's JSON)

Render time = from the click to the page's last DOM change (a MutationObserver's clock), read once
Streamlit's run has ended, every chart has drawn and the page has been quiet for 0.5 s; the waits
themselves are not counted. The page is opened first with cold caches (its computation runs), then
twice more after going back to the Overview (caches warm); the Overview's own switch time, measured
in the same run, is the reference for a loaded machine.
"""

from __future__ import annotations

import harness

import os
import socket
import subprocess
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

ROOT = harness.ROOT
WATCH = """window.__lastMutation = performance.now();
new MutationObserver(() => { window.__lastMutation = performance.now(); })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});"""
SETTLED = """(quietMs) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stStatusWidget"], [data-stale="true"], [data-testid="stSkeleton"]'))
        return false;
    const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(el => el.offsetParent);
    if (!charts.every(el => el.querySelector('.main-svg'))) return false;
    return performance.now() - window.__lastMutation >= quietMs;
}"""


def switch(tab, slug: str) -> tuple[float, int]:
    """Click the sidebar link of ``slug`` ('' = the Overview); seconds to the last DOM change, charts drawn."""
    link = tab.locator(f'[data-testid="stSidebarNavLink"][href$="/{slug}"]').first
    t0 = tab.evaluate("() => performance.now()")
    link.click()
    tab.wait_for_timeout(300)  # the run starts
    tab.wait_for_function(SETTLED, arg=500, timeout=300_000, polling=100)
    charts = tab.locator('[data-testid="stPlotlyChart"]').count()
    return (tab.evaluate("() => window.__lastMutation") - t0) / 1000, charts


def main(argv: list[str] | None = None, port: int = 8766) -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument(
        "page", nargs="?", default="findings", help="the page's URL path, as in the sidebar (default: findings)"), argv)
    page_path = args.page
    env = {**os.environ, "BERT_EXPLORER_RUNS": tempfile.mkdtemp(), "HF_HUB_OFFLINE": "1"}
    srv = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                            "--server.port", str(port), "--server.address", "127.0.0.1"], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.add_init_script(WATCH)
            with harness.stopwatch("app start (Overview in a new tab, incl. 0.5 s quiet wait)") as sw:
                tab.goto(f"http://127.0.0.1:{port}/")
                tab.wait_for_selector('[data-testid="stSidebarNavLink"]', timeout=300_000)
                tab.wait_for_function(SETTLED, arg=500, timeout=300_000, polling=100)
            print(f"{sw.name}: {sw.seconds:.1f} s")
            for label in ("first (cold caches)", "cached", "cached again"):
                seconds, charts = switch(tab, page_path)
                print(f"{page_path}, {label}: {seconds:.2f} s ({charts} charts)", flush=True)
                overview, _ = switch(tab, "")
                print(f"  back to the Overview (reference): {overview:.2f} s", flush=True)
            print(f"load average {harness.load_average():.1f} on {os.cpu_count()} CPUs")
            browser.close()
    finally:
        srv.terminate()
    harness.save(args.json)


if __name__ == "__main__":
    main()
