"""Evolution: how one attention head and the position embeddings change across a run's checkpoints.

Widgets -> ``bertcore.runs`` (which runs and checkpoints exist) -> ``bertcore.loading.sources.load`` per
checkpoint -> ``bertcore.analysis.attention.activations.run`` / ``bertcore.readouts.positional`` ->
``explorer.figures.evolution``; at the bottom, "Use this checkpoint in Python"
(``explorer.train.run_view.checkpoint_in_python``).
Session-state keys start with ``evo_``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertcore import runs
from bertcore.analysis.papers import emergence
from bertcore.modeling.config import ConfigError
from bertcore.data import DataError
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.modeling.hf_format import read_config_file
from bertcore.loading.sources import ModelSource, SourceError, files_stamp
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, heldout, widgets
from explorer.train import checkpoint_resources
from explorer.as_code import training
from explorer.figures import evolution as figs
from explorer.figures import findings as finding_figs
from explorer.figures import training as train_figs
from explorer.train.run_view import checkpoint_in_python

MAX_PANELS = 8
DEFAULT_TEXT = "The cat sat on the mat because it was tired."


# ----------------------------------------------------------------------------- cached computations
def _spread(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``0..n-1``, first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / (k - 1))) for i in range(k)})


def _unigram_exit(run_dir: Path) -> int | None:
    """Where the run's held-out MLM loss left the unigram line (the loss chart's mark), or None."""
    records = runs.read_metrics(run_dir)
    unigram = train_figs.reference_of(records).get("unigram_loss")
    return train_figs.unigram_exit_step(records, unigram) if isinstance(unigram, (int, float)) else None


def _agreement_series(run_dir: Path, folders: tuple[str, ...], stamps: tuple[str, ...]) -> dict[str, list[float]]:
    """For runs on the generated agreement language: the best head's verb -> subject attention and the same head's
    verb -> attractor attention per checkpoint (:mod:`bertcore.analysis.grammar.agreement`); {} for other runs."""
    if (runs.read_config(run_dir) or {}).get("args", {}).get("corpus") != "agreement":
        return {}
    found = [checkpoint_resources.agreement_summary(f, s) for f, s in zip(folders, stamps)]
    last = found[-1]
    return {f"Agreement head: verb -> subject (best head per checkpoint; last L{widgets.layer_number(last['layer'])} "
            f"H{widgets.head_number(last['head'])})":
            [f["to_subject"] for f in found],
            "Same head: verb -> attractor noun": [f["to_attractor"] for f in found]}


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
key_folders = tuple(str(f) for f in folders)
key_stamps = tuple(files_stamp(ModelSource("run", str(f))) for f in folders)  # cache keys: a rewritten step differs
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
        maps, tokens = checkpoint_resources.attention_per_checkpoint(key_folders, key_stamps, text, layer, head,
                                                                     by_word)
        if len(tokens) > 40:
            st.caption(f"{len(tokens)} tokens: hover over a panel to read the cells; a shorter sentence is easier "
                       "to read.")
        widgets.plotly_chart(figs.attention_evolution_figure(maps, tokens, chosen, layer=layer, head=head),
                        key="evo_att_chart")
        as_code.expander("evolution", "Evolution", training.evolution(run_dir, chosen, text, layer, head, by_word),
                         maps)
    except (TextError, SourceError, ValueError) as exc:
        widgets.show_error(exc, "Cannot compute the attention maps")

with tab_pos:
    st.markdown("BERT learns one vector per position. Each panel shows the cosine similarity between the first "
                "positions' vectors at one checkpoint: at initialisation they are random (only the diagonal is "
                "bright); as training teaches word order, a band appears along the diagonal because nearby "
                "positions get similar vectors. The line chart summarises it: mean similarity of positions "
                "*i* and *i + offset* per checkpoint.")
    if getattr(config, "position_embedding_type", "absolute") == "rotary":
        st.info("This run's model has no position table: its positions are rotary (RoPE, applied inside every "
                "attention to queries and keys), so there are no position vectors to compare across checkpoints. "
                "The Positional embeddings page shows what its rotary frequencies do.", icon=":material/info:")
    else:
        max_p = int(config.max_position_embeddings)
        trained_len = (runs.read_config(run_dir) or {}).get("args", {}).get("max_seq_len")
        default_p = min(max_p, 256, int(trained_len) if isinstance(trained_len, int) and trained_len >= 2 else 64)
        n_positions = int(st.number_input(
            "Positions to compare", min_value=2, max_value=min(max_p, 256), value=default_p, step=8,
            key="evo_positions",
            help=f"The first N positions (2 to {min(max_p, 256)}; default: the run's sequence length). "
                 "Runs trained with short sequences only update the "
                 "positions they saw: beyond the sequence length the vectors stay random."))
        if isinstance(trained_len, int) and n_positions > trained_len:
            st.caption(f"This run trained on sequences of {trained_len} tokens: positions from {trained_len} on "
                       "were never used, so they keep their initial vectors.")
        try:
            sims = checkpoint_resources.position_similarity_per_checkpoint(key_folders, key_stamps, n_positions)
            widgets.plotly_chart(figs.position_similarity_evolution_figure(sims, chosen), key="evo_pos_chart")
            widgets.plotly_chart(figs.neighbour_similarity_figure(sims, chosen, max_offset=4), key="evo_pos_line")
        except (SourceError, ValueError) as exc:
            widgets.show_error(exc, "Cannot read the position embeddings")

with tab_find:
    st.markdown("The measures of the **Findings** page at each chosen checkpoint, on held-out BBC segments, beside the "
                "run's MLM loss: when did a previous-token head appear (Clark et al. 2019: > 50% of a head's attention "
                "on the previous token), when did attention to [SEP] rise (their 'no-op'), how did anisotropy "
                "change (Ethayarajh 2019), and when did the loss leave its plateau (Chen et al. 2023 see a plateau, "
                "then a sudden drop as syntactic attention appears). Each checkpoint is run once, then kept.")
    c1, c2 = st.columns(2)
    with c1:
        show = st.toggle("Compute across the chosen checkpoints", value=False, key="evo_findings")
    with c2:
        n_seg = int(st.number_input("Held-out segments per checkpoint", min_value=4, max_value=200, value=24, step=4,
                                    key="evo_find_segments", help="More segments give steadier numbers; each "
                                    "checkpoint runs the model once per segment."))
    if show:
        seq_len = (runs.read_config(run_dir) or {}).get("args", {}).get("max_seq_len")
        max_tokens = int(seq_len) if isinstance(seq_len, int) and seq_len >= 8 else 128
        bar = st.progress(0.0, text="Running the checkpoints on held-out segments ...")
        summaries = []
        try:
            for i, (folder, stamp) in enumerate(zip(key_folders, key_stamps)):
                summaries.append(heldout.checkpoint_summary(folder, stamp, str(run_dir), n_seg, max_tokens))
                bar.progress((i + 1) / len(key_folders), text=f"Checkpoint {i + 1} / {len(key_folders)}")
        except (SourceError, ValueError) as exc:
            widgets.show_error(exc, "Cannot run the checkpoints")
            summaries = []
        except DataError as exc:
            st.error("Cannot build the evaluation set: " + widgets.escape_md(str(exc)), icon=":material/error:")
            summaries = []
        bar.empty()
        if summaries:
            series = {}
            metrics = [r for r in runs.read_metrics(run_dir) if r.get("split") == "train"]
            loss_key = "mlm_loss" if any("mlm_loss" in r for r in metrics) else "loss"
            points = [(r["step"], r[loss_key]) for r in metrics if isinstance(r.get(loss_key), (int, float))]
            loss_name = f"MLM loss (train, {loss_key})"
            exit_step, plateau = emergence.plateau_exit(*zip(*points)) if len(points) >= 3 else (None, None)
            if points:
                series[loss_name] = tuple(zip(*points))
            val = [(r["step"], r["mlm_acc_mask"]) for r in runs.read_metrics(run_dir, split="val")
                   if isinstance(r.get("mlm_acc_mask"), (int, float))]
            if val:
                series["Accuracy at [MASK] positions (validation)"] = tuple(zip(*val))
            for k, name in emergence.SUMMARY_NAMES.items():
                series[name] = (chosen, [s.get(k, float("nan")) for s in summaries])
            agreement = _agreement_series(run_dir, key_folders, key_stamps)
            for name, values in agreement.items():
                series[name] = (chosen, values)
            unigram_step = _unigram_exit(run_dir)
            prev_step = emergence.first_above(chosen, [s["prev_max"] for s in summaries], emergence.PREV_MIN)
            sep_step = emergence.rise_step(chosen, [s["sep"] for s in summaries])
            marks = {emergence.SUMMARY_NAMES["prev_max"]: prev_step, emergence.SUMMARY_NAMES["sep"]: sep_step,
                     loss_name: exit_step}
            not_yet = "not in the chosen checkpoints"
            if not points:
                plateau_text = "no loss in metrics.jsonl"
            elif exit_step is None:
                plateau_text = "not yet" if plateau is not None else "too few logged steps"
            else:
                plateau_text = str(exit_step)
            aniso = [s["anisotropy_last"] for s in summaries]
            st.dataframe([
                {"event": "first previous-token head (> 50%)",
                 "step": not_yet if prev_step is None else str(prev_step)},
                {"event": f"[SEP] attention rose (x{emergence.SEP_RISE:g}, >= {emergence.SEP_MIN:.0%})",
                 "step": not_yet if sep_step is None else str(sep_step)},
                {"event": "loss left its plateau" + (f" (plateau {plateau:.2f})" if plateau is not None else ""),
                 "step": plateau_text},
                {"event": f"held-out MLM loss below the unigram line for good (by {emergence.UNIGRAM_MARGIN:g} nats)",
                 "step": "not yet" if unigram_step is None else str(unigram_step)},
                {"event": "anisotropy of the last layer, first -> last checkpoint",
                 "step": f"{aniso[0]:.2f} -> {aniso[-1]:.2f}"},
            ], hide_index=True, width="stretch")
            st.caption(f"Rules: a previous-token head puts > {emergence.PREV_MIN:.0%} on the previous token; [SEP] "
                       f"attention 'rose' when it reaches {emergence.SEP_RISE:g} x its first value and at least "
                       f"{emergence.SEP_MIN:.0%}; the plateau starts where the smoothed loss falls at under "
                       f"{emergence.FLAT:.0%} of its fastest rate and ends where it has fallen half-way to its final "
                       "value. Dashed red lines mark these steps. Only the chosen checkpoints are measured: save "
                       "early checkpoints densely to see a sudden change.")
            widgets.plotly_chart(finding_figs.emergence_figure(series, marks), key="evo_find_chart")

with tab_gram:
    st.markdown("The **Grammar** page's minimal-pair suite at each chosen checkpoint: the share of pairs whose "
                "grammatical sentence gets the higher pseudo-log-likelihood, per paradigm (50% is chance). BabyLM "
                "evaluates small models this way; watch agreement arrive, and see whether agreement across an "
                "attractor lags simple agreement. Runs from scratch with their own vocabulary split the suite's "
                "words into more pieces, which PLL handles.")
    c1, c2 = st.columns(2)
    show_gram = c1.toggle("Score the suite across the chosen checkpoints", value=False, key="evo_gram")
    n_pairs = int(c2.number_input("Pairs per paradigm", min_value=5, max_value=100, value=10, step=5,
                                  key="evo_gram_n", help="Each pair costs two PLLs per checkpoint."))
    if show_gram:
        bar = st.progress(0.0, text="Scoring the suite at each checkpoint ...")
        per_ckpt = []
        try:
            for i, (folder, stamp) in enumerate(zip(key_folders, key_stamps)):
                per_ckpt.append(checkpoint_resources.suite_summary(folder, stamp, n_pairs))
                bar.progress((i + 1) / len(key_folders), text=f"Checkpoint {i + 1} / {len(key_folders)}")
        except (SourceError, FillMaskError, ValueError) as exc:
            widgets.show_error(exc, "Cannot score the checkpoints")
            per_ckpt = []
        bar.empty()
        if per_ckpt:
            series = {name: (chosen, [p[name] for p in per_ckpt]) for name in per_ckpt[0]}
            widgets.plotly_chart(finding_figs.emergence_figure(series), key="evo_gram_chart")

st.divider()
_py_steps = {runs.checkpoint_step(f): f for f in folders}
_py_step = st.selectbox("Checkpoint for Python", list(_py_steps), index=len(_py_steps) - 1, key="evo_py_step",
                        help="One of the chosen checkpoints: the code below loads it.") if len(_py_steps) > 1 \
    else next(iter(_py_steps))
_info = runs.run_info(run_dir)
checkpoint_in_python(_py_steps[_py_step], "evo_py", ((runs.read_config(run_dir) or {}).get("args") or {}).get("probe"),
                     can_rewrite=_info is None or _info.state not in ("queued", "running"))
