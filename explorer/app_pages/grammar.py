"""Grammar: which of two sentences the model prefers (pseudo-log-likelihood), and a minimal-pair suite.

Widgets -> ``bertcore.analysis.grammar.scoring`` / ``bertcore.analysis.grammar.minimal_pairs`` ->
``explorer.figures.grammar``.
Session-state keys start with ``gram_``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertcore.analysis import shipped
from bertcore.analysis.grammar.scoring import PLL_METRICS
from bertcore.loading.sources import PACKAGED_MLM
from explorer import as_code, widgets
from explorer.server import heavy
from explorer.server import share
from explorer import whatif
from explorer.views import grammar as views
from explorer.views.code import snippet
from explorer.views.core import source_key

GOOD = "The keys to the cabinet are on the table."
BAD = "The keys to the cabinet is on the table."
METRIC_LABELS = {"within_word_l2r": "within-word left-to-right (Kauf & Ivanova 2023)",
                 "original": "original (Salazar et al. 2020)"}

st.title("Grammar")
st.markdown(
    """
Does the model know grammar? A masked LM has no left-to-right probability of a sentence, but it can
**score** one: hide each token in turn and add up the log-probabilities it gives the real token
(the *pseudo-log-likelihood*, PLL; Salazar et al. 2020). Of two sentences that differ in one word, a
model that knows the rule should give the grammatical one the higher PLL. Marvin & Linzen (2018) and
BLiMP (Warstadt et al. 2020) test models this way with *minimal pairs*; Goldberg (2019) asks the
model directly: with `[MASK]` at the verb, is *are* more likely than *is*?
"""
)

lm = widgets.current_model()
if not lm.has_mlm_head:
    st.info(f"**{widgets.escape_md(lm.source.name)} has no MLM head**, so it cannot score sentences: PLL needs the "
            "probability of each hidden token. The packaged **MiniLM-MLM** (the same encoder with a masked-LM "
            "head) can, and so can a checkpoint of a pretraining run.", icon=":material/block:")
    st.button("Use the packaged MiniLM-MLM", key="gram_switch", type="primary", on_click=widgets.use_source,
              args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
    st.stop()

share.shareable({"gram_a": share.text, "gram_b": share.text, "gram_whatif": share.boolean})
key = source_key(lm.source)
metric = st.radio("Scoring", PLL_METRICS, index=PLL_METRICS.index(shipped.GRAMMAR_METRIC), key="gram_metric",
                  format_func=METRIC_LABELS.__getitem__,
                  horizontal=True, help="Within-word left-to-right also hides the later pieces of a word split "
                  "into several WordPieces, so the model cannot read a word's end to guess its start. The two "
                  "differ only for such words.")

# ----------------------------------------------------------------------------- two sentences
st.subheader("Which sentence does the model prefer?")
c1, c2 = st.columns(2)
a = c1.text_area("Sentence 1", GOOD, key="gram_a", height=80)
b = c2.text_area("Sentence 2", BAD, key="gram_b", height=80)
args = (lm.source, a, b, metric)
pref = views.preference(*args)
for label, why in pref.errors.items():
    st.warning(f"{label}: {widgets.escape_md(why)}", icon=":material/warning:")
scores = list(zip(pref.labels, pref.scores))
if len(scores) == 2:
    (_, s1), (_, s2) = scores
    better, worse = (1, 2) if s1.pll >= s2.pll else (2, 1)
    diff = abs(s1.pll - s2.pll)
    st.success(f"The model prefers **sentence {better}** by {diff:.2f} nats of PLL "
               f"(about {min(diff, 700) / 2.302585:.1f} orders of magnitude in pseudo-likelihood). Per token: "
               f"{s1.mean:.2f} vs {s2.mean:.2f} nats; sentences of different lengths compare better per token.",
               icon=":material/balance:")
    if (a, b) == (GOOD, BAD):  # the default pair: we know which one is grammatical
        if better == 1:
            st.info("Sentence 1 is the grammatical one (the verb agrees with its subject, not with the nearer noun "
                    "between them): **the model gets this pair right**.", icon=":material/check:")
        else:
            st.warning("Sentence 1 is the grammatical one (the verb agrees with its subject, not with the nearer noun "
                       "between them): **the model gets this pair wrong**; it agrees with the nearer noun, as small "
                       "models often do (the suite below measures how often).", icon=":material/warning:")
if scores:
    st.caption("Each bar is one WordPiece's log-probability when it alone (with the rest of its word, in the "
               "within-word scoring) is hidden. Where the two sentences differ, the bars show which word the "
               "model finds surprising; small bars elsewhere show the difference spreading to the neighbours.")
    widgets.plotly_chart(views.contributions_figure(pref), key="gram_contrib")
if len(scores) == 2:
    as_code.expander("grammar", "Grammar", snippet("Grammar: which sentence does the model prefer?",
                                                   views.preference, args,
                                                   draw=[(views.contributions_figure, {})]), pref)
if st.toggle("Compare the two sentences token by token (what if?)", key="gram_whatif", persist_state="session",
             help="Sentence 1 as input A, sentence 2 as input B: each token's vector and each head's attention, "
                  "side by side, and one-click edits of sentence 2."):
    whatif.edit_buttons("gram", "gram_b", b or "", lm, where="sentence 2")
    with st.container(border=True):
        whatif.views(lm, "gram", a or "", b or "", fill_mask=False)

# ----------------------------------------------------------------------------- the suite
st.subheader("A minimal-pair suite")
st.markdown("Pairs generated from word lists (fixed seed) after Marvin & Linzen 2018 and BLiMP: subject-verb "
            "agreement (simple, across a prepositional phrase or a relative clause whose noun has the other "
            "number, inside a sentential complement, irregular plurals), reflexive number, determiner-noun number "
            "and a negative polarity item. A pair counts when the grammatical sentence scores higher; the red bar "
            "asks the same with `[MASK]` at the word where the two differ. 50% is chance.")
c1, c2 = st.columns([2, 1])
n_pairs = c1.slider("Pairs per paradigm", 10, 200, shipped.GRAMMAR_PAIRS, 10, key="gram_n",
                    help="More pairs give steadier shares and take longer (two PLLs per pair).")
run = c2.button("Run the suite", key="gram_run", type="primary", icon=":material/play_arrow:")
stored = st.session_state.get("gram_results")
if run:
    # queued beside other heavy jobs; a class that runs the same suite on the same model scores it once
    results = heavy.run_view(views.suite, "the suite", lm.source, n_pairs, metric)
    stored = {"key": key, "metric": metric, "n": n_pairs, "results": results}
    st.session_state["gram_results"] = stored
elif not stored or (stored["key"], stored["metric"], stored["n"]) != (key, metric, n_pairs):
    found = views.shipped_suite(lm.source, n_pairs, metric)  # as shipped beside the model: shown without a click
    if found is not None:
        stored = {"key": key, "metric": metric, "n": n_pairs, "results": found, "shipped": True}
if stored and stored.get("shipped"):
    st.caption("Computed when this model was shipped (the same pairs, metric and weights); **Run the suite** "
               "recomputes it here.")
if stored and (stored["key"], stored["metric"]) != (key, metric):
    st.caption("The results below are of another model or scoring: run the suite again.")
    stored = None
if stored:
    results = stored["results"]
    widgets.plotly_chart(views.suite_figure(results), key="gram_suite")
    failing = [r for r in results if not r.pll_correct]
    st.markdown(f"**{len(failing)} of {len(results)} pairs** where the ungrammatical sentence scored higher.")
    if failing:
        table = pd.DataFrame([{"paradigm": r.pair.paradigm, "grammatical": r.pair.good, "ungrammatical": r.pair.bad,
                               "PLL difference": round(r.pll_good - r.pll_bad, 3)} for r in failing])
        st.dataframe(table, hide_index=True, width="stretch")
        options = list(range(len(failing)))
        pick = st.selectbox("Look inside a failing pair", options, key="gram_pick",
                            format_func=lambda i: f"{failing[i].pair.good}  /  {failing[i].pair.bad}")
        chosen = failing[pick].pair

        def open_in(page: str, state: dict) -> None:
            st.session_state.update(state)
            st.session_state["gram_goto"] = page

        c1, c2, c3, c4 = st.columns(4)
        c1.button("Score this pair above", key="gram_use", on_click=open_in, icon=":material/arrow_upward:",
                  args=("", {"gram_a": chosen.good, "gram_b": chosen.bad}))
        c2.button("Open in Attention", key="gram_att", icon=":material/grid_on:", on_click=open_in,
                  args=("explorer/app_pages/attention.py", {"att_text": chosen.bad, "att_pair_on": False}))
        if chosen.critical:
            c3.button("Open the [MASK] in Masking", key="gram_msk", icon=":material/visibility_off:",
                      on_click=open_in, args=("explorer/app_pages/masking.py",
                                              {"msk_text": chosen.critical[0], "msk_pair_on": False}))
            c4.button("Explain the [MASK] in Attribution", key="gram_attr", icon=":material/troubleshoot:",
                      on_click=open_in, args=("explorer/app_pages/attribution.py",
                                              {"attr_mlm_text": chosen.critical[0], "attr_kind": "fill_mask"}),
                      help="Which input tokens push the model toward its guess at the critical word "
                           "(integrated gradients).")
        widgets.download_csv(table, "grammar-failing-pairs", key="gram_csv", index=False)
goto = st.session_state.pop("gram_goto", None)
if goto:
    st.switch_page(goto)
