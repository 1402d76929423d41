"""The Attribution page's what-if section: input B's prediction and integrated-gradients scores beside input A's."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertcore.analysis.causal.attribution import AttributionError
from bertcore.analysis.representations import whatif
from bertcore.loading.sources import LoadedModel
from bertcore.modeling.embeddings import InputError
from bertcore.tokenization.tokenizer import TextError, check_text
from explorer import widgets
from explorer.figures import attribution as attr_figures
from explorer.server import heavy
from explorer.views import attribution as attr_views


def whatif_section(lm: LoadedModel, kind: str, res_a, text_a: str, text_b: str, other: str | None,
                      target: int | None, n_steps: int, per_word: bool) -> None:
    """The Attribution page's what-if: input B's prediction and integrated-gradients scores beside A's (``res_a``),
    for the same output (A's class, or A's guessed word at B's first [MASK]), and the change per aligned token."""
    st.subheader("What if: A and B side by side")
    try:
        check_text(text_b, "edited text B")
        position = None
        if kind == "fill_mask":
            masks = attr_views.masks(lm.source, text_b)
            if not masks:
                st.info("Type [MASK] in B too: the same word's probability is explained there.", icon=":material/info:")
                return
            position = masks[0]
        else:
            probs_a, probs_b = attr_views.class_probs(lm.source, text_a, other), attr_views.class_probs(lm.source,
                                                                                                        text_b, other)
            names = lm.config.id2label or {}
            st.dataframe(pd.DataFrame({"class": [str(names.get(c, c)) for c in range(len(probs_a))],
                                       "P in A": probs_a, "P in B": probs_b, "Δ": probs_b - probs_a}),
                         hide_index=True, key="attr_wi_classes",
                         column_config={c: st.column_config.NumberColumn(format="%.4f") for c in ("P in A", "P in B",
                                                                                                 "Δ")})
            target = int(probs_a.argmax()) if target is None else target
        res_b = heavy.run_view(attr_views.explain, "integrated gradients of B", lm.source, kind, text_b, other,
                               position, target, int(n_steps))
    except (TextError, InputError) as exc:
        widgets.show_error(exc)
        return
    except AttributionError as exc:
        st.warning(widgets.escape_md(exc), icon=":material/info:")
        return
    if res_b.encoding.num_truncated:
        widgets.truncation_notice(len(res_b.encoding) + res_b.encoding.num_truncated, lm.max_length, "That is input B.")
    m1, m2 = st.columns(2)
    m1.metric(f"A: {res_a.target}", f"{res_a.f_input:.4f}")
    m2.metric(f"B: {res_b.target}", f"{res_b.f_input:.4f}", f"{res_b.f_input - res_a.f_input:+.4f}",
              delta_color="off", delta_arrow="off")
    labels, scores = res_b.word_scores() if per_word else (res_b.tokens, res_b.scores)
    if len(scores):
        widgets.plotly_chart(attr_figures.attribution_bars(labels, scores, f"B: what moves {res_b.target}",
                                                           "cosine" if kind == "similarity" else "probability"),
                             key="attr_wi_bars")
    al = whatif.align(res_a.tokens, res_b.tokens)
    if len(al):
        st.caption("The change of each paired token's attribution, B − A (per WordPiece; paired as in the other "
                   "what-if views): which tokens the edit made matter more or less.")
        names = [res_a.tokens[i] if same else f"{res_a.tokens[i]}→{res_b.tokens[j]}"
                 for i, j, same in zip(al.a, al.b, al.same)]
        widgets.plotly_chart(attr_figures.attribution_bars(names, res_b.scores[al.b] - res_a.scores[al.a],
                                                           "Δ attribution, B − A", "probability"),
                             key="attr_wi_delta")
