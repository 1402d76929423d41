"""The what-if view in a real browser, on the Masking page: the toggle opens box B (prefilled with A),
a one-click edit changes B and redraws the comparison, bad B (empty, longer than the model reads, odd Unicode)
gets a message; no exception box at any step. Screenshots: artifacts/screenshots/whatif-*.png

Run:  python -m pytest tests/browser/test_browser_whatif.py -v -s
"""

from __future__ import annotations

import pytest

from .conftest import SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures
    BAD_TEXT,
    MAIN,
    TEXT_FIELDS,
    find_page,
    message_in_page,
    nav_pages,
    new_session_module,
    open_page,
    problems,
    set_text,
    shoot,
    wait_charts,
    wait_idle,
)

A = "The keys to the cabinet [MASK] on the table."


def test_masking_whatif(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"^masking")
    if nav is None:
        pytest.fail("no Masking page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    set_text(page, 0, A)
    page.locator(f'{MAIN} [data-testid="stCheckbox"]', has_text="Compare with an edited input").first.click()
    wait_idle(page)
    wait_charts(page)
    found = problems(session, server)
    box_b = page.locator(TEXT_FIELDS).nth(1)
    assert box_b.input_value() == A  # B starts as A: every difference is zero
    assert "exactly zero" in page.locator(MAIN).inner_text()
    shoot(page, SCREENSHOTS / "whatif-identical.png")

    page.locator(f"{MAIN} button").filter(has_text="keys → key").first.click()
    wait_idle(page)
    wait_charts(page)
    found += problems(session, server)
    assert page.locator(TEXT_FIELDS).nth(1).input_value() == A.replace("keys", "key")
    body = page.locator(MAIN).inner_text()
    assert "What if: A and B side by side" in body and "exactly zero" not in body
    shoot(page, SCREENSHOTS / "whatif-edited.png")

    told = {}
    for name in ("empty", "600 tokens (> 512 positions)", "emoji", "right-to-left", "zero-width"):
        set_text(page, 1, BAD_TEXT[name])
        wait_charts(page)
        found += [f"{name}: {p}" for p in problems(session, server)]
        told[name] = message_in_page(page)
    assert "empty" in told["empty"], told
    assert "cut off" in told["600 tokens (> 512 positions)"], told
    shoot(page, SCREENSHOTS / "whatif-bad-b.png")
    assert not found, "; ".join(found)
