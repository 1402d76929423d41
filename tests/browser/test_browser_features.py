"""The Features page in a real browser, with every default: the shipped SAE of layer 2, your text's
feature strip, one feature's dashboard, then the Steering tab beside fill-mask; no exception box at any step.
Screenshots: artifacts/screenshots/features-*.png

Run:  python -m pytest tests/browser/test_browser_features.py -v -s
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
    wait_charts,
    wait_idle,
)


def test_features_page_and_steering(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"^features")
    if nav is None:
        pytest.fail("no Features page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    wait_charts(page)
    found = problems(session, server)
    body = page.locator(MAIN).inner_text()
    assert "2 of 6" in body and "The strongest features on each token" in body  # the shipped SAE of layer 2
    shoot(page, SCREENSHOTS / "features-your-text.png")
    for tab, expected, name in (("One feature", "Its strongest held-out contexts", "features-one.png"),
                                ("Steering", "unsteered", "features-steering.png")):
        page.locator(f'{MAIN} [data-testid="stTabs"] [role="tab"]', has_text=tab).first.click()
        wait_idle(page)
        wait_charts(page)
        found += problems(session, server)
        assert expected in page.locator(MAIN).inner_text()
        shoot(page, SCREENSHOTS / name)
    assert not found, found
