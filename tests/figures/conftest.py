"""Helpers of the figure tests (explorer.figures: pure functions, no Streamlit)."""

from __future__ import annotations

import json

import plotly.graph_objects as go

HOSTILE = "<b>x</b>&<script>"  # user text that must never be rendered as HTML


def all_text(fig: go.Figure) -> str:
    """Everything a figure sends to the browser, as one string."""
    return json.dumps(fig.to_plotly_json(), default=str)
