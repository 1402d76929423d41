"""Tokenization: how text becomes WordPiece tokens, ids, segment ids and an attention mask."""

import pandas as pd
import streamlit as st

from bertcore.analysis.attention import activations
from bertcore.loading.sources import SourceError
from bertcore.tokenization.tokenizer import TextError, TokenizerError, is_wordpiece
from explorer import as_code, widgets
from explorer.views import tokenization as views
from explorer.views.code import snippet

DEFAULT = "Unbelievably, the Café's naïve chatbot tokenized hyperparameterization!"
DEFAULT_B = "Segment ids tell the two sentences apart."

st.title("Tokenization")
st.markdown(
    """
BERT never sees characters or whole words: its tokenizer first **normalizes** the text (the
uncased model lower-cases it and strips accents), splits it on spaces and punctuation, then
cuts each word into the longest **WordPiece** pieces found in its vocabulary. A piece that
continues a word starts with `##`. Every sequence starts with the special token `[CLS]` and
each sentence ends with `[SEP]`. The **segment id** says which sentence a token belongs to
(0 for A, 1 for B) and the **attention mask** is 1 for real tokens (0 only for padding in a batch).
A character the vocabulary cannot spell at all becomes `[UNK]`.
"""
)

lm = widgets.current_model()
tok = lm.tokenizer
bpe = not is_wordpiece(tok)
if bpe:
    st.info(
        f"**This {lm.config.family} model reads byte-level BPE, not WordPiece** (Sennrich et al. 2016; Radford et "
        "al. 2019, section 2.2). The text is read as bytes, so no character is ever unknown; the vocabulary holds "
        "the byte pairs merged most often while it was trained. There is no lower-casing and no `##`: instead "
        "a piece that starts a word after a space begins with **`Ġ`**, the printable stand-in for the space byte "
        f"(`Ġcat` is \" cat\"). Special tokens: `{tok.cls_token}` at the start, `{tok.sep_token}` after each "
        "sentence" + ("; RoBERTa has no segment ids (one segment, all 0)." if lm.config.family == "roberta" else
                      "; this model has no segment embeddings, so the segment ids below are not read."),
        icon=":material/info:")
text, text_pair = widgets.text_or_pair("tok", DEFAULT, DEFAULT_B)
limit = lm.max_length
syntax_on = bool(st.session_state.get("tok_syntax", True))  # the toggle is drawn below the counts, read first
args = (lm.source, text, text_pair, syntax_on)
try:
    result = views.tokens(*args)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
enc, rows, n_unk = result.encoding, result.rows, result.n_unknown

if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, limit, f"Only the first {limit} are shown.")

cols = st.columns(4)
cols[0].metric("Tokens (with special)", len(enc))
cols[1].metric("Words", len(rows))
cols[2].metric("Words split into pieces", sum(r["n_pieces"] > 1 for r in rows))
cols[3].metric("Unknown tokens", n_unk)
if n_unk:
    st.info(f"{n_unk} token(s) became {tok.unk_token}: characters this vocabulary cannot spell "
            "(emoji, rare scripts). BERT sees them all as the same token.", icon=":material/help:")

st.subheader("Tokens")
st.caption("Each cell is one token with its id below. Pieces of the same word share a colour (words "
           "alternate two shades); sentence A is blue, sentence B green, special tokens grey. "
           "Hover a cell for its position, word, segment id and attention mask.")
st.toggle("Part of speech and dependencies (spaCy)", value=True, key="tok_syntax", persist_state="session",
          help="spaCy's English parser (en_core_web_sm) tags every word; each WordPiece shows its word's Universal "
               "part of speech and dependency label; hover for the Penn tag and the head word. The Syntax heads tab "
               "of the Findings page asks which attention heads follow these arcs.")
if result.syntax_note:
    st.caption(widgets.escape_md(result.syntax_note))
widgets.plotly_chart(views.grid_figure(result), key="tok_grid")
as_code.expander("tokenization", "Tokenization", snippet("Tokenization: WordPieces, ids, segment ids, attention mask",
                                                         views.tokens, args, draw=[(views.grid_figure, {})]), result)

