"""Open every page of the app with every default in Chromium, time its first paint and take a screenshot.

    python bench/screenshot_pages.py --out /tmp/shots/after                  # this checkout
    python bench/screenshot_pages.py --root /tmp/old-checkout --out /tmp/shots/before
    python bench/screenshot_pages.py --compare /tmp/shots/before /tmp/shots/after

Each page is opened by its URL in a fresh tab of one browser (caches of the server stay warm across pages, as
for a user who clicks through; the first page pays the model load). First paint = from navigation start to
the page's last DOM change once Streamlit's run has ended and every chart has drawn (the clock and the
"settled" rule of ``bench/bench_page_load.py``). ``--click``: the first page by its URL, every other page by a
click on its sidebar link in the same tab, timed from the click (how a student moves through the app; the
browser keeps Streamlit's scripts and connection). ``--read S`` (default 20): seconds between the first page and
the next, as a student reads it (the server's warm-up, ``explorer/server/warmup.py``, runs then; 0 to time pages back
to back). ``--compare`` prints, per page, the share of pixels that
differ between two shot folders (same size required) and writes a diff image where they do.
Needs ``/usr/bin/chromium`` (``bash .ci/install-browser.sh``). Prints the load average before and after.
"""

from __future__ import annotations

import harness

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_page_load import SETTLED, WATCH, switch

ROOT = Path(__file__).resolve().parents[1]


def page_slugs(root: Path) -> list[str]:
    """The URL path of every page, in sidebar order, read from ``app.py``'s ``page("file", ...)`` lines."""
    import re

    files = re.findall(r'page\("(\w+)"', (root / "app.py").read_text())
    return ["" if f == "overview" else f for f in files]


def serve(root: Path, port: int, cpus: str | None = None, env_extra: dict[str, str] | None = None,
          log: Path | None = None, module: str = "streamlit") -> subprocess.Popen:
    """``streamlit run app.py`` of ``root`` on ``port`` (pinned to ``cpus`` with taskset when given, its output to
    ``log`` or nowhere), once it accepts connections; ``python -m <module> run ...`` (a wrapper such as
    ``bench/run_clock.py``, on ``env_extra``'s PYTHONPATH). Raises RuntimeError when it has not started in 4
    minutes."""
    env = {**os.environ, "BERT_EXPLORER_RUNS": tempfile.mkdtemp(), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root),
           **(env_extra or {})}
    cmd = [sys.executable, "-m", module, "run", "app.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1"]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out = open(log, "w") if log is not None else subprocess.DEVNULL
    srv = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT if log else subprocess.DEVNULL)
    for _ in range(480):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return srv
        except OSError:
            time.sleep(0.5)
    srv.terminate()
    raise RuntimeError("the app did not start in 4 minutes")


def shoot(root: Path, out: Path, port: int, pages: list[str] | None, width: int, height: int, click: bool = False,
          read_s: float = 20.0) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    slugs = pages or page_slugs(root)
    print(f"load average before: {harness.load_average():.2f} on {os.cpu_count()} CPUs", flush=True)
    srv = serve(root, port)
    times = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                        args=["--no-sandbox"])
            tab = None
            for i, slug in enumerate(slugs):
                if i == 1 and read_s:
                    time.sleep(read_s)  # the student reads the first page
                if click and tab is not None:
                    seconds, _ = switch(tab, slug)  # from the click
                else:
                    tab = browser.new_page(viewport={"width": width, "height": height})
                    tab.add_init_script(WATCH)
                    tab.goto(f"http://127.0.0.1:{port}/{slug}")
                    tab.wait_for_selector('[data-testid="stSidebarNavLink"]', timeout=600_000)
                    tab.wait_for_timeout(300)
                    tab.wait_for_function(SETTLED, arg=700, timeout=600_000, polling=100)
                    seconds = tab.evaluate("() => window.__lastMutation") / 1000  # from navigation start
                errors = tab.locator('[data-testid="stException"]').count()
                name = slug or "overview"
                tab.screenshot(path=str(out / f"{name}.png"), full_page=True)
                how = "click" if click and i else "url"
                times[name] = {"first_paint_s": round(seconds, 2), "exceptions": errors, "opened_by": how}
                print(f"{name:15s} {seconds:7.2f} s  ({how})  exceptions: {errors}", flush=True)
                if not click:
                    tab.close()
                    tab = None
            browser.close()
    finally:
        srv.terminate()
    load = harness.load_average()
    print(f"load average after: {load:.2f}")
    harness.write_json(out / "times.json", {"pages": times, "load_after": load, "read_s": read_s})


def compare(a: Path, b: Path) -> int:
    import numpy as np
    from PIL import Image

    changed = 0
    for pa in sorted(a.glob("*.png")):
        pb = b / pa.name
        if not pb.exists():
            print(f"{pa.stem:15s} missing in {b}")
            changed += 1
            continue
        x, y = np.asarray(Image.open(pa).convert("RGB")), np.asarray(Image.open(pb).convert("RGB"))
        if x.shape != y.shape:
            print(f"{pa.stem:15s} size {x.shape[:2]} -> {y.shape[:2]}")
            changed += 1
            continue
        diff = (np.abs(x.astype(int) - y.astype(int)).sum(-1) > 0)
        share = diff.mean()
        print(f"{pa.stem:15s} {share:8.4%} of pixels differ")
        if share:
            changed += 1
            Image.fromarray((diff * 255).astype("uint8")).save(b / f"{pa.stem}.diff.png")
    return changed


def main() -> None:
    parser = []

    def options(ap):
        parser.append(ap)  # for its error()
        ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app is served")
        ap.add_argument("--out", type=Path, help="folder for the screenshots and times.json")
        ap.add_argument("--pages", nargs="*", help="page paths (default: every page of app.py)")
        ap.add_argument("--port", type=int, default=8771)
        ap.add_argument("--width", type=int, default=1400)
        ap.add_argument("--height", type=int, default=1000)
        ap.add_argument("--click", action="store_true", help="open pages after the first by their sidebar link")
        ap.add_argument("--read", type=float, default=20.0, help="seconds spent on the first page before the next")
        ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))

    args = harness.parse(__doc__, options)
    if args.compare:
        sys.exit(1 if compare(*args.compare) else 0)
    if not args.out:
        parser[0].error("--out is required (or --compare BEFORE AFTER)")
    shoot(args.root.resolve(), args.out, args.port, args.pages, args.width, args.height, args.click, args.read)


if __name__ == "__main__":
    main()
