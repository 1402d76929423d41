"""Every page in Chromium with a ModernBERT-style run's checkpoint in use: the checkpoint
(pre-LN, rotary positions, GeGLU, no biases, no token types, local / global attention: ``MODERN_FIELDS``) is chosen
in the sidebar as a user does, then each page is opened from the sidebar's navigation in the same session (a new
URL would start a new session, with the default model); no exception box, a screenshot each.

Run:  python -m pytest tests/browser/test_browser_modern.py -v -s
Screenshots: artifacts/screenshots/modern-<page>.png
"""

from __future__ import annotations

import json
from pathlib import Path

from bertcore.modeling.heads import BertForMaskedLM
from bertcore.training.models import MODERN_FIELDS

from ..conftest import mark_complete, save_tiny_bert
from .conftest import SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures used by name
    SIDEBAR,
    _sidebar_radio,
    nav_pages,
    new_session_module,
    problems,
    shoot,
    wait_charts,
    wait_idle,
)

RUN_NAME = "20261127-090000-pretrain-modern"


def modern_run(runs_dir: Path) -> Path:
    """A finished ModernBERT-style run with one tiny random checkpoint (3 layers: global, local, local)."""
    run = runs_dir / RUN_NAME
    checkpoint = save_tiny_bert(run / "checkpoints" / "step-000010", BertForMaskedLM, seed=1, num_hidden_layers=3,
                                max_position_embeddings=128, **{**MODERN_FIELDS, "local_attention": 8})
    mark_complete(checkpoint, 10)
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "task": "pretrain",
                                              "args": {"max_seq_len": 128, "architecture": "modernbert"},
                                              "created": "2026-11-27T09:00:00Z", "argv": []}))
    (run / "status.json").write_text(json.dumps({"state": "done", "step": 10, "pid": None}))
    return run


def test_every_page_with_a_modernbert_style_run(session, server, nav_pages):  # noqa: F811
    page = session.page
    modern_run(server.runs_dir)  # the newest run: the sidebar's checkpoint list shows it first
    page.goto(session.base_url, wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True)
    assert _sidebar_radio(page, r"checkpoint of a training run"), "no run-checkpoint choice in the sidebar"
    page.locator(f"{SIDEBAR} button").filter(has_text="Use this checkpoint").first.click()
    wait_idle(page)
    in_use = page.locator(f'{SIDEBAR} [data-testid="stCaptionContainer"]').filter(has_text="In use").first
    assert RUN_NAME in in_use.inner_text(), in_use.inner_text()
    found = []
    for nav in nav_pages:
        more = page.locator('[data-testid="stSidebarNavViewButton"]')
        if more.count() and more.first.is_visible() and "more" in more.first.inner_text().lower():
            more.first.click()
        page.locator(f'a[data-testid="stSidebarNavLink"][href="{nav.url}"]').first.click()
        wait_idle(page, start_ms=3_000, timeout_ms=300_000)
        wait_charts(page)
        shoot(page, SCREENSHOTS / f"modern-{nav.slug}.png")
        found += [f"{nav.title}: {p}" for p in problems(session, server)]
        caption = page.locator(f'{SIDEBAR} [data-testid="stCaptionContainer"]').filter(has_text="In use").first
        if RUN_NAME not in caption.inner_text():
            found.append(f"{nav.title}: the model in use changed to {caption.inner_text()!r}")
    assert not found, "\n".join(found)
