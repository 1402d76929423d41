"""The app in a real browser (headless Debian Chromium + Playwright), as people use it.

Pages are discovered from the running app's sidebar navigation, so a new page is covered
without touching this file. For every page: wait until the script has run and its Plotly charts
have drawn, check that no Streamlit exception box or traceback is shown, save
``artifacts/screenshots/<page>.png``; then type bad input into every main text field and bad
numbers into every number field, switch layer / head sliders, and check the page stays usable.
The attention page is timed with a 512-token input. The sidebar's model picker with bad folders and hub ids:
``test_browser_model_picker.py``; several sessions at once: ``test_browser_concurrency.py``.

Run:  python -m pytest tests/browser -v -s      (needs /usr/bin/chromium: bash .ci/install-browser.sh)
Results: artifacts/browser/bad-inputs.md (what each bad input gave on each page),
         artifacts/browser/render-times.md, artifacts/screenshots/*.png
"""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path

import pytest


from .conftest import BROWSER_ARTIFACTS, ROOT, SCREENSHOTS, Session
from .helpers import (  # noqa: F401 - fixtures used by name (nav_pages, results, new_session_module)
    BAD_NUMBERS,
    BAD_TEXT,
    FILLER,
    FULL,
    LEAN_MAIN,
    LEAN_NUMBERS,
    LEAN_OTHER,
    LEAN_UPLOADS,
    MAIN,
    NUMBER_FIELDS,
    SIDEBAR,
    TEXT_FIELDS,
    XSS,
    _sidebar_radio,
    _sliders,
    expand_all,
    find_page,
    message_in_page,
    nav_pages,
    NavPage,
    new_session_module,
    next_frame_ms,
    open_page,
    outcome,
    problems,
    Results,
    results,
    set_text,
    shoot,
    slug,
    visible_texts,
    wait_charts,
    wait_idle,
)


# ----------------------------------------------------------------------------- tests
def _text_fields(session: Session, server, nav: NavPage, results: Results) -> list[str]:  # noqa: F811
    """Bad text in every main text field; each field gets its original text back at the end
    (that the page works again is the 'still usable' check)."""
    page = session.page
    failures: list[str] = []
    n = page.locator(TEXT_FIELDS).count()
    if n == 0:
        results.add(nav.title, "-", "-", "no text field on this page")
    for i in range(n):
        loc = page.locator(TEXT_FIELDS).nth(i)
        if not loc.is_visible() or not loc.is_editable():
            continue
        label = loc.get_attribute("aria-label") or f"text field {i + 1}"
        original = loc.input_value()
        names = list(BAD_TEXT) if FULL else (LEAN_MAIN if i == 0 else LEAN_OTHER)
        for name in names:
            t0 = time.perf_counter()
            try:
                set_text(page, i, BAD_TEXT[name])
                charts_ok = True
                try:
                    wait_charts(page, timeout_ms=30_000)
                except Exception:  # noqa: BLE001
                    charts_ok = False
                result, found = outcome(session, server, t0)
                if not charts_ok:  # a chart that never draws is a broken page, not a note
                    result += " [charts did not draw within 30 s]"
                    found = [*found, "a chart did not draw within 30 s"]
            except Exception as exc:  # noqa: BLE001 - the browser timed out: the page hung
                result, found = f"FAIL: page did not finish ({type(exc).__name__}: {str(exc)[:200]})", [str(exc)]
            results.add(nav.title, label, name, result)
            if found:
                failures.append(f"{nav.title} / {label} / {name}: {'; '.join(found)[:800]}")
                shoot(page, SCREENSHOTS / f"fail-{nav.slug}-{slug(name)}.png")
                if not server.alive():
                    return failures
        t0 = time.perf_counter()
        set_text(page, i, original)
        wait_charts(page)
        result, found = outcome(session, server, t0)
        results.add(nav.title, label, "(original text again)", result)
        if found:
            failures.append(f"{nav.title} / {label} / after bad inputs: {'; '.join(found)}")
    return failures


