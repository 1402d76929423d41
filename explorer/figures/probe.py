"""The probe's predictions during pretraining: one bar panel per [MASK], and a table of how the top guess
changed. Pure functions of ``probe.jsonl`` records (``docs/CONTRACTS.md``: ``{"step", "text", "predictions":
[[[token, prob], ...] per [MASK]]}``, with several sentences also ``"sentences"`` and ``"labels"``); no
Streamlit. A malformed record raises ``ValueError`` saying what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .training import PALETTE, _check_records, _empty, finite_number


def _check_probe(record: Any) -> list[list[tuple[str, float]]]:
    if not isinstance(record, Mapping) or "predictions" not in record:
        raise ValueError("a probe record must be a dict with 'predictions' (a line of probe.jsonl)")
    preds = record["predictions"]
    if not isinstance(preds, Sequence) or isinstance(preds, str):
        raise ValueError("probe 'predictions' must be a list (one list of [token, prob] per [MASK])")
    out = []
    for m, cands in enumerate(preds):
        if not isinstance(cands, Sequence) or isinstance(cands, str):
            raise ValueError(f"probe predictions[{m}] must be a list of [token, probability] pairs")
        pairs = []
        for c in cands:
            if not isinstance(c, Sequence) or isinstance(c, str) or len(c) != 2 or finite_number(c[1]) is None:
                raise ValueError(f"probe predictions[{m}] holds {c!r}; expected [token, probability]")
            pairs.append((str(c[0]), float(c[1])))
        out.append(pairs)
    return out


def mask_titles(record: Mapping[str, Any], n: int) -> list[str]:
    """A name per [MASK] of a probe record: its ``labels`` (a few words either side, probes of several
    sentences) when there is one per [MASK], else ``[MASK] #1``, ``[MASK] #2`` ..."""
    labels = record.get("labels")
    if isinstance(labels, Sequence) and not isinstance(labels, str) and len(labels) == n:
        return [f"#{m + 1} {label}" for m, label in enumerate(labels)]
    return [f"[MASK] #{m + 1}" for m in range(n)]


def probe_figure(record: Mapping[str, Any], top_k: int = 5) -> go.Figure:
    """Top-k predictions for each [MASK] of the probe sentence at one step: one bar panel per [MASK].

    Raises:
        ValueError: malformed record, or ``top_k`` < 1.
    """
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    preds = _check_probe(record)
    step = record.get("step", "?")
    title = f"Probe predictions at step {step}"
    if not preds:
        return _empty(title, "the probe sentence has no [MASK]", 260)
    fig = make_subplots(rows=1, cols=len(preds), subplot_titles=mask_titles(record, len(preds)),
                        horizontal_spacing=0.12)
    for m, cands in enumerate(preds):
        top = sorted(cands, key=lambda c: -c[1])[:top_k][::-1]  # best at the top of a horizontal bar chart
        fig.add_trace(go.Bar(x=[p for _, p in top], y=[t for t, _ in top], orientation="h", marker_color=PALETTE[0],
                             text=[f"{p:.1%}" for _, p in top], textposition="auto", showlegend=False,
                             hovertemplate="%{y}: %{x:.4f}<extra></extra>"), row=1, col=m + 1)
    # One x range for all panels: up to 1, or zoomed in while every guess is unlikely (early training).
    best = max((p for cands in preds for _, p in cands), default=0.0)
    fig.update_xaxes(range=[0, min(1.0, max(0.05, best * 1.25))], title_text="probability", tickformat=".0%")
    fig.update_layout(title=title, height=110 + 34 * min(top_k, max(len(c) for c in preds) or 1),
                      margin=dict(l=80, r=20, t=70, b=40))
    return fig


def probe_rows(records: Sequence[Mapping[str, Any]], last: int = 10) -> list[dict[str, Any]]:
    """A table of the ``last`` probe records, newest first: the step and the top guess (with its
    probability) for each [MASK], to read how the guesses sharpen during pretraining."""
    records = _check_records(records, "probe records")
    rows = []
    for rec in sorted(records, key=lambda r: r["step"], reverse=True)[:max(0, last)]:
        row: dict[str, Any] = {"step": int(rec["step"])}
        preds = _check_probe(rec)
        for title, cands in zip(mask_titles(rec, len(preds)), preds):
            best = max(cands, key=lambda c: c[1]) if cands else ("", 0.0)
            row[title] = f"{best[0]} ({best[1]:.1%})"
        rows.append(row)
    return rows
