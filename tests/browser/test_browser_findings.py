"""The Findings page in Chromium for the three kinds of model a user can choose: the packaged MiniLM, a
tiny random model in a local folder, and a checkpoint of a training run, each chosen in the sidebar as
a user does. Each is computed once (progress bar), then timed when the user comes back to the page
with the evaluation set cached (click -> last DOM change); screenshots; no exception box.

Run:  python -m pytest tests/browser/test_browser_findings.py -v -s
Results: artifacts/browser/render-times.md (appended), artifacts/screenshots/findings-*.png
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from bertcore.modeling.heads import BertForPreTraining, BertModel

from ..conftest import mark_complete, save_tiny_bert
from .conftest import BROWSER_ARTIFACTS, SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures used by name
    SIDEBAR,
    _sidebar_radio,
    problems,
    shoot,
    timed,
    wait_charts,
    wait_idle,
)

FIRST_RUN_MS = 600_000  # the MiniLM's 150 segments take ~40 s on a loaded 2-core machine


def fake_run(runs_dir: Path) -> Path:
    """A finished run with one (random, tiny) checkpoint, as bertcore.training.cli writes it."""
    run = runs_dir / "20261123-120000-pretrain-find"
    checkpoint = save_tiny_bert(run / "checkpoints" / "step-000000", BertForPreTraining, max_position_embeddings=128)
    mark_complete(checkpoint, 0)
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "task": "pretrain", "args": {"max_seq_len": 128},
                                              "created": "2026-11-23T12:00:00Z", "argv": []}))
    (run / "status.json").write_text(json.dumps({"state": "done", "step": 0, "pid": None}))
    return run


def nav(page, title: str):
    return lambda: page.locator('[data-testid="stSidebarNavLink"]', has_text=title).first.click()


def sidebar_button(page, pattern: str) -> None:
    page.locator(f"{SIDEBAR} button").filter(has_text=re.compile(pattern, re.I)).first.click()
    wait_idle(page)


def test_findings_for_three_kinds_of_model(session, server, tmp_path):
    page = session.page
    page.goto(session.base_url, wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True)
    local = save_tiny_bert(tmp_path / "tiny-random", BertModel, max_position_embeddings=128)
    fake_run(server.runs_dir)
    rows, found = [], []
    for kind in ("packaged MiniLM", "tiny random model (local folder)", "run checkpoint (step 0)"):
        if kind.startswith("tiny"):
            assert _sidebar_radio(page, r"local"), "no local-folder choice in the sidebar"
            field = page.locator(f'{SIDEBAR} [data-testid="stTextInput"] input').first
            field.fill(str(local))
            field.press("Enter")
            wait_idle(page)
            sidebar_button(page, r"use this folder")
        elif kind.startswith("run"):
            assert _sidebar_radio(page, r"checkpoint of a training run"), "no run-checkpoint choice in the sidebar"
            sidebar_button(page, r"use this checkpoint")
        in_use = page.locator(f'{SIDEBAR} [data-testid="stCaptionContainer"]').filter(has_text="In use").first
        assert ("MiniLM" if kind.startswith("packaged") else "tiny-random" if kind.startswith("tiny")
                else "step 0") in in_use.inner_text(), (kind, in_use.inner_text())
        t0 = time.perf_counter()
        nav(page, "Findings")()
        wait_idle(page, start_ms=3_000, timeout_ms=FIRST_RUN_MS)
        wait_charts(page, timeout_ms=FIRST_RUN_MS)
        first = time.perf_counter() - t0
        found += [f"{kind}: {p}" for p in problems(session, server)]
        tag = kind.split()[0].lower()
        shoot(page, SCREENSHOTS / f"findings-{tag}.png")
        table = page.locator('[data-testid="stMain"] [data-testid="stTable"]')
        assert table.count() == 1 and "Clark et al. 2019" in table.first.inner_text(), kind
        timed(page, nav(page, "Overview"))
        cached = [timed(page, nav(page, "Findings"))[0]]
        timed(page, nav(page, "Overview"))
        cached.append(timed(page, nav(page, "Findings"))[0])
        found += [f"{kind}: {p}" for p in problems(session, server)]
        rows.append(f"{kind}: first {first:.1f} s (forward passes), cached {cached[0]:.2f} / {cached[1]:.2f} s")
    line = (f"Findings page: {'; '.join(rows)}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("\n" + line)
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(BROWSER_ARTIFACTS / "render-times.md", "a", encoding="utf-8") as fh:
        fh.write(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}: {line}\n")
    assert not found, "; ".join(found)
