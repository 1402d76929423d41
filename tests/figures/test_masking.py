"""Figures of the masking, embeddings, positions and anatomy pages: pure functions that validate
their inputs with messages saying how to fix them, and never render user text as HTML."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import anatomy as fa
from explorer.figures import embeddings as fe
from explorer.figures import masking as fm
from explorer.figures import positions as fp

HOSTILE = "<b>x</b>&<script>"


def all_text(fig: go.Figure) -> str:
    return json.dumps(fig.to_plotly_json(), default=str)


# ----------------------------------------------------------------------------- masking
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


# ----------------------------------------------------------------------------- embeddings
def test_component_heatmaps_one_panel_per_component_with_own_range():
    rng = np.random.default_rng(0)
    comps = {"token": rng.normal(size=(3, 8)) * 0.05, "output": rng.normal(size=(3, 8))}
    fig = fe.component_heatmaps(comps, ["[CLS]", HOSTILE, "[SEP]"], first_dim=16)
    assert len(fig.data) == 2
    assert fig.data[0].zmax == pytest.approx(np.percentile(np.abs(comps["token"]), 99))
    assert fig.data[1].zmax == pytest.approx(np.percentile(np.abs(comps["output"]), 99))
    assert fig.data[0].zmin == -fig.data[0].zmax
    assert list(fig.data[0].x) == list(range(16, 24))
    assert len(set(fig.data[0].y)) == 3  # unique labels even for repeated tokens
    assert "<script>" not in all_text(fig)


def test_robust_limit_ignores_a_single_outlier_dimension():
    m = np.full((10, 100), 0.1)
    m[:5, 7] = 50.0  # 0.5% of the cells
    assert fe.robust_limit(m) == pytest.approx(0.1)
    assert fe.robust_limit(np.zeros((2, 2))) == 1.0
    spikes = np.zeros((10, 100))
    spikes[0, 0] = 3.0
    assert fe.robust_limit(spikes) == 3.0


@pytest.mark.parametrize("comps,tokens,match", [
    ({}, ["a"], "no components"),
    ({"token": np.zeros((2, 4))}, ["a"], "expected \\(tokens=1"),
    ({"token": np.zeros((1, 4)), "sum": np.zeros((1, 5))}, ["a"], "slice them alike"),
    ({"token": np.zeros((0, 4))}, [], "no tokens"),
])
def test_component_heatmaps_validate(comps, tokens, match):
    with pytest.raises(ValueError, match=match):
        fe.component_heatmaps(comps, tokens)


def test_norms_and_token_vectors():
    fig = fe.norms_figure({"token": [1.0, 2.0], "output": [19.0, 20.0]}, ["a", "a"])
    assert [t.name for t in fig.data] == ["token", "output"] and len(set(fig.data[0].x)) == 2
    with pytest.raises(ValueError, match="2 tokens"):
        fe.norms_figure({"token": [1.0]}, ["a", "b"])
    fig = fe.token_vectors_figure({"token": np.ones(8), "position": np.zeros(8)}, title=HOSTILE)
    assert len(fig.data) == 2 and "<script>" not in all_text(fig)
    with pytest.raises(ValueError, match="same non-zero length"):
        fe.token_vectors_figure({"token": np.ones(8), "position": np.zeros(7)})


# ----------------------------------------------------------------------------- positions
def test_position_comparisons():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 6)), rng.normal(size=(10, 6))
    fig = fp.compare_tables(a, b, start=100)
    assert len(fig.data) == 2 and list(fig.data[0].y) == list(range(100, 110))
    fig = fp.compare_cosine(np.eye(10), np.eye(10), start=5)
    assert fig.data[0].zmin == -1 and fig.data[0].zmax == 1 and fig.data[0].x[0] == 5
    fig = fp.compare_pca(a[:, :2], b[:, :2], start=3, explained=[[0.5, 0.2], [0.3, 0.3]])
    markers = [t for t in fig.data if t.mode == "markers"]
    assert len(markers) == 2 and list(markers[0].customdata) == list(range(3, 13))
    assert "50%" in fig.layout.xaxis.title.text
    fig = fp.offset_similarity([0.9, 0.8], [0.95, 0.7])
    assert list(fig.data[0].x) == [1, 2]


@pytest.mark.parametrize("fn,args,match", [
    (fp.compare_tables, (np.zeros((3, 4)), np.zeros((4, 4))), "same positions"),
    (fp.compare_tables, (np.zeros(3), np.zeros((3, 4))), "2-D"),
    (fp.compare_cosine, (np.zeros((3, 4)), np.zeros((3, 4))), "square"),
    (fp.compare_pca, (np.zeros((3, 3)), np.zeros((3, 2))), "2 columns"),
    (fp.offset_similarity, ([], []), "same non-zero length"),
])
def test_position_figures_validate(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


# ----------------------------------------------------------------------------- anatomy
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


def test_layering_bertcore_without_ui_and_figures_without_streamlit():
    """One subprocess: this issue's bertcore modules pull in neither streamlit nor plotly; its figure
    modules pull in plotly but not streamlit."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; import bertcore.fill_mask, bertcore.positional, bertcore.anatomy, bertcore.masking; "
            "ui = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'streamlit', 'plotly'}); print(ui()); "
            "import explorer.figures.masking, explorer.figures.embeddings, explorer.figures.positions, "
            "explorer.figures.anatomy; print(ui())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["[]", "['plotly']"], out.stdout + out.stderr
