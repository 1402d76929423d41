"""Next sentence prediction: sentence A and sentence B in, P(IsNext) out, with [CLS]'s attention."""

import random

import streamlit as st

from bertcore.readouts import next_sentence
from bertcore.loading.sources import PACKAGED_MLM
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, resources, widgets
from explorer.server import share
from explorer import whatif
from explorer.figures import next_sentence as nsp_figures
from explorer.views import next_sentence as views
from explorer.views.code import snippet

EXAMPLES = {
    "true": ("The company said its profits rose by 20% last year.",
             "Its shares rose 5% in early trading after the results were announced."),
    "random": ("The company said its profits rose by 20% last year.",
               "The striker scored twice in the second half to win the match."),
}

st.title("Next sentence prediction")
st.markdown(
    """
BERT's second pretraining task (Devlin et al. 2019, section 3.1, "Next Sentence Prediction"): the
model reads `[CLS] A [SEP] B [SEP]` and says whether **B really follows A** in a document (*IsNext*)
or is a **random sentence from another document** (*NotNext*). Half of the training pairs are each.
The answer comes from the final `[CLS]` vector only (through the pooler and a 2-way classifier), so
`[CLS]` has to gather what it needs from both sentences by attention: the heatmap below shows where it
looks in each layer. Later work found the task easy (topic alone often gives the answer) and dropped
it (RoBERTa, Liu et al. 2019); it is here because it is how BERT was trained.
"""
)

lm = widgets.current_model()
if not views.has_head(lm.source):
    st.info(f"**{widgets.escape_md(lm.source.name)}**: " + next_sentence.no_nsp_reason(lm.config),
            icon=":material/block:")
    st.button("Use the packaged MiniLM-MLM (has MLM and NSP heads)", key="nsp_switch", type="primary",
              on_click=widgets.use_source, args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
    st.stop()


def _example(kind: str) -> None:
    st.session_state["nsp_a"], st.session_state["nsp_b"] = EXAMPLES[kind]


def _draw(is_next: bool) -> None:
    """A pair from BBC News: two consecutive sentences, or A and a sentence of another article."""
    docs = resources.corpus_sentences("bbc")
    rng = random.Random()
    doc = rng.choice([d for d in docs if len(d) >= 2])
    i = rng.randrange(len(doc) - 1)
    b = doc[i + 1] if is_next else rng.choice(rng.choice([d for d in docs if d is not doc]))
    st.session_state["nsp_a"], st.session_state["nsp_b"] = doc[i], b


share.shareable({"nsp_a": share.text, "nsp_b": share.text})
if "nsp_a" not in st.session_state:
    _example("true")
c = st.columns(4)
c[0].button("Example: true next", key="nsp_ex_true", on_click=_example, args=("true",))
c[1].button("Example: random", key="nsp_ex_random", on_click=_example, args=("random",))
c[2].button("Draw a next pair from BBC", key="nsp_draw_next", on_click=_draw, args=(True,), icon=":material/casino:")
c[3].button("Draw a random pair from BBC", key="nsp_draw_random", on_click=_draw, args=(False,),
            icon=":material/casino:")
a = st.text_area("Sentence A", key="nsp_a", height=80)
b = st.text_area("Sentence B", key="nsp_b", height=80)
b_edited = whatif.input_b("nsp", b or "", lm, label="Sentence B, edited (input B of the what-if)")

try:
    pred = views.predict(lm.source, a or "", b or "")
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
enc = pred.encoding
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, lm.max_length)

left, right = st.columns([1, 3])
verdict = "B follows A" if pred.p_is_next >= 0.5 else "B is a random sentence"
left.metric("P(IsNext)", f"{pred.p_is_next:.1%}", verdict, delta_color="off", delta_arrow="off",
            help="Softmax of the NSP head's two logits "
                 + f"(IsNext {pred.logits[0]:.2f}, NotNext {pred.logits[1]:.2f}).")
widgets.plotly_chart(where=right, fig=nsp_figures.is_next_bar(pred.p_is_next), key="nsp_bar")
if b_edited is not None:
    with st.container(border=True):
        try:
            pred_b = views.predict(lm.source, a or "", b_edited)
        except TextError:
            pred_b = None  # the views below say what is wrong with the edited sentence
        if pred_b is not None:
            st.metric("P(IsNext) with the edited sentence B", f"{pred_b.p_is_next:.1%}",
                      f"{pred_b.p_is_next - pred.p_is_next:+.1%} against the pair above", delta_color="off",
                      delta_arrow="off",
                      help="The NSP head's answer for sentence A followed by your edited sentence B.")
        whatif.views(lm, "nsp", b or "", b_edited, first=a or "", fill_mask=False)

st.subheader("Where [CLS] looks")
st.caption("Row = layer, column = token (sentence B's tokens are marked B:). Each row is [CLS]'s attention "
           "and sums to 1. In many BERTs the middle layers send most of it to [SEP] (Clark et al. 2019), "
           "and the last layer spreads it over both sentences.")
n_heads = pred.cls_attention.shape[1]
hc1, hc2 = st.columns([3, 1])
head = hc1.selectbox("Head", ["mean over heads"] + [f"head {h + 1}" for h in range(n_heads)], key="nsp_head")
head_index = None if head == "mean over heads" else int(head.split()[1]) - 1
by_word = widgets.words_toggle("nsp", where=hc2)
args = (lm.source, a or "", b or "", by_word)
looks = views.cls_looks(*args)
widgets.plotly_chart(views.cls_figure(looks, head_index), key="nsp_cls_attention")
as_code.expander("next_sentence", "Next sentence prediction",
                 snippet("Next sentence prediction: P(IsNext) and where [CLS] looks", views.cls_looks, args,
                         draw=[(views.cls_figure, {"head": head_index})]), looks)
