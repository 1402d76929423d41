"""explorer.figures.grammar: token contributions and the suite's accuracy by paradigm."""

import math

import pytest

from explorer.figures import grammar as F


def test_contributions_one_panel_per_sentence_with_the_pll_in_its_title():
    fig = F.contributions_figure([("A", ["the", "keys", "are"], [-1.0, -2.0, -0.5]),
                                  ("B <b>", ["keys", "is"], [-2.5, -4.0])])
    assert len(fig.data) == 2 and list(fig.data[1].y) == [-2.5, -4.0]
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0] == "A: PLL -3.50 nats" and titles[1].startswith("B &lt;b&gt;: PLL -6.50")
    assert list(fig.data[0].x) == ["1. the", "2. keys", "3. are"]


def test_contributions_reject_mismatched_input():
    with pytest.raises(ValueError, match="2 tokens but 1"):
        F.contributions_figure([("A", ["a", "b"], [-1.0])])
    with pytest.raises(ValueError):
        F.contributions_figure([])


def test_suite_figure_bars_and_chance_line():
    acc = {"agreement: simple": {"pll": 1.0, "critical": 0.9, "n": 10},
           "NPI licensing (ever)": {"pll": 0.4, "critical": math.nan, "n": 10}}
    fig = F.suite_figure(acc)
    pll, crit = fig.data
    assert list(pll.y) == ["NPI licensing (ever)", "agreement: simple"] and list(pll.x) == [0.4, 1.0]
    assert list(crit.text) == ["-", "90%"]
    assert fig.layout.shapes[0].x0 == 0.5
    with pytest.raises(ValueError):
        F.suite_figure({})
