"""Charts and tables out of the page: every Plotly chart drawn with the toolbar's export format, CSV and HTML
downloads."""

from __future__ import annotations

import re

import streamlit as st


# ----------------------------------------------------------------------------- export
EXPORT_FORMAT_KEY = "export_format"  # the image format of every chart's toolbar download
EXPORT_FORMATS = {"png": "PNG (2x, for slides)", "svg": "SVG (vector, for papers)"}


def export_picker() -> None:
    """Sidebar: the format the camera button of every chart's toolbar downloads (PNG or SVG)."""
    st.sidebar.radio("Chart downloads", list(EXPORT_FORMATS), format_func=EXPORT_FORMATS.__getitem__,
                     key=EXPORT_FORMAT_KEY, horizontal=True, persist_state="session",
                     help="The camera icon in a chart's toolbar (top right, on hover) saves the chart in this "
                          "format. Tables have their own CSV button.")


def chart_config(name: str) -> dict:
    """Plotly config for :func:`plotly_chart`: the toolbar's download saves ``name``.png / .svg
    (plotly.js ``toImageButtonOptions``; scale 2 for PNG)."""
    fmt = st.session_state.get(EXPORT_FORMAT_KEY, "png")
    return {"displaylogo": False, "toImageButtonOptions": {
        "format": fmt if fmt in EXPORT_FORMATS else "png", "filename": _file_stem(name), "scale": 2}}


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("_") or "chart"


def plotly_chart(fig, key: str, where=None, **kwargs):
    """``st.plotly_chart`` with the export config of :func:`chart_config` (the one place every page
    draws a Plotly figure). ``where``: a container or column (default: ``st``)."""
    return (where or st).plotly_chart(fig, key=key, config=chart_config(key), **kwargs)


def download_csv(df, name: str, key: str, label: str = "CSV", index: bool = True, where=None) -> None:
    """A download button for a table (``pandas.DataFrame`` with labelled rows and columns) as ``name``.csv.

    The CSV is built only when the button is clicked (a callable ``data``), so a big matrix costs
    nothing on reruns.
    """
    (where or st).download_button(label, data=lambda: df.to_csv(index=index).encode("utf-8"),
                                  file_name=f"{_file_stem(name)}.csv", mime="text/csv", key=key,
                                  icon=":material/download:", on_click="ignore",
                                  help="Download this table as a CSV file (rows and columns labelled).")


def standalone_html(fig) -> str:
    """A figure as one self-contained HTML file that opens offline (plotly.js inlined, no CDN)."""
    return fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})


def download_html(fig, name: str, key: str, label: str = "HTML", where=None) -> None:
    """A download button for :func:`standalone_html` of ``fig`` (built only when clicked; ~4 MB)."""
    (where or st).download_button(label, data=lambda: standalone_html(fig).encode("utf-8"),
                                  file_name=f"{_file_stem(name)}.html", mime="text/html", key=key,
                                  icon=":material/download:", on_click="ignore",
                                  help="An interactive HTML file of this chart that opens offline in any browser.")
