"""Findings: published analyses of BERT recomputed on the selected model, beside the published numbers.

Widgets -> ``explorer.heldout.findings`` (held-out BBC segments, one forward each, cached) ->
``bertcore.analysis.papers.published.comparison_rows`` / ``explorer.figures.findings``. Keys start with ``find_``.
"""

import time

import numpy as np
import pandas as pd
import streamlit as st

from bertcore import runs
from bertcore.analysis.papers import evalset, published
from bertcore.analysis.shipped import PROBE_SEGMENTS
from bertcore.analysis.papers import findings as F
from bertcore.analysis.representations import syntax
from bertcore.data import DataError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import PACKAGED_MLM
from explorer import as_code, heldout, resources, widgets
from explorer.server import share
from explorer.as_code import analyses
from explorer.figures import findings as figs
from explorer.figures import syntax as syntax_figs

COLUMNS = {"measure": "Measure", "ours": "This model", "published": "bert-base (published)", "source": "Source"}

st.title("Findings: does this model agree with the papers?")
st.markdown(
    "Analyses that made BERT's inner workings famous, recomputed on the model chosen in the sidebar over a fixed "
    "evaluation set: segments of the packaged **BBC News** articles that pretraining here holds out (never trained "
    "on), each `[CLS] part 1 [SEP] part 2 [SEP]` of at most 128 tokens, as in Clark et al. 2019. Our number "
    "stands beside the published one and its source."
)

lm = widgets.current_model()
config = lm.config
source = lm.source
if published.comparable(config):
    st.success("This model has bert-base's shape (12 layers x 12 heads): the columns compare directly "
               "(the text differs: BBC News here, Wikipedia in Clark et al.).", icon=":material/check:")
else:
    diffs = "; ".join(published.differences(config))
    if source == PACKAGED_MLM:
        training = ("MiniLM-MLM is all-MiniLM-L6-v2 (a 6-layer MiniLM distilled from a larger BERT-style model and "
                    "fine-tuned for sentence embeddings) with MLM and NSP heads, trained further in this project with "
                    "BERT's own objectives on news, encyclopedic and everyday English (about 4M words; its model card "
                    "lists the corpora), including the BBC training articles but never the held-out ones used here. "
                    "A short MLM training on top of a sentence-embedding model: expect some of bert-base's attention "
                    "habits, weaker or moved.")
    elif source.kind == "packaged":
        training = ("all-MiniLM-L6-v2 is a 6-layer MiniLM (distilled from a larger BERT-style model), then fine-tuned "
                    "for sentence embeddings with a contrastive objective on ~1B sentence pairs, with no MLM or NSP "
                    "head: expect the attention habits of MLM pretraining to be weaker or moved.")
    elif source.kind == "run":
        step = runs.checkpoint_step(lm.path)
        training = (f"This is a checkpoint of a run trained here (step {step}); at step 0 it is a random "
                    "initialisation, so no published pattern is expected yet." if step is not None
                    else "This is a checkpoint of a run trained here.")
    else:
        training = "Its training may differ from bert-base's (MLM + NSP on books and Wikipedia)."
    lo, hi = published.relative_layers(5, 9, config.num_hidden_layers)  # 0-based blocks: bert-base's layers 6-10
    st.info(f"The papers measured bert-base. This model differs: {diffs}. {training} Layer ranges are mapped to "
            f"the same relative depth (bert-base's layers 6-10 of 12 are layers {widgets.layer_number(lo)}-"
            f"{widgets.layer_number(hi)} of "
            f"{config.num_hidden_layers} here).", icon=":material/info:")

share.shareable({"find_segments": share.integer(10, 300)})
n_segments = int(st.number_input(
    "Segments in the evaluation set", min_value=10, max_value=300, value=evalset.DEFAULT_SEGMENTS, step=10,
    key="find_segments", help="More segments give steadier numbers but take longer the first time (about 0.15 s "
                              "per segment for the MiniLM on one CPU thread); results are kept afterwards."))
