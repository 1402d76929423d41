"""Overview: what BERT is, the card of the model every page uses (picked in the sidebar), and on a shared server
what the shared mode changes (``explorer.server.shared_mode``)."""

import streamlit as st

from bertcore.loading.sources import PACKAGED_MLM
from explorer import as_code, widgets
from explorer.server import shared_mode
from explorer.tour import banner as tour
from explorer.views import overview as views
from explorer.views.code import snippet

st.title("BERT Explorer")
shared_note = shared_mode.describe()  # None for a single user
if shared_note:
    st.info(shared_note, icon=":material/groups:")
with st.container(border=True, key="ov_tour"):
    st.markdown(f"**New to BERT? Start with the guided tour.** {len(tour.STEPS)} steps follow one sentence from "
                "text to prediction on the app's real pages, with numbers measured on the model in the sidebar, "
                "and end with a quiz. The *Start here* page lists every step.")
    st.button("Start the guided tour", key="ov_tour_start", type="primary", on_click=tour.enter, args=(1,),
              icon=":material/tour:")
st.markdown(
    """
**BERT** (Devlin et al., 2019) is a stack of Transformer *encoder* layers that reads a whole
sentence at once, left and right context together. Text is cut into **WordPiece** tokens, each
token becomes a vector (word + position + segment embeddings), and every layer lets each token
**attend** to all the others and mixes what it finds into its own vector. BERT is pretrained on
two tasks: guessing **masked** words (masked language modelling) and telling whether sentence B
really follows sentence A (next-sentence prediction). The output is one *contextual* vector per
token: the same word gets a different vector in a different sentence.

The pages on the left follow a first visit:
- **Inside BERT**: how text becomes tokens and vectors (Tokenization, Embeddings, Positional
  embeddings), what each attention head looks at (Attention: heads, layers, rollout, neuron view),
  and every weight tensor by name (Model anatomy).
- **BERT's tasks**: watch it fill in `[MASK]` (Masking) and judge sentence pairs (Next sentence).
- **Analyses**: how a word's vector changes with its meaning (Word senses), what the papers
  measured, recomputed on this model (Findings), what happens when heads are switched off (Head
  ablation), which input tokens a prediction depends on (Attribution), and two models side by side.
- **Train your own**: pretrain or fine-tune a small BERT live and watch it learn (Train, Evolution).

The model is chosen in the sidebar and used by every page. Two work offline:
- **MiniLM-MLM** (the default): a 6-layer BERT with BERT's two heads, trained in this project with masked-LM and
  next-sentence prediction on news, encyclopedic and everyday English. It fills `[MASK]`, scores sentence pairs
  and sentences (Grammar), and every other page works with it. Its model card (`models/minilm-mlm/README.md`)
  gives its held-out accuracy and how it was trained.
- **all-MiniLM-L6-v2**: the same encoder before that training, a sentence-embedding model (sentence-transformers)
  with no masked-LM head: the pages that need one say so. Compare the two (Compare models) to see what
  masked-LM training changed.
"""
)

lm = widgets.current_model()
card = views.card(lm.source)

st.subheader("The loaded model")
st.caption("Source")
st.text(f"{card.name}  ({widgets.KINDS.get(lm.source.kind, lm.source.kind)})\n{card.path}\nComputes on: {card.device}")
cols = st.columns(5)
cols[0].metric("Parameters", f"{card.parameters / 1e6:.1f} M")
cols[1].metric("Layers", card.layers)
cols[2].metric("Heads per layer", card.heads)
cols[3].metric("Hidden size", card.hidden)
cols[4].metric("Vocabulary", f"{card.vocab:,}")
cols = st.columns(5)
cols[0].metric("Max positions", card.max_positions)
cols[1].metric("Feed-forward size", card.intermediate)
cols[2].metric("Head size", card.head_size)
cols[3].metric("Tokenizer size", f"{card.tokenizer_size:,}")
cols[4].metric("Head on top", card.head)

if not card.has_mlm_head:
    st.info("This model has no masked-language-model head, so it cannot fill in [MASK] tokens. "
            "Attention, tokens and contextual vectors work as with any BERT.", icon=":material/info:")
    st.button("Use the packaged MiniLM-MLM (fills [MASK])", key="ov_switch", on_click=widgets.use_source,
              args=(PACKAGED_MLM,), icon=":material/swap_horiz:")
if card.load_report is not None:
    st.caption("Checkpoint keys: " + widgets.escape_md(card.load_report))

with st.expander("Full configuration (config.json fields)"):
    st.json(card.config)
as_code.expander("overview", "Overview", snippet("Overview: the loaded model", views.card, (lm.source,)), card)
