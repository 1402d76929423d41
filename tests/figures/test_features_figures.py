"""The Features page's purity chart: every scale's share, and the varied-words share when the index has it."""

from __future__ import annotations

import pytest

from explorer.figures.features import purity_bars


def test_purity_bars_show_the_varied_words_share_beside_the_pure_share():
    numbers = {"sae": {"share": 0.45, "pure_varied_share": 0.30}, "random": {"share": 0.41, "pure_varied_share": 0.02},
               "neurons": {"share": 0.38, "pure_varied_share": 0.03}}
    fig = purity_bars(numbers)
    assert [t.name for t in fig.data] == ["label-pure", "label-pure, varied words"]
    assert list(fig.data[1].y) == pytest.approx([30.0, 2.0, 3.0])
    assert list(fig.data[0].x) == ["SAE features", "random directions", "neurons"]
    older = purity_bars({k: {"share": v["share"]} for k, v in numbers.items()})  # an index without the measure
    assert len(older.data) == 1 and list(older.data[0].y) == pytest.approx([45.0, 41.0, 38.0])