key = resources.source_key(source)
cached = heldout.findings_cached(key, n_segments, lm)
try:
    if cached is None:
        bar = st.progress(0.0, text=f"Running the model on {n_segments} held-out segments ...")
        t0 = time.perf_counter()
        result = heldout.findings(key, n_segments, lm, progress=lambda i, n: bar.progress(
            i / n, text=f"Running the model on held-out segments: {i} / {n}"))
        bar.empty()
        st.caption(f"First computation: {time.perf_counter() - t0:.1f} s (kept for this session and others).")
    else:
        result = cached
except DataError as exc:
    st.error("Cannot build the evaluation set: " + widgets.escape_md(str(exc)), icon=":material/error:")
    st.stop()
except (ValueError, InputError) as exc:
    widgets.show_error(exc, "Cannot run the model on the evaluation set")
    st.stop()
st.caption(f"{result.n_segments} segments, {result.n_tokens:,} tokens, {result.info.get('sentences', 0)} sentences; "
           f"the forward passes took {result.seconds:.1f} s when first computed.")


if lm.encoder.embeddings.position_embeddings is None:  # rotary positions (ModernBERT): no table to regress
    regression, learned_mae, sinus_mae = None, None, None
else:
    regression = resources.position_regression(key, lm)
    learned_mae, sinus_mae = regression["learned"]["mae"], regression["sinusoidal"]["mae"]
st.subheader("Ours beside the papers")
rows = published.comparison_rows(result, learned_mae, sinus_mae)
st.table(pd.DataFrame(rows).rename(columns=COLUMNS))
as_code.expander("findings", "Findings", analyses.findings(lm.source, n_segments),
                 {"ours": "\n".join(str(r["ours"]) for r in rows), "to_cls": result.to_cls, "to_sep": result.to_sep})
with st.expander("The papers"):
    for paper in (published.CLARK, published.KOVALEVA, published.ETHAYARAJH, published.WANG_CHEN):
        st.markdown(f"- {paper.short}, *{paper.title}*, {paper.venue}. {paper.url}")


def special_tokens() -> None:
    st.markdown("Clark et al. 2019 (section 3.2, Figure 2): how much of each head's attention goes to [CLS], to "
                "[SEP], and to periods and commas, averaged over every token. In bert-base, early heads look at "
                "[CLS], middle layers put over half their attention on [SEP] (a 'no-op' when a head has "
                "nothing to do), the last layers look at punctuation. A model trained differently can park its "
                "idle attention on another token "
                "that every input has, such as [CLS]: look for the layers where one token takes most of the attention.")
    widgets.plotly_chart(figs.token_attention_figure({"[CLS]": result.to_cls, "[SEP]": result.to_sep,
                                                 ". and ,": result.to_punct}), key="find_tokens")


def offsets() -> None:
    st.markdown("Clark et al. 2019 (section 3.1): the average attention each head puts on the previous and on the "
                "next token; cells above 50% are labelled. bert-base has 4 such previous-token heads and 5 "
                "next-token heads, mostly in the early layers.")
    widgets.plotly_chart(figs.head_grid_figure({"previous token": result.prev, "next token": result.next},
                                          threshold=F.POSITIONAL_MIN), key="find_offsets")


def entropy() -> None:
    mean_t = result.n_tokens / max(result.n_segments, 1)
    st.markdown("Clark et al. 2019 (section 3.3, Figure 4): the entropy of each head's attention, in nats. Low = "
                "focused on a few tokens; the dashed line is uniform attention over an average segment. "
                f"Broad heads put less than {F.BROAD_MAX:.0%} on any token on average.")
    widgets.plotly_chart(figs.entropy_figure(result.entropy, float(np.log(mean_t))), key="find_entropy")
    widgets.plotly_chart(figs.head_grid_figure({"[CLS] entropy (nats)": result.cls_entropy},
                                          zmax=float(np.log(mean_t)), colorbar="nats"), key="find_cls_entropy")


