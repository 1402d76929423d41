"""Real-browser check of the Compare models and Attribution pages: they open with no exception
box (screenshots), and the time to draw each of their views for a 128- and a 512-token input,
first run (the models run) and then once the numbers are cached (tab switches, the per-word
toggle), appended to ``artifacts/browser/render-times.md``. Bad text in every field is tried by
``test_browser.test_every_page``, which visits these pages too."""

from __future__ import annotations

import time

import pytest

from .conftest import BROWSER_ARTIFACTS, SCREENSHOTS
from .test_browser import (  # noqa: F401 - fixtures used by name
    FILLER,
    MAIN,
    find_page,
    nav_pages,
    new_session_module,
    next_frame_ms,
    open_page,
    problems,
    set_text,
    shoot,
    wait_charts,
    wait_idle,
)

WORDS = {128: 126, 512: 510}  # one-token words; + [CLS] and [SEP]


def text_of(tokens: int) -> str:
    words = FILLER.split() * (WORDS[tokens] // 6 + 1)
    return " ".join(words[: WORDS[tokens]])


def timed(page, action) -> tuple[float, float]:
    """Seconds until the run ends and every chart is drawn after ``action()``; the next frame's ms."""
    t0 = time.perf_counter()
    action()
    wait_idle(page, start_ms=500, quiet_ms=200)
    wait_charts(page, timeout_ms=180_000)
    return time.perf_counter() - t0, next_frame_ms(page)


def record(lines: list[str]) -> None:
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(BROWSER_ARTIFACTS / "render-times.md", "a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}: {line}\n")
    print("\n" + "\n".join(lines))


@pytest.mark.parametrize("pattern", [r"compare", r"attribution"])
def test_view_render_times(session, server, nav_pages, pattern):  # noqa: F811
    nav = find_page(nav_pages, pattern)
    assert nav is not None, f"no {pattern} page in the navigation"
    open_page(session, nav)
    page = session.page
    shoot(page, SCREENSHOTS / f"{nav.slug}.png")
    found = problems(session, server)
    lines, slow = [], []
    for tokens in (128, 512):
        first, _ = timed(page, lambda: set_text(page, 0, text_of(tokens)))
        found += problems(session, server)
        views = []
        if pattern == "compare":
            tabs = page.locator(f'{MAIN} [data-testid="stTabs"] [role="tab"]')
            for k in list(range(1, tabs.count())) + [0]:
                name = " ".join(tabs.nth(k).inner_text().split())[:32]
                views.append((name, *timed(page, tabs.nth(k).click)))
                found += problems(session, server)
                shoot(page, SCREENSHOTS / f"{nav.slug}-{tokens}-tokens-tab-{k}.png")
        else:
            toggle = page.locator(f'{MAIN} [data-testid="stCheckbox"]').filter(has_text="Per word")
            for state in ("per word", "per token"):
                views.append((state, *timed(page, toggle.click)))
                found += problems(session, server)
            shoot(page, SCREENSHOTS / f"{nav.slug}-{tokens}-tokens.png")
        limit = 1.0 if tokens == 128 else 2.0
        slow += [f"{name} at {tokens} tokens: {s:.2f} s" for name, s, _ in views if s > limit]
        lines.append(f"{nav.title} page, {tokens}-token input: first run (models / IG) {first:.1f} s; cached views: "
                     + ", ".join(f"{name} {s:.2f} s (next frame {ms:.0f} ms)" for name, s, ms in views))
    record(lines)
    assert not found, "; ".join(found)
    assert not slow, "views slower than 1 s (128 tokens) / 2 s (512 tokens) once cached: " + "; ".join(slow)
