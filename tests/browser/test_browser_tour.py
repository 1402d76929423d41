"""The guided tour in Chromium, as a student takes it: open "Start here", press Start, then Next through every
step with its defaults (each step's page, banner and URL checked, one screenshot each, no exception box), and
answer the quiz once right and once wrong (the right answers are measured here on the same packaged model).

Run:  python -m pytest tests/browser/test_browser_tour.py -v -s
Screenshots: <pytest tmp dir>/tour-NN-<step>.png (the path is printed)
"""

from __future__ import annotations

import re

from bertcore.loading.sources import DEFAULT, load
from explorer.tour import quiz as tour_quiz
from explorer.tour.steps import STEPS

from .helpers import problems, shoot, wait_charts, wait_idle

BANNER = ".st-key-tour_banner"


def _click(page, selector: str, name: str) -> None:
    page.locator(selector).get_by_role("button", name=re.compile(name)).first.click()
    wait_idle(page, start_ms=3_000, need_content=True)


def _answer(page, question: tour_quiz.Question, choice: str) -> str:
    """Pick ``choice`` in the question's box, press Check; returns the feedback shown under it (without the
    alert's icon, a Material ligature drawn from its name)."""
    box = page.locator(f".st-key-quiz_box_{question.key}")
    box.scroll_into_view_if_needed()
    box.locator('[data-testid="stRadio"] label').filter(has_text=re.compile(rf"^\s*{re.escape(choice)}\s*$")).click()
    wait_idle(page)
    box.get_by_role("button", name=re.compile("Check")).click()
    wait_idle(page)
    alert = box.locator('[data-testid="stAlert"]').first
    return " ".join(alert.locator('[data-testid="stMarkdownContainer"]').first.inner_text().split())


def test_walk_the_tour_and_answer_the_quiz(session, server, tmp_path):
    page = session.page
    page.goto(f"{server.url}/tour", wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True)
    assert not problems(session, server)
    _click(page, '[data-testid="stMain"]', "Start the tour")
    shots, found = [], []
    for n, step in enumerate(STEPS, 1):
        # a step's button runs the script twice (the click, then st.switch_page's run): wait for the new step
        banner = page.locator(BANNER, has_text=f"step {n} of {len(STEPS)}: {step.title}")
        banner.wait_for(timeout=180_000)
        wait_idle(page, need_content=True)
        wait_charts(page, timeout_ms=120_000)
        heading = " ".join(banner.inner_text().split())
        assert f"step {n} of {len(STEPS)}: {step.title}" in heading, (n, heading[:200])
        assert "Measured on this model" in heading, (n, heading[:400])
        assert re.search(rf"[?&]tour={n}(&|$)", page.url), (n, page.url)
        found += [f"step {n}: {p}" for p in problems(session, server)]
        shot = tmp_path / f"tour-{n:02d}-{step.slug}.png"
        shoot(page, shot)
        shots.append(shot)
        if n < len(STEPS):
            _click(page, BANNER, "Next")
    print(f"\ntour screenshots: {tmp_path}")
    assert not found, found
    assert all(s.is_file() and s.stat().st_size > 10_000 for s in shots)

    quiz = {q.key: q for q in tour_quiz.build(load(DEFAULT)).questions}
    right = quiz["pieces"]
    said = _answer(page, right, right.answer)
    assert said.startswith("Right") and right.answer in said, said
    wrong = quiz["blank"]
    choice = next(c for c in wrong.choices if c != wrong.answer)
    said = _answer(page, wrong, choice)
    assert said.startswith("Not quite") and f"the answer is {wrong.answer}" in said and "%" in said, said
    shoot(page, tmp_path / "tour-quiz-answered.png")
    assert not problems(session, server)
