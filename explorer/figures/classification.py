"""Figures of a fine-tuning run's test results: the confusion matrix, the per-class report, and the model beside
the TF-IDF + logistic regression baseline.

Pure functions: plain data in, ``plotly.graph_objects.Figure`` (or rows) out. No Streamlit here. Inputs are checked
first; a ``ValueError`` says what is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from .training import METRIC_LABELS, PALETTE, finite_number


def _check_matrix(matrix: Any, labels: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    arr = np.asarray(matrix, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"a confusion matrix must be square (classes x classes), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or (arr < 0).any():
        raise ValueError("a confusion matrix holds counts: finite and >= 0")
    n = arr.shape[0]
    labels = [str(x) for x in labels] if labels is not None else [str(i) for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} labels for a {n} x {n} confusion matrix; give one label per class")
    return arr, labels


def confusion_matrix_figure(matrix: Any, labels: Sequence[str] | None = None, *, normalize: bool = True,
                            title: str = "Confusion matrix (test set)") -> go.Figure:
    """Heatmap of a confusion matrix (rows: true class, columns: predicted), each cell annotated
    with its count (and the row fraction when ``normalize``, which also colours by row fraction).

    Raises:
        ValueError: not square, negative or non-finite counts, or a label count that does not match.
    """
    arr, labels = _check_matrix(matrix, labels)
    rows = arr.sum(axis=1, keepdims=True)
    frac = np.divide(arr, rows, out=np.zeros_like(arr), where=rows > 0)
    z = frac if normalize else arr
    text = [[f"{int(arr[i, j]):,}" + (f"<br>{frac[i, j]:.0%}" if normalize else "") for j in range(len(labels))]
            for i in range(len(labels))]
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, text=text, texttemplate="%{text}", colorscale="Blues",
        zmin=0, zmax=1 if normalize else None, colorbar=dict(title="row share" if normalize else "count"),
        hovertemplate="true %{y}<br>predicted %{x}<br>%{text}<extra></extra>"))
    fig.update_layout(title=title, height=140 + 60 * len(labels), margin=dict(l=80, r=20, t=50, b=60),
                      xaxis=dict(title="predicted", side="bottom"),
                      yaxis=dict(title="true", autorange="reversed"))
    return fig


def report_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of a scikit-learn ``classification_report(..., output_dict=True)``: one per class, then
    macro and weighted averages; ``accuracy`` (a bare number there) becomes its own row.

    Raises:
        ValueError: not a dict of dicts with precision / recall / f1-score.
    """
    if not isinstance(report, Mapping) or not report:
        raise ValueError("a classification report must be a non-empty dict (sklearn output_dict=True)")
    rows = []
    for name, value in report.items():
        if isinstance(value, Mapping):
            missing = {"precision", "recall", "f1-score"} - set(value)
            if missing:
                raise ValueError(f"report row {name!r} lacks {sorted(missing)}")
            rows.append({"class": str(name), "precision": float(value["precision"]), "recall": float(value["recall"]),
                         "f1-score": float(value["f1-score"]), "support": int(value.get("support", 0))})
        elif finite_number(value) is not None:
            rows.append({"class": str(name), "precision": None, "recall": None, "f1-score": float(value),
                         "support": None})
        else:
            raise ValueError(f"report entry {name!r} is neither a row (dict) nor a number")
    return rows


def baseline_comparison_figure(model: Mapping[str, float], baseline: Mapping[str, float],
                               metrics: Sequence[str] | None = None, *, names: tuple[str, str] = (
                                   "fine-tuned BERT", "TF-IDF + logistic regression"),
                               majority: float | None = None) -> go.Figure:
    """Grouped bars: the fine-tuned model's test metrics beside the baseline's, on the same split.

    Args:
        model / baseline: metric name -> value in [0, 1] (e.g. ``accuracy``, ``macro_f1``).
        metrics: which to show (default: those both have, in ``model``'s order).
        majority: accuracy of always predicting the most frequent class, drawn as a line.
    Raises:
        ValueError: no metric in common, or a value outside [0, 1].
    """
    if not isinstance(model, Mapping) or not isinstance(baseline, Mapping):
        raise ValueError("model and baseline must be dicts of metric name -> value")
    if metrics is None:
        metrics = [k for k in model if k in baseline and finite_number(model[k]) is not None
                   and finite_number(baseline[k]) is not None]
    if not metrics:
        raise ValueError(f"no metric in common to compare (model has {sorted(model)}, baseline {sorted(baseline)})")
    for name, values in ((names[0], model), (names[1], baseline)):
        for k in metrics:
            v = finite_number(values.get(k))
            if v is None or not 0 <= v <= 1:
                raise ValueError(f"{name}: metric {k!r} must be a number in [0, 1], got {values.get(k)!r}")
    labels = [METRIC_LABELS.get(k, k.replace("_", " ")) for k in metrics]
    fig = go.Figure()
    for (name, values), color in zip(((names[0], model), (names[1], baseline)), (PALETTE[0], "#999999")):
        vals = [float(values[k]) for k in metrics]
        fig.add_trace(go.Bar(name=name, x=labels, y=vals, marker_color=color, text=[f"{v:.3f}" for v in vals],
                             textposition="outside"))
    if majority is not None and finite_number(majority) is not None:
        fig.add_hline(y=float(majority), line=dict(dash="dash", color="#666"),
                      annotation_text=f"majority class {float(majority):.3f}", annotation_position="bottom right")
    fig.update_layout(title="Test set: fine-tuned BERT vs. baseline", barmode="group", height=360,
                      yaxis=dict(range=[0, 1.1], title="score"), margin=dict(l=50, r=20, t=50, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
