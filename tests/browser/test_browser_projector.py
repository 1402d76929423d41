"""The Embedding projector in a real browser with 10,000 points: the WebGL scatter draws, a hover
costs under 100 ms (from the mouse event to the last DOM change of the hover label), a lasso selection lists the
selected sentences, the hovered point's number typed lists its neighbours and its button opens its text on the
Attention page, and no exception box appears. The points come from a tiny random BERT (opened by the page's
link), so that the test times the browser, not a forward pass. Screenshots: artifacts/screenshots/projector-10k.png,
projector-point.png

Run:  python -m pytest tests/browser/test_browser_projector.py -v -s
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from bertcore.modeling.heads import BertForMaskedLM

from ..conftest import save_tiny_bert
from .conftest import SCREENSHOTS
from .helpers import CHART, MAIN, problems, shoot, wait_charts, wait_idle

POINTS = 10_000
HOVER_LIMIT_MS = 100.0
HOVER_JS = """() => { window.__hoverT0 = null;
    document.addEventListener('mousemove', () => {
        if (window.__hoverT0 === null) window.__hoverT0 = performance.now(); }, {capture: true}); }"""


def test_ten_thousand_points_hover_and_lasso(session, server, tmp_path):
    folder = save_tiny_bert(tmp_path / "tiny", BertForMaskedLM)
    page = session.page
    page.goto(f"{server.url}/projector?model={quote('local:' + str(folder), safe='')}&proj_points={POINTS}"
              "&proj_colour=word", wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True, timeout_ms=240_000)
    wait_charts(page)
    found = problems(session, server)
    assert f"{POINTS:,} points" in page.locator(MAIN).inner_text()
    drawn = page.evaluate(f"""() => document.querySelector('{CHART} .js-plotly-plot')._fullData
                                  .reduce((n, t) => n + (t._length || 0), 0)""")
    assert drawn >= POINTS  # every point is in the figure (the ring trace may add none)
    box = page.locator(f"{CHART} .nsewdrag").first.bounding_box()
    cx, cy, w, h = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, box["width"], box["height"]

    times, hit = [], None
    for dx, dy in ((0, 0), (0.05, 0.05), (-0.05, 0.03)):
        page.mouse.move(box["x"] - 30, box["y"] - 30)  # off the plot: the label goes
        page.wait_for_timeout(300)
        page.evaluate(HOVER_JS)
        page.mouse.move(cx + dx * w, cy + dy * h)
        try:
            page.wait_for_selector(f"{CHART} .hoverlayer .hovertext", timeout=3_000)
        except Exception:  # noqa: BLE001 - no point under the mouse there
            continue
        page.wait_for_timeout(400)  # quiet: the label is complete
        times.append(page.evaluate("() => (window.__lastMutation || 0) - window.__hoverT0"))
        hit = hit or page.locator(f"{CHART} .hoverlayer .hovertext").first.text_content()
    assert times, "no hover label appeared anywhere near the plot's centre"
    print(f"hover, mouse event to last DOM change, ms: {[round(t, 1) for t in times]}")
    assert max(times) < HOVER_LIMIT_MS, times

    page.mouse.move(cx - 0.2 * w, cy - 0.2 * h)  # a lasso around the dense middle
    page.mouse.down()
    for fx, fy in ((0.2, -0.2), (0.2, 0.2), (-0.2, 0.2), (-0.2, -0.19)):
        page.mouse.move(cx + fx * w, cy + fy * h, steps=8)
    page.mouse.up()
    wait_idle(page, start_ms=5_000, timeout_ms=120_000)
    wait_charts(page)
    body = page.locator(MAIN).inner_text()
    assert "Your selection:" in body and "points from" in body, body[-600:]
    assert page.locator(f'{MAIN} [data-testid="stDataFrame"]').count() >= 1
    found += problems(session, server)
    shoot(page, SCREENSHOTS / "projector-10k.png")

    number = re.match(r"#(\d+)", hit.strip()).group(1)  # the hovered point, typed (a click in Playwright's
    field = page.locator(f"{MAIN} input[aria-label^='Or type a point']")  # Chromium is not a Plotly selection)
    field.fill(number)
    field.press("Enter")
    wait_idle(page, start_ms=5_000, timeout_ms=120_000)
    body = page.locator(MAIN).inner_text()
    assert "nearest neighbours at layer" in body, body[-600:]
    text = page.locator(f"{MAIN} p", has_text="Its text:").first.inner_text().split("Its text:", 1)[1].strip()
    shoot(page, SCREENSHOTS / "projector-point.png")
    page.locator(f"{MAIN} button", has_text="Open this text on the Attention page").click()
    wait_idle(page, start_ms=5_000, timeout_ms=120_000)
    assert "/attention" in page.url and page.locator(f"{MAIN} textarea").first.input_value() == text
    found += problems(session, server)
    assert not found, "; ".join(found)
    if session.page_errors:
        pytest.fail("JavaScript errors: " + "; ".join(session.page_errors[:3]))
