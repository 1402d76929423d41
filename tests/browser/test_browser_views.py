"""The attention views in a real browser: the Attention page's Rollout and flow / Neuron view tabs (with and
without the word toggle) and the Head ablation page, at 40 (flow on), 128 and 512 tokens, timed from
the click to the drawn chart, with screenshots and no exception box.

Run:  python -m pytest tests/browser/test_browser_views.py -v -s
Results: artifacts/browser/render-times.md (appended), artifacts/screenshots/views-*.png
"""

from __future__ import annotations

import time

import pytest

from .conftest import BROWSER_ARTIFACTS, SCREENSHOTS
from .helpers import (  # noqa: F401 - fixtures
    FILLER,
    MAIN,
    find_page,
    nav_pages,
    new_session_module,
    open_page,
    problems,
    set_text,
    shoot,
    timed,
    wait_charts,
)

VIEW_TABS = ("Head view", "Rollout and flow", "One head", "Neuron view")  # each differs from the one before
REFERENCE_TABS = ("Head view", "One head")  # existing views: the same-run reference for a loaded machine


def text_of(tokens: int) -> str:
    words = FILLER.split()
    return " ".join(words[i % len(words)] for i in range(tokens - 2))  # + [CLS] and [SEP]


def click_tab(page, name: str):
    return lambda: page.locator(f'{MAIN} [data-testid="stTabs"] [role="tab"]', has_text=name).first.click()


def click_toggle(page, label: str):
    return lambda: page.locator(f'{MAIN} [data-testid="stCheckbox"]', has_text=label).first.click()


def test_attention_views_render_times(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"^attention$")
    if nav is None:
        pytest.fail("no Attention page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    rows, found = [], []
    for n in (40, 128, 512):
        set_text(page, 0, text_of(n))
        wait_charts(page, timeout_ms=120_000)  # the forward is now cached
        for tab in VIEW_TABS:
            took, frame = timed(page, click_tab(page, tab))
            rows.append(f"{n} tokens, {tab}: {took:.2f} s (next frame {frame:.0f} ms)")
            found += problems(session, server)
            if tab in ("Rollout and flow", "Neuron view"):
                shoot(page, SCREENSHOTS / f"views-{tab.split()[0].lower()}-{n}.png")
        timed(page, click_tab(page, "Rollout and flow"))
        took, frame = timed(page, click_toggle(page, "Words, not WordPieces"))
        rows.append(f"{n} tokens, Rollout and flow, word toggle on: {took:.2f} s (next frame {frame:.0f} ms)")
        found += problems(session, server)
        shoot(page, SCREENSHOTS / f"views-rollout-words-{n}.png")
        timed(page, click_toggle(page, "Words, not WordPieces"))
        timed(page, click_tab(page, "One head"))  # so that the next length's first click changes tab
    _write("attention views", rows)
    assert not found, "; ".join(found)


def test_ablation_page_render_times(session, server, nav_pages):  # noqa: F811
    nav = find_page(nav_pages, r"ablation")
    if nav is None:
        pytest.fail("no Head ablation page in the navigation (renamed? update the pattern)")
    open_page(session, nav)
    page = session.page
    shoot(page, SCREENSHOTS / "views-ablation-default.png")
    rows, found = [], problems(session, server)
    layers = page.locator(f'{MAIN} [data-testid="stMultiSelect"]').filter(has_text="Whole layers")

    def add_layer(n: int):
        layers.click()  # opening the list is not part of the render: the choice is
        page.wait_for_timeout(300)
        return lambda: page.get_by_role("option", name=str(n), exact=True).click()

    for n, extra in ((128, 2), (512, 3)):
        took, frame = timed(page, lambda n=n: set_text(page, 0, text_of(n)))
        rows.append(f"{n} tokens, Head ablation, new text (forward + unablated and ablated readouts): {took:.2f} s "
                    f"(next frame {frame:.0f} ms)")
        took, frame = timed(page, add_layer(extra))
        rows.append(f"{n} tokens, Head ablation, one more layer off (the ablated readout): {took:.2f} s "
                    f"(next frame {frame:.0f} ms)")
        found += problems(session, server)
        shoot(page, SCREENSHOTS / f"views-ablation-{n}.png")
    _write("head ablation", rows)
    assert not found, "; ".join(found)


def _write(what: str, rows: list[str]) -> None:
    print(f"\n{what}:\n  " + "\n  ".join(rows))
    BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(BROWSER_ARTIFACTS / "render-times.md", "a", encoding="utf-8") as fh:
        fh.write(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}: {what}: " + "; ".join(rows) + "\n")
