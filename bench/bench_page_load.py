"""Time a page in Chromium: a fresh tab on the page, until Streamlit's status widget is gone and the charts are
drawn; first (cold caches), then twice with the server's caches warm, and the Overview as the app's own start.

    python bench/bench_page_load.py findings          # needs /usr/bin/chromium (bash .ci/install-browser.sh)

Printed seconds include a fixed 1.5 s wait after the page opens (so the status widget has appeared);
compare a page with the Overview line of the same run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
DONE = """() => !document.querySelector('[data-testid="stStatusWidget"]')
          && (document.querySelectorAll('[data-testid="stPlotlyChart"]').length > 0 || location.pathname == '/')"""


def main(page_path: str, port: int = 8766) -> None:
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
            for label, path in (("first", page_path), ("cached", page_path), ("cached again", page_path),
                                ("Overview", "")):
                tab = browser.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.perf_counter()
                tab.goto(f"http://127.0.0.1:{port}/{path}")
                tab.wait_for_timeout(1500)
                tab.wait_for_function(DONE, timeout=300_000, polling=100)
                charts = tab.locator('[data-testid="stPlotlyChart"]').count()
                print(f"{path or 'overview'}, {label}: {time.perf_counter() - t0:.1f} s ({charts} charts)", flush=True)
                tab.close()
            browser.close()
    finally:
        srv.terminate()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "findings")
