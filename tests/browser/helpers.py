"""What the browser tests share: Streamlit's selectors, waiting for a script run and its charts, the problems a
page may show (an exception box, a traceback, a dead server), the bad inputs, the pages found in the sidebar, and
the module-scoped fixtures (``nav_pages``, ``results``, ``new_session_module``) the test files import by name.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .conftest import BROWSER_ARTIFACTS, Session, session_factory

APP = '[data-testid="stApp"]'
IDLE = f'{APP}[data-test-script-state="notRunning"][data-test-connection-state="CONNECTED"]'
BUSY = f'{APP}:not([data-test-script-state="notRunning"])'
MAIN = '[data-testid="stMain"]'
SIDEBAR = '[data-testid="stSidebar"]'
NAV_LINK = '[data-testid="stSidebarNav"] a[data-testid="stSidebarNavLink"], [data-testid="stTopNav"] a'
EXCEPTION = '[data-testid="stException"]'
TEXT_FIELDS = f'{MAIN} [data-testid="stTextArea"] textarea, {MAIN} [data-testid="stTextInput"] input'
NUMBER_FIELDS = f'{MAIN} [data-testid="stNumberInput"] input'
CHART = '[data-testid="stPlotlyChart"]'
RUN_TIMEOUT_MS = 120_000  # one script run (the first loads the 90 MB model)
CHART_TIMEOUT_MS = 60_000
TRACEBACK_TEXT = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\.py\", line \d+")

XSS = ('<script>alert("xss-script")</script><img src=x onerror="window.__xss=1">'
       '<b id="xss-b">bold?</b> [link](javascript:alert(2)) <iframe src="javascript:alert(3)"></iframe>'
       ' **md** $x^2$ :red[colour] {{7*7}}')
FILLER = "the cat sat on the mat "  # 6 one-token words
BAD_TEXT: dict[str, str] = {
    "empty": "",
    "whitespace": "   \n\t  \u00a0 ",
    "20k chars": ("The quick brown fox jumps over the lazy dog. " * 460)[:20_500],
    "600 tokens (> 512 positions)": "word " * 600,
    "emoji": "I love 🤖 and 🍕🍕! Family: 👩‍👩‍👧‍👦, flag 🇫🇷, skin tone 👍🏽",
    "right-to-left": "مرحبا بالعالم، هذا اختبار. שלום עולם. mixed: hello مرحبا world",
    "zero-width": "zero\u200bwidth\u200c non\u200djoiner \ufeffBOM word\u2060joiner \u202eRLO override",
    "control chars": "bell\x07 esc\x1b[31mred\x1b[0m back\x08 vt\x0b ff\x0c del\x7f c1\x85\x9b end",
    "NUL bytes": "before\x00after \x00\x00 nul",
    "HTML / script": XSS,
    "special tokens": "[CLS] [SEP] [MASK] [PAD] [UNK] ##ing",
    "combining marks": "Z̵̡̢̛a̶̘l̷̪g̸̣o̵͎ te\u0301xt",
}
BAD_TEXT["everything odd at once"] = (
    "emoji 🤖👩‍👩‍👧‍👦🇫🇷 | RTL مرحبا שלום | zero\u200bwidth\ufeff\u2060 | ctrl\x07\x1b[31m\x08\x7f\x85 | nul\x00 | "
    "Z̵̡a̶l̷g̸o̵ | " + XSS + " | \u202eRLO last")
BAD_NUMBERS = ["-1", "0", "-999999", "99999999", "1e309", "nan", "abc", ""]
# The CI run (default) tries a subset that goes through every code path; BROWSER_TEST_FULL=1 tries
# every input above in every field (a few minutes more; its table is in docs/measurements/browser-findings.md).
FULL = os.environ.get("BROWSER_TEST_FULL") == "1"
LEAN_MAIN = ["empty", "20k chars", "everything odd at once"]  # the first text field of a page
LEAN_OTHER = ["empty", "everything odd at once"]  # its other text fields
LEAN_NUMBERS = ["-1", "99999999"]  # one per field, in turn
LEAN_UPLOADS = ["corrupt safetensors", "CSV without the right columns", "non-UTF-8 text", "huge file (210 MB)"]


# ----------------------------------------------------------------------------- helpers
SETTLED_JS = """([needContent, quietMs]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning'
        || app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
    if (document.querySelector('[data-testid="stElementContainer"][data-stale="true"]')) return false;
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;  // a widget's code still loading
    if (needContent
        && !document.querySelector('[data-testid="stMain"] [data-testid="stElementContainer"]')) return false;
    // no DOM change for quietMs (lazily loaded widgets, charts drawing); see conftest.MUTATION_JS
    return performance.now() - (window.__lastMutation || 0) >= quietMs;
}"""
QUIET_LIMIT_MS = 15_000  # a page that never goes quiet (a live view) is taken as it is after this


def wait_idle(page, start_ms: int = 1_500, timeout_ms: int = RUN_TIMEOUT_MS, quiet_ms: int = 400,
              need_content: bool = False) -> None:
    """Wait for a script run to start (if one is coming) and finish, with no stale element left
    and no DOM change for ``quiet_ms`` (widgets load lazily; a page can run twice in a row).
    ``need_content``: also wait for the main area to hold an element (after a page load)."""
    try:
        page.wait_for_selector(BUSY, timeout=start_ms, state="attached")
    except Exception:  # noqa: BLE001 - no run started: the action did not trigger one, or it was very fast
        pass
    page.wait_for_function(SETTLED_JS, arg=[need_content, 0], timeout=timeout_ms, polling=100)
    try:
        page.wait_for_function(SETTLED_JS, arg=[need_content, quiet_ms], timeout=QUIET_LIMIT_MS, polling=100)
    except Exception:  # noqa: BLE001 - a live view keeps changing the page: take it as it is
        pass


def wait_charts(page, timeout_ms: int = CHART_TIMEOUT_MS) -> int:
    """Wait until every visible Plotly chart has drawn its SVG; returns how many there are."""
    page.wait_for_function(
        """(sel) => [...document.querySelectorAll(sel)]
                .filter(el => el.offsetParent !== null)
                .every(el => el.querySelector('.js-plotly-plot .main-svg'))""",
        arg=CHART, timeout=timeout_ms)
    return page.locator(CHART).count()


def next_frame_ms(page) -> float:
    """Time until the browser paints two more frames (a frozen main thread makes this long)."""
    t0 = time.perf_counter()
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))")
    return (time.perf_counter() - t0) * 1000


def timed(page, action, start_ms: int = 500, timeout_ms: int = 180_000) -> tuple[float, float]:
    """Render time of ``action()`` (a click, a text entry): seconds from the action to the page's last
    DOM change, read once the script run has ended, the page has been quiet for 200 ms and every visible
    chart has drawn (the waits themselves are not counted); and the next frame's ms after that."""
    t0 = page.evaluate("() => performance.now()")
    action()
    wait_idle(page, start_ms=start_ms, quiet_ms=200)
    wait_charts(page, timeout_ms=timeout_ms)
    last = page.evaluate("() => window.__lastMutation || 0")
    return max(0.0, (last - t0) / 1000), next_frame_ms(page)