def patterns() -> None:
    st.markdown("Kovaleva et al. 2019 (section 4.1) sorted attention maps into five types with a CNN trained on ~400 "
                "hand-labelled maps. Here a transparent rule classifies each head on each segment, from three "
                "scores: *vertical* = share on [CLS]/[SEP]; *diagonal* = share on the tokens at offsets -1, 0, +1; "
                "*block* = share of ordinary attention staying inside the query's own part (A or B).")
    r = F.PATTERN_RULES
    st.markdown(
        f"1. **vertical**: vertical ≥ {r['vertical_min']} and diagonal < {r['other_max']}\n"
        f"2. **diagonal**: diagonal ≥ {r['diagonal_min']} and vertical < {r['other_max']}\n"
        f"3. **vertical+diagonal**: both ≥ {r['mixed_min']} and together ≥ {r['mixed_sum']}\n"
        f"4. **block**: block ≥ {r['block_min']}\n"
        "5. **heterogeneous**: anything else (the only type that could carry linguistic structure)")
    widgets.plotly_chart(figs.pattern_figure(result.pattern_shares, F.PATTERNS), key="find_patterns")


def contextuality() -> None:
    st.markdown("Ethayarajh 2019: *anisotropy* is the average cosine of two random words (0 in an isotropic space). "
                "*Self-similarity* is the average cosine of one word's vectors in different contexts, "
                "*intra-sentence similarity* the average cosine of a sentence's words to their mean; both minus "
                "the anisotropy, so 0 means 'no more similar than random words'. In bert-base, upper layers are "
                "more context-specific: adjusted self-similarity falls. Words are whole words (mean of their "
                f"WordPieces); {result.n_self_words} words seen in at least {evalset.MIN_CONTEXTS} segments. "
                "See also the **Word senses** page for one word across your own sentences.")
    widgets.plotly_chart(figs.contextuality_figure(result.anisotropy, result.self_similarity_adjusted,
                                              result.intra_similarity_adjusted), key="find_context")


def positions() -> None:
    if regression is None:
        st.info(f"This {lm.config.family} model has no learned position table (its positions are rotary, turned "
                "inside attention), so Wang & Chen's regression does not apply; the Positional embeddings page "
                "shows its rotary frequencies.", icon=":material/info:")
        return
    st.markdown(f"Wang & Chen 2020 (Table 1): a linear regression from a position's vector to its index, 5-fold "
                f"cross-validated. This model's learned table: mean absolute error **{learned_mae:.1f}** positions; "
                f"a sinusoidal table of the same size: **{sinus_mae:.1f}**. A small error means absolute position "
                "is a linear read-out of the vector. The **Positional embeddings** page shows the tables.")
    widgets.plotly_chart(figs.position_regression_figure(
        {k: v["predictions"] for k, v in regression.items()}, {k: v["mae"] for k, v in regression.items()}),
        key="find_positions")


def _parsed(compute, start: str, step: str, failure: str):
    """``compute(progress)`` under a progress bar; None (with a message) without spaCy or on bad data."""
    bar = st.progress(0.0, text=start)
    try:
        return compute(lambda i, n: bar.progress(i / n, text=f"{step}: {i} / {n}"))
    except syntax.SyntaxUnavailable as exc:
        st.warning(widgets.escape_md(str(exc)), icon=":material/warning:")
    except ValueError as exc:
        widgets.show_error(exc, failure)
    finally:
        bar.empty()
    return None


def syntax_heads() -> None:
    st.markdown(
        "Clark et al. 2019 (section 4.2, Table 1, Figure 5): some heads follow syntax. The segments are parsed "
        "by spaCy's English model (`en_core_web_sm`, ClearNLP labels); attention is merged to words (the sum over "
        "a word's pieces as keys, the mean over them as queries), and a head *predicts* for each word the other "
        "word it attends to most ([CLS] and [SEP] left out). A head's accuracy on a relation is the share of arcs "
        "where the dependent's prediction is its head (dep→head) or, of the words attending to the dependent, its "
        "head attends most (head→dep; as Clark et al.'s code scores it), whichever is higher. The **fixed-offset "
        "baseline** always picks the word at the relation's most common relative position: a head is only "
        "interesting where it beats it.")
    run = heldout.syntax_cached(key, n_segments, lm) or _parsed(
        lambda progress: heldout.syntax_heads(key, n_segments, lm, progress=progress),
        "Parsing the segments and running the model ...",
        "Parsing and running the model, then fitting the attention probe (segments)", "Cannot score syntax heads")
    if run is None:
        return
    _syntax_views(run)


