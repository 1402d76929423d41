"""What if I change one word? The shared what-if input and views of the pages: a "Compare with an edited
input" toggle, a second text box B (prefilled with A), one-click edits of B, and the views of A and B side by side
with their difference (:mod:`bertcore.analysis.representations.whatif`, figures in
:mod:`explorer.figures.whatif`).

Session keys (page prefix ``p``): ``p_whatif`` (the toggle) and ``p_whatif_b`` (B's text), both kept in the URL;
``p_wi_*`` for the edit buttons and the word picker.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from bertcore.analysis.representations import edits as edits_mod
from bertcore.analysis.representations import whatif as whatif_mod
from bertcore.modeling.embeddings import InputError
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.loading.sources import LoadedModel
from bertcore.tokenization.tokenizer import TextError, check_text
from explorer import as_code, widgets
from explorer.server import share
from explorer.figures import masking as mask_figures
from explorer.figures import whatif as wi_figures
from explorer.views import whatif as wi_views
from explorer.views.code import snippet

TOGGLE = "Compare with an edited input (what if?)"
MAX_MASKS = 4  # paired [MASK]s drawn (each is two bar panels and a Δ chart)


def keys(prefix: str) -> tuple[str, str]:
    """The session keys of the toggle and of B's text."""
    return f"{prefix}_whatif", f"{prefix}_whatif_b"


def _set(key: str, value: str) -> None:
    st.session_state[key] = value


def input_b(prefix: str, text: str, lm: LoadedModel, text_pair: str | None = None,
                 label: str = "Input B: the edited text (A is the text above)") -> str | None:
    """The what-if toggle and, when it is on, box B (prefilled with ``text``) and its one-click edits.

    Returns B's text (raw, possibly empty: :func:`views` says so), or None while the toggle is off.
    """
    on_key, b_key = keys(prefix)
    share.shareable({on_key: share.boolean, b_key: share.text})
    if not st.toggle(TOGGLE, key=on_key, persist_state="session",
                     help="Type a second version B of the text (or click an edit below) and see how the model's "
                          "view changes: predictions, each token's vector and each head's attention, A beside B."):
        return None
    if st.session_state.get(b_key) is None:
        st.session_state[b_key] = text
    b = st.text_area(label, key=b_key, height=80,
                     persist_state="session") or ""
    edit_buttons(prefix, b_key, b, lm, text_pair, reset_to=text)
    return b


def edit_buttons(prefix: str, b_key: str, b: str, lm: LoadedModel, text_pair: str | None = None,
                 reset_to: str | None = None, where: str = "box B") -> None:
    """One-click edits of the text ``b`` held in the session key ``b_key``: other number, other tense, not, and the
    model's own guesses for a word (a model with an MLM head); ``reset_to``: a "Reset B to A" button."""
    def reset() -> None:
        if reset_to is not None:
            st.button("Reset B to A", key=f"{prefix}_wi_reset", on_click=_set, args=(b_key, reset_to),
                      icon=":material/undo:", type="tertiary")

    try:
        spans = wi_views.words(lm.source, b)
    except TextError:
        reset()
        return
    found = wi_views.grammatical_edits(b)
    st.caption(f"**One-click edits** (each click edits the text in {where}, so edits add up): another number "
               "(inflect), another tense (present ↔ past), *not*, or a word the model itself proposes.")
    with st.container(horizontal=True):
        for i, edit in enumerate(found or []):
            st.button(edit.label, key=f"{prefix}_wi_e{i}", on_click=_set, args=(b_key, edit.text),
                      help=f"{edits_mod.KINDS[edit.kind]}: {edit.text}")
        reset()
    if found is None:
        st.caption("spaCy is not installed, so only the model's own guesses are offered.")
    if not lm.has_mlm_head:
        return
    word_key = f"{prefix}_wi_word"
    names = [f"{i + 1}: {w}" for i, (_, _, w) in enumerate(spans)]
    chosen = str(st.session_state.get(word_key, "")).partition(":")[0]
    index = int(chosen) - 1 if chosen.isdigit() and 0 < int(chosen) <= len(names) else 0
    st.session_state[word_key] = names[index]  # the same position in a new B (its word may have changed)
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    word = names.index(c1.selectbox("Replace a word with the model's guess", names, key=word_key,
                                    help="The word becomes [MASK]; the buttons are the model's most probable "
                                         "whole words there."))
    try:
        guesses = wi_views.model_edits(lm.source, b, int(word), text_pair)
    except (TextError, InputError, FillMaskError) as exc:
        widgets.show_error(exc)
        return
    with c2.container(horizontal=True):
        for i, edit in enumerate(guesses):
            st.button(edit.label, key=f"{prefix}_wi_m{i}", on_click=_set, args=(b_key, edit.text),
                      help=edit.text)


