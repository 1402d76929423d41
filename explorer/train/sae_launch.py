"""The Train page's SAE recipe: train a sparse autoencoder on a layer of the sidebar's model (a run's checkpoint
too), or a transcoder for every layer (the Circuits page's attribution graphs), and the live view of such a run
(FVU, L0 and dead-feature curves). The run is a process
(:func:`bertcore.sae.launch.launch`); the page only reads its directory. Session-state keys start with
``train_sae_``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from bertcore import runs
from bertcore.sae.config import SAETrainConfig
from bertcore.sae.launch import TASK, launch, resume
from explorer import widgets
from explorer.figures import features as figs

def form() -> None:
    """Inputs and the launch button of an SAE run on the sidebar's model."""
    lm = widgets.current_model()
    st.caption("A TopK sparse autoencoder (Gao et al. 2024) rewrites one layer's hidden state as a sum of a few of "
               "many learned directions, the features. It trains on the hidden states of the everyday-English "
               "mixture (State of the Union stays held out for its measures); when it ends its features appear on "
               "the Features page.")
    if not lm.path:
        st.info("Pick a model folder (the packaged fill-mask model or a run's checkpoint) in the sidebar.")
        return
    kind = st.radio("What to train", ["sae", "transcoder"], horizontal=True, key="train_sae_kind",
                    format_func={"sae": "An SAE on one layer (Features page)",
                                 "transcoder": "Transcoders for every layer (Circuits page)"}.get,
                    help="A transcoder replaces one feed-forward block (it reads what the block reads and predicts "
                         "what it writes); one per block makes the attribution graphs of the Circuits page.")
    c1, c2, c3, c4 = st.columns(4)
    n = lm.config.num_hidden_layers
    if kind == "sae":
        # the input shows (and keeps in the session) the layer's label, from 1; the run takes the 0-based block
        layer = c1.number_input("Layer", 1, n, min(2, n), key="train_sae_layer",
                                help="the output of this layer (1 = the first)")
        blocks = (int(layer) - 1,)  # layer 1 is block 0
    else:
        c1.caption(f"Every layer: blocks 0 to {n - 1} in one run (resumable: it goes on from its last checkpoint "
                   "after a stop).")
        blocks = tuple(range(n))
    expansion = c2.selectbox("Features per dimension", [4, 8, 16], index=2, key="train_sae_expansion",
                             help=f"features = this x the hidden size ({lm.config.hidden_size})")
    k = c3.number_input("k (features per token)", 4, 128, 32, key="train_sae_k")
    minutes = c4.number_input("Minutes", 1.0, 600.0, 20.0 if kind == "sae" else 120.0, step=5.0,
                              key="train_sae_minutes")
    extra = {"kind": "transcoder", "lr": 5e-4, "warmup_steps": 50, "resample_every": 250_000} \
        if kind == "transcoder" else {"lr": 8e-4, "warmup_steps": 20}
    cfg = SAETrainConfig(model=str(lm.path), layers=blocks, d_sae=int(expansion) * lm.config.hidden_size,
                         k=int(k), max_time=float(minutes), batch_size=1024, passes=3, dead_tokens=300_000,
                         eval_every=250, eval_tokens=16_384, save_every=100, log_every=20,
                         device=str(lm.device), **extra)  # the app's device, where its model is
    st.caption(f"Model: `{lm.source.label}`. Command: `python -m bertcore.sae train --run-dir RUN "
               f"{' '.join(cfg.to_argv())}`")
    if st.button("Train the SAE" if kind == "sae" else "Train the transcoders", key="train_sae_go", type="primary"):
        try:
            path = launch(cfg)
        except runs.RunError as exc:
            st.error(str(exc))
        else:
            st.session_state["train_view"] = str(path)
            st.success(f"Started {path.name}: its curves are below.")


def view(run_path: Path, status: dict[str, Any] | None) -> None:
    """An SAE run: progress, curves, its SAE folders; live (polling) while it runs."""
    if status is not None and status.get("state") in ("queued", "running"):
        _live(str(run_path))
    else:
        _show(run_path, status)
        if status is not None and status.get("state") in ("failed", "cancelled") and st.button(
                "Resume", key="train_sae_resume"):
            try:
                resume(run_path)
            except runs.RunError as exc:
                st.error(str(exc))
            else:
                st.rerun()


@st.fragment(run_every=3)
def _live(run_dir: str) -> None:
    status = runs.read_status(run_dir)
    if status is not None and status.get("state") in runs.FINAL_STATES:
        st.rerun()
    _show(Path(run_dir), status)
    if st.button("Cancel", key="train_sae_cancel"):
        runs.cancel(run_dir)


def _show(run_path: Path, status: dict[str, Any] | None) -> None:
    if status is None:
        st.info("Starting ...")
        return
    args = (runs.read_config(run_path) or {}).get("args") or {}
    budget = args.get("max_time")
    used = status.get("elapsed_s") or 0.0
    text = f"{status.get('state')}: step {status.get('step', 0):,}, {status.get('tokens') or 0:,} tokens"
    if status.get("tokens_per_s"):
        text += f", {status['tokens_per_s']:,.0f} tokens/s"
    st.progress(min(1.0, used / (60 * budget)) if budget else 0.0, text=text)
    if status.get("state") == "failed":
        st.error("The run failed: " + widgets.escape_md(status.get("error") or "no error message"))
    metrics = runs.read_metrics(run_path)
    if metrics:
        blocks = list(SAETrainConfig.from_dict(args).layers) if args.get("layers") else []  # 0-based
        widgets.plotly_chart(figs.sae_curves(metrics, blocks),
                             key="train_sae_curves")
        last = [r for r in metrics if r.get("split") == "val"][-1:]
        if last:
            st.dataframe(pd.DataFrame([{"layer": k.split("/")[0], "measure": k.split("/")[1], "held-out": v}
                                       for k, v in last[0].items() if "/" in k]), hide_index=True)
    finals = sorted((run_path / "sae").glob("layer-*")) if (run_path / "sae").is_dir() else []
    if finals:
        st.success("Its SAE is ready: open the Features page with this run's model in the sidebar ("
                   + ", ".join(f"`{p}`" for p in finals) + ").")


def is_sae_run(run_path: Path) -> bool:
    return ((runs.read_config(run_path) or {}).get("task")) == TASK
