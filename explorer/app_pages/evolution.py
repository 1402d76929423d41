"""Evolution: how one attention head and the position embeddings change across a run's checkpoints.

Widgets -> ``bertcore.runs`` (which runs and checkpoints exist) -> ``explorer.views.evolution`` (each checkpoint
loaded, run and dropped; cached per checkpoint's files) -> ``explorer.figures.evolution``; the other tabs in
``explorer.panels.evolution``; at the bottom, "Use this checkpoint in Python"
(``explorer.train.run_view.checkpoint_in_python``).
Session-state keys start with ``evo_``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertcore import runs
from bertcore.modeling.config import ConfigError
from bertcore.modeling.hf_format import read_config_file
from bertcore.loading.sources import SourceError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.panels import evolution as panels
from explorer.train.run_view import checkpoint_in_python
from explorer.views import evolution as views
from explorer.views.code import snippet

MAX_PANELS = 8
DEFAULT_TEXT = "The cat sat on the mat because it was tired."


# ----------------------------------------------------------------------------- cached computations
def _spread(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``0..n-1``, first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / (k - 1))) for i in range(k)})


# ----------------------------------------------------------------------------- page
st.title("Evolution across checkpoints")
st.caption("How a model changes while it trains: pick a run, then compare its saved checkpoints side by side. "
           "Early checkpoints of a run from scratch show near-uniform attention and unrelated positions; "
           "structure appears as the loss falls.")

all_runs = [r for r in runs.list_runs() if r.n_checkpoints > 0]
if not all_runs:
    st.info("No run has a checkpoint yet. Start a run on the **Train** page: a checkpoint is saved every "
            "*Checkpoint every* steps and at the end (Train page, advanced options, where *Checkpoints kept* "
            "sets how many stages this page can compare).")
    st.stop()

labels = {str(r.path): f"{r.run_id} · {r.task or '?'} · {r.state} · {r.n_checkpoints} checkpoint(s)"
          for r in all_runs}
run_dir = Path(st.selectbox("Run", list(labels), format_func=labels.__getitem__, key="evo_run"))
ckpts = runs.checkpoints(run_dir)
if not ckpts:
    st.warning("This run's checkpoints are gone or still being written; pick another run.")
    st.stop()
steps_all = [runs.checkpoint_step(c) for c in ckpts]
default = [steps_all[i] for i in _spread(len(ckpts), min(MAX_PANELS, 6))]
chosen = st.multiselect("Checkpoints (steps)", steps_all, default=default, key=f"evo_steps_{run_dir.name}",
                        max_selections=MAX_PANELS,
                        help=f"Up to {MAX_PANELS} checkpoints, shown in training order. Each is loaded and run once "
                             "(cached afterwards).")
if not chosen:
    st.info("Choose at least one checkpoint.")
    st.stop()
chosen = sorted(chosen)
folders = [ckpts[steps_all.index(s)] for s in chosen]
checkpoints = views.checkpoint_sources(run_dir, chosen)  # keyed on their files: a rewritten step differs
try:
    config = read_config_file(folders[-1] / "config.json")
except ConfigError as exc:
    widgets.show_error(exc, "Cannot read the checkpoint's config")
    st.stop()

tab_att, tab_pos, tab_find, tab_gram = st.tabs(["One head's attention", "Position embeddings", "Published patterns",
                                                "Grammar suite"])

with tab_att:
    st.markdown("Each panel is the attention of one head at one checkpoint: row = the token that looks "
                "(query), column = the token it looks at (key); every row sums to 1. All panels share one "
                "colour scale, so a head that sharpens from a uniform dark map into a few bright cells "
                "has learned a pattern (e.g. attending to the previous token or to [SEP]).")
    text = st.text_input("Sentence", value=DEFAULT_TEXT, key="evo_text", max_chars=500,
                         help="A short sentence (at most 500 characters) keeps the panels readable.")
    c1, c2, c3 = st.columns([2, 2, 1])
    with c1:
        layer = widgets.layer_picker("evo", config.num_hidden_layers)  # 0-based block
    with c2:
        head = widgets.head_picker("evo", config.num_attention_heads)  # 0-based
    by_word = widgets.words_toggle("evo", where=c3)
    try:
        args = (run_dir, chosen, text, layer, head, by_word)
        evo = views.attention(*args)
        if len(evo.tokens) > 40:
            st.caption(f"{len(evo.tokens)} tokens: hover over a panel to read the cells; a shorter sentence is "
                       "easier to read.")
        widgets.plotly_chart(views.attention_figure(evo), key="evo_att_chart")
        as_code.expander("evolution", "Evolution", snippet(
            f"Evolution: layer {layer + 1}, head {head + 1} across checkpoints", views.attention, args,
            draw=[(views.attention_figure, {})]), evo)
    except (TextError, SourceError, ValueError) as exc:
        widgets.show_error(exc, "Cannot compute the attention maps")

with tab_pos:
    panels.positions(run_dir, config, chosen, checkpoints)
with tab_find:
    panels.published_patterns(run_dir, chosen, checkpoints)
with tab_gram:
    panels.grammar_suite(chosen, checkpoints)

st.divider()
_py_steps = {runs.checkpoint_step(f): f for f in folders}
_py_step = st.selectbox("Checkpoint for Python", list(_py_steps), index=len(_py_steps) - 1, key="evo_py_step",
                        help="One of the chosen checkpoints: the code below loads it.") if len(_py_steps) > 1 \
    else next(iter(_py_steps))
_info = runs.run_info(run_dir)
checkpoint_in_python(_py_steps[_py_step], "evo_py", ((runs.read_config(run_dir) or {}).get("args") or {}).get("probe"),
                     can_rewrite=_info is None or _info.state not in ("queued", "running"))
