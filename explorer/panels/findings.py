"""The Findings page's tabs: each measure's chart, the syntax heads and the attention-only probe, the probing
classifiers, and the faithfulness of explanations over a set (:mod:`explorer.views.findings`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis.causal import faithfulness as faith
from bertcore.analysis.papers import evalset, published
from bertcore.analysis.papers import findings as F
from bertcore.analysis.representations import syntax
from bertcore.analysis.shipped import PROBE_SEGMENTS
from bertcore.loading.sources import LoadedModel
from explorer import widgets
from explorer.figures import findings as figs
from explorer.figures import mixing as mixing_figs
from explorer.figures import syntax as syntax_figs
from explorer.server import heavy
from explorer.views import findings as views


@dataclass
class Page:
    """What every tab reads: the model, the number of segments, the measures and the position regression."""

    lm: LoadedModel
    n_segments: int
    result: object
    regression: dict | None


def special_tokens(p: Page) -> None:
    result = p.result
    st.markdown("Clark et al. 2019 (section 3.2, Figure 2): how much of each head's attention goes to [CLS], to "
                "[SEP], and to periods and commas, averaged over every token. In bert-base, early heads look at "
                "[CLS], middle layers put over half their attention on [SEP] (a 'no-op' when a head has "
                "nothing to do), the last layers look at punctuation. A model trained differently can park its "
                "idle attention on another token "
                "that every input has, such as [CLS]: look for the layers where one token takes most of the attention.")
    widgets.plotly_chart(figs.token_attention_figure({"[CLS]": result.to_cls, "[SEP]": result.to_sep,
                                                      ". and ,": result.to_punct}), key="find_tokens")


def offsets(p: Page) -> None:
    result = p.result
    st.markdown("Clark et al. 2019 (section 3.1): the average attention each head puts on the previous and on the "
                "next token; cells above 50% are labelled. bert-base has 4 such previous-token heads and 5 "
                "next-token heads, mostly in the early layers.")
    widgets.plotly_chart(figs.head_grid_figure({"previous token": result.prev, "next token": result.next},
                                          threshold=F.POSITIONAL_MIN), key="find_offsets")


def entropy(p: Page) -> None:
    result = p.result
    mean_t = result.n_tokens / max(result.n_segments, 1)
    st.markdown("Clark et al. 2019 (section 3.3, Figure 4): the entropy of each head's attention, in nats. Low = "
                "focused on a few tokens; the dashed line is uniform attention over an average segment. "
                f"Broad heads put less than {F.BROAD_MAX:.0%} on any token on average.")
    widgets.plotly_chart(figs.entropy_figure(result.entropy, float(np.log(mean_t))), key="find_entropy")
    widgets.plotly_chart(figs.head_grid_figure({"[CLS] entropy (nats)": result.cls_entropy},
                                          zmax=float(np.log(mean_t)), colorbar="nats"), key="find_cls_entropy")


def patterns(p: Page) -> None:
    result = p.result
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


def contextuality(p: Page) -> None:
    result = p.result
    st.markdown("Ethayarajh 2019: *anisotropy* is the average cosine of two random words (0 in an isotropic space). "
                "*Self-similarity* is the average cosine of one word's vectors in different contexts, "
                "*intra-sentence similarity* the average cosine of a sentence's words to their mean; both minus "
                "the anisotropy, so 0 means 'no more similar than random words'. In bert-base, upper layers are "
                "more context-specific: adjusted self-similarity falls. Words are whole words (mean of their "
                f"WordPieces); {result.n_self_words} words seen in at least {evalset.MIN_CONTEXTS} segments. "
                "See also the **Word senses** page for one word across your own sentences.")
    widgets.plotly_chart(figs.contextuality_figure(result.anisotropy, result.self_similarity_adjusted,
                                              result.intra_similarity_adjusted), key="find_context")


def positions(p: Page) -> None:
    regression, lm = p.regression, p.lm
    if regression is None:
        st.info(f"This {lm.config.family} model has no learned position table (its positions are rotary, turned "
                "inside attention), so Wang & Chen's regression does not apply; the Positional embeddings page "
                "shows its rotary frequencies.", icon=":material/info:")
        return
    learned_mae, sinus_mae = regression["learned"]["mae"], regression["sinusoidal"]["mae"]
    st.markdown(f"Wang & Chen 2020 (Table 1): a linear regression from a position's vector to its index, 5-fold "
                f"cross-validated. This model's learned table: mean absolute error **{learned_mae:.1f}** positions; "
                f"a sinusoidal table of the same size: **{sinus_mae:.1f}**. A small error means absolute position "
                "is a linear read-out of the vector. The **Positional embeddings** page shows the tables.")
    widgets.plotly_chart(figs.position_regression_figure(
        {k: v["predictions"] for k, v in regression.items()}, {k: v["mae"] for k, v in regression.items()}),
        key="find_positions")


def _parsed(view, what: str, *args, failure: str):
    """``view(*args)`` through the heavy-job queue; None (with a message) without spaCy or on bad data."""
    try:
        return heavy.run_view(view, what, *args)
    except syntax.SyntaxUnavailable as exc:
        st.warning(widgets.escape_md(str(exc)), icon=":material/warning:")
    except ValueError as exc:
        widgets.show_error(exc, failure)
    return None


def syntax_heads(p: Page) -> None:
    st.markdown(
        "Clark et al. 2019 (section 4.2, Table 1, Figure 5): some heads follow syntax. The segments are parsed "
        "by spaCy's English model (`en_core_web_sm`, ClearNLP labels); attention is merged to words (the sum over "
        "a word's pieces as keys, the mean over them as queries), and a head *predicts* for each word the other "
        "word it attends to most ([CLS] and [SEP] left out). A head's accuracy on a relation is the share of arcs "
        "where the dependent's prediction is its head (dep→head) or, of the words attending to the dependent, its "
        "head attends most (head→dep; as Clark et al.'s code scores it), whichever is higher. The **fixed-offset "
        "baseline** always picks the word at the relation's most common relative position: a head is only "
        "interesting where it beats it.")
    run = _parsed(views.syntax_heads, "the syntax heads (parsing the segments and running the model)",
                  p.lm.source, p.n_segments, failure="Cannot score syntax heads")
    if run is None:
        return
    _syntax_views(p, run)


@st.fragment
def _syntax_views(p: Page, run) -> None:
    """One view at a time, switched without rerunning the page (a cached redraw near half a second on 2 cores):
    the table, every head, an example, the probe."""
    view = st.segmented_control("Show", list(SYNTAX_VIEWS), default=next(iter(SYNTAX_VIEWS)), required=True,
                                key="find_syntax_view")
    SYNTAX_VIEWS[view or next(iter(SYNTAX_VIEWS))](p, run)


def _syntax_table(p: Page, run) -> None:
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


def _syntax_heatmap(p: Page, run) -> None:
    res = run.heads
    grids = [np.maximum(res.dep_to_head[r], res.head_to_dep[r]) for r in res.relations]
    counts = [res.counts[r] for r in res.relations]
    widgets.plotly_chart(syntax_figs.relation_head_heatmap(res.relations, grids, counts), key="find_syntax_heatmap")


def _syntax_example(p: Page, run) -> None:
    rel = st.selectbox("An example of a relation, with its best head", run.heads.relations, key="find_syntax_rel")
    ex = views.syntax_example(p.lm.source, p.n_segments, rel)
    widgets.plotly_chart(syntax_figs.arc_figure(ex.words, ex.gold, ex.predicted, title=ex.title),
                         key="find_syntax_arcs")


def _syntax_probe(p: Page, run) -> None:
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


def probing(p: Page) -> None:
    lm, n_segments = p.lm, p.n_segments
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
    res = _parsed(views.probes, "the probes (parsing, running the model and fitting them)", lm.source, n_probe,
                  failure="Cannot fit the probes")
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


def faithful_explanations(p: Page) -> None:
    """Faithful explanations over a whole set: which explanation ranks the tokens that matter first."""
    lm = p.lm

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
    result = views.shipped_faithfulness(lm.source, n) or views.faithfulness.cached(lm.source, n)
    if result is None:
        st.caption(f"Not shipped beside this model: computed on request, about 1-2 seconds a sentence on a 2-core "
                   f"CPU ({n} sentences: {n // 60 + 1}-{n // 30 + 1} minutes), six explanations and two removals "
                   "per sentence.")
        if not st.button(f"Compute it on {n} sentences", key="find_faith_go", type="primary",
                         icon=":material/play_arrow:"):
            return
        result = heavy.run_view(views.faithfulness, f"the faithfulness of six explanations on {n} sentences",
                                lm.source, n)
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


def tabs(p: Page) -> None:
    """The Findings page's tabs (``find_tab``); only the open one computes and draws."""
    for tab, draw in zip(st.tabs(list(SECTIONS), key="find_tab", on_change="rerun"), SECTIONS.values()):
        if tab.open:
            with tab:
                draw(p)
