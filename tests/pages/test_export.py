"""Chart export (explorer/widgets/): every page draws through the export helper, the chart toolbar
downloads PNG or SVG as chosen in the sidebar, the standalone HTML opens offline."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go

from ..conftest import ROOT
from .conftest import PAGES, assert_clean, open_page, page


def test_every_page_draws_charts_through_the_export_helper():
    for path in [*PAGES.glob("*.py"), *(ROOT / "explorer").glob("*.py")]:
        if path.name == "widgets.py":
            continue
        src = path.read_text()
        assert not re.search(r"(?<!widgets)\.plotly_chart\(", src), f"{path.name}: use widgets.plotly_chart"


def test_chart_toolbar_downloads_png_or_svg():
    at = page("attention", att_tab="Rollout and flow")
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "png"
    assert config["toImageButtonOptions"]["filename"] == "att_roll"
    at = open_page("overview")
    at.radio(key="export_format").set_value("svg").run()
    at.switch_page("explorer/app_pages/attention.py").run()
    assert_clean(at)
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "svg"


def test_standalone_html_opens_offline():
    from explorer.widgets import standalone_html

    html = standalone_html(go.Figure(go.Heatmap(z=[[0.5, 0.5], [1.0, 0.0]])))
    assert "<html>" in html[:100] and "Plotly.newPlot" in html
    assert not re.search(r"<script[^>]+src=", html), "no external script (CDN)"
    assert len(html) > 1_000_000  # plotly.js is inlined
