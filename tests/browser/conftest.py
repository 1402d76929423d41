"""Real-browser fixtures: one headless ``streamlit run app.py`` per test session, driven by
Debian's Chromium through Playwright for Python (no browser download).

- The server runs on 127.0.0.1 and a free port, offline (``HF_HUB_OFFLINE=1``), with training
  runs redirected to a temporary folder, in its own process group; the fixture kills the whole
  group when the tests end, whatever happens (and an ``atexit`` hook does too if pytest dies).
- Chromium: ``$CHROMIUM`` or ``/usr/bin/chromium`` (install: ``bash .ci/install-browser.sh``).
  Without it, or without the ``playwright`` package, every browser test is skipped with a reason.
- Artifacts (gitignored): ``artifacts/screenshots/<page>.png``, ``artifacts/browser/streamlit.log``,
  ``artifacts/browser/bad-inputs.md``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
BROWSER_ARTIFACTS = ARTIFACTS / "browser"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]
SERVER_START_TIMEOUT = 90.0
# Records the time of the last DOM change, so that tests can wait for the page to go quiet.
MUTATION_JS = """
window.__lastMutation = performance.now();
new MutationObserver(() => { window.__lastMutation = performance.now(); })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""
# The script under test (another one only to develop these tests against a stand-in app).
APP_SCRIPT = os.environ.get("BROWSER_TEST_APP", "app.py")


def _skip_reason() -> str | None:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return (f"Chromium not found at {CHROMIUM}: run `bash .ci/install-browser.sh` "
                "(apt-get install chromium chromium-driver) or set $CHROMIUM")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed: pip install -r requirements-dev.txt"
    if not (ROOT / APP_SCRIPT).is_file():
        return f"no {APP_SCRIPT} yet"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    if reason is None:
        return
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.skip(reason=reason))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the test process dies, even by SIGKILL,
    so that a killed pytest leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class StreamlitServer:
    """``streamlit run app.py`` in its own process group; :meth:`stop` kills the group."""

    def __init__(self, port: int, runs_dir: Path, log_path: Path):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.runs_dir = runs_dir
        env = {
            **{k: v for k, v in os.environ.items() if k != "BERT_EXPLORER_THREADS"},  # the app's own default
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "BERT_EXPLORER_RUNS": str(runs_dir),
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [sys.executable, "-m", "streamlit", "run", APP_SCRIPT,
               "--server.address", "127.0.0.1", "--server.port", str(port), "--server.headless", "true",
               "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        self.pgid = self.proc.pid  # start_new_session: the child leads its own group
        atexit.register(self.stop)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def healthy(self, timeout: float = 5.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=timeout) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = SERVER_START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.healthy(timeout=2):
                return
            time.sleep(0.5)
        raise RuntimeError(f"streamlit not healthy after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        try:
            self._log.flush()
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def rss_mb(self) -> float | None:
        """Resident memory of the server process (Linux), in MB."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def _stop_training_runs(self) -> None:
        """Training runs the app started (in their own sessions, under this server's temporary
        runs folder): SIGTERM, then SIGKILL, to each run's process group."""
        pids = []
        for status in self.runs_dir.glob("*/status.json"):
            try:
                pid = int(json.loads(status.read_text(encoding="utf-8")).get("pid") or 0)
            except (OSError, ValueError, TypeError):
                continue
            if pid > 1:
                pids.append(pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    if os.getpgid(pid) == pid:  # still the leader of the group the app started
                        os.killpg(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            if sig == signal.SIGTERM and pids:
                time.sleep(3)

    def stop(self) -> None:
        if self.proc.returncode is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.pgid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # children that outlived the leader are in the same group
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._stop_training_runs()
        if not self._log.closed:
            self._log.close()


@pytest.fixture(scope="session")
def server():
    """The running app (one per test session); always stopped, with its process group, at the end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    runs_dir = Path(tempfile.mkdtemp(prefix="bert-explorer-runs-"))
    srv = StreamlitServer(free_port(), runs_dir, BROWSER_ARTIFACTS / "streamlit.log")
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(runs_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Playwright gives each launch a fresh temporary --user-data-dir of its own.
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


def new_context(browser):
    """A fresh browser context (cookies, storage: its own Streamlit session) with the DOM-change clock."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    context.add_init_script(MUTATION_JS)
    return context


class Session:
    """One browser tab on the app, with the dialogs (alert/confirm) and page errors it saw."""

    def __init__(self, context, base_url: str):
        self.context = context
        self.page = context.new_page()
        self.base_url = base_url
        self.dialogs: list[str] = []
        self.page_errors: list[str] = []
        self.page.on("dialog", self._on_dialog)
        self.page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture()
def session(browser, server):
    """A fresh browser context (its own Streamlit session) per test."""
    context = new_context(browser)
    try:
        yield Session(context, server.url)
    finally:
        context.close()


def session_factory(browser, server):
    """Generator for fixtures: yields a factory of extra sessions, closes them all afterwards."""
    contexts = []

    def make() -> Session:
        context = new_context(browser)
        contexts.append(context)
        return Session(context, server.url)

    yield make
    for c in contexts:
        c.close()


@pytest.fixture()
def new_session(browser, server):
    """A factory of extra sessions (for concurrency tests); all closed at the end."""
    yield from session_factory(browser, server)
