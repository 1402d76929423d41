"""The inputs the pages share: a text or a sentence pair, clamped sliders, layer and head pickers (the one place
a 0-based block becomes "layer 1"), the words toggle. A page's own keys start with its prefix (``tok_``, ``att_``
...)."""

from __future__ import annotations

import streamlit as st

from ..server import share


# ----------------------------------------------------------------------------- text inputs
def text_or_pair(prefix: str, default: str, default_pair: str, pair_default: bool = False,
                 label: str = "Text") -> tuple[str, str | None]:
    """A text area, and a second one for sentence B when the pair toggle is on.

    Returns ``(text, text_pair)``; ``text_pair`` is None without the toggle. Values are
    returned raw: :func:`bertcore.tokenization.tokenizer.encode` checks them (empty, too long ...). The three are
    kept in
    the URL (:func:`explorer.server.share.shareable`).
    """
    share.shareable({f"{prefix}_text": share.text, f"{prefix}_pair_on": share.boolean, f"{prefix}_text_b": share.text})
    pair = st.toggle("Sentence pair (A + B, as in next-sentence prediction)", value=pair_default,
                     key=f"{prefix}_pair_on", persist_state="session")
    text = st.text_area("Sentence A" if pair else label, value=default, key=f"{prefix}_text",
                        height=100, persist_state="session")
    text_pair = None
    if pair:
        text_pair = st.text_area("Sentence B", value=default_pair, key=f"{prefix}_text_b", height=100,
                                 persist_state="session")
    return text or "", (text_pair or "") if pair else None


def clamped_slider(label: str, key: str, lo: int, hi: int, default: int, help: str | None = None,
                   format_func=None, compact: bool = False) -> int:
    """An int slider ``lo..hi`` whose value is kept across pages and clamped when the range
    shrinks (another model, a shorter text); a fixed caption when ``lo == hi``. ``compact``: a
    selectbox instead (two sliders cost ~0.3 s per rerun in the browser; use it where every rerun
    counts)."""
    if hi <= lo:
        st.caption(f"{label}: {format_func(lo) if format_func else lo} (the only one)")
        return lo
    if key in st.session_state:  # keep the user's choice, clamped to this model's range
        if not lo <= st.session_state[key] <= hi:
            st.session_state[key] = min(max(st.session_state[key], lo), hi)
        value = {}
    else:
        value = {"index": min(max(default, lo), hi) - lo} if compact else {"value": min(max(default, lo), hi)}
    if compact:
        return int(st.selectbox(label, range(lo, hi + 1), key=key, help=help, persist_state="session", **value))
    return int(st.slider(label, lo, hi, key=key, help=help, persist_state="session", **value))


def layer_number(block: int) -> int:
    """The number the UI shows for the 0-based encoder block ``block`` (``encoder.layer[block]``): block 0 is
    "layer 1". The one conversion for text; :func:`layer_picker` is the one for widgets."""
    return block + 1


def head_number(head: int) -> int:
    """The number the UI shows for the 0-based head ``head``: head 0 is "head 1"."""
    return head + 1


def layer_label(block: int) -> str:
    """``"layer 4"`` for block 3: the 1-based label of a 0-based encoder block (see :func:`layer_number`)."""
    return f"layer {layer_number(block)}"


def layer_picker(prefix: str, num_layers: int, include_embeddings: bool = False, default: int | None = None,
                 label: str = "Layer", compact: bool = False) -> int:
    """A layer slider labelled "Layer" 1..num_layers, or 0..num_layers with ``include_embeddings`` (0 = the
    embedding output, before any layer); ``st.session_state[f"{prefix}_layer"]`` keeps the label's number.

    Returns (the only place the UI's 1-based layer numbers become bertcore's):
        without ``include_embeddings``: the 0-based BLOCK (``encoder.layer[i]``, 0..num_layers-1; label "Layer 1"
        is block 0); with it: the HIDDEN_STATES INDEX (0..num_layers, 0 = the embeddings; label "Layer k" is
        ``hidden_states[k]``, the output of block k-1). ``default`` is in the same numbering as the return value
        (None: the last layer)."""
    if include_embeddings:
        return clamped_slider(label, f"{prefix}_layer", 0, num_layers, num_layers if default is None else default,
                              help="0 is the embedding layer's output", compact=compact)
    shown = clamped_slider(label, f"{prefix}_layer", 1, num_layers,
                           num_layers if default is None else layer_number(default), compact=compact)
    return shown - 1


WORDS_HELP = ("Merge the pieces of each word: attention to a word is the sum over its pieces, attention from a "
              "word the mean over its pieces (Clark et al. 2019, section 4.1).")


def words_toggle(prefix: str, where=None) -> bool:
    """The "Words, not WordPieces" toggle of every token-level attention view (key ``<prefix>_words``,
    kept across pages); merging is :mod:`bertcore.analysis.attention.words`."""
    return bool((where or st).toggle("Words, not WordPieces", key=f"{prefix}_words", persist_state="session",
                                     help=WORDS_HELP))


def head_picker(prefix: str, num_heads: int, default: int = 0, compact: bool = False) -> int:
    """A head slider labelled "Head" 1..num_heads (``compact``: a selectbox; the session state keeps the label's
    number); returns the chosen head 0-based (0..num_heads-1), as bertcore takes it. ``default``: 0-based."""
    return clamped_slider("Head", f"{prefix}_head", 1, num_heads, head_number(default), compact=compact) - 1
