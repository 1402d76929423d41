"""``explorer.figures.attention.token_axis``: every token-labelled chart (one head, side by side, rollout,
neuron view, attribution) draws at most ``max_labels`` labels with Plotly's automargin off, and leaves
itself the margin its longest label needs (automargin made a 128-token heatmap ~3x slower to draw)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import attention, attribution, compare, rollout


def att(t: int) -> np.ndarray:
    a = np.random.default_rng(0).random((t, t))
    return a / a.sum(-1, keepdims=True)


def figures(t: int, tokens: list[str]) -> dict:
    a = att(t)
    return {"one head": attention.attention_heatmap(a, tokens),
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
            assert all(len(text) <= attention.TICK_CHARS for text in axis["ticktext"]), (name, key)
            if t == 12:
                assert len(axis["ticktext"]) == 12, (name, key)  # short inputs: every token labelled


def test_margin_fits_the_longest_label():
    fig = attention.attention_heatmap(att(3), ["a", "b", "c"])
    short = fig.layout.margin.l
    fig = attention.attention_heatmap(att(3), ["a", "internationalization", "c"])
    assert fig.layout.margin.l >= short + (attention.TICK_CHARS - 1) * attention.CHAR_PX
    assert fig.layout.yaxis.ticktext[1] == "international…"
    assert fig.layout.margin.t > fig.layout.margin.l * 0.5  # x labels at -60 degrees need height
