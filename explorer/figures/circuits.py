"""An attribution graph drawn as Neuronpedia's graph viewer lays it out: x = token position, y = layer, the
embeddings at the bottom and the logit on top; node size = influence, edge width = |weight|, colour = sign."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .mixing import NEGATIVE, POSITIVE  # blue pushes towards the target, orange against (the DecompX bars' colours)

KIND_SYMBOL = {"feature": "circle", "error": "diamond", "embedding": "square", "logit": "hexagon"}
KIND_NAME = {"feature": "transcoder feature", "error": "error (what the transcoder misses)",
             "embedding": "embedding", "logit": "logit (target)"}
WIDTHS = (0.6, 1.6, 3.2)  # edge widths by tertile of |weight|
MAX_EDGES = 1500  # edges drawn, the strongest by |weight|: a readable picture that a browser draws in a blink
LABEL_CHARS = 24  # a label written beside its node: the feature's name, cut here
# where the labels of the nodes sharing one cell (layer, position) go, in turn, so that neighbours do not overlap
LABEL_PLACES = ("top center", "bottom center", "middle right", "middle left")


def _short(label: str) -> str:
    """A node's label as written beside it: without its bracketed place, at most :data:`LABEL_CHARS` characters."""
    name = label.rsplit(" (block ", 1)[0]
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"


def _spread(layers: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """x for each node: its position, nodes sharing (layer, position) spread over ±0.35 of a column."""
    x = positions.astype(float).copy()
    for key in {(int(a), int(b)) for a, b in zip(layers, positions)}:
        here = np.flatnonzero((layers == key[0]) & (positions == key[1]))
        if len(here) > 1:
            x[here] += np.linspace(-0.35, 0.35, len(here))
    return x


def _places(layers: np.ndarray, positions: np.ndarray) -> list[str]:
    """Each node's label position: the k-th node of its cell (layer, position) takes ``LABEL_PLACES[k % 4]``."""
    seen: dict[tuple[int, int], int] = {}
    out = []
    for a, b in zip(layers, positions):
        k = seen.get((int(a), int(b)), 0)
        seen[(int(a), int(b))] = k + 1
        out.append(LABEL_PLACES[k % len(LABEL_PLACES)])
    return out


def graph_figure(tokens: Sequence[str], kinds: Sequence[str], layers: np.ndarray, positions: np.ndarray,
                 influence: np.ndarray, labels: Sequence[str], activations: np.ndarray, logit_effect: np.ndarray,
                 edges: np.ndarray, node_ids: Sequence[str], selected: str | None = None,
                 max_edges: int = MAX_EDGES, show_labels: bool = False) -> go.Figure:
    """The graph.

    Args:
        tokens: the T input tokens (the x axis).
        kinds, layers, positions, influence, labels, activations, logit_effect, node_ids: one entry per node
            (layers: -1 = embeddings, 0..L-1 = blocks, L = the logit).
        edges: ``(E, 3)`` (source index, target index, weight).
        selected: a node id to ring.
        max_edges: draw only this many edges, the strongest by |weight| (every node is drawn).
        show_labels: write each feature's and error's label beside it (its first :data:`LABEL_CHARS` characters),
            for a graph of a few nodes.
    Returns:
        A figure with one edge trace per (sign, width) and one node trace per kind; each node's ``customdata`` is
        its id (for selection).
    """
    layers, positions = np.asarray(layers), np.asarray(positions)
    x, y = _spread(layers, positions), layers.astype(float) + 1  # embeddings on row 0
    fig = go.Figure()
    if len(edges) > max_edges:
        edges = edges[np.argsort(-np.abs(edges[:, 2]), kind="stable")[:max_edges]]
    if len(edges):
        mags = np.abs(edges[:, 2])
        cuts = np.quantile(mags, [1 / 3, 2 / 3]) if len(mags) > 2 else np.array([np.inf, np.inf])
        for sign, colour, name in ((1, POSITIVE, "excites"), (-1, NEGATIVE, "inhibits")):
            for tier, width in enumerate(WIDTHS):
                pick = (np.sign(edges[:, 2]) == sign) & (np.searchsorted(cuts, mags, side="right") == tier)
                xs, ys = [], []
                for s, d, _ in edges[pick]:
                    xs += [x[int(s)], x[int(d)], None]
                    ys += [y[int(s)], y[int(d)], None]
                if xs:
                    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", opacity=0.55,
                                             line={"color": colour, "width": width}, name=f"edge: {name}",
                                             legendgroup=name, showlegend=tier == len(WIDTHS) - 1))
    places = _places(layers, positions)
    size = 8 + 30 * np.sqrt(np.clip(influence, 0, None) / max(float(np.max(influence, initial=0)), 1e-12))
    for kind, symbol in KIND_SYMBOL.items():
        pick = np.array([k == kind for k in kinds], dtype=bool)
        if not pick.any():
            continue
        idx = np.flatnonzero(pick)
        hover = [f"<b>{labels[i]}</b><br>position {positions[i]} ({tokens[positions[i]]})<br>activation "
                 f"{activations[i]:.3g}<br>direct effect on the target {logit_effect[i]:+.3g}<br>influence "
                 f"{influence[i]:.3g}" for i in idx]
        written = show_labels and kind in ("feature", "error")
        fig.add_trace(go.Scatter(
            x=x[idx], y=y[idx], mode="markers+text" if written else "markers", name=KIND_NAME[kind],
            hovertext=hover, hoverinfo="text", customdata=[node_ids[i] for i in idx],
            text=[_short(labels[i]) for i in idx] if written else None,
            textposition=[places[i] for i in idx] if written else None,
            textfont={"size": 10, "color": "#333"},
            marker={"symbol": symbol, "size": size[idx], "line": {"width": 1, "color": "#333"},
                    "color": [POSITIVE if logit_effect[i] >= 0 else NEGATIVE for i in idx]
                    if kind in ("feature", "error") else ("#9e9e9e" if kind == "embedding" else "#2ca02c")}))
    if selected is not None and selected in node_ids:
        i = list(node_ids).index(selected)
        fig.add_trace(go.Scatter(x=[x[i]], y=[y[i]], mode="markers", hoverinfo="skip", showlegend=False,
                                 marker={"size": float(size[i]) + 12, "color": "rgba(0,0,0,0)",
                                         "line": {"width": 3, "color": "#000"}}))
    top = int(layers.max(initial=0)) + 1
    fig.update_layout(
        title="Attribution graph: which features make the prediction at the [MASK]",
        xaxis={"tickmode": "array", "tickvals": list(range(len(tokens))), "ticktext": list(tokens),
               "title": "token position", "range": [-0.6, len(tokens) - 0.4]},
        yaxis={"tickmode": "array", "tickvals": list(range(top + 1)),
               "ticktext": ["embeddings"] + [f"layer {b + 1} (block {b})" for b in range(top - 1)] + ["logit"],
               "title": "", "range": [-0.5, top + 0.5]},
        height=520, margin={"l": 120, "r": 20, "t": 50, "b": 60}, legend={"orientation": "h", "y": -0.2},
        plot_bgcolor="white")
    return fig