@st.fragment
def _syntax_views(run) -> None:
    """One view at a time, switched without rerunning the page (a cached redraw near half a second on 2 cores):
    the table, every head, an example, the probe."""
    view = st.segmented_control("Show", list(SYNTAX_VIEWS), default=next(iter(SYNTAX_VIEWS)), required=True,
                                key="find_syntax_view")
    SYNTAX_VIEWS[view or next(iter(SYNTAX_VIEWS))](run)


def _syntax_table(run) -> None:
    res = run.heads
    rows = []
    for r in res.relations:
        share, layer, head, direction = res.best(r)
        base, off = res.baseline[r]
        pub = published.SYNTAX_HEADS.get(r)
        rows.append({"relation": r, "arcs": res.counts[r], "best head (layer-head)": f"{layer + 1}-{head + 1}",
                     "direction": direction, "accuracy": share, "fixed offset": f"{base:.1%} (offset {off:+d})",
                     "bert-base (Clark, Table 1)": (f"{pub.accuracy:.1%}, head {pub.name} {pub.direction}; "
                                                    f"offset {pub.baseline:.1%}") if pub else ""})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="find_syntax_table",
                 column_config={"accuracy": st.column_config.NumberColumn(format="percent")})
    st.caption("bert-base's numbers are on the Penn Treebank with Stanford dependencies (Clark et al. 2019, "
               f"{published.SYNTAX_HEADS_WHERE}); ours on held-out BBC segments parsed by spaCy, so they compare "
               "in kind, not to the decimal.")


def _syntax_heatmap(run) -> None:
    res = run.heads
    grids = [np.maximum(res.dep_to_head[r], res.head_to_dep[r]) for r in res.relations]
    counts = [res.counts[r] for r in res.relations]
    widgets.plotly_chart(syntax_figs.relation_head_heatmap(res.relations, grids, counts), key="find_syntax_heatmap")


def _syntax_example(run) -> None:
    res = run.heads
    rel = st.selectbox("An example of a relation, with its best head", res.relations, key="find_syntax_rel")
    share, layer, head, direction = res.best(rel)
    seg_i, dep, gov = res.examples[rel][0]
    seg = run.segments[seg_i]
    act = resources.forward(key, seg.text_a, seg.text_b, lm)
    merged, unit = syntax.word_attention(act.attentions, seg)
    other = syntax.predicted_word(merged, unit, layer, head, dep, direction)
    lo, hi = max(0, min(dep, gov) - 4), min(len(seg.words), max(dep, gov) + 5)
    gold = [(d - lo, seg.words[d].head - lo, seg.words[d].dep) for d in range(lo, hi)
            if seg.words[d].head != d and lo <= seg.words[d].head < hi and seg.words[d].dep not in ("punct", "ROOT")]
    looks = (dep, other) if direction == "dep->head" else (other, dep)  # (the word that looks, where it looks)
    predicted = [(looks[0] - lo, looks[1] - lo)] if other is not None and lo <= other < hi else []
    below = (f"where '{seg.words[dep].text}' looks" if direction == "dep->head"
             else f"the word that looks most at '{seg.words[dep].text}'")
    widgets.plotly_chart(syntax_figs.arc_figure([w.text for w in seg.words[lo:hi]], gold, predicted, title=(
        f"Head {layer + 1}-{head + 1} on '{rel}' ({share:.0%} of arcs, {direction}): above, spaCy's arcs; below, "
        f"{below}")), key="find_syntax_arcs")


