"""Tokenization: how text becomes WordPiece tokens, ids, segment ids and an attention mask."""

import pandas as pd
import streamlit as st

from bertcore import analysis
from bertcore.tokenizer import TextError, encode
from explorer import widgets
from explorer.figures import tokens as token_figures

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
text, text_pair = widgets.text_or_pair("tok", DEFAULT, DEFAULT_B)
limit = min(lm.config.max_position_embeddings, int(tok.model_max_length))
try:
    enc = encode(tok, text, text_pair, max_length=limit)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()

if enc.num_truncated:
    st.warning(f"The input has {len(enc) + enc.num_truncated:,} tokens but this model reads at most {limit}: "
               f"the last {enc.num_truncated:,} tokens were cut off (only the first {limit} are shown).",
               icon=":material/content_cut:")

rows = analysis.word_rows(enc, tok)
n_unk = sum(t == tok.unk_token for t in enc.tokens)
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
per_row = 12 if len(enc) <= 120 else 16
widgets.plotly_chart(token_figures.token_grid(enc.tokens, enc.input_ids, enc.word_ids, enc.special_tokens_mask,
                                         enc.token_type_ids, enc.attention_mask, per_row=per_row),
                key="tok_grid")

st.subheader("Input vs tokens: normalization and WordPiece")
st.caption("What you typed, what the normalizer made of it, and the pieces. Invisible characters "
           "(zero-width, control) are shown as markers such as ⟨U+200B⟩: the tokenizer drops them.")
table = pd.DataFrame(rows)
# a left-to-right mark around each piece keeps right-to-left pieces in the model's left-to-right order
table["pieces"] = [" ".join(f"\u200e{p}\u200e" for p in r["pieces"].split(" ")) for r in rows]
st.dataframe(table, hide_index=True, key="tok_words",
             column_config={"typed": "you typed", "normalized": "normalized", "pieces": "WordPiece tokens",
                            "n_pieces": "pieces", "unknown": "has [UNK]"})
if any(analysis.show_invisible(t) != t for t in (text, text_pair) if t):
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