# ----------------------------------------------------------------------------- views
def diff_markdown(result: whatif_mod.WhatIf) -> tuple[str, str]:
    """A's and B's WordPieces as Markdown, tokens without a partner or replaced highlighted (red in A, green in B)."""
    ta, tb = result.act_a.tokens, result.act_b.tokens
    lines = []
    for tokens, side in ((ta, 0), (tb, 1)):
        parts = []
        for tag, a0, a1, b0, b1 in result.alignment.opcodes:
            lo, hi = (a0, a1) if side == 0 else (b0, b1)
            for tok in tokens[lo:hi]:
                shown = widgets.escape_md(tok)
                parts.append(shown if tag == "equal" else
                             f":{'red' if side == 0 else 'green'}-background[{shown}]")
        lines.append(" ".join(parts))
    return lines[0], lines[1]


def views(lm: LoadedModel, prefix: str, text_a: str, text_b: str, text_pair: str | None = None,
          fill_mask: bool = True, head: tuple[int, int] | None = None,
          prepare: Callable[[str], str] | None = None, first: str | None = None) -> whatif_mod.WhatIf | None:
    """The what-if views of A and B: the token diff, fill-mask top-k and Δ probability (``fill_mask``), each aligned
    token's hidden-state cosine per layer, each head's Jensen-Shannon distance, and, with ``head = (layer, head)``
    (0-based block and head, as :func:`explorer.widgets.layer_picker` / ``head_picker`` return them), that head's
    attention on A and on B. ``prepare`` rewrites both texts (and the pair) first (the
    Masking page spells ``[mask]`` as ``[MASK]``). ``first``: the edited texts are the second sentences of two
    pairs that both start with ``first`` (the Next sentence page edits sentence B). Bad input gives a message
    (never a traceback) and None; a bad A gives none here (the page says what is wrong with A)."""
    st.subheader("What if: A and B side by side")
    try:
        check_text(text_a)
    except TextError:
        return None
    try:
        check_text(text_b, "edited text B")
    except TextError as exc:
        widgets.show_error(exc)
        return None
    if prepare is not None:
        text_a, text_b = prepare(text_a), prepare(text_b)
        text_pair = None if text_pair is None else prepare(text_pair)
    inputs = (text_a, text_b, text_pair, text_pair) if first is None else (first, first, text_a, text_b)
    try:
        args = (lm.source, inputs[0], inputs[1], inputs[2], inputs[3])  # text_a, text_b, pair_a, pair_b
        result = wi_views.compare(*args)
    except (TextError, InputError) as exc:
        widgets.show_error(exc, "What if")
        return None
    enc_b = result.act_b.encoding
    if enc_b.num_truncated:
        widgets.truncation_notice(len(enc_b) + enc_b.num_truncated, lm.max_length, "That is input B.")
    a_line, b_line = diff_markdown(result)
    st.markdown(f"**A:** {a_line}\n\n**B:** {b_line}")
    n, only = len(result.alignment), len(result.alignment.only_a) + len(result.alignment.only_b)
    st.caption(f"{n} WordPieces are paired (difflib's SequenceMatcher; a replaced piece is paired with its "
               f"replacement when both sides have as many); {only} exist in one input only (highlighted).")
    as_code.expander(f"{prefix}_whatif", "What if", snippet("What if: A and B side by side", wi_views.compare, args,
                                                            draw=[(wi_views.cosine_figure, {}),
                                                                  (wi_views.js_figure, {})]), result)
    if result.identical:
        st.info("B is the same as A, so every difference below is exactly zero. Edit B (or click an edit above) to "
                "see what changes.", icon=":material/compare_arrows:")
    if fill_mask:
        _fill_mask_view(prefix, result)
    if n == 0:
        st.info("A and B share no WordPiece, so there is nothing to compare token by token.", icon=":material/info:")
        return result
    st.markdown("**Each token's vector, layer by layer.** The cosine similarity of a token's hidden state in A "
                "and in B (1 = the same direction). Tokens you did not edit still move, because every layer mixes "
                "in the context: watch how far the edit spreads, and in which layers.")
    widgets.plotly_chart(wi_views.cosine_figure(result), key=f"{prefix}_wi_cos")
    labels = [f"{i}:{lab}" for i, lab in enumerate(result.labels())]
    widgets.download_csv(pd.DataFrame(result.cosine.T, index=pd.Index(labels, name="aligned token"),
                                      columns=["emb"] + [f"layer {i}" for i in range(1, len(result.cosine))]),
                         f"{prefix}_whatif_cosine", key=f"{prefix}_wi_cos_csv")
    st.markdown("**Each head's attention.** The Jensen-Shannon distance (0 = the same, 1 = nothing in common) "
                "between a token's attention in A and in B, averaged over the paired tokens. Rows are compared over "
                "the paired tokens only: attention to a word that exists in one input is left out and the rest "
                "rescaled to sum to 1.")
    widgets.plotly_chart(wi_views.js_figure(result), key=f"{prefix}_wi_js")
    dropped = float(max(result.dropped_a.max(), result.dropped_b.max()))
    if dropped > 0:
        st.caption(f"Left out: at most {dropped:.0%} of a head's attention (mean over the paired tokens) went to "
                   "unpaired tokens.")
    if head is not None:
        layer, h = head
        st.markdown(f"**Layer {widgets.layer_number(layer)}, head {widgets.head_number(h)} on A and on B** (rows: the "
                    "token that looks; columns: the token looked at).")
        widgets.plotly_chart(wi_views.head_figure(result, layer, h), key=f"{prefix}_wi_head")
    return result


