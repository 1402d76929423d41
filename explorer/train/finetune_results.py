"""A fine-tuning run's test results (``results.json``, :mod:`bertcore.training.tasks`): its scores beside the
TF-IDF baseline's, in one sentence and in charts, both confusion matrices and both classification reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from bertcore import runs
from explorer.train import run_notes as notes
from explorer import widgets
from explorer.figures import classification

COMPARED = ("acc", "f1", "accuracy", "macro_f1")  # scores in [0, 1] shown beside the baseline's


def _block(data: dict[str, Any], name: str) -> dict[str, Any]:
    block = data.get(name)
    return block if isinstance(block, dict) else {}


def show_results(run_dir: Path) -> None:
    """Fine-tuning results (``results.json``): test scores beside the TF-IDF baseline's, both
    confusion matrices and both classification reports."""
    results = runs.read_results(run_dir)
    if not results:
        st.caption("The test results appear when the run ends.")
        return
    test, base = _block(results, "test"), _block(results, "baseline")
    labels = results.get("labels")
    st.subheader("Test set")
    n = test.get("n")
    st.caption(f"Scores on the held-out test split{f' ({n:,} examples)' if isinstance(n, int) else ''}, which "
               "training never saw. The baseline is a TF-IDF + logistic regression model trained on the same "
               "training split: a fine-tuned BERT should beat it. The dashed line is the share of the most "
               "frequent class (what always guessing it would score).")
    sentence = notes.baseline_sentence(results)
    if sentence:
        st.markdown(f"**{sentence}**")
    if base.get("error"):
        st.warning("The baseline could not be computed: " + widgets.escape_md(base["error"]))
    elif not base:
        st.caption("No baseline in this run (it was skipped).")
    try:
        model_scores = {k: test[k] for k in COMPARED if k in test}
        base_scores = {k: base[k] for k in COMPARED if k in base}
        if set(model_scores) & set(base_scores):
            widgets.plotly_chart(classification.baseline_comparison_figure(
                model_scores, base_scores,
                names=("fine-tuned BERT", base.get("name") or "TF-IDF + logistic regression"),
                majority=results.get("majority_fraction")), key="train_baseline")
        elif model_scores:
            st.dataframe([model_scores], hide_index=True)
        cm = results.get("confusion_matrix", test.get("confusion_matrix"))
        base_cm = base.get("confusion_matrix")
        cols = st.columns(2 if base_cm is not None else 1)
        if cm is not None:
            widgets.plotly_chart(where=cols[0], fig=classification.confusion_matrix_figure(
                cm, labels, title="Fine-tuned BERT: confusion matrix"), key="train_cm")
        if base_cm is not None:
            widgets.plotly_chart(where=cols[-1], fig=classification.confusion_matrix_figure(
                base_cm, labels, title="Baseline: confusion matrix"), key="train_cm_base")
        report = results.get("classification_report", test.get("classification_report"))
        base_report = base.get("classification_report")
        rc = st.columns(2 if base_report else 1)
        if report:
            rc[0].markdown("**Classification report: fine-tuned BERT**")
            rc[0].dataframe(classification.report_rows(report), hide_index=True)
        if base_report:
            rc[-1].markdown("**Classification report: baseline**")
            rc[-1].dataframe(classification.report_rows(base_report), hide_index=True)
    except ValueError as exc:
        widgets.show_error(exc, "Unreadable results.json")
