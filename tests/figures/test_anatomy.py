"""explorer.figures.anatomy: parameter groups, presets on a log scale, the pooler's tanh; inputs validated."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import anatomy as fa


def test_anatomy_figures():
    fig = fa.groups_figure(["embeddings", "encoder layer 0", "pooler"], [100, 300, 50])
    assert list(fig.data[0].x) == [100, 300, 50] and "66.7%" in fig.data[0].text[1]
    fig = fa.presets_figure(["base", "large"], [109_482_240, 335_141_888], highlight="base")
    assert fig.layout.yaxis.type == "log" and fig.data[0].marker.color[0] != fig.data[0].marker.color[1]
    assert fig.data[0].text[0] == "109.5 M"
    d = np.linspace(-2, 2, 5)
    fig = fa.pooler_figure(d, np.tanh(d))
    assert len(fig.data) == 2


@pytest.mark.parametrize("fn,args,match", [
    (fa.groups_figure, ([], []), "one count per group"),
    (fa.groups_figure, (["a"], [-1]), ">= 0"),
    (fa.presets_figure, (["a"], [0]), ">= 1"),
    (fa.pooler_figure, ([1.0, 2.0], [1.0]), "same size"),
])
def test_anatomy_figures_validate(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)
