"""Attention: what each head of each layer looks at, as heatmaps, grids, a head view, statistics,
rollout and flow across layers, what actually flows (context mixing: explorer.panels.what_flows) and the
neuron view; every view can merge WordPieces into words."""

import streamlit as st

from bertcore.modeling.embeddings import InputError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.server import share
from explorer import whatif
from explorer.panels import attention as panels
from explorer.views import attention as views
from explorer.views.code import snippet

DEFAULT = "The keys to the cabinet are on the table."
DEFAULT_B = "Someone had left them there the night before."
#: the default sentence's agreement (verb, its other number, subject, the attractor noun between them)
DEFAULT_AGREEMENT = ("are", "is", "keys", "cabinet")

st.title("Attention")
st.markdown(
    """
In every layer, each token (a **query**) spreads one unit of attention over all tokens (the
**keys**) and takes in a weighted mix of their vectors. Each layer has several **heads** that do
this independently, each with its own idea of what is relevant. A row of a heatmap below is one
token's attention: it sums to 1. Many heads park most of their attention on `[CLS]`, `[SEP]` or
punctuation when they have nothing better to do (Clark et al., 2019, "What does BERT look at?"):
hide those to see the rest.
"""
)

lm = widgets.current_model()
# (layer and head are clamped to the model's range by their sliders)
share.shareable({"att_layer": share.integer(1, 48), "att_head": share.integer(1, 64), "att_hide": share.boolean,
                 "att_words": share.boolean, "att_pos": share.boolean})
text, text_pair = widgets.text_or_pair("att", DEFAULT, DEFAULT_B)
text_b = whatif.input_b("att", text, lm, text_pair)  # None while "what if" is off
try:
    act = views.forward(lm.source, text, text_pair)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()

enc = act.encoding
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, lm.max_length)

c1, c2, c3, c4 = st.columns([2, 2, 2, 2])
with c1:
    layer = widgets.layer_picker("att", act.num_layers, default=0)  # 0-based block
with c2:
    head = widgets.head_picker("att", act.num_heads)  # 0-based
with c3:
    hide = st.toggle("Hide attention to [CLS] / [SEP]", key="att_hide", persist_state="session",
                     help="Zero the attention to special tokens and rescale each row to sum to 1 again.")
with c4:
    by_word = widgets.words_toggle("att")
shown = views.maps(lm.source, text, text_pair, bool(hide), bool(by_word))  # (L, heads, U, U) as shown
pos = st.toggle("Part of speech on the tokens (spaCy)", key="att_pos", persist_state="session",
                help="Each token (or word) label gets its word's part of speech and dependency label, e.g. "
                     "'keys · NOUN nsubj', from spaCy's English parser: see which heads link which word classes.")
tagged = views.token_labels(lm.source, text, text_pair, bool(hide), bool(by_word), bool(pos))
labels = tagged.labels
if tagged.note is not None:
    st.caption(widgets.escape_md(tagged.note))
t = len(labels)
notes = []
if hide:
    notes.append("Attention to [CLS]/[SEP] removed; each row is rescaled to sum to 1 over the other tokens.")
if by_word:
    notes.append(f"{len(enc.tokens)} WordPieces merged into {t} words and special tokens: a row is the mean of "
                 "its pieces' rows, a column the sum of its pieces' columns, so rows still sum to 1.")
if notes:
    st.caption(" ".join(notes))
if text_b is not None:
    with st.container(border=True):
        whatif.views(lm, "att", text, text_b, text_pair, fill_mask=False, head=(layer, head))
if (text, text_pair) == (DEFAULT, None):  # the default example: does this model get it right, and which head?
    agree = views.agreement(lm.source, DEFAULT, *DEFAULT_AGREEMENT)
    if agree.note is not None:
        st.caption(f"The agreement check of this example does not apply to this model: {agree.note}.")
    chk = agree.check
    if chk is not None:
        verdict = "gets it right" if chk.right else "gets it wrong (it agrees with the nearer noun)"
        (st.info if chk.right else st.warning)(
            f"With *are* masked, this model gives *are* {chk.p_correct:.1%} and *is* {chk.p_other:.1%}: it "
            f"{verdict}. Which head links the verb to its subject? In **layer {widgets.layer_number(chk.head[0])}, "
            f"head {widgets.head_number(chk.head[1])}**, "
            f"*are* puts {chk.to_subject:.0%} of its attention on *keys* and {chk.to_attractor:.0%} on *cabinet*, "
            "the noun in between: set the sliders to it.", icon=":material/check:" if chk.right else None)

args = (lm.source, text, text_pair, layer, head, bool(hide), bool(by_word))
result = views.one_head(*args)
as_code.expander("attention", "Attention", snippet(
    f"Attention: layer {widgets.layer_number(layer)}, head {widgets.head_number(head)}", views.one_head, args,
    draw=[(views.heatmap_figure, {"labels": labels})]), result)
page = panels.Page(lm, text, text_pair, layer, head, bool(hide), bool(by_word), act, shown, labels, result)
TABS = ["One head", "All heads of a layer", "All layers × heads", "Head view", "Head statistics",
        "Rollout and flow", "What flows", "Neuron view"]
# lazy: only the open tab runs
tabs = st.tabs(TABS, key="att_tab", on_change="rerun")
for tab, draw in zip(tabs, (panels.one_head, panels.layer_grid, panels.thumbnails, panels.head_view, panels.stats,
                            panels.rollout, panels.what_flows, panels.neuron)):
    if tab.open:
        with tab:
            draw(page)
