"""The shared-server mode on a real server (BERT_EXPLORER_SHARED=1, its own ``streamlit run``): the Overview says so,
a link with a folder path is refused, and a session's upload folder is removed when the browser tab closes (what
AppTest cannot show: Streamlit releases a session's resources only in a real server).

Run:  python -m pytest tests/browser/test_browser_shared.py -v
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import BROWSER_ARTIFACTS, StreamlitServer, _skip_reason, free_port, new_context
from .helpers import MAIN, wait_idle


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """``streamlit run app.py`` in shared mode: 1 MB uploads, session folders under a temporary folder."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("shared")
    config = root / "shared.toml"
    config.write_text(f'max_upload_mb = 1\nsession_folder = "{root / "sessions"}"\n', encoding="utf-8")
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    runs_dir = Path(tempfile.mkdtemp(prefix="bert-explorer-runs-"))
    saved = {k: os.environ.get(k) for k in ("BERT_EXPLORER_SHARED", "BERT_EXPLORER_SHARED_CONFIG")}
    os.environ.update(BERT_EXPLORER_SHARED="1", BERT_EXPLORER_SHARED_CONFIG=str(config))
    try:
        srv = StreamlitServer(free_port(), runs_dir, BROWSER_ARTIFACTS / "streamlit-shared.log")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        srv.wait_ready()
        srv.sessions = root / "sessions"
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(runs_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_browser(shared_server, browser):
    """The suite's one Chromium (``conftest.browser``): a second ``sync_playwright()`` in the same thread fails with
    "using Playwright Sync API inside the asyncio loop" once another browser test has started the first."""
    return browser


def main_text(page) -> str:
    return page.locator(MAIN).inner_text()


def test_overview_and_a_refused_link(shared_server, shared_browser, tmp_path):
    context = new_context(shared_browser)
    try:
        page = context.new_page()
        page.goto(f"{shared_server.url}/?model=local:{tmp_path}", wait_until="domcontentloaded")
        wait_idle(page, start_ms=5_000, need_content=True)
        page.get_by_text("Shared server mode is on").wait_for(timeout=60_000)
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert "a model cannot be opened by typing a folder path" in sidebar, sidebar
        assert "Local Hugging Face folder" not in sidebar
    finally:
        context.close()


def test_a_sessions_upload_folder_goes_when_its_tab_closes(shared_server, shared_browser, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The bank of the river.\n\nShe sat on the bank.\n\nThe bank lends money.\n", encoding="utf-8")
    context = new_context(shared_browser)
    try:
        page = context.new_page()
        page.goto(f"{shared_server.url}/corpus_search", wait_until="domcontentloaded")
        wait_idle(page, start_ms=5_000, need_content=True)
        page.locator(f'{MAIN} [data-testid="stRadio"] label').filter(has_text="your .txt file").first.click()
        wait_idle(page)
        page.locator(f'{MAIN} input[type="file"]').set_input_files(str(corpus))
        page.get_by_text("tokens of 3 texts indexed").wait_for(timeout=120_000)
        [folder] = list(shared_server.sessions.glob("session-*"))
        assert list(folder.glob("corpus-index/*.npz")), "the index is not in the session's folder"
    finally:
        context.close()
    deadline = time.monotonic() + 60
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not folder.exists(), f"{folder} outlived its session\n{shared_server.log_tail()}"