def _number_fields(session: Session, server, nav: NavPage, results: Results) -> list[str]:  # noqa: F811
    """Numbers out of range (and not numbers) in every main number field."""
    page = session.page
    failures: list[str] = []
    n = page.locator(NUMBER_FIELDS).count()
    for i in range(n):
        loc = page.locator(NUMBER_FIELDS).nth(i)
        if not loc.is_visible() or not loc.is_editable():
            continue
        label = loc.get_attribute("aria-label") or f"number field {i + 1}"
        original = loc.input_value()
        for value in (BAD_NUMBERS if FULL else [LEAN_NUMBERS[i % len(LEAN_NUMBERS)]]):
            t0 = time.perf_counter()
            loc = page.locator(NUMBER_FIELDS).nth(i)
            try:
                loc.fill(value)
            except Exception as exc:  # noqa: BLE001 - Chromium refuses letters in input[type=number]
                results.add(nav.title, label, f"number {value!r}", f"the browser refuses it ({str(exc)[:60]})")
                continue
            loc.press("Enter")
            wait_idle(page)
            field_now = page.locator(NUMBER_FIELDS).nth(i)
            shown = field_now.input_value()
            widget = field_now.locator('xpath=ancestor::div[@data-testid="stNumberInput"]')
            said = " ".join(widget.first.inner_text().split()) if widget.count() else ""
            said = re.search(r"(Error:.*?)(Press Enter.*)?$", said)
            result, found = outcome(session, server, t0)
            if said and not found:  # Streamlit's own range check, in the widget
                result = f"widget says: {said.group(1).strip()[:110]}"
            results.add(nav.title, label, f"number {value!r}", f"{result}; field shows {shown!r}")
            if found:
                failures.append(f"{nav.title} / {label} / {value!r}: {'; '.join(found)[:800]}")
        loc = page.locator(NUMBER_FIELDS).nth(i)
        if loc.input_value() != original:
            loc.fill(original)
            loc.press("Enter")
            wait_idle(page)
    return failures


def _layer_head(session: Session, server, nav: NavPage, results: Results) -> list[str]:  # noqa: F811
    """Move every layer / head slider (to its end; in full mode also back and one step)."""
    page = session.page
    failures: list[str] = []
    sliders = _sliders(page, r"\b(layer|head)s?\b")
    for label, thumb in sliders:
        label = label[:40]
        for key in (("End", "Home", "ArrowRight") if FULL else ("End",)):
            t0 = time.perf_counter()
            thumb.focus()
            thumb.press(key)
            wait_idle(page)
            wait_charts(page)
            result, found = outcome(session, server, t0)
            results.add(nav.title, f"slider {label}", key, result)
            if found:
                failures.append(f"{nav.title} / slider {label} / {key}: {'; '.join(found)[:800]}")
    if sliders:
        shoot(page, SCREENSHOTS / f"{nav.slug}-switched.png")
    return failures


def _uploads(session: Session, server, nav: NavPage, results: Results, files: dict[str, Path]) -> list[str]:  # noqa: F811
    """Files that are not what they claim, in every uploader (a fresh page for each file)."""
    page = session.page
    failures: list[str] = []
    count = _uploaders(page).count()
    for i in range(count):
        for name, path in files.items():
            if not FULL and name not in LEAN_UPLOADS:
                continue
            open_page(session, nav)
            t0 = time.perf_counter()
            try:
                _uploaders(page).nth(i).set_input_files(str(path))
                wait_idle(page, start_ms=3_000)
                result, found = outcome(session, server, t0)
                box = page.locator('[data-testid="stFileUploader"]').nth(i)
                said = " ".join(box.inner_text().split()) if box.count() else ""
                if not found and re.search(r"not allowed|exceed|too large|limit", said, re.I):
                    result = f"rejected by the uploader: {said[-140:]}"
            except Exception as exc:  # noqa: BLE001
                result, found = f"FAIL: {type(exc).__name__}: {str(exc)[:200]}", [str(exc)]
            results.add(nav.title, f"uploader {i + 1}", name, result)
            if found:
                failures.append(f"{nav.title} / uploader {i + 1} / {name}: {'; '.join(found)[:800]}")
                shoot(page, SCREENSHOTS / f"fail-{nav.slug}-upload-{slug(name)}.png")
    return failures


def test_every_page(session, server, nav_pages, results, subtests, tmp_path):  # noqa: F811
    """Each page (a subtest each): it runs, draws its charts and shows no exception (screenshot
    ``artifacts/screenshots/<page>.png``); then bad text in its text fields, bad numbers in its
    number fields, its layer / head sliders moved, bad files in its uploaders."""
    files = _bad_uploads(tmp_path)
    for nav in nav_pages:
        with subtests.test(msg=nav.title):
            took, charts = open_page(session, nav, expand=True)
            shot = SCREENSHOTS / f"{nav.slug}.png"
            shoot(session.page, shot)
            found = problems(session, server)
            msg = message_in_page(session.page)
            results.add(nav.title, "(page)", "open", ("FAIL: " + "; ".join(found)) if found else
                        f"{charts} charts drawn in {took:.1f} s" + (f"; message: {msg[:120]}" if msg else ""))
            print(f"page {nav.title!r}: {took:.1f} s, {charts} charts, screenshot {shot.relative_to(ROOT)}")
            for err in session.page_errors:
                results.add(nav.title, "(page)", "JavaScript error", err[:200])
            session.page_errors.clear()
            failures = [f"{nav.title}: {'; '.join(found)}"] if found else []
            failures += _text_fields(session, server, nav, results)
            if server.alive():
                failures += _number_fields(session, server, nav, results)
                failures += _layer_head(session, server, nav, results)
                failures += _uploads(session, server, nav, results, files)
            assert not failures, "\n".join(failures)
            assert server.alive(), "the server died"


