"""Classification scores and the TF-IDF + logistic regression baseline a fine-tuned BERT must beat."""

from __future__ import annotations

import time
from typing import Any, Sequence


def macro_f1(y_true: Sequence[int], y_pred: Sequence[int], n_classes: int) -> float:
    """Mean of the per-class F1 over ``n_classes`` classes (scikit-learn ``f1_score(average="macro")``;
    a class never predicted scores 0)."""
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, labels=list(range(n_classes)), average="macro", zero_division=0))


def tfidf_baseline(train, test, labels: list[str]) -> dict[str, Any]:
    """TF-IDF (word 1-2 grams, sublinear tf) + logistic regression fitted on ``train`` and scored on
    ``test`` (``datasets.Dataset`` with ``text``, optional ``text_pair``, ``label`` ids).

    Returns ``name``, ``acc``, ``f1`` (macro), ``confusion_matrix`` (C x C list), ``classification_report``
    (scikit-learn dict), ``train_examples`` and ``seconds``.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, classification_report, confusion_matrix

    t0 = time.perf_counter()
    if "text_pair" in train.column_names:
        def join(ds):
            return [a + " " + b for a, b in zip(ds["text"], ds["text_pair"])]
    else:
        def join(ds):
            return list(ds["text"])
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x_train = vec.fit_transform(join(train))
    x_test = vec.transform(join(test))
    clf = LogisticRegression(max_iter=2000, C=10.0)
    clf.fit(x_train, train["label"])
    pred = clf.predict(x_test)
    y = test["label"]
    ids = list(range(len(labels)))
    return {
        "name": "TF-IDF (1-2 grams) + logistic regression",
        "acc": float(accuracy_score(y, pred)), "f1": macro_f1(y, pred, len(labels)),
        "confusion_matrix": confusion_matrix(y, pred, labels=ids).tolist(),
        "classification_report": classification_report(y, pred, labels=ids, target_names=labels, output_dict=True,
                                                       zero_division=0),
        "train_examples": len(train), "seconds": round(time.perf_counter() - t0, 2),
    }
