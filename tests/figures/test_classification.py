"""explorer.figures.classification: a fine-tuning run's test results."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import classification as F


def names(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data]


def test_confusion_matrix_counts_and_row_shares():
    fig = F.confusion_matrix_figure([[8, 2], [1, 9]], ["negative", "positive"])
    hm = fig.data[0]
    assert list(hm.x) == ["negative", "positive"]
    assert np.allclose(np.asarray(hm.z), [[0.8, 0.2], [0.1, 0.9]])
    assert hm.text[0][0] == "8<br>80%"


@pytest.mark.parametrize("matrix, labels, match", [
    ([[1, 2, 3]], None, "square"),
    ([[1, -1], [0, 1]], None, ">= 0"),
    ([[1, 0], [0, 1]], ["a"], "one label per class"),
])
def test_confusion_matrix_rejects(matrix, labels, match):
    with pytest.raises(ValueError, match=match):
        F.confusion_matrix_figure(matrix, labels)


def test_report_rows_from_sklearn_dict():
    # sklearn classification_report([0, 1, 1, 0], [0, 1, 0, 0], target_names=["neg", "pos"], output_dict=True)
    rep = {"neg": {"precision": 2 / 3, "recall": 1.0, "f1-score": 0.8, "support": 2.0},
           "pos": {"precision": 1.0, "recall": 0.5, "f1-score": 2 / 3, "support": 2.0},
           "accuracy": 0.75,
           "macro avg": {"precision": 5 / 6, "recall": 0.75, "f1-score": 11 / 15, "support": 4.0},
           "weighted avg": {"precision": 5 / 6, "recall": 0.75, "f1-score": 11 / 15, "support": 4.0}}
    rows = F.report_rows(rep)
    classes = [r["class"] for r in rows]
    assert classes[:2] == ["neg", "pos"] and "accuracy" in classes and "macro avg" in classes
    acc = next(r for r in rows if r["class"] == "accuracy")
    assert acc["f1-score"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="lacks"):
        F.report_rows({"neg": {"precision": 1.0}})


def test_baseline_comparison():
    fig = F.baseline_comparison_figure({"accuracy": 0.9, "macro_f1": 0.88}, {"accuracy": 0.867, "macro_f1": 0.83},
                                       majority=0.7)
    assert names(fig) == ["fine-tuned BERT", "TF-IDF + logistic regression"]
    assert list(fig.data[1].y) == [0.867, 0.83]
    with pytest.raises(ValueError, match="no metric in common"):
        F.baseline_comparison_figure({"accuracy": 0.9}, {"f1": 0.8})
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        F.baseline_comparison_figure({"accuracy": 90}, {"accuracy": 0.8})


# ----------------------------------------------------------------------------- reference lines, time budget