def _uploaders(page):
    return page.locator(f'{MAIN} [data-testid="stFileUploader"] input[type="file"], '
                        f'{SIDEBAR} [data-testid="stFileUploader"] input[type="file"]')


def _bad_uploads(tmp: Path) -> dict[str, Path]:
    files = {}
    p = tmp / "model.safetensors"
    p.write_bytes(struct.pack("<Q", 1 << 40) + b"{garbage")
    files["corrupt safetensors"] = p
    p = tmp / "data.csv"
    p.write_text("foo,bar\n1,2\n3,4\n", encoding="utf-8")
    files["CSV without the right columns"] = p
    p = tmp / "empty.csv"
    p.write_bytes(b"")
    files["empty CSV"] = p
    p = tmp / "latin1.txt"
    p.write_bytes("caf\xe9 na\xefve r\xe9sum\xe9\n".encode("latin-1") + bytes(range(128, 256)))
    files["non-UTF-8 text"] = p
    p = tmp / "notes.csv"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    files["PNG named .csv"] = p
    p = tmp / "big.txt"
    with open(p, "wb") as fh:
        fh.truncate(210 * 1024 * 1024)  # sparse: over the 200 MB upload limit
    files["huge file (210 MB)"] = p
    return files


def test_attention_512_tokens_render_time(session, server, nav_pages, results):  # noqa: F811
    """A 512-token input on the attention page renders in the browser without freezing it."""
    nav = find_page(nav_pages, r"attention")
    if nav is None:
        pytest.fail("no Attention page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    if page.locator(TEXT_FIELDS).count() == 0:
        shoot(page, SCREENSHOTS / f"{nav.slug}-512-skipped.png")
        pytest.fail("the Attention page has no text field (renamed? update the test)")
    text = (FILLER * 85).strip()  # 510 words of one token each: 512 with [CLS] and [SEP]
    t0 = time.perf_counter()
    set_text(page, 0, text)
    run_s = time.perf_counter() - t0
    charts = wait_charts(page, timeout_ms=120_000)
    render_s = time.perf_counter() - t0
    frame_ms = next_frame_ms(page)
    found = problems(session, server)
    shoot(page, SCREENSHOTS / f"{nav.slug}-512-tokens.png")
    switch_s = None
    sliders = _sliders(page, r"\bhead\b") or _sliders(page, r"\blayer\b")
    if sliders:
        thumb = sliders[0][1]
        t1 = time.perf_counter()
        thumb.focus()
        thumb.press("ArrowRight")
        wait_idle(page)
        wait_charts(page, timeout_ms=120_000)
        switch_s = time.perf_counter() - t1
        found += problems(session, server)
    # every tab of the page (all heads of a layer, all layers x heads, head view ...): draw time
    # and the browser's next frame after it
    tab_times = []
    tabs = page.locator(f'{MAIN} [data-testid="stTabs"] [role="tab"]')
    for k in range(min(tabs.count(), 8)):
        tab = tabs.nth(k)
        name = " ".join(tab.inner_text().split())[:30]
        t2 = time.perf_counter()
        tab.click()
        wait_idle(page, start_ms=300, quiet_ms=200)
        wait_charts(page, timeout_ms=120_000)
        tab_s = time.perf_counter() - t2
        tab_frame = next_frame_ms(page)
        frame_ms = max(frame_ms, tab_frame)
        tab_times.append(f"{name} {tab_s:.2f} s (next frame {tab_frame:.0f} ms)")
        found += problems(session, server)
    if tab_times:
        shoot(page, SCREENSHOTS / f"{nav.slug}-512-tokens-last-tab.png")
    svg_nodes = page.evaluate("() => document.querySelectorAll('.main-svg *').length")
    line = (f"attention page, 512-token input: script run {run_s:.2f} s, all {charts} charts drawn after "
            f"{render_s:.2f} s, slowest next frame {frame_ms:.0f} ms"
            + (f", head/layer switch {switch_s:.2f} s" if switch_s is not None else "")
            + f", {svg_nodes} SVG nodes"
            + (f"; tabs: {', '.join(tab_times)}" if tab_times else ""))
    print("\n" + line)
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(BROWSER_ARTIFACTS / "render-times.md", "a", encoding="utf-8") as fh:
        fh.write(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}: {line}\n")
    results.add(nav.title, "text 1", "512 tokens", line)
    assert not found, "; ".join(found)
    assert frame_ms < 2_000, f"the browser was frozen for {frame_ms:.0f} ms after drawing"
    assert render_s < 90, line
