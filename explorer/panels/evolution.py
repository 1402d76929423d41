"""The Evolution page's tabs beside one head's attention: the position embeddings, the published patterns and the
run's timeline, and the minimal-pair suite, at each chosen checkpoint (:mod:`explorer.views.evolution`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertcore import runs
from bertcore.analysis.papers import emergence
from bertcore.data import DataError
from bertcore.loading.sources import ModelSource, SourceError
from bertcore.readouts.fill_mask import FillMaskError
from explorer import widgets
from explorer.figures import evolution as figs
from explorer.figures import findings as finding_figs
from explorer.views import evolution as views


def positions(run_dir: Path, config, chosen: list[int], checkpoints: list[ModelSource]) -> None:
    """The position embeddings' cosine similarity at each checkpoint (``config``: the last checkpoint's)."""
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
            sims = [views.position_similarity_at(c, n_positions) for c in checkpoints]
            widgets.plotly_chart(figs.position_similarity_evolution_figure(sims, chosen), key="evo_pos_chart")
            widgets.plotly_chart(figs.neighbour_similarity_figure(sims, chosen, max_offset=4), key="evo_pos_line")
        except (SourceError, ValueError) as exc:
            widgets.show_error(exc, "Cannot read the position embeddings")


def published_patterns(run_dir: Path, chosen: list[int], checkpoints: list[ModelSource]) -> None:
    """The Findings page's measures at each checkpoint beside the run's loss, and the timeline's events."""
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
        bar = st.progress(0.0, text="Running the checkpoints on held-out segments ...")
        t = None
        try:
            for i, checkpoint in enumerate(checkpoints):  # one by one, for the progress bar; each kept
                views.summary_at(checkpoint, n_seg, views.max_tokens_of(run_dir))
                bar.progress((i + 1) / len(checkpoints), text=f"Checkpoint {i + 1} / {len(checkpoints)}")
            t = views.timeline(run_dir / "metrics.jsonl", chosen, n_seg)
        except (SourceError, ValueError) as exc:
            widgets.show_error(exc, "Cannot run the checkpoints")
        except DataError as exc:
            st.error("Cannot build the evaluation set: " + widgets.escape_md(str(exc)), icon=":material/error:")
        bar.empty()
        if t is not None:
            st.dataframe(t.events, hide_index=True, width="stretch")
            st.caption(f"Rules: a previous-token head puts > {emergence.PREV_MIN:.0%} on the previous token; [SEP] "
                       f"attention 'rose' when it reaches {emergence.SEP_RISE:g} x its first value and at least "
                       f"{emergence.SEP_MIN:.0%}; the plateau starts where the smoothed loss falls at under "
                       f"{emergence.FLAT:.0%} of its fastest rate and ends where it has fallen half-way to its final "
                       "value. Dashed red lines mark these steps. Only the chosen checkpoints are measured: save "
                       "early checkpoints densely to see a sudden change.")
            widgets.plotly_chart(views.timeline_figure(t), key="evo_find_chart")


def grammar_suite(chosen: list[int], checkpoints: list[ModelSource]) -> None:
    """The minimal-pair suite's accuracy per paradigm at each checkpoint."""
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
            for i, checkpoint in enumerate(checkpoints):
                per_ckpt.append(views.suite_at(checkpoint, n_pairs))
                bar.progress((i + 1) / len(checkpoints), text=f"Checkpoint {i + 1} / {len(checkpoints)}")
        except (SourceError, FillMaskError, ValueError) as exc:
            widgets.show_error(exc, "Cannot score the checkpoints")
            per_ckpt = []
        bar.empty()
        if per_ckpt:
            series = {name: (chosen, [p[name] for p in per_ckpt]) for name in per_ckpt[0]}
            widgets.plotly_chart(finding_figs.emergence_figure(series), key="evo_gram_chart")
