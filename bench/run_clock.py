"""``streamlit`` with a clock on every script run: ``python -m run_clock run app.py ...`` (``bench/`` on the path).

Each request a session's script thread handles (a page opened, a widget changed, Ctrl+Enter; the reruns the
script asks for itself included) is one line of JSON appended to the file named by ``$BENCH_RUN_CLOCK``::

    {"session": "...", "page": "masking", "start": 123.4, "end": 125.0, "cpu": 0.31}

``start`` / ``end``: ``time.monotonic()`` seconds, the same clock for every process of the machine; ``cpu``: the
script thread's CPU seconds in the run (``time.thread_time``). The wall time ``end - start`` is the server's part of
a student's step: the script run, with its waits for the GIL, for other sessions' runs of the same view (the
single-flight view cache) and for the heavy queue, without the transfer and the browser's drawing. Used by
``bench/bench_load.py`` (the browsers of a whole class share this machine's cores, a class's laptops would not).
"""

from __future__ import annotations

import harness  # noqa: F401  (the repository on sys.path, the hub offline: as every script of bench/)

import json
import os
import sys
import threading
import time

from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
from streamlit.web.cli import main

_OUT = os.environ.get("BENCH_RUN_CLOCK")
_LOCK = threading.Lock()
_run_script = ScriptRunner._run_script


def _page(runner: ScriptRunner) -> str:
    """The URL name of the page the session's last run drew ("" for the first page)."""
    ctx = runner._get_script_run_ctx()
    page = runner._pages_manager.get_pages().get(ctx.page_script_hash, {})
    return page.get("url_pathname", "")


def _timed(self: ScriptRunner, rerun_data) -> None:
    start, cpu = time.monotonic(), time.thread_time()
    try:
        _run_script(self, rerun_data)
    finally:
        row = {"session": self._session_id, "page": _page(self), "start": start, "end": time.monotonic(),
               "cpu": time.thread_time() - cpu}
        with _LOCK, open(_OUT, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if _OUT:
    ScriptRunner._run_script = _timed

if __name__ == "__main__":
    sys.exit(main(prog_name="streamlit"))
