"""The server's warm-up (explorer/server/warmup.py): after it, a first visit of any page imports no package not yet
imported (what it is for: a first visit that answers at once), and it starts once per process, never under the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from explorer.server import warmup

from ..conftest import ROOT

# In a fresh interpreter (nothing imported yet): warm up, open app.py as a browser does, then visit every page
# through its navigation and list, per page, the packages (top-level modules of installed distributions) that
# the visit imported first (app start itself is the first page's cost, not counted). The standard library is no
# distribution.
VISIT_EVERY_PAGE = textwrap.dedent("""
    import importlib.metadata, json, re, sys
    from explorer.server import warmup
    skipped = warmup.run()
    from streamlit.testing.v1 import AppTest
    installed = set(importlib.metadata.packages_distributions())
    at = AppTest.from_file(sys.argv[1], default_timeout=600).run()
    new = {}
    for stem in re.findall(r'page\\("(\\w+)"', open(sys.argv[1]).read()):
        before = {m.split(".")[0] for m in sys.modules}
        at.switch_page(f"explorer/app_pages/{stem}.py").run()
        at._page_hash = ""  # as tests/pages/test_tour.py's goto: forget the switch after this run
        new[stem] = sorted(({m.split(".")[0] for m in sys.modules} - before) & installed)
        assert not at.exception, (stem, [e.value for e in at.exception])
    print(json.dumps({"skipped": skipped, "new": new}))
""")


def test_after_the_warmup_no_first_visit_imports_a_package():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERT_EXPLORER_WARMUP": "0"}
    proc = subprocess.run([sys.executable, "-c", VISIT_EVERY_PAGE, str(ROOT / "app.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["skipped"] == []  # every optional package of requirements.txt is installed here
    assert len(got["new"]) > 15  # every page was visited
    assert {page: mods for page, mods in got["new"].items() if mods} == {}


def test_page_imports_reads_every_page_file():
    names = warmup.page_imports()
    assert "streamlit" in names and "explorer.resources" in names
    assert "bertcore.analysis.representations.syntax" in names  # Word senses / Grammar / Findings import it


def test_start_runs_once_per_process_and_not_when_turned_off(monkeypatch):
    calls = []
    monkeypatch.setattr(warmup, "_warm", lambda: calls.append(1))
    monkeypatch.setattr(warmup, "_started", False)
    monkeypatch.setenv("BERT_EXPLORER_WARMUP", "0")
    assert warmup.start() is False
    monkeypatch.setenv("BERT_EXPLORER_WARMUP", "1")
    assert warmup.start() is True
    assert warmup.start() is False
    for _ in range(100):
        if calls:
            break
        time.sleep(0.05)
    assert calls == [1]
