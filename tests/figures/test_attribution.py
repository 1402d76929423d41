"""explorer.figures.attribution: one bar per position, coloured by sign; clear errors."""

from __future__ import annotations

import pytest

from explorer.figures import attribution as attr_figures


def test_attribution_bars_colour_by_sign():
    fig = attr_figures.attribution_bars(["[CLS]", "good", "bad", "good"], [0.0, 0.4, -0.2, 0.1], "P(x)", "probability")
    colours = list(fig.data[0].marker.color)
    assert colours[1] == attr_figures.POSITIVE and colours[2] == attr_figures.NEGATIVE
    assert list(fig.data[0].x) == [0, 1, 2, 3]  # by position: repeated words keep their own bar
    with pytest.raises(ValueError, match="one label per score"):
        attr_figures.attribution_bars(["a"], [0.1, 0.2])
    with pytest.raises(ValueError, match="N >= 1"):
        attr_figures.attribution_bars([], [])
