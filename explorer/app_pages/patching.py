"""Activation patching: which activations cause a prediction (clean vs corrupted input, one site at a time).

Widgets -> ``bertcore.analysis.causal.patching`` -> ``explorer.figures.patching``. Session-state keys start with
``pat_``.
"""

from __future__ import annotations

import streamlit as st

from bertcore.analysis.causal import patching as P
from bertcore.readouts.fill_mask import mask_token_positions
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError, encode
from explorer import as_code, resources, widgets
from explorer.server import heavy
from explorer.server import share
from explorer.as_code import more
from explorer.figures import patching as figs

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
    e_clean = encode(tok, clean_text, max_length=min(lm.max_length, 64))
    e_corr = encode(tok, corrupt_text, max_length=min(lm.max_length, 64))
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if e_clean.num_truncated or e_corr.num_truncated:
    st.warning("Patching runs one forward per site: inputs are limited to 64 tokens here. Shorten the text.",
               icon=":material/content_cut:")
    st.stop()
masks = mask_token_positions(tok, e_clean.tensors()["input_ids"])
ids = [tok.convert_tokens_to_ids(t) for t in (good, bad)]
problems = []
if len(masks) != 1:
    problems.append(f"the clean input needs exactly one {tok.mask_token} (it has {len(masks)})")
if any(i is None or i == tok.unk_token_id for i in ids):
    problems.append("tokens A and B must each be one WordPiece of the vocabulary")
if good == bad:
    problems.append("tokens A and B must differ")
if len(e_clean) != len(e_corr):
    longer, shorter = ("clean", "corrupted") if len(e_clean) > len(e_corr) else ("corrupted", "clean")
    n = abs(len(e_clean) - len(e_corr))
    st.warning(f"The {longer} input has {n} token(s) more than the {shorter} one: patching copies activations "
               "position by position, so both must have the same length.", icon=":material/straighten:")

    def _pad() -> None:
        key = "pat_corrupt" if shorter == "corrupted" else "pat_clean"
        st.session_state[key] = st.session_state[key].rstrip() + " ." * n

    st.button(f"Pad the {shorter} input with {n} '.'", key="pat_pad", on_click=_pad, icon=":material/add:",
              help="A full stop is a neutral filler at the end of a sentence; or reword one input.")
    st.stop()
if problems:
    text = "; ".join(problems)
    st.warning(text[0].upper() + text[1:] + ".", icon=":material/edit_note:")
    st.stop()
if not kinds:
    st.info("Pick at least one kind of site.", icon=":material/info:")
    st.stop()

metric = P.logit_diff(masks[0], ids[0], ids[1])
run_key = (resources.source_key(lm.source), clean_text, corrupt_text, good, bad, tuple(kinds))
stored = st.session_state.get("pat_result")
if stored is None or stored[0] != run_key:
    try:  # one scan per inputs for the whole server, queued beside other heavy jobs (explorer/server/heavy.py)
        result = heavy.run_with_status(("patching", *run_key), lambda progress: P.scan(
            lm.model, e_clean.tensors(), e_corr.tensors(), metric, kinds=kinds,
            progress=lambda i, n: progress(i / n)), "the patching scan")
    except P.PatchingError as exc:
        st.warning(widgets.escape_md(str(exc)), icon=":material/warning:")
        st.stop()
    st.session_state["pat_result"] = (run_key, result)
else:
    result = stored[1]

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
labels = [a if a == b else f"{a} / {b}" for a, b in zip(e_clean.tokens, e_corr.tokens)]
for kind in kinds:
    widgets.plotly_chart(figs.effect_heatmap(result.effects[kind], kind, None if kind == "head" else labels),
                         key=f"pat_{kind}")
st.caption("Columns are positions (clean / corrupted token where they differ). A value above 1 or below 0 means "
           "the single patch overshoots or pushes the other way; effects of different sites need not add up.")
as_code.expander("patching", "Activation patching",
                 more.patching(lm.source, clean_text, corrupt_text, good, bad, list(kinds), min(lm.max_length, 64)),
                 {"clean": result.clean, "corrupted": result.corrupted, **result.effects})
