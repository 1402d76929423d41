"""explorer.figures.attention: one head, a layer's heads, every head, the head view and head statistics;
shape checks, and long inputs stay light."""

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import attention as fa
from explorer.figures import attribution, compare, rollout

from ..conftest import random_attention


def _attn(layers, heads, t, seed=0):
    return random_attention(np.random.default_rng(seed), layers, heads, t).astype(np.float32)


def test_attention_heatmap_shape_labels_and_segment_lines():
    a = _attn(1, 1, 6)[0, 0]
    toks = ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"]
    fig = fa.attention_heatmap(a, toks, segment_break=3)
    assert np.asarray(fig.data[0].z).shape == (6, 6)
    assert list(fig.layout.xaxis.ticktext) == toks  # duplicates kept apart (numeric axis)
    assert len(fig.layout.shapes) == 2
    assert fig.data[0].customdata is not None


def test_attention_heatmap_long_input_has_sparse_labels_and_no_cell_text():
    a = _attn(1, 1, 512)[0, 0]
    fig = fa.attention_heatmap(a, [f"t{i}" for i in range(512)])
    assert fig.data[0].customdata is None
    assert len(fig.layout.xaxis.tickvals) <= 64


@pytest.mark.parametrize("build, match", [
    (lambda: fa.attention_heatmap(np.ones((3, 4)), ["a"] * 4), r"\(T, T\)"),
    (lambda: fa.layer_grid(np.ones((3, 3)), ["a"] * 3, 1), r"\(heads, T, T\)"),
    (lambda: fa.thumbnails(np.ones((2, 3, 3))), r"\(layers, heads, T, T\)"),
    (lambda: fa.head_view(np.ones((2, 2, 2)), ["a"] * 2, 0), r"\(T, T\)"),
])
def test_attention_figures_reject_wrong_shapes(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_attention_heatmap_rejects_wrong_label_count():
    with pytest.raises(ValueError, match="one label per token"):
        fa.attention_heatmap(np.eye(3), ["a", "b"])


def test_layer_grid_one_panel_per_head_and_downsampled():
    a = _attn(1, 12, 512)[0]
    fig = fa.layer_grid(a, [f"t{i}" for i in range(512)], layer=2, max_cells=40)
    heat = [d for d in fig.data if isinstance(d, go.Heatmap)]
    assert len(heat) == 12
    assert all(np.asarray(h.z).shape == (40, 40) for h in heat)
    # blocks keep each row's mass: an average query of a block still gives 1 in total
    np.testing.assert_allclose(np.asarray(heat[0].z).sum(-1), 1.0, atol=1e-4)
    assert "averaged" in fig.layout.title.text and fig.layout.title.text.startswith("Layer 3:")  # block 2


def test_thumbnails_single_mosaic_trace():
    a = _attn(6, 12, 512)
    fig = fa.thumbnails(a, max_cells=16)
    assert len(fig.data) == 1
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (6 * 17 - 1, 12 * 17 - 1)
    assert np.nanmax(z) == pytest.approx(1.0)  # each map scaled to its own maximum
    assert len(fig.to_json()) < 300_000


def test_head_view_draws_top_k_strongest_edges():
    t = 10
    a = np.zeros((t, t), np.float32)
    a[4] = np.linspace(0.01, 1.0, t)
    a[4] /= a[4].sum()
    fig = fa.head_view(a, [f"w{i}" for i in range(t)], query=4, top_k=3)
    lines = [d for d in fig.data if d.mode == "lines"]
    assert len(lines) == 3
    assert sorted(d.y[1] for d in lines) == [7, 8, 9]
    widths = {d.y[1]: d.line.width for d in lines}
    assert widths[9] > widths[8] > widths[7]


def test_head_view_long_input_stays_light():
    a = _attn(1, 1, 512)[0, 0]
    fig = fa.head_view(a, [f"t{i}" for i in range(512)], query=100, top_k=20)
    assert len([d for d in fig.data if d.mode == "lines"]) == 20
    labelled = [d for d in fig.data if d.mode == "markers+text"]
    assert [len(d.y) for d in labelled] == [1, 20]  # the query, and the 20 linked keys only
    assert labelled[0].text[0] == "100: t100"
    keys = [int(t.split(":")[0]) for t in labelled[1].text]
    assert keys == sorted(keys)  # listed in reading order
    top = np.argsort(-a[100])[:20]
    assert set(keys) == set(int(k) for k in top)
    assert len(fig.to_json()) < 200_000


def test_head_view_validates_query_and_top_k():
    with pytest.raises(ValueError, match="query"):
        fa.head_view(np.eye(3), ["a", "b", "c"], query=3)
    with pytest.raises(ValueError, match="top_k"):
        fa.head_view(np.eye(3), ["a", "b", "c"], query=0, top_k=0)


def test_stat_heatmap():
    fig = fa.stat_heatmap(np.arange(12, dtype=float).reshape(2, 6), "Entropy")
    assert np.asarray(fig.data[0].z).shape == (2, 6) and list(fig.data[0].y) == ["L1", "L2"]
    with pytest.raises(ValueError, match=r"\(layers, heads\)"):
        fa.stat_heatmap(np.ones(3), "x")


# ----------------------------------------------------------------------------- token_axis
# every token-labelled chart (one head, side by side, rollout, neuron view, attribution) draws at most
# max_labels labels with automargin off and leaves itself the margin its longest label needs
def att(t: int) -> np.ndarray:
    a = np.random.default_rng(0).random((t, t))
    return a / a.sum(-1, keepdims=True)


def figures(t: int, tokens: list[str]) -> dict:
    a = att(t)
    return {"one head": fa.attention_heatmap(a, tokens),
            "side by side": compare.side_by_side(a, a, tokens),
            "rollout": rollout.contributions_figure({"raw": a[:3], "rollout": a[3:6]}, tokens, "q"),
            "neuron": rollout.neuron_figure(a[0, :8], a[:, :8], a[:, :8], a[0], a[0], tokens, "q"),
            "attribution": attribution.attribution_bars(tokens, a[0])}


@pytest.mark.parametrize("t", [12, 128, 512])
def test_token_labels_are_few_and_lay_out_without_automargin(t):
    tokens = [f"tok{i}" if i % 7 else "internationalization" for i in range(t)]
    for name, fig in figures(t, tokens).items():
        layout = fig.to_plotly_json()["layout"]
        axes = {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis")) and v.get("ticktext")}
        assert axes, name
        for key, axis in axes.items():
            assert axis.get("automargin") is False, (name, key)
            assert len(axis["ticktext"]) <= 48, (name, key)
            assert all(len(text) <= fa.TICK_CHARS for text in axis["ticktext"]), (name, key)
            if t == 12:
                assert len(axis["ticktext"]) == 12, (name, key)  # short inputs: every token labelled


def test_margin_fits_the_longest_label():
    fig = fa.attention_heatmap(att(3), ["a", "b", "c"])
    short = fig.layout.margin.l
    fig = fa.attention_heatmap(att(3), ["a", "internationalization", "c"])
    assert fig.layout.margin.l >= short + (fa.TICK_CHARS - 1) * fa.CHAR_PX
    assert fig.layout.yaxis.ticktext[1] == "international…"
    assert fig.layout.margin.t > fig.layout.margin.l * 0.5  # x labels at -60 degrees need height
