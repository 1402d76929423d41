"""explorer.figures.masking: the decision grid, the counts against their expected values, the top-k
guesses; inputs validated with messages saying how to fix them, user text never rendered as HTML."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import masking as fm

from .conftest import HOSTILE, all_text


def test_decision_grid_colours_cells_by_decision_and_shows_replacements():
    tokens = ["[CLS]", "the", "cat", "sat", "on", "mat", "[SEP]"]
    decisions = [0, 1, 2, 3, 0, 0, 0]
    eligible = [False, True, True, True, True, True, False]
    fed = ["[CLS]", "[MASK]", "zebra", "sat", "on", "mat", "[SEP]"]
    fig = fm.decision_grid(tokens, decisions, eligible, fed, per_row=4)
    heat = fig.data[0]
    z = np.asarray(heat.z)
    assert z.shape == (2, 4)
    assert list(z.reshape(-1)[:7]) == [fm.NOT_ELIGIBLE, fm.MASKED, fm.RANDOM, fm.UNCHANGED, 0, 0, fm.NOT_ELIGIBLE]
    assert np.isnan(z[1, 3])
    text = list(np.asarray(heat.text).reshape(-1))
    assert "→ [MASK]" in text[1] and "→ zebra" in text[2] and "kept" in text[3]
    legend = {t.name for t in fig.data[1:]}
    assert legend == set(fm.NAMES.values())


def test_decision_grid_escapes_user_text():
    fig = fm.decision_grid([HOSTILE, "a"], [2, 0], [True, True], [HOSTILE, "a"])
    dumped = all_text(fig)
    assert "<script>" not in dumped and "<b>x" not in dumped and "&lt;script&gt;" in dumped


@pytest.mark.parametrize("kwargs,match", [
    (dict(tokens=[], decisions=[], eligible=[], fed_tokens=[]), "no tokens"),
    (dict(tokens=["a"], decisions=[0, 0], eligible=[True], fed_tokens=["a"]), "one entry per"),
    (dict(tokens=["a"], decisions=[7], eligible=[True], fed_tokens=["a"]), "codes 0..3"),
    (dict(tokens=["a"], decisions=[0], eligible=[True], fed_tokens=["a"], per_row=0), "per_row"),
])
def test_decision_grid_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fm.decision_grid(**kwargs)


def test_counts_figure_expected_values_and_band():
    counts = {"eligible": 200, "selected": 30, "masked": 25, "random": 2, "unchanged": 3}
    fig = fm.counts_figure(counts, 0.15, 0.8, 0.1)
    expected, observed = fig.data
    assert list(observed.y) == [30, 25, 2, 3]
    np.testing.assert_allclose(expected.y, [30.0, 24.0, 3.0, 3.0])
    np.testing.assert_allclose(expected.error_y.array[0], 2 * np.sqrt(200 * 0.15 * 0.85))


@pytest.mark.parametrize("counts,args,match", [
    ({"eligible": 1}, (0.15, 0.8, 0.1), "missing"),
    ({"eligible": 1, "selected": -1, "masked": 0, "random": 0, "unchanged": 0}, (0.15, 0.8, 0.1), ">= 0"),
    ({"eligible": 1, "selected": 0, "masked": 0, "random": 0, "unchanged": 0}, (1.5, 0.8, 0.1), "mlm_probability"),
    ({"eligible": 1, "selected": 0, "masked": 0, "random": 0, "unchanged": 0}, (0.15, 0.8, 0.3), "unchanged"),
])
def test_counts_figure_validates(counts, args, match):
    with pytest.raises(ValueError, match=match):
        fm.counts_figure(counts, *args)


def test_counts_figure_rate_zero_has_zero_expectation():
    fig = fm.counts_figure({"eligible": 10, "selected": 0, "masked": 0, "random": 0, "unchanged": 0}, 0.0, 0.8, 0.1)
    assert list(fig.data[0].y) == [0, 0, 0, 0]


def test_topk_figure_highlights_the_original_and_escapes():
    fig = fm.topk_figure(["pos 2: cat", f"pos 5: {HOSTILE}"], [["cat", "dog"], ["a", HOSTILE]],
                         [[0.7, 0.2], [0.5, 0.4]], ["cat", None], cols=2)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert len(bars) == 2
    assert list(bars[0].marker.color) == ["#4caf50", "#3b75af"]
    assert all(c == "#3b75af" for c in bars[1].marker.color)
    assert list(fig.layout.xaxis.range) == [0, 1]  # confident: the full scale
    assert fig.layout.xaxis2.range[1] == pytest.approx(0.5 * 1.25)  # not: zoomed in
    weak = fm.topk_figure(["p"], [["a", "b"]], [[3.3e-5, 3.2e-5]], [None])
    assert weak.layout.xaxis.range[1] == pytest.approx(3.3e-5 * 1.25) and weak.data[0].text[0] == "0.0033%"
    assert "<script>" not in all_text(fig)


@pytest.mark.parametrize("args,match", [
    (([], [], [], []), "no positions"),
    ((["a"], [["x"]], [[0.5], [0.2]], [None]), "one entry per position"),
    ((["a"], [["x", "y"]], [[0.5]], [None]), "as many tokens"),
    ((["a"], [["x"]], [[1.5]], [None]), r"\[0, 1\]"),
])
def test_topk_figure_validates(args, match):
    with pytest.raises(ValueError, match=match):
        fm.topk_figure(*args)


def test_lens_grid_draws_the_chosen_positions():
    from explorer.figures import lens as fl

    tokens = ["[CLS]", "a", "[MASK]", "[SEP]"]
    top = [[[f"t{r}{c}", "x"] for c in range(4)] for r in range(2)]
    probs = np.arange(16, dtype=float).reshape(2, 4, 2) / 16
    rank = np.array([[1, 1, 1, 1], [0, 0, 0, 0]])
    fig = fl.lens_grid(tokens, top, probs, rank, positions=[2, 1])
    heat = fig.data[0]
    assert list(heat.x) == ["2: [MASK]", "1: a"]
    np.testing.assert_allclose(np.asarray(heat.z), probs[:, [2, 1], 0])
    assert heat.text[1][0] == "<b>t12</b>" and heat.text[0][0] == "t02"
    assert len(fl.lens_grid(tokens, top, probs, rank).data[0].x) == 4
    with pytest.raises(ValueError, match="positions"):
        fl.lens_grid(tokens, top, probs, rank, positions=[4])
