"""The Grammar page in a real browser: the default model (MiniLM-MLM) scores two sentences with no click, then
sentences of different length and the minimal-pair suite; screenshots, no exception box (bad text is covered
under AppTest).

Run:  python -m pytest tests/browser/test_browser_grammar.py -v -s
Screenshots: artifacts/screenshots/grammar-*.png
"""

from __future__ import annotations

import pytest

from .conftest import SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures
    MAIN,
    _sliders,
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


def click_button(page, label: str) -> None:
    page.locator(f"{MAIN} button").filter(has_text=label).first.click()
    wait_idle(page, timeout_ms=300_000)


def test_grammar_page(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"^grammar$")
    if nav is None:
        pytest.fail("no Grammar page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    assert wait_charts(page) >= 1  # the default model (MiniLM-MLM) scores the two sentences with no click
    shoot(page, SCREENSHOTS / "grammar-default.png")
    found = problems(session, server)
    set_text(page, 1, "Keys is here.")  # a sentence of another length
    found += problems(session, server)
    # the fewest pairs (the slider's Home key: 10 a paradigm, against the shipped 40): the suite is computed
    # here, not read from the shipped copy, in a quarter of the time (CI time matters; the counts are AppTest's)
    sliders = _sliders(page, r"pairs per paradigm")
    assert sliders, "no 'Pairs per paradigm' slider on the Grammar page"
    thumb = sliders[0][1]
    thumb.focus()
    thumb.press("Home")
    wait_idle(page)
    assert thumb.input_value() == "10", f"the pairs slider did not move to 10 ({thumb.input_value()})"
    click_button(page, "Run the suite")
    assert wait_charts(page, timeout_ms=300_000) >= 2
    shoot(page, SCREENSHOTS / "grammar-suite.png")
    found += problems(session, server)
    assert not found, "; ".join(found)
