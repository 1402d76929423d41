"""explorer.figures.ablation: the head mask, how far each layer moved, before / after bars; inputs checked."""

import numpy as np
import pytest

from explorer.figures import ablation as abl_figures


def test_ablation_figures_check_their_inputs():
    mask = np.ones((2, 3))
    mask[1, 2] = 0
    fig = abl_figures.head_mask_figure(mask)
    assert "1 of 6" in fig.layout.title.text
    with pytest.raises(ValueError, match="layers, heads"):
        abl_figures.head_mask_figure(np.ones(3))
    with pytest.raises(ValueError, match="layer names"):
        abl_figures.movement_figure([1.0, 0.9], ["a"], 0.9, 0.9)
    with pytest.raises(ValueError, match="labels"):
        abl_figures.before_after_bars(["x", "y"], [0.5, 0.5], [1.0], "t")
