"""Corpus search: where else in a corpus does a token have a vector like this one (exBERT)?

Widgets -> ``bertcore.analysis.representations.corpus_search`` (index on disk per model, corpus and layer). Keys start
with ``cs_``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st
import torch

from bertcore.analysis import shipped
from bertcore.analysis.representations import corpus_search as CS
from bertcore.analysis.representations import syntax
from bertcore.data import DataError, cache_dir
from bertcore.tokenization.tokenizer import TextError, encode
from explorer import as_code, heldout, resources, widgets
from explorer.server import share
from explorer.server import shared_mode
from explorer.as_code import more

MAX_UPLOAD_CHARS = 2_000_000

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

@st.cache_resource(show_spinner=False, max_entries=4)
def _index(path_str: str, stamp: str):
    """The index file read once per version of the file (``stamp``: size and mtime)."""
    return CS.load_index(Path(path_str))


lm = widgets.current_model()
cfg = lm.config
share.shareable({"cs_text": share.text, "cs_layer": share.integer(0, cfg.num_hidden_layers),
                 "cs_k": share.integer(5, 100)})
text = st.text_input("Your sentence", shipped.CORPUS_TEXT, key="cs_text")
try:
    enc = encode(lm.tokenizer, text, max_length=min(lm.max_length, CS.MAX_TOKENS))
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, len(enc), "The corpus is read in pieces of that length "
                              "too: pick a token among those kept.", reader="this search")
special = set(lm.tokenizer.all_special_ids)
ordinary = [i for i, tid in enumerate(enc.input_ids) if tid not in special]  # typed [MASK]s too are special
if not ordinary:
    st.warning("The sentence has no ordinary token to search for.", icon=":material/edit_note:")
    st.stop()
c1, c2, c3, c4 = st.columns([2, 1, 1, 2])
default_token = next((i for i in ordinary if enc.tokens[i] == shipped.CORPUS_WORD), ordinary[0])
position = c1.selectbox("Token", ordinary, index=ordinary.index(default_token), key="cs_token",
                        format_func=lambda i: f"{i}: {enc.tokens[i]}")
layer = int(c2.number_input("Layer", 0, cfg.num_hidden_layers, min(shipped.CORPUS_LAYER, cfg.num_hidden_layers),
                            key="cs_layer",
                            help="0 = the embeddings (no context)."))
k = int(c3.number_input("Neighbours", 5, 100, shipped.CORPUS_K, step=5, key="cs_k"))
corpus = c4.radio("Corpus", ["bbc", "upload"], key="cs_corpus", horizontal=True,
                  format_func={"bbc": "held-out BBC segments", "upload": "your .txt file"}.__getitem__)
found = None
if corpus == "bbc":
    n = int(st.number_input("Segments to index", 20, 400, shipped.CORPUS_SEGMENTS, step=10, key="cs_segments"))
    # the default view (this model, sentence, token, layer, k and corpus) may ship with the model: no indexing
    found = shipped.shipped(lm, shipped.corpus_search(lm, text, position, layer, k, n))
if found is not None:
    hits, labels, n_tokens, n_texts = found["hits"], found["labels"], found["n_tokens"], found["n_texts"]
else:
    if corpus == "bbc":
        try:
            texts = [f"{s.text_a} {s.text_b}" for s in heldout.findings_segments(resources.source_key(lm.source), n,
                                                                                     CS.MAX_TOKENS, lm)]
        except DataError as exc:
            st.error("Cannot read the held-out BBC documents: " + widgets.escape_md(str(exc)), icon=":material/error:")
            st.stop()
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
        digest = hashlib.sha256(raw).hexdigest() if shared.enabled else ""
        if shared.enabled and digest not in accepted:  # checked once per content: its index then counts
            session = shared_mode.session_folder(shared)
            refusal = shared_mode.upload_refusal(up.name, len(raw), shared_mode.folder_bytes(session), shared)
            if refusal is not None:
                st.error(widgets.escape_md(refusal), icon=":material/error:")
                st.stop()
            accepted.add(digest)
        if raw[:4] in (b"\x89PNG", b"%PDF", b"PK\x03\x04"):
            st.warning("That is not a text file.", icon=":material/warning:")
            st.stop()
        body = raw.decode("utf-8", errors="replace")[:MAX_UPLOAD_CHARS] if raw else ""
        texts = [p.strip() for p in body.replace("\r\n", "\n").split("\n\n") if p.strip()]
        if not texts:
            st.warning("The file holds no text.", icon=":material/warning:")
            st.stop()
    index_root = shared_mode.session_folder() if corpus == "upload" and shared_mode.enabled() else cache_dir()
    path = CS.index_path(index_root, repr(resources.source_key(lm.source)), texts, layer)
    index = _index(str(path), f"{path.stat().st_size}-{path.stat().st_mtime_ns}") if path.is_file() else None
    if index is None:
        bar = st.progress(0.0, text="Indexing the corpus ...")
        index = CS.build_index(lm.encoder, lm.tokenizer, texts, layer, progress=lambda i, m: bar.progress(
            i / m, text=f"Indexing: {i} / {m} texts"))
        try:
            CS.save_index(index, path)
        except OSError:
            pass  # caching is an optimisation only
        bar.empty()
    with torch.no_grad():
        t = enc.tensors()
        hidden = lm.encoder(t["input_ids"], t["attention_mask"], t["token_type_ids"],
                            output_hidden_states=True).hidden_states[layer][0, position].numpy()
    hits = CS.search(index, hidden, k)
    n_tokens, n_texts = len(index.tokens), len(texts)
    try:
        labels = CS.hit_labels(index, hits, lm.tokenizer)
    except syntax.SyntaxUnavailable:
        labels = None
st.caption(f"{n_tokens:,} tokens of {n_texts} texts indexed at layer {layer}"
           + (" (shipped with the model: the default view)." if found is not None else "."))
table = pd.DataFrame([{"token": h.token, "cosine": h.cosine, "in context": h.context, "text": h.segment + 1,
                       **({"part of speech": labels[i][0], "dependency": labels[i][1]} if labels else {})}
                      for i, h in enumerate(hits)])
st.dataframe(table, hide_index=True, key="cs_hits", column_config={"cosine": st.column_config.NumberColumn(
    format="%.3f")})
words = ", ".join(f"{w} ({c})" for w, c in CS.summary(hits)[:10])
st.markdown(f"**What the {len(hits)} nearest tokens are:** {widgets.escape_md(words)}")
if labels:
    from collections import Counter

    for name, col in (("parts of speech", 0), ("dependency labels", 1)):
        counts = ", ".join(f"{v} ({n})" for v, n in Counter(lab[col] for lab in labels if lab[col]).most_common(8))
        st.markdown(f"**Their {name}:** {widgets.escape_md(counts)}")
widgets.download_csv(table, "corpus-search", key="cs_csv", index=False)
as_code.expander("corpus_search", "Corpus search",
                 more.corpus_search(lm.source, text, int(position), layer, k, n if corpus == "bbc" else None,
                                    up.name if corpus == "upload" else None),
                 {"cosine": [h.cosine for h in hits], "segment": [h.segment for h in hits]})
