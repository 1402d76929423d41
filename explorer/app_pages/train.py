"""Train: launch a small BERT pretraining or fine-tuning run, watch it live, list and compare runs.

A run is its own process (``python -m bertcore.training``, started by :func:`bertcore.runs.launch`):
the page never trains, it only reads the run directory (``docs/CONTRACTS.md``). Wiring only: the
launch form is ``explorer.train.form``, the views of runs ``explorer.train.run_view`` (a live run is an
``st.fragment(run_every=...)`` that stops polling when the run has ended). Session-state keys
start with ``train_``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertcore import runs
from explorer.train import sae_launch as sae_train
from explorer.train.run_view import live_view, runs_table, runs_table_live, static_view
from explorer.train.form import launch_form

st.title("Train a small BERT")
st.caption("Pretrain a tiny BERT from scratch with masked-language modelling and next-sentence prediction, or "
           "fine-tune one on labelled sentences. Each run is a separate process writing to "
           f"`{runs.runs_root()}/<run id>/`: it keeps going if you close the browser or restart the app, and its "
           "checkpoints become models for every other page.")

launch_form()
with st.expander("Sparse autoencoder: the features of one layer of the sidebar's model"):
    sae_train.form()

st.divider()
st.subheader("Runs")
infos = runs.list_runs()
if not infos:
    st.info("No run yet: start one above.")
    st.stop()
if any(i.state in ("queued", "running") for i in infos):
    runs_table_live()
else:
    runs_table(infos)

by_path = {str(i.path): i for i in infos}
if st.session_state.get("train_view") not in by_path:  # a refresh, or a run deleted: show the most relevant one
    active = [i for i in infos if i.state in ("queued", "running")]
    st.session_state["train_view"] = str((active or infos)[0].path)
view = st.selectbox("Show run", list(by_path), key="train_view",
                    format_func=lambda p: f"{by_path[p].run_id} ({runs.task_of(by_path[p])})")
run_path = Path(view)
status = runs.read_status(run_path)
if sae_train.is_sae_run(run_path):
    sae_train.view(run_path, status)
elif status is not None and status.get("state") in ("queued", "running"):
    live_view(str(run_path))
else:
    static_view(run_path, status)
