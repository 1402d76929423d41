"""explorer.figures.training: pure figure functions of training runs (no Streamlit, no run needed)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from explorer.figures import probe as FP
from explorer.figures import training as F


def pretrain_metrics(n: int = 6) -> list[dict]:
    out = []
    for s in range(1, n + 1):
        out.append({"step": s * 10, "time": s, "split": "train", "lr": 1e-4, "tokens_per_s": 900.0,
                    "loss": 10 - s, "mlm_loss": 9 - s, "nsp_loss": 0.7, "mlm_acc": 0.05 * s, "nsp_acc": 0.5})
        if s % 3 == 0:
            out.append({"step": s * 10, "time": s, "split": "val", "loss": 10.5 - s, "mlm_loss": 9.5 - s,
                        "nsp_loss": 0.69, "mlm_acc": 0.04 * s, "nsp_acc": 0.52})
    return out


def names(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data]


# ----------------------------------------------------------------------------- curves
def test_loss_figure_pretrain_train_and_val():
    fig = F.loss_figure(pretrain_metrics(), "pretrain", total_steps=100)
    assert "total loss (train)" in names(fig) and "total loss (validation)" in names(fig)
    assert "MLM loss (train)" in names(fig) and "NSP loss (validation)" in names(fig)
    train = next(t for t in fig.data if t.name == "total loss (train)")
    assert list(train.x) == [10, 20, 30, 40, 50, 60] and list(train.y) == [9, 8, 7, 6, 5, 4]
    val = next(t for t in fig.data if t.name == "total loss (validation)")
    assert list(val.x) == [30, 60]
    assert list(fig.layout.xaxis.range) == [0, 100]


def test_loss_figure_marks_where_the_held_out_loss_left_the_unigram_line():
    records = [{"step": 0, "split": "reference", "unigram_loss": 6.0, "most_frequent_token_rate": 0.1},
               *pretrain_metrics()]  # held-out MLM loss 6.5 at step 30, 3.5 at step 60
    fig = F.loss_figure(records, "pretrain", total_steps=100)
    marks = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert [m.x0 for m in marks] == [60]
    assert "left the unigram line: step 60" in fig.layout.annotations[0].text
    records[0]["unigram_loss"] = 3.0  # never below: no mark
    assert not F.loss_figure(records, "pretrain", total_steps=100).layout.shapes


def test_accuracy_figure_finetune_keys_and_range():
    recs = [{"step": 1, "split": "train", "loss": 0.7, "acc": 0.5, "f1": 0.4},
            {"step": 2, "split": "val", "loss": 0.6, "acc": 0.7, "f1": 0.6}]
    fig = F.accuracy_figure(recs, "finetune")
    assert names(fig) == ["accuracy (train)", "accuracy (validation)", "macro F1 (train)", "macro F1 (validation)"]
    assert list(fig.layout.yaxis.range) == [0, 1.02]


def test_curves_skip_missing_and_nonfinite_values():
    recs = [{"step": 2, "split": "train", "loss": 1.0}, {"step": 1, "split": "train", "loss": float("nan")},
            {"step": 3, "split": "train", "loss": None}, {"step": 0, "split": "train", "loss": 2.0}]
    steps, values = F.metric_series(recs, "loss")
    assert steps == [0, 2] and values == [2.0, 1.0]


def test_empty_metrics_give_a_placeholder_not_an_error():
    fig = F.loss_figure([], "pretrain")
    assert not fig.data and "no values logged yet" in fig.layout.annotations[0].text


@pytest.mark.parametrize("records, match", [
    ("loss", "list of dicts"),
    ([1, 2], r"metrics\[0\] must be a dict"),
    ([{"loss": 1}], "has no 'step'"),
])
def test_curves_reject_malformed_records(records, match):
    with pytest.raises(ValueError, match=match):
        F.loss_figure(records, "pretrain")


def test_unknown_task_and_empty_keys():
    with pytest.raises(ValueError, match="unknown task"):
        F.loss_figure([], "classify")
    with pytest.raises(ValueError, match="non-empty list"):
        F.curves_figure([], [])


# ----------------------------------------------------------------------------- progress
@pytest.mark.parametrize("seconds, text", [(None, "unknown"), (float("nan"), "unknown"), (5, "5 s"),
                                           (75, "1 min 15 s"), (3725, "1 h 02 min")])
def test_format_duration(seconds, text):
    assert F.format_duration(seconds) == text


def test_progress_summary_running_and_done():
    p = F.progress_summary({"state": "running", "step": 30, "total_steps": 120, "eta_s": 65, "tokens_per_s": 5400.4})
    assert p.fraction == pytest.approx(0.25)
    assert "step 30 / 120 (25%)" in p.text and "ETA 1 min 05 s" in p.text and "5,400 tokens/s" in p.text
    assert F.progress_summary({"state": "done", "step": 119, "total_steps": 120}).fraction == 1.0
    assert F.progress_summary({"state": "queued", "step": None, "total_steps": None}).fraction == 0.0
    with pytest.raises(ValueError, match="status.json"):
        F.progress_summary({"step": 1})


# ----------------------------------------------------------------------------- probe
PROBE = {"step": 40, "text": "the [MASK] sat on the [MASK] .",
         "predictions": [[["cat", 0.5], ["dog", 0.3], ["man", 0.1]], [["mat", 0.6], ["floor", 0.2]]]}


def test_probe_figure_one_panel_per_mask_sorted():
    fig = FP.probe_figure(PROBE, top_k=2)
    assert len(fig.data) == 2
    assert list(fig.data[0].y) == ["dog", "cat"]  # best at the top of a horizontal bar chart
    assert "step 40" in fig.layout.title.text
    assert fig.layout.xaxis.range[1] == pytest.approx(0.75)  # zoomed to the best guess (60%) + 25%
    early = FP.probe_figure({"step": 0, "predictions": [[["the", 0.001]]]})
    assert early.layout.xaxis.range[1] == pytest.approx(0.05)


@pytest.mark.parametrize("record, match", [
    ({"step": 1}, "predictions"),
    ({"step": 1, "predictions": [["cat"]]}, r"\[token, probability\]"),
    ({"step": 1, "predictions": "cat"}, "must be a list"),
])
def test_probe_figure_rejects_malformed(record, match):
    with pytest.raises(ValueError, match=match):
        FP.probe_figure(record)


def test_probe_rows_newest_first():
    rows = FP.probe_rows([{**PROBE, "step": 10}, PROBE], last=5)
    assert [r["step"] for r in rows] == [40, 10]
    assert rows[0]["[MASK] #1"] == "cat (50.0%)" and rows[0]["[MASK] #2"] == "mat (60.0%)"


def test_a_probe_of_several_sentences_names_each_mask_by_its_neighbours():
    rec = {**PROBE, "sentences": ["the [MASK] sat", "on the [MASK] ."], "labels": ["the ___ sat", "on the ___ ."]}
    fig = FP.probe_figure(rec, top_k=3)
    assert [a.text for a in fig.layout.annotations] == ["#1 the ___ sat", "#2 on the ___ ."]
    assert list(FP.probe_rows([rec])[0]) == ["step", "#1 the ___ sat", "#2 on the ___ ."]
    assert FP.mask_titles({**rec, "labels": ["one"]}, 2) == ["[MASK] #1", "[MASK] #2"]  # not one per [MASK]


def with_reference(records: list[dict]) -> list[dict]:
    ref = {"step": 0, "time": 0.0, "split": "reference", "unigram_loss": 6.5, "most_frequent_token_rate": 0.05,
           "most_frequent_token": "the"}
    extra = [{**r, "mlm_acc_mask": r["mlm_acc"] / 2, "mlm_top5_mask": r["mlm_acc"]} for r in records]
    return [ref, *extra]


def test_pretraining_charts_draw_the_reference_lines():
    recs = with_reference(pretrain_metrics())
    loss = F.loss_figure(recs, "pretrain", total_steps=100)
    [uni] = [t for t in loss.data if t.name.startswith("unigram")]
    assert list(uni.y) == [6.5, 6.5] and list(uni.x) == [0, 100.0] and "6.50" in uni.name
    acc = F.accuracy_figure(recs, "pretrain", total_steps=100)
    assert "MLM accuracy at [MASK] (train)" in names(acc) and "top-5 at [MASK] (validation)" in names(acc)
    assert any("mix of [MASK], random, unchanged" in n for n in names(acc))
    [freq] = [t for t in acc.data if t.name.startswith("always the most frequent")]
    assert list(freq.y) == [0.05, 0.05] and "(the)" in freq.name and "5.0%" in freq.name
    [chance] = [t for t in acc.data if t.name.startswith("NSP chance")]
    assert list(chance.y) == [0.5, 0.5]
    # a run without a reference record (older runs) or without NSP draws no such line
    no_nsp = [{k: v for k, v in r.items() if not k.startswith("nsp")} for r in pretrain_metrics()]
    acc = F.accuracy_figure(no_nsp, "pretrain")
    assert not [n for n in names(acc) if n.startswith(("NSP chance", "always"))]
    assert not [n for n in names(F.loss_figure(no_nsp, "pretrain")) if n.startswith("unigram")]


def test_progress_under_a_time_budget_is_in_time():
    p = F.progress_summary({"state": "running", "step": 340, "total_steps": None, "time_budget_s": 600,
                            "elapsed_s": 150, "eta_s": 450, "tokens_per_s": 1000})
    assert p.fraction == pytest.approx(0.25)
    assert "2 min 30 s of 10 min 00 s (25%)" in p.text and "step 340" in p.text and "ETA 7 min 30 s" in p.text


def test_pretraining_charts_draw_the_agreement_margin_and_accuracy_when_logged():
    records = pretrain_metrics()
    assert "agreement margin (train)" not in names(F.loss_figure(records, "pretrain"))
    for r in records:
        if r["split"] == "train":
            r.update(agreement_margin_loss=0.5, agreement_acc=0.75)
    assert "agreement margin (train)" in names(F.loss_figure(records, "pretrain"))
    acc = F.accuracy_figure(records, "pretrain")
    assert list(next(t for t in acc.data if t.name == "agreement at verb (train)").y) == [0.75] * 6
