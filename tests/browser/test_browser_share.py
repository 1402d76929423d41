"""Shareable views in Chromium: a page's URL, copied after changing its controls, reopens the same figures in a
fresh session; every page opened with junk query parameters renders without an exception box.

Run:  python -m pytest tests/browser/test_browser_share.py -v -s
Screenshots: artifacts/screenshots/share-*.png
"""

from __future__ import annotations

import json
import re

import pytest

from .conftest import SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures
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

FIGURES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => JSON.stringify(
    (el.data || []).map(t => ({type: t.type, x: t.x, y: t.y, z: t.z, text: t.text}))))"""
JUNK = "?msk_rate=lots&msk_k=999&att_layer=-4&qk_head=9999&cs_layer=x&model=zzz%3Anope&gram_a=%00&foo=%3Cscript%3E"


def test_a_copied_link_reopens_the_same_view(session, server, nav_pages, new_session):  # noqa: F811
    nav = find_page(nav_pages, r"^masking$")
    if nav is None:
        pytest.fail("no Masking page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    set_text(page, 0, "Paris is the [MASK] of France, and Rome is the capital of Italy.")
    wait_charts(page)
    url = page.url
    assert "msk_text=" in url, url
    before = page.evaluate(FIGURES_JS)
    shoot(page, SCREENSHOTS / "share-original.png")
    other = new_session()  # a fresh browser context: no session state, only the link
    other.page.goto(url, wait_until="domcontentloaded")
    wait_idle(other.page, start_ms=5_000, need_content=True)
    wait_charts(other.page)
    after = other.page.evaluate(FIGURES_JS)
    shoot(other.page, SCREENSHOTS / "share-reopened.png")
    assert after == before
    assert not problems(other, server)


#: the pages that read a junk key of :data:`JUNK` (its msk_, att_, qk_, cs_ and gram_ keys); ``model`` and unknown keys
#: go through the sidebar every page shares, opened here on the first page and on each of these
JUNK_PAGES = r"^(masking|attention|query|corpus search|grammar)"


def test_junk_query_parameters_never_break_a_page(session, server, nav_pages):  # noqa: F811
    pages = [nav_pages[0], *(nav for nav in nav_pages if re.search(JUNK_PAGES, nav.title, re.I))]
    assert len(pages) >= 6, [nav.title for nav in pages]  # the first page and the five that read a junk key
    found = []
    for nav in pages:
        session.page.goto(nav.url.split("?")[0] + JUNK, wait_until="domcontentloaded")
        wait_idle(session.page, start_ms=4_000, need_content=True, timeout_ms=300_000)
        found += [f"{nav.title}: {p}" for p in problems(session, server)]
    shoot(session.page, SCREENSHOTS / "share-junk-last-page.png")
    assert not found, json.dumps(found, indent=1)