def _syntax_probe(run) -> None:
    probe = run.probe
    if probe is None:
        st.info("The attention-only probe trains on some segments and tests on others: it needs at least two "
                "segments with words to attach. Raise the number of segments above.", icon=":material/info:")
        return
    st.markdown(
        "Clark et al. 2019 (section 5, Table 3): an **attention-only probe** scores each candidate head *i* of a "
        "word *j* (the other words of its sentence, or ROOT = [CLS]) by a learned weighted sum of every head's "
        "attention j→i and i→j, softmax over the candidates; nothing but those 2 × layers × heads weights is "
        f"trained. Trained on the words of most segments and scored on the other {len(probe.test_segments)} "
        "segments' words: the unlabelled attachment score (UAS, punctuation left out).")
    m = st.columns(3)
    m[0].metric("Attention-only probe, UAS", f"{probe.uas:.1%}",
                f"bert-base: {published.ATTENTION_PROBE_UAS:.0%}", delta_color="off", delta_arrow="off",
                help=f"{probe.n_test} test words ({probe.n_train} for training; training UAS {probe.train_uas:.1%})")
    m[1].metric("Best single head, UAS", f"{float(run.heads.uas.max()):.1%}",
                help="The best head's share of all arcs (punctuation and roots left out) where the dependent's "
                     "most-attended other word is its head.")
    m[2].metric("Right-branching baseline", f"{probe.right_branching:.1%}",
                f"bert-base data: {published.RIGHT_BRANCHING_UAS:.0%}", delta_color="off", delta_arrow="off",
                help="The next word of the sentence is the head (ROOT for the last word), on the same test words.")
    widgets.plotly_chart(syntax_figs.probe_weights_figure(probe.weights), key="find_syntax_probe")
    st.caption("Their numbers: bert-base on the WSJ dev set with gold Stanford dependencies; ours: held-out BBC "
               "segments parsed by spaCy (its parses are about 92% right), so they compare in kind.")


SYNTAX_VIEWS = {"Best head per relation": _syntax_table, "Every head": _syntax_heatmap, "An example": _syntax_example,
                "Attention-only probe": _syntax_probe}


def probing() -> None:
    st.markdown(
        "Tenney et al. 2019 and Hewitt & Liang 2019: a **linear probe** (logistic regression) per layer reads a "
        "word's part of speech or dependency label from its vector (the mean of its WordPieces; layer 0 = the "
        "embeddings, no context), trained on some segments and tested on others. The **control task** gives each "
        "word type a random label: a probe that learns it too is memorising words, so the gap (*selectivity*) is "
        "what the layer adds beyond word identity. The **expected layer** (Tenney's centre of gravity) is the "
        "mean layer weighted by each layer's gain in accuracy: where the task gets solved.")
    n_probe = min(n_segments, PROBE_SEGMENTS)
    st.caption(f"Probes use the words of {n_probe} of the held-out segments (a quarter of them for testing): "
               f"{4 * (lm.config.num_hidden_layers + 1)} logistic regressions (part of speech and dependency label, "
               "each with its control task, per layer) take seconds to a minute beyond that on a first visit.")
    res = heldout.probes_cached(key, n_probe, lm) or _parsed(
        lambda progress: heldout.probes(key, n_probe, lm, progress=progress),
        "Parsing, running the model and fitting the probes ...", "Fitting probes (layers)", "Cannot fit the probes")
    if res is None:
        return
    widgets.plotly_chart(syntax_figs.probe_figure(res), key="find_probes")
    rows = [{"task": t, "labels": r.n_labels, "train / test words": f"{r.n_train} / {r.n_test}",
             "majority class": r.majority, "embeddings (layer 0)": r.accuracy[0],
             "best layer": int(r.accuracy.argmax()),
             "best accuracy": float(r.accuracy.max()), "selectivity there": float(r.selectivity[r.accuracy.argmax()]),
             "expected layer": r.expected_layer} for t, r in res.items()]
    pct = st.column_config.NumberColumn(format="percent")
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="find_probe_table",
                 column_config={"majority class": pct, "embeddings (layer 0)": pct, "best accuracy": pct,
                                "selectivity there": pct,
                                "expected layer": st.column_config.NumberColumn(format="%.2f")})
    st.caption("Tenney et al. 2019 probe bert-large on OntoNotes and find the 'classical pipeline' order: part of "
               "speech is solved earliest, dependencies a little later. Their exact expected layers (and Hewitt & "
               "Liang's ELMo numbers) are not typed here: they were not re-read from the papers offline, and the "
               "model, text and parser differ.")


