"""What flows in a real browser: the Attention page's "What flows" tab and the Masking page's "Which words made this
prediction" panel with every default, no exception box; screenshots to look at.

Run:  python -m pytest tests/browser/test_browser_what_flows.py -v -s
Results: artifacts/screenshots/what-flows-*.png
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
    shoot,
    timed,
)
from .test_browser_views import click_tab


def test_what_flows_tab_and_the_masking_panel(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"^attention$")
    if nav is None:
        pytest.fail("no Attention page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    took, _ = timed(page, click_tab(page, "What flows"))
    found = problems(session, server)
    text = page.locator(MAIN).inner_text()
    assert "on [CLS] / [SEP]" in text and "Route graph" in text, text[:2000]
    assert page.locator(f"{MAIN} .js-plotly-plot").count() >= 4
    shoot(page, SCREENSHOTS / "what-flows-attention.png")

    nav = find_page(nav_pages, r"^masking$")
    if nav is None:
        pytest.fail("no Masking page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    text = page.locator(MAIN).inner_text()
    assert "Which explanation is faithful" not in text  # below the fold: computed when its tab is opened
    timed(page, click_tab(page, "Which words made this prediction"))
    found += problems(session, server)
    text = page.locator(MAIN).inner_text()
    assert "Which words made this prediction" in text and "Which explanation is faithful" in text, text[-3000:]
    shoot(page, SCREENSHOTS / "what-flows-masking.png")
    assert not found, "; ".join(found)
