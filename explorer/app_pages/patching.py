"""Activation patching: which activations cause a prediction (clean vs corrupted input, one site at a time).

Widgets -> ``explorer.views.patching`` (``bertcore.analysis.causal.patching``) -> ``explorer.figures.patching``.
Session-state keys start with ``pat_``.
"""

from __future__ import annotations

import streamlit as st

from bertcore.analysis.causal import patching as P
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.server import heavy
from explorer.server import share
from explorer.views import patching as views
from explorer.views.code import snippet

CLEAN = "The keys to the cabinet [MASK] on the table."
CORRUPT = "The key to the cabinet [MASK] on the table."
KIND_LABELS = {"resid": "Residual stream", "attn": "Attention output", "mlp": "Feed-forward output",
               "head": "Heads"}

st.title("Activation patching")
st.markdown(
    """
Attention maps and attribution show what a model *looks at*; patching asks what *causes* its answer
(Meng et al. 2022, causal tracing; Wang et al. 2023; Heimersheim & Nanda 2024). Run a **clean** input and a
**corrupted** one that differs in a word, and measure something the difference changes: here the logit of one
token minus another at a `[MASK]` (*are* - *is* after *keys* vs *key*). Then rerun the corrupted input with
**one activation copied from the clean run** and see how much of the clean answer comes back: 0 = nothing
(the corrupted run), 1 = all of it. Where a single position of the residual stream restores everything, the
information sits there at that layer; the attention and feed-forward outputs and the heads show which
component moved it.
"""
)

lm = widgets.current_model()
if not lm.has_mlm_head:
    st.info(f"**{widgets.escape_md(lm.source.name)} has no MLM head**: the metric here is a logit difference at a "
            "[MASK]. The packaged MiniLM-MLM has one.", icon=":material/block:")
    st.button("Use the packaged MiniLM-MLM", key="pat_switch", type="primary", on_click=widgets.use_source,
              args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
    st.stop()
tok = lm.tokenizer
share.shareable({"pat_clean": share.text, "pat_corrupt": share.text, "pat_good": share.text, "pat_bad": share.text})

c1, c2 = st.columns(2)
clean_text = c1.text_input("Clean input (with one [MASK])", CLEAN, key="pat_clean")
corrupt_text = c2.text_input("Corrupted input (same length)", CORRUPT, key="pat_corrupt")
c1, c2, c3 = st.columns([2, 2, 3])
good = c1.text_input("Token A (the clean answer)", "are", key="pat_good").strip().lower()
bad = c2.text_input("Token B", "is", key="pat_bad").strip().lower()
kinds = c3.multiselect("Sites", list(KIND_LABELS), default=list(KIND_LABELS), format_func=KIND_LABELS.__getitem__,
                       key="pat_kinds")

try:
    pair = views.pair(lm.source, clean_text, corrupt_text, good, bad)  # the checks: one [MASK], same length ...
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if pair.truncated:
    st.warning(f"Patching runs one forward per site: inputs are limited to {views.MAX_TOKENS} tokens here. Shorten "
               "the text.", icon=":material/content_cut:")
    st.stop()
if pair.gap:
    longer, shorter, n = pair.longer, pair.shorter, pair.gap
    st.warning(f"The {longer} input has {n} token(s) more than the {shorter} one: patching copies activations "
               "position by position, so both must have the same length.", icon=":material/straighten:")

    def _pad() -> None:
        key = "pat_corrupt" if shorter == "corrupted" else "pat_clean"
        st.session_state[key] = st.session_state[key].rstrip() + " ." * n

    st.button(f"Pad the {shorter} input with {n} '.'", key="pat_pad", on_click=_pad, icon=":material/add:",
              help="A full stop is a neutral filler at the end of a sentence; or reword one input.")
    st.stop()
if pair.problems:
    text = "; ".join(pair.problems)
    st.warning(text[0].upper() + text[1:] + ".", icon=":material/edit_note:")
    st.stop()
if not kinds:
    st.info("Pick at least one kind of site.", icon=":material/info:")
    st.stop()

args = (lm.source, clean_text, corrupt_text, good, bad, tuple(kinds))
try:  # one scan per inputs for the whole server, queued beside other heavy jobs (explorer/server/heavy.py)
    result = heavy.run_view(views.scan, "the patching scan", *args)
except P.PatchingError as exc:
    st.warning(widgets.escape_md(str(exc)), icon=":material/warning:")
    st.stop()

m = st.columns(3)
m[0].metric(f"Clean: logit({good}) - logit({bad})", f"{result.clean:+.3f}")
m[1].metric(f"Corrupted: logit({good}) - logit({bad})", f"{result.corrupted:+.3f}")
m[2].metric("Difference to explain", f"{result.clean - result.corrupted:+.3f}")
clean_pick, corrupt_pick = (good if result.clean > 0 else bad), (good if result.corrupted > 0 else bad)
if result.clean > 0 and result.corrupted < 0:
    st.success(f"The model gets this pair right: it prefers **{good}** on the clean input and **{bad}** on the "
               "corrupted one, so the grids below show how it reaches a right answer.", icon=":material/check:")
else:
    verdict = lambda pick, want: "right" if pick == want else f"wrong: {want} expected"  # noqa: E731
    st.warning(f"The model prefers **{clean_pick}** on the clean input ({verdict(clean_pick, good)}) and "
               f"**{corrupt_pick}** on the corrupted one ({verdict(corrupt_pick, bad)}): the grids below explain how "
               "it reaches a *wrong* answer. Try a pair it gets right to see the mechanism of the right one.",
               icon=":material/warning:")
for kind in kinds:
    widgets.plotly_chart(views.heatmap_figure(result, kind), key=f"pat_{kind}")
st.caption("Columns are positions (clean / corrupted token where they differ). A value above 1 or below 0 means "
           "the single patch overshoots or pushes the other way; effects of different sites need not add up.")
as_code.expander("patching", "Activation patching",
                 snippet("Activation patching", views.scan, args,
                         draw=[(views.heatmap_figure, {"kind": kind}) for kind in kinds]), result)