def faithful_explanations() -> None:
    """Faithful explanations over a whole set: which explanation ranks the tokens that matter first."""
    from bertcore.analysis import shipped
    from bertcore.analysis.causal import faithfulness as faith
    from explorer.server import heavy
    from explorer.figures import mixing as mixing_figs

    st.markdown(
        "Explanations of a prediction disagree, so which one to believe? Here each method ranks the words of a "
        "sentence for the model's guess at a `[MASK]`, and the ranking is compared (Spearman's rank correlation, "
        "magnitudes) with what really happens when a word is removed: replaced by `[MASK]` (**occlusion**), or "
        "its value vectors zeroed in every layer at once (**value zeroing**). The Masking page shows the same "
        "table for your own sentence.")
    if not lm.has_mlm_head:
        st.info("This model has no MLM head: there is no [MASK] prediction to explain. Pick MiniLM-MLM in the "
                "sidebar.", icon=":material/info:")
        return
    n = int(st.select_slider("Sentences", [10, 25, 50, 100, 200], value=200, key="find_faith_n",
                             help="Held-out State of the Union sentences (the shipped model never trained on "
                                  "them), one random word masked in each."))
    comp = shipped.faithfulness(lm, n)
    result = shipped.shipped(lm, comp) or st.session_state.get(f"find_faith:{key}:{n}")
    if result is None:
        st.caption(f"Not shipped beside this model: computed on request, about 1-2 seconds a sentence on a 2-core "
                   f"CPU ({n} sentences: {n // 60 + 1}-{n // 30 + 1} minutes), six explanations and two removals "
                   "per sentence.")
        if not st.button(f"Compute it on {n} sentences", key="find_faith_go", type="primary",
                         icon=":material/play_arrow:"):
            return
        result = heavy.run_with_status(("faithfulness-set", key, n),
                                       lambda progress: comp.compute(lambda i, total: progress(i / max(total, 1))),
                                       f"the faithfulness of six explanations on {n} sentences")
        st.session_state[f"find_faith:{key}:{n}"] = result
    corr = np.asarray(result["correlations"])
    with np.errstate(all="ignore"):
        means = np.nanmean(corr, axis=0) if len(corr) else np.full((len(faith.METHODS), len(faith.EFFECTS)), np.nan)
    widgets.plotly_chart(mixing_figs.faithfulness_figure(list(faith.METHODS.values()), means,
                                                         list(faith.EFFECTS.values()), faith.PUBLISHED, len(corr)),
                         key="find_faith_fig")
    st.dataframe(pd.DataFrame(means, index=pd.Index(list(faith.METHODS.values()), name="method"),
                              columns=list(faith.EFFECTS.values())), key="find_faith_table",
                 column_config={c: st.column_config.NumberColumn(format="%.2f") for c in faith.EFFECTS.values()})
    st.caption("Published (grey): " + ", ".join(f"{k} {v:+.2f}" for k, v in faith.PUBLISHED.items())
               + " (Ferrando et al. 2022, section 5). Where the settings differ: " + faith.PUBLISHED_SETTING)


# lazy tabs: only the open one runs and draws (one or two charts per rerun instead of seven)
SECTIONS = {"Special tokens": special_tokens, "Previous / next token": offsets, "Entropy": entropy,
            "Pattern types": patterns, "Contextuality": contextuality, "Positions": positions,
            "Syntax heads": syntax_heads, "Probing classifiers": probing,
            "Faithful explanations": faithful_explanations}
for tab, draw in zip(st.tabs(list(SECTIONS), key="find_tab", on_change="rerun"), SECTIONS.values()):
    if tab.open:
        with tab:
            draw()