def visible_texts(page, selector: str, limit: int = 3) -> list[str]:
    loc = page.locator(selector)
    out = []
    for i in range(min(loc.count(), 20)):
        el = loc.nth(i)
        if el.is_visible():
            text = " ".join(el.inner_text().split())
            if text:
                out.append(text)
        if len(out) >= limit:
            break
    return out


def problems(session: Session, server) -> list[str]:
    """What is wrong with the page now: exception boxes, traceback text, dead server, XSS."""
    page = session.page
    found = []
    for text in (visible_texts(page, EXCEPTION, limit=2)
                 or (["(exception box)"] if page.locator(EXCEPTION).count() else [])):
        found.append(f"exception box: {text[:600]}")
    body = page.locator(MAIN).inner_text() if page.locator(MAIN).count() else ""
    if TRACEBACK_TEXT.search(body) and not found:
        found.append("traceback text in the page")
    if not server.alive():
        found.append(f"server died: {server.log_tail(30)}")
    injected = page.evaluate(
        """() => ({
            xss: window.__xss === 1,
            bold: !!document.getElementById('xss-b'),
            script: [...document.scripts].some(s => (s.textContent || '').includes('xss-script')),
            jslink: !!document.querySelector('a[href^="javascript:"], iframe[src^="javascript:"]'),
        })""")
    found += [f"HTML injected and live: {k}" for k, v in injected.items() if v]
    found += [f"dialog opened: {d}" for d in session.dialogs]
    session.dialogs.clear()
    return found


def message_in_page(page) -> str:
    """The first visible alert / message in the main area (what the user is told), or ''."""
    texts = visible_texts(page, f'{MAIN} [data-testid="stAlert"]', limit=1)
    return texts[0] if texts else ""


def shoot(page, path: Path) -> None:
    """Screenshot the whole page: Streamlit scrolls inside its main container, not the document,
    so the window is made as tall as the content (at most 8,000 px) for the shot."""
    height = page.evaluate("""() => Math.max(...['[data-testid="stMain"]', '[data-testid="stAppViewContainer"]',
                                                  '[data-testid="stSidebarContent"]']
        .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight), 0)""")
    size = page.viewport_size or {"width": 1400, "height": 1000}
    tall = int(min(max(size["height"], height + 40), 8_000))
    try:
        if tall > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": tall})
            page.wait_for_timeout(400)  # charts follow the new size
        page.screenshot(path=str(path), full_page=True)
    finally:
        if tall > size["height"]:
            page.set_viewport_size(size)


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "page"


@dataclass
class NavPage:
    title: str
    url: str

    @property
    def slug(self) -> str:
        return slug(self.title)


