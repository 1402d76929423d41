"""explorer.figures.rotary: the figures draw what they are given and refuse shapes that do not fit."""

import numpy as np
import pytest

from explorer.figures import rotary as figs


def test_figures_draw_their_data():
    w = {"a": np.array([6.28, 60.0, 600.0]), "b": np.array([6.28, 30.0, 300.0])}
    fig = figs.wavelengths(w, window=128)
    assert [t.name for t in fig.data] == ["a", "b"] and fig.layout.yaxis.type == "log"
    grid = np.arange(9.0).reshape(3, 3)
    assert np.array_equal(np.asarray(figs.score_grid(grid).data[0].z), grid)
    d = np.array([1.0, 10.0, 100.0])
    assert len(figs.decay(d, {"a": d / 2}).data) == 1
    prof = np.full((2, 5), 0.2)
    fig = figs.offset_profile(prof, np.arange(-2, 3))
    assert list(fig.data[0].x) == [-2, -1, 0, 1, 2] and list(fig.data[0].y) == ["head 1", "head 2"]


@pytest.mark.parametrize("call", [lambda: figs.wavelengths({}), lambda: figs.wavelengths({"a": np.zeros((2, 2))}),
                                  lambda: figs.score_grid(np.zeros((2, 3))),
                                  lambda: figs.decay(np.arange(3.0), {"a": np.zeros(4)}),
                                  lambda: figs.offset_profile(np.zeros((2, 4)), np.arange(5))])
def test_bad_shapes_are_refused(call):
    with pytest.raises(ValueError):
        call()
