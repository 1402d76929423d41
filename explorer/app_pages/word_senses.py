"""Word senses: the same word gets a different contextual vector in each sentence; do the
vectors group by meaning, and from which layer on?"""

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitAPIException

from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.views import word_senses as views
from explorer.views.code import snippet

MAX_SENTENCES = 24
PRESETS = {
    "python: the snake vs the language": ("python", """snake | The python swallowed the rabbit whole.
snake | A python coiled around the branch of the tree.
snake | The zoo keeper fed the python a dead mouse.
language | I wrote the script in Python last night.
language | Python code is easy to read.
language | She installed the latest version of Python on her laptop."""),
    "bank: river vs money": ("bank", """river | We had a picnic on the bank of the river.
river | The boat drifted toward the muddy bank.
river | Fishermen lined the bank at dawn.
money | She deposited the check at the bank.
money | The bank raised its interest rates.
money | He asked the bank for a loan."""),
}


def _apply_preset() -> None:
    name = st.session_state.get("ws_preset")
    if name in PRESETS:
        st.session_state["ws_target"], st.session_state["ws_sentences"] = PRESETS[name]


def parse_lines(block: str) -> tuple[list[str], list[str]]:
    """``sense | sentence`` lines (the ``sense |`` part optional) -> (senses, sentences); blank lines skipped."""
    senses, sentences = [], []
    for line in (block or "").splitlines():
        if not line.strip():
            continue
        sense, sep, sentence = line.partition("|")
        if not sep:
            sense, sentence = "", line
        senses.append(sense.strip())
        sentences.append(sentence.strip())
    return senses, sentences


st.title("Word senses")
st.markdown(
    """
A static embedding gives *bank* one vector. BERT gives it a new vector in every sentence, built
from its context. Here the **contextual vector** of the target word (the mean of its WordPiece
vectors when it is split into pieces) is taken in each sentence, at every layer, and compared
with **cosine similarity**. If BERT separates the meanings, sentences of the same sense should be
more similar to each other than to sentences of the other sense, more so in higher layers.

Raw cosine values are misleading: BERT's vectors share a common direction, so even unrelated
words score well above 0. Compare with the **random word pairs** baseline.
"""
)
st.caption("The same measures over many words and a held-out corpus (anisotropy, self-similarity and intra-sentence "
           "similarity by layer, Ethayarajh 2019) are on the **Findings** page, tab *Contextuality*.")
try:  # a link when the page runs inside app.py's navigation (not when a test runs this file alone)
    st.page_link("explorer/app_pages/findings.py", label="Open Findings", icon=":material/fact_check:")
except StreamlitAPIException:
    pass

lm = widgets.current_model()
first = next(iter(PRESETS))
if "ws_target" not in st.session_state:
    st.session_state["ws_target"], st.session_state["ws_sentences"] = PRESETS[first]
st.selectbox("Example", list(PRESETS), key="ws_preset", on_change=_apply_preset, persist_state="session",
             help="Fills in the target word and the sentences; edit them freely.")
target = st.text_input("Target word", key="ws_target", persist_state="session")
block = st.text_area(f"Sentences, one per line: `sense | sentence` (the sense label is optional; at most "
                     f"{MAX_SENTENCES} lines)", key="ws_sentences", height=200, persist_state="session")
senses, sentences = parse_lines(block)

if not (target or "").strip():
    st.warning("Type a target word: the word to follow across the sentences.", icon=":material/edit_note:")
    st.stop()
if not sentences:
    st.warning("Type at least two sentences that contain the target word, one per line.", icon=":material/edit_note:")
    st.stop()
if len(sentences) > MAX_SENTENCES:
    st.warning(f"{len(sentences)} lines given: only the first {MAX_SENTENCES} are used.", icon=":material/content_cut:")
    senses, sentences = senses[:MAX_SENTENCES], sentences[:MAX_SENTENCES]

try:
    occ = views.occurrences(lm.source, target, sentences)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()

shown_target = widgets.escape_md(target.strip())
if occ.errors:
    st.warning("Left out, line(s) " + ", ".join(str(i + 1) for i in sorted(occ.errors)) + ": "
               + widgets.escape_md("; ".join(sorted(set(occ.errors.values())))), icon=":material/edit_note:")
if occ.truncated:
    st.info(f"{widgets.lines_phrase([i + 1 for i in occ.truncated])} cut to the model's "
            f"{lm.config.max_position_embeddings} positions.", icon=":material/content_cut:")
if occ.missing:
    st.warning(f"The target word “{shown_target}” (tokens: {widgets.escape_md(' '.join(occ.pieces))}) is not in "
               "line(s) " + ", ".join(str(i + 1) for i in occ.missing) + " as a whole word (or it lies beyond "
               "the cut): those lines are left out.", icon=":material/search_off:")
n = len(occ.sentence_index)
if n < 2:
    st.info(f"The target word “{shown_target}” was found in {n} sentence(s); at least two are needed to "
            "compare its vectors. Add sentences that contain it, or pick an example above.", icon=":material/info:")
    st.stop()

n_layers = lm.config.num_hidden_layers
if len(occ.pieces) > 1:
    st.caption(f"The target is split into {len(occ.pieces)} pieces ({widgets.escape_md(' '.join(occ.pieces))}): "
               "its vector is their mean.")

# with the embeddings option the picker returns a hidden_states index (0 = embeddings; "Layer k" is hidden_states[k],
# the output of block k - 1), and occ.vectors[:, k] is hidden_states[k]: the label's number is the index here
layer = widgets.layer_picker("ws", n_layers, include_embeddings=True, default=n_layers)
args = (lm.source, target, sentences, senses, layer)
res = views.senses(*args)
base_mean, base_std = res.base_mean, res.base_std

left, right = st.columns(2)
with left:
    st.subheader("Cosine similarity")
    layer_context = ("the embedding output, before any context is mixed in" if layer == 0
                     else "after " + str(layer) + " layer(s) of attention")
    st.caption(f"Between the occurrences at layer {res.layer_names[layer]} ({layer_context}).")
    widgets.plotly_chart(views.matrix_figure(res), key="ws_matrix")
    if not np.isnan(base_mean[layer]):
        st.caption(f"Baseline at this layer: two random different words of these sentences have a mean cosine of "
                   f"{base_mean[layer]:.2f} (± {base_std[layer]:.2f}); the colour scale starts there, so a dark "
                   "cell is a pair no more alike than two unrelated words.")
with right:
    st.subheader("Two dimensions (PCA)")
    st.caption("The occurrences at the chosen layer, projected on their two main directions of variation "
               "(numbers match the matrix).")
    if not res.explained.any():
        st.info("Every occurrence has the same vector at this layer: before any attention layer, a word's "
                "vector depends only on the word, its position and its segment.", icon=":material/info:")
    widgets.plotly_chart(views.pca_figure(res), key="ws_pca")

st.subheader("Similarity across layers")
if np.all(np.isnan(res.same)) and np.all(np.isnan(res.different)):
    st.info("Label the sentences with a sense (`sense | sentence`) to compare same-sense and "
            "different-sense pairs.", icon=":material/info:")
else:
    st.caption("Mean cosine of pairs of occurrences with the same sense label and with different labels; "
               "the grey band is random pairs of different words from the same sentences. The gap between "
               "green and red is what the model knows about the sense.")
widgets.plotly_chart(views.layers_figure(res), key="ws_layers")
as_code.expander("word_senses", "Word senses",
                 snippet(f"Word senses: '{target}' at layer {layer}", views.senses, args,
                         draw=[(views.matrix_figure, {}), (views.pca_figure, {}), (views.layers_figure, {})]), res)