st.subheader("This vocabulary vs bert-base-uncased's" + (" (compare tokenizers: BPE vs WordPiece)" if bpe else ""))
try:
    voc = views.vocabularies(lm.source, text, text_pair)
except (SourceError, TokenizerError) as exc:
    voc = None
    st.info(f"bert-base-uncased's vocabulary is not available to compare with: {exc}")
if voc is not None and voc.same:
    st.caption(f"This model uses bert-base-uncased's vocabulary ({len(tok):,} WordPiece tokens, lower-cased), "
               "the one Devlin et al. (2019) trained on Wikipedia and BooksCorpus. A model pretrained here "
               "from scratch with a corpus vocabulary (`--tokenizer corpus:<size>`) splits words differently: "
               "pick one in the sidebar to compare.")
elif voc is not None:
    comp = voc.comparison
    n_model, n_ref = comp.n_pieces
    if bpe:
        st.caption(f"The same text under this model's byte-level BPE ({len(tok):,} tokens; `Ġ` starts a word "
                   "after a space) and under bert-base-uncased's WordPiece (30,522 tokens, lower-cased; `##` "
                   "continues a word). Each splits the words it saw often less; every extra piece is a longer "
                   "sequence for the model. Ids differ too: the same id means a different token in each.")
    else:
        st.caption(f"This model's vocabulary ({len(tok):,} tokens) is not bert-base-uncased's (30,522). A "
                   "smaller vocabulary trained on one corpus (WordPiece, Wu et al. 2016; trained with the "
                   "`tokenizers` library) keeps that corpus's frequent words whole and cuts rarer words into "
                   "more pieces; every extra piece is a longer sequence for the model. Ids differ too: the same "
                   "id means a different token under each vocabulary.")
    left, right = st.columns(2)
    for col, name, n in ((left, "this model", n_model), (right, "bert-base-uncased", n_ref)):
        col.metric(f"Pieces under {name}", n, delta=None if col is right else n - n_ref,
                   delta_color="inverse", help="tokens without the special tokens ([CLS] / [SEP], <s> / </s>)")
        widgets.plotly_chart(where=col, fig=views.comparison_figure(voc, reference=col is right),
                             key=f"tok_grid_{'model' if col is left else 'reference'}")
    if comp.words:
        st.dataframe(pd.DataFrame(comp.words).drop(columns="word"), hide_index=True, key="tok_compare",
                     column_config={"text": "word", "pieces": "this model's pieces",
                                    "reference_pieces": "bert-base-uncased's pieces", "n_pieces": "pieces",
                                    "n_reference_pieces": "pieces (bert-base-uncased)"})

st.subheader("Input vs tokens: normalization and WordPiece")
st.caption("What you typed, what the normalizer made of it, and the pieces. Invisible characters "
           "(zero-width, control) are shown as markers such as ⟨U+200B⟩: the tokenizer drops them.")
table = pd.DataFrame(rows)
# a left-to-right mark around each piece keeps right-to-left pieces in the model's left-to-right order
table["pieces"] = [" ".join(f"\u200e{p}\u200e" for p in r["pieces"].split(" ")) for r in rows]
st.dataframe(table, hide_index=True, key="tok_words",
             column_config={"typed": "you typed", "normalized": "normalized", "pieces": "WordPiece tokens",
                            "n_pieces": "pieces", "unknown": "has [UNK]"})
if any(activations.show_invisible(t) != t for t in (text, text_pair) if t):
    st.caption("Your text contains invisible or control characters; they are not tokens.")

st.subheader("Every token: id, segment id, attention mask")
st.caption("What the model actually receives: three integer sequences of the same length (input ids, segment "
           "ids, attention mask). Special tokens are added by the tokenizer, not typed.")
st.dataframe(pd.DataFrame({
    "position": range(len(enc)),
    "token": enc.tokens,
    "id": enc.input_ids,
    "word": pd.array(enc.word_ids, dtype="Int64"),
    "segment id": enc.token_type_ids,
    "attention mask": enc.attention_mask,
    "special": [bool(s) for s in enc.special_tokens_mask],
}), hide_index=True, key="tok_table", height=min(38 + 35 * len(enc), 420))