def _fill_mask_view(prefix: str, result: whatif_mod.WhatIf) -> None:
    st.markdown("**The model's guesses at [MASK].** The top guesses in A and in B, then how much each word's "
                "probability changed from A to B (green: more likely in B).")
    if result.masks is None:
        st.caption("This model has no MLM head, so it makes no guesses at [MASK]; the vectors and attention below "
                   "still compare.")
        return
    if not result.masks:
        st.info("Type [MASK] in both A and B (e.g. *The keys to the cabinet [MASK] on the table.*) to compare the "
                "model's guesses.", icon=":material/info:")
        return
    if result.unpaired_masks:
        st.caption(f"A and B hold different numbers of [MASK]: the first of each are paired in order, "
                   f"{result.unpaired_masks} left out.")
    for i, m in enumerate(result.masks[:MAX_MASKS]):
        c1, c2 = st.columns([3, 2])
        widgets.plotly_chart(mask_figures.topk_figure(
            [f"A · [MASK] at {m.position_a}", f"B · [MASK] at {m.position_b}"], [m.top_a, m.top_b],
            [m.probs_a, m.probs_b], [None, None], cols=2), key=f"{prefix}_wi_topk{i}", where=c1)
        widgets.plotly_chart(wi_figures.mask_delta(m.candidates, m.p_a, m.p_b, "Δ probability, B − A"),
                             key=f"{prefix}_wi_delta{i}", where=c2)
    if len(result.masks) > MAX_MASKS:
        st.caption(f"The first {MAX_MASKS} of {len(result.masks)} paired [MASK]s are drawn.")
    rows = [{"[MASK] in A": m.position_a, "[MASK] in B": m.position_b, "word": w, "p(A)": pa, "p(B)": pb,
             "Δ": pb - pa} for m in result.masks for w, pa, pb in zip(m.candidates, m.p_a, m.p_b)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"{prefix}_wi_table",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in ("p(A)", "p(B)", "Δ")})


def section(lm: LoadedModel, prefix: str, text_a: str, text_pair: str | None = None, fill_mask: bool = True,
            head: tuple[int, int] | None = None,
            prepare: Callable[[str], str] | None = None) -> whatif_mod.WhatIf | None:
    """:func:`input_b` then, when on, :func:`views` in a bordered box: the one call a page makes."""
    text_b = input_b(prefix, text_a, lm, text_pair)
    if text_b is None:
        return None
    with st.container(border=True):
        return views(lm, prefix, text_a, text_b, text_pair, fill_mask=fill_mask, head=head, prepare=prepare)
