"""bertcore.analysis.papers.emergence: when a measure leaves its plateau, first crosses a level, starts to rise."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.analysis.papers import emergence as E


def test_plateau_exit_finds_the_sudden_drop_after_the_plateau():
    steps = np.arange(0, 300)
    loss = np.where(steps < 20, 10 - 0.15 * steps, 7.0 - 0.001 * (steps - 20))  # quick fall to a slow plateau ...
    loss = np.where(steps >= 180, 3.0, loss)  # ... and a sudden drop at step 180
    step, plateau = E.plateau_exit(steps, loss, window=1)
    assert step == 180 and plateau == pytest.approx(7.0, abs=0.01)
    assert E.plateau_exit(steps, np.where(steps < 20, 10 - 0.15 * steps, 7.0), window=1) == (None, pytest.approx(7.0))
    assert E.plateau_exit([0, 1], [5.0, 4.0]) == (None, None)


def test_first_above_and_rise_step():
    assert E.first_above([0, 10, 20], [0.1, 0.6, 0.9], 0.5) == 10
    assert E.first_above([0, 10], [0.1, float("nan")], 0.5) is None
    assert E.rise_step([0, 10, 20, 30], [0.05, 0.08, 0.12, 0.3]) == 20  # >= 2 x 0.05 and >= 0.10
    assert E.rise_step([0, 10], [0.3, 0.4]) is None
    assert E.rise_step([0, 10, 20], [0.01, 0.03, 0.2]) == 20  # tripled at 10, but still under 10%


def test_left_unigram_line_on_constructed_curves():
    from bertcore.analysis.papers.emergence import left_unigram_line

    steps = [0, 100, 200, 300, 400, 500]
    assert left_unigram_line(steps, [9.0, 6.5, 6.45, 6.2, 5.0, 4.0], 6.46) == 300  # 6.45 is not 0.1 below
    assert left_unigram_line(steps, [9.0, 6.0, 6.5, 6.2, 5.0, 4.0], 6.46) == 300  # a dip that came back: not yet
    assert left_unigram_line(steps, [9.0, 6.0, 6.0, 6.0, 6.0, 6.5], 6.46) is None  # back above at the end
    assert left_unigram_line(steps, [9.0, 8.0, 7.0, 6.9, 6.8, 6.7], 6.46) is None  # still on the plateau
    assert left_unigram_line(steps, [9.0, 6.0, 6.0, float("nan"), 6.0, 6.0], 6.46) == 400
    assert left_unigram_line(steps, [9.0, 6.0, 6.3, 6.3, 6.3, 6.3], 6.46, margin=0.5) is None
    assert left_unigram_line([], [], 6.46) is None


def test_content_words_are_whole_alphabetic_non_stop_words():
    from bertcore.analysis.papers.emergence import is_content_word

    tokens = ["week", "the", ",", "##s", "of", "year", "[MASK]", "2004", "Government"]
    assert [t for t in tokens if is_content_word(t)] == ["week", "year", "Government"]
