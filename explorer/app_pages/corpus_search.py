"""Corpus search: where else in a corpus does a token have a vector like this one (exBERT)?

Widgets -> ``explorer.views.corpus_search`` (``bertcore.analysis.shipped.corpus_neighbours``: the index on disk per
model, corpus and layer). Keys start
with ``cs_``.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import pandas as pd
import streamlit as st

from bertcore.analysis import shipped
from bertcore.analysis.representations import corpus_search as CS
from bertcore.data import DataError, cache_dir
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.server import heavy, share
from explorer.server import shared_mode
from explorer.views import corpus_search as views
from explorer.views.code import snippet


st.title("Corpus search")
st.markdown(
    """
exBERT (Hoover et al. 2020) asks of a token: where else does the model put a token **in the same place**? Pick
a token of your sentence and a layer; every token of a corpus is compared with it by the cosine of their
contextual vectors at that layer. In low layers the nearest tokens are mostly the same word; higher up they
share the *meaning in context* ("bank" of money vs of a river) or the *role* (subjects, verbs of a kind). The
corpus is indexed once per model, corpus and layer (a progress bar), then kept on disk.
"""
)

lm = widgets.current_model()
cfg = lm.config
share.shareable({"cs_text": share.text, "cs_layer": share.integer(0, cfg.num_hidden_layers),
                 "cs_k": share.integer(5, 100)})
text = st.text_input("Your sentence", shipped.CORPUS_TEXT, key="cs_text")
try:
    sent = views.sentence(lm.source, text)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if sent.num_truncated:
    widgets.truncation_notice(len(sent.tokens) + sent.num_truncated, len(sent.tokens), "The corpus is read in pieces "
                              "of that length too: pick a token among those kept.", reader="this search")
ordinary = sent.ordinary
if not ordinary:
    st.warning("The sentence has no ordinary token to search for.", icon=":material/edit_note:")
    st.stop()
c1, c2, c3, c4 = st.columns([2, 1, 1, 2])
position = c1.selectbox("Token", ordinary, index=ordinary.index(sent.default), key="cs_token",
                        format_func=lambda i: f"{i}: {sent.tokens[i]}")
layer = int(c2.number_input("Layer", 0, cfg.num_hidden_layers, min(shipped.CORPUS_LAYER, cfg.num_hidden_layers),
                            key="cs_layer",
                            help="0 = the embeddings (no context)."))
k = int(c3.number_input("Neighbours", 5, 100, shipped.CORPUS_K, step=5, key="cs_k"))
corpus = c4.radio("Corpus", ["bbc", "upload"], key="cs_corpus", horizontal=True,
                  format_func={"bbc": "held-out BBC segments", "upload": "your .txt file"}.__getitem__)
n, upload, index_root = shipped.CORPUS_SEGMENTS, None, cache_dir()
if corpus == "bbc":
    n = int(st.number_input("Segments to index", 20, 400, shipped.CORPUS_SEGMENTS, step=10, key="cs_segments"))
else:
    shared = shared_mode.settings()  # a shared server: size limit, session quota, index in the session's folder
    limit = f", at most {shared_mode.size_text(shared.max_upload_bytes)}" if shared.enabled else ""
    up = st.file_uploader("A .txt file (paragraphs separated by blank lines)" + limit, type=["txt"],
                          key="cs_upload", **({"max_upload_size": max(1, int(shared.max_upload_mb + 0.999))}
                                              if shared.enabled else {}))
    if up is None:
        st.info("Upload a .txt file to index it.", icon=":material/upload_file:")
        st.stop()
    raw = up.getvalue()
    accepted = st.session_state.setdefault("cs_upload_accepted", set()) if shared.enabled else set()
    digest = hashlib.sha256(raw).hexdigest()
    if shared.enabled and digest not in accepted:  # checked once per content: its index then counts
        session = shared_mode.session_folder(shared)
        refusal = shared_mode.upload_refusal(up.name, len(raw), shared_mode.folder_bytes(session), shared)
        if refusal is not None:
            st.error(widgets.escape_md(refusal), icon=":material/error:")
            st.stop()
        accepted.add(digest)
    index_root = shared_mode.session_folder() if shared_mode.enabled() else cache_dir()
    upload = index_root / "uploads" / f"{digest[:24]}.txt"  # the view reads the file (keyed on its size and time)
    if not upload.is_file():
        upload.parent.mkdir(parents=True, exist_ok=True)
        upload.write_bytes(raw)
args = (lm.source, text, int(position), layer, k, n, upload, str(index_root))
try:  # the first search of a corpus and layer indexes it: seconds of the server, queued beside other heavy jobs
    found = heavy.run_view(views.search, "the corpus index", *args)
except DataError as exc:
    st.error("Cannot read the held-out BBC documents: " + widgets.escape_md(str(exc)), icon=":material/error:")
    st.stop()
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
hits, labels, n_tokens, n_texts = found.hits, found.labels, found.n_tokens, found.n_texts
st.caption(f"{n_tokens:,} tokens of {n_texts} texts indexed at layer {layer}"
           + (" (shipped with the model: the default view)." if found.from_model else "."))
table = pd.DataFrame([{"token": h.token, "cosine": h.cosine, "in context": h.context, "text": h.segment + 1,
                       **({"part of speech": labels[i][0], "dependency": labels[i][1]} if labels else {})}
                      for i, h in enumerate(hits)])
st.dataframe(table, hide_index=True, key="cs_hits", column_config={"cosine": st.column_config.NumberColumn(
    format="%.3f")})
words = ", ".join(f"{w} ({c})" for w, c in CS.summary(hits)[:10])
st.markdown(f"**What the {len(hits)} nearest tokens are:** {widgets.escape_md(words)}")
if labels:
    for name, col in (("parts of speech", 0), ("dependency labels", 1)):
        counts = ", ".join(f"{v} ({n})" for v, n in Counter(lab[col] for lab in labels if lab[col]).most_common(8))
        st.markdown(f"**Their {name}:** {widgets.escape_md(counts)}")
widgets.download_csv(table, "corpus-search", key="cs_csv", index=False)
as_code.expander("corpus_search", "Corpus search",
                 snippet("Corpus search: the nearest tokens of a corpus", views.search, args), found)
