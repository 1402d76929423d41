"""Every view as code: the "Show the code" expander of each page.

A page prints its snippet with :func:`explorer.views.code.snippet` from the view it computed with (the view
function's own source, the page's inputs bound above it; see ``explorer/views/code.py`` and docs/views.md) and hands
it to :func:`expander` with the view's value. :func:`nothing` is the tour's expander (it computes nothing);
:func:`run_expander` the Train form's, whose code (:mod:`.training`, laid out by the same
:func:`explorer.views.code.document`) is the command line and the ``bertcore.runs.launch`` call that start the same
run. ``tests/pages/test_as_code.py`` runs each page's
snippet in a fresh offline process and compares its ``result`` with the page's value (recorded in
``st.session_state[RECORD_KEY]``).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from . import training
from explorer.views.code import notebook

RECORD_KEY = "_as_code"  # page -> Record: what the page showed and computed (read by the snippet tests)


@dataclass(frozen=True)
class Record:
    """A page's snippet and the numbers the page computed (None on a page that computes nothing)."""

    code: str | None
    result: object


def expander(page: str, title: str, code: str, result: object) -> None:
    """The "Show the code" expander: ``code`` (from :mod:`explorer.as_code`), a ``.py`` and a notebook
    (``.ipynb``) download. ``page``: the page's file stem (download names, widget keys); ``title``: the view, in
    words; ``result``: the numbers the page drew, which the snippet's ``result`` reproduces."""
    st.session_state.setdefault(RECORD_KEY, {})[page] = Record(code, result)
    with st.expander("Show the code", icon=":material/code:"):
        st.caption("The Python below reproduces this view from its current inputs, with the same `bertcore` and "
                   "`explorer.figures` functions the page calls: change an input above and it changes too. Run it "
                   "anywhere the project is installed (`pip install -e .`) or in the clone's root; `result` holds "
                   "the numbers drawn, `fig` the chart.")
        st.code(code, language="python", line_numbers=False)
        c1, c2, _ = st.columns([1, 1, 2])
        c1.download_button("Download .py", code, file_name=f"{page}.py", mime="text/x-python",
                           key=f"{page}_code_py", icon=":material/download:")
        c2.download_button("Download notebook", notebook(code, title), file_name=f"{page}.ipynb",
                           mime="application/x-ipynb+json", key=f"{page}_code_ipynb", icon=":material/download:")


def nothing(page: str, reason: str) -> None:
    """The expander of a page that computes nothing from a model: ``reason`` says so, and where the code is."""
    st.session_state.setdefault(RECORD_KEY, {})[page] = Record(None, None)
    with st.expander("Show the code", icon=":material/code:"):
        st.info(reason, icon=":material/info:")


def run_expander(task: str, opts: dict) -> None:
    """The Train form's expander: the run it starts (``opts``: TrainConfig options and ``device``) as a command line
    and a ``bertcore.runs.launch`` call; nothing for options TrainConfig refuses (the form says which)."""
    args = {k: v for k, v in opts.items() if k != "device"}
    try:
        code = training.train(task, args, opts["device"])
        argv = training.train_command(task, args, opts["device"])
    except ValueError:
        return
    expander("train", "Train", code, {"argv": argv})
