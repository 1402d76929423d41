"""'Show the code' in a real browser on three pages (Attention, Masking, Word senses): the expander
opens on a click, holds the snippet with the page's current input, offers the .py and notebook downloads, and a
changed input changes the code; no exception box at any step. Screenshots: artifacts/screenshots/as-code-*.png

Run:  python -m pytest tests/browser/test_browser_as_code.py -v -s
"""

from __future__ import annotations

import pytest

from .conftest import SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures
    MAIN,
    find_page,
    nav_pages,
    new_session_module,
    open_page,
    problems,
    set_text,
    shoot,
    wait_charts,
    wait_idle,
)

PAGES = [("attention", r"^attention", "The keys to the cabinet are on the table."),
         ("masking", r"^masking", "The film won the award for best actor"),
         ("word-senses", r"^word senses", "python")]
CHANGED = "The dogs in the garden were barking."


def open_code(page) -> str:
    """Open the page's 'Show the code' expander (a click, unless it is open); the code block's text."""
    block = page.locator(f'{MAIN} [data-testid="stExpander"]', has_text="Show the code").first
    code = block.locator('[data-testid="stCode"]').first
    if not code.is_visible():
        block.locator("summary").first.click()
    code.wait_for(state="visible", timeout=30_000)
    return code.inner_text()


@pytest.mark.parametrize("name,pattern,expected", PAGES)
def test_show_the_code(session, server, nav_pages, name, pattern, expected):  # noqa: F811
    nav = find_page(nav_pages, pattern)
    if nav is None:
        pytest.fail(f"no {name} page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    wait_charts(page)
    found = problems(session, server)
    code = open_code(page)
    assert expected in code and "result" in code and "fig" in code, code[:500]
    block = page.locator(f'{MAIN} [data-testid="stExpander"]', has_text="Show the code").first
    labels = block.locator('[data-testid="stDownloadButton"]').all_inner_texts()
    assert any(".py" in t for t in labels) and any("notebook" in t for t in labels), labels
    shoot(page, SCREENSHOTS / f"as-code-{name}.png")
    if name == "attention":  # the code follows the input
        set_text(page, 0, CHANGED)
        wait_idle(page)
        wait_charts(page)
        found += problems(session, server)
        assert CHANGED in open_code(page)
        shoot(page, SCREENSHOTS / f"as-code-{name}-changed.png")
    assert not found, "; ".join(found)
