"""explorer.figures.forward_pass: vectors and matrices as coloured strips with their shape in the title, the
number and the formula on hover, the followed row outlined; user text escaped; inputs validated."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import forward_pass as ff

from .conftest import HOSTILE, all_text


def test_each_strip_is_one_heatmap_with_its_shape_numbers_and_formula():
    rng = np.random.default_rng(0)
    q, keys, probs = rng.normal(size=8), rng.normal(size=(5, 8)), rng.dirichlet(np.ones(5))
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    fig = ff.strips_figure([ff.Strip("q", q, "(heads, T, d) = (4, 5, 8)", "q = x W_Q + b_Q"),
                            ff.Strip("k", keys, "(heads, T, d)", "k = x W_K + b_K", rows=tokens, highlight=2),
                            ff.Strip("weights", probs, "(heads, T, T)", "softmax(q·k / √d)", columns=tokens,
                                     probability=True)])
    assert [len(t.z) for t in fig.data] == [1, 5, 1]
    np.testing.assert_array_equal(fig.data[0].z[0], q)
    np.testing.assert_array_equal(np.asarray(fig.data[1].z), keys)
    titles = [a.text for a in fig.layout.annotations]
    assert "(heads, T, d) = (4, 5, 8)" in titles[0] and "(heads, T, T)" in titles[2]
    assert "softmax(q·k / √d)" in fig.data[2].hovertemplate and "%{z" in fig.data[2].hovertemplate
    assert fig.data[2].zmin == 0 and fig.data[0].zmin == -fig.data[0].zmax  # centred on 0
    assert fig.data[0].zmax == pytest.approx(np.quantile(np.abs(q), ff.SATURATE))
    assert list(fig.data[2].text[0]) == tokens  # the keys written in their cells
    (box,) = fig.layout.shapes  # the followed token's row of k
    assert (box.y0, box.y1) == (1.5, 2.5)
    assert fig.data[1].customdata[2][0][0] == "cat"


def test_an_outlier_dimension_saturates_instead_of_washing_out_the_rest():
    v = np.r_[np.linspace(-1, 1, 383), 40.0]  # one BERT-style outlier among 384 dimensions
    fig = ff.strips_figure([ff.Strip("h", v, "(384,)", "x")])
    assert fig.data[0].zmax < 1.01 and fig.data[0].z[0][-1] == 40.0  # its colour saturates, its value is kept


def test_user_text_is_escaped_and_long_inputs_keep_their_axis_labels_few():
    tokens = [HOSTILE] + [f"w{i}" for i in range(199)]
    fig = ff.strips_figure([ff.Strip(f"query of {HOSTILE}", np.ones(4), "(4,)", "x"),
                            ff.Strip("scores", np.arange(200.0), "(T,)", "q·k", columns=tokens)])
    dumped = all_text(fig)
    assert "<script>" not in dumped and "<b>x" not in dumped and "&lt;script&gt;" in dumped
    assert fig.data[1].text is None  # 200 tokens: too many to write in the cells
    assert len(fig.layout.xaxis2.tickvals) <= ff.MAX_TOKEN_LABELS


@pytest.mark.parametrize("strip, match", [
    (ff.Strip("a", np.zeros(0), "(0,)", "f"), "non-empty"),
    (ff.Strip("a", np.zeros((2, 2, 2)), "(2, 2, 2)", "f"), "non-empty"),
    (ff.Strip("a", np.array([1.0, np.nan]), "(2,)", "f"), "finite"),
    (ff.Strip("a", np.zeros(3), "(3,)", "f", columns=["x"]), "column labels"),
    (ff.Strip("a", np.zeros((2, 3)), "(2, 3)", "f", rows=["x"]), "row labels"),
    (ff.Strip("a", np.zeros((2, 3)), "(2, 3)", "f", highlight=2), "highlighted row"),
])
def test_strips_are_validated(strip, match):
    with pytest.raises(ValueError, match=match):
        ff.strips_figure([strip])
    with pytest.raises(ValueError, match="no strips"):
        ff.strips_figure([])