def discover_pages(session: Session) -> list[NavPage]:
    page = session.page
    page.goto(session.base_url, wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True)
    more = page.locator('[data-testid="stSidebarNavViewButton"]')
    if more.count() and more.first.is_visible() and "more" in more.first.inner_text().lower():
        more.first.click()
    page.wait_for_selector(NAV_LINK, timeout=10_000, state="attached")
    links = page.locator(NAV_LINK)
    pages: list[NavPage] = []
    for i in range(links.count()):
        link = links.nth(i)
        # the link's text without its icon (a Material icon is drawn from a ligature: its name is text)
        title = link.evaluate("""el => { const c = el.cloneNode(true);
            c.querySelectorAll('[data-testid="stIconMaterial"], [data-testid="stIconEmoji"]').forEach(i => i.remove());
            return c.textContent; }""")
        title = " ".join(title.split())
        href = link.get_attribute("href") or ""
        if href and not any(p.url == href for p in pages):
            pages.append(NavPage(title, href))
    return pages


def open_page(session: Session, nav: NavPage, expand: bool = False) -> tuple[float, int]:
    """Go to a page, wait for the run and the charts; returns (seconds, number of charts).
    ``expand``: then open its closed expanders (their fields are places people type too)."""
    t0 = time.perf_counter()
    session.page.goto(nav.url, wait_until="domcontentloaded")
    wait_idle(session.page, start_ms=5_000, need_content=True)
    charts = wait_charts(session.page)
    took = time.perf_counter() - t0
    if expand:
        expand_all(session.page)
    return took, charts


def expand_all(page) -> None:
    """Open the main area's closed expanders (their fields are places people type too)."""
    closed = page.locator(f'{MAIN} [data-testid="stExpander"] details:not([open]) > summary')
    for _ in range(min(closed.count(), 10)):
        closed.first.click()
    if closed.count() == 0:
        wait_idle(page, start_ms=300)


def commit(field_locator, is_area: bool) -> None:
    """Make Streamlit take a typed value: Ctrl+Enter in a text area, Enter in an input."""
    field_locator.press("Control+Enter" if is_area else "Enter")


def set_text(page, index: int, value: str) -> None:
    loc = page.locator(TEXT_FIELDS).nth(index)
    is_area = loc.evaluate("el => el.tagName") == "TEXTAREA"
    loc.fill(value)
    commit(loc, is_area)
    wait_idle(page)


@dataclass
class Results:
    """Bad-input outcomes, written to artifacts/browser/bad-inputs.md as the tests go."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # page, field, input, result

    def add(self, page: str, where: str, what: str, result: str) -> None:
        self.rows.append((page, where, what, result))
        self.write()

    def write(self) -> None:
        BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
        lines = ["| page | field | input | result |", "|---|---|---|---|"]
        for row in self.rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ")[:300] for c in row) + " |")
        (BROWSER_ARTIFACTS / "bad-inputs.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (BROWSER_ARTIFACTS / "bad-inputs.json").write_text(json.dumps(self.rows, indent=1), encoding="utf-8")


_RESULTS = Results()  # one for the whole test session: bad-inputs.md holds every module's rows


@pytest.fixture(scope="module")
def results():
    """The session's one :class:`Results` (every module that imports this fixture adds to it)."""
    return _RESULTS


@pytest.fixture(scope="module")
def nav_pages(browser, server, new_session_module):
    pages = discover_pages(new_session_module())
    assert pages, "no pages found in the sidebar navigation"
    print("\npages found:", ", ".join(f"{p.title} ({p.url})" for p in pages))
    return pages


@pytest.fixture(scope="module")
def new_session_module(browser, server):
    yield from session_factory(browser, server)


def outcome(session: Session, server, t0: float) -> tuple[str, list[str]]:
    found = problems(session, server)
    took = time.perf_counter() - t0
    if found:
        return f"FAIL ({took:.1f} s): " + "; ".join(found), found
    msg = message_in_page(session.page)
    return (f"message: {msg[:160]}" if msg else "handled, no message") + f" ({took:.1f} s)", []


def find_page(nav_pages: list[NavPage], pattern: str) -> NavPage | None:
    return next((p for p in nav_pages if re.search(pattern, p.title, re.I)), None)


SLIDER_THUMB = '[role="slider"], input[type="range"]'


def _sliders(page, pattern: str) -> list[tuple[str, object]]:
    """``(label, thumb locator)`` of the visible main-area sliders whose label matches ``pattern``
    (Streamlit 1.67 draws a slider thumb as a react-aria ``input[type=range]``)."""
    sliders = page.locator(f'{MAIN} [data-testid="stSlider"]')
    out = []
    for i in range(sliders.count()):
        s = sliders.nth(i)
        if not s.is_visible():
            continue
        label_loc = s.locator('[data-testid="stWidgetLabel"]')
        label = " ".join((label_loc.first.inner_text() if label_loc.count() else s.inner_text()).split())
        thumbs = s.locator(SLIDER_THUMB)
        if thumbs.count() and re.search(pattern, label, re.I):
            out.append((label, thumbs.first))
    return out


def _sidebar_radio(page, label_pattern: str) -> bool:
    option = page.locator(f'{SIDEBAR} [data-testid="stRadio"] label').filter(has_text=re.compile(label_pattern, re.I))
    if not option.count():
        return False
    option.first.click()
    wait_idle(page)
    return True
