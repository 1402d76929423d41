"""Compare two models on the same sentences: CKA per layer, Jensen-Shannon distance per head,
one head of both side by side."""

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis.representations.compare import MAX_SENTENCES, TokenizationMismatch
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import PACKAGED
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, resources, widgets
from explorer.views import compare as views
from explorer.views.code import snippet
from explorer.views.core import source_key

DEFAULT = (
    "The bank raised its interest rates again this quarter.\n"
    "She sat on the bank of the river and watched the boats.\n"
    "The striker scored twice in the second half of the match.\n"
    "Parliament will vote on the new budget next week.\n"
    "The new phone has a faster chip and a larger screen.\n"
    "After the storm, the village had no power for three days.\n"
    "Shares fell sharply after the company missed its profit forecast.\n"
    "The film won three awards at the festival on Sunday.\n"
)

st.title("Compare two models")
st.markdown(
    """
Run two models on the same sentences and see where they differ. **Model A** is the one chosen in
the sidebar; pick **model B** below: a checkpoint fine-tuned from A, two checkpoints of one run,
or two runs.

- **CKA** (linear centred kernel alignment, Kornblith et al. 2019, "Similarity of Neural Network
  Representations Revisited") compares the hidden states of a layer over all the tokens: 1 means
  the same representation up to a rotation and a scale (so a model and a copy with shuffled
  neurons score 1), lower means the layer encodes the tokens differently.
- **Jensen-Shannon distance** compares each head's attention maps row by row: 0 means the head
  attends exactly as before, 1 means to completely different tokens.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", section 5) found that fine-tuning
changes mostly the **last layers**: CKA stays near 1 in the lower layers and drops towards the top,
and the JS distance grows in the last layers. Check whether that holds for your run.
"""
)

lm_a = widgets.current_model()
with st.expander(f"Model B (model A is the sidebar's: {widgets.escape_md(lm_a.source.name)})", expanded=True):
    source_b = widgets.source_picker(st, "cmp_b", "cmp_source_b", "cmp_error_b", default=PACKAGED)
try:
    resources.load_model(source_b)  # with a spinner; the view reads it from the same cache
except Exception as exc:  # noqa: BLE001 - a model that loaded before may have been deleted since
    st.error(f"Cannot load model B ({widgets.escape_md(source_b.name)}): {widgets.escape_md(exc)}",
             icon=":material/error:")
    st.stop()

text = st.text_area(f"Sentences, one per line (at most {MAX_SENTENCES}; more tokens give a steadier CKA)",
                    value=DEFAULT, key="cmp_text", height=170, persist_state="session")
include_special = st.toggle("Include [CLS] / [SEP] in CKA", key="cmp_special", persist_state="session",
                            help="Their vectors are outliers that can dominate CKA; they are left out by default.")
args = (lm_a.source, source_b, text, include_special)
try:
    cmp = views.compare(*args)
except TokenizationMismatch as exc:
    st.warning(f"These models cannot be compared token by token: {widgets.escape_md(exc)}",
               icon=":material/compare_arrows:")
    st.stop()
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()

if source_key(lm_a.source) == source_key(source_b):
    st.info("Model A and model B are the same model: CKA is 1 and the JS distance 0 everywhere. Pick another "
            "model B above (e.g. a checkpoint of a training run).", icon=":material/info:")
if cmp.cut:
    st.warning(f"{widgets.lines_phrase(cmp.cut)} cut to the models' positions.", icon=":material/content_cut:")
c1, c2, c3 = st.columns(3)
c1.metric("Tokens compared", f"{cmp.tokens:,}", help="Over every line, [CLS]/[SEP] excluded unless included above.")
c2.metric("Layers (A / B)", f"{cmp.layers[0]} / {cmp.layers[1]}")
c3.metric("Heads per layer (A / B)", f"{cmp.heads[0]} / {cmp.heads[1]}")
if cmp.tokens < cmp.hidden // 2:
    st.caption(f"Only {cmp.tokens} tokens for {cmp.hidden}-dimensional hidden states: with few tokens CKA is high for "
               "almost any pair of representations. Add lines for a sharper comparison.")

drawn: list = []  # the open tab's figure: what "Show the code" draws
TABS = ["CKA by layer", "Layer × layer CKA", "Attention difference per head", "One head side by side"]
by_layer, matrix, heads, one = st.tabs(TABS, key="cmp_tab", on_change="rerun")
if by_layer.open:
    with by_layer:
        if cmp.cka is None:
            st.info("The models have different numbers of layers: compare them in the layer × layer CKA tab.")
        else:
            st.caption("Layer 0 ('emb') is the embedding output. Fine-tuning typically keeps the lower layers (CKA "
                       "near 1) and changes the top ones (Kovaleva et al. 2019).")
            js_layer = cmp.js.mean(1) if cmp.js is not None else None
            widgets.plotly_chart(views.by_layer_figure(cmp), key="cmp_by_layer")
            drawn.append((views.by_layer_figure, {}))
            table = pd.DataFrame({"layer": ["emb"] + [str(i) for i in range(1, len(cmp.cka))],
                                  "CKA": np.round(cmp.cka, 4)})
            if js_layer is not None:
                table["mean JS distance"] = [None] + list(np.round(js_layer, 4))
            st.dataframe(table, hide_index=True, key="cmp_by_layer_table")
            widgets.download_csv(table, "cka_by_layer", key="cmp_by_layer_csv", index=False)
if matrix.open:
    with matrix:
        st.caption("Every layer of A against every layer of B. A bright diagonal means each layer kept its role; "
                   "brightness off the diagonal means a layer of B resembles another layer of A.")
        widgets.plotly_chart(views.matrix_figure(cmp), key="cmp_matrix")
        drawn.append((views.matrix_figure, {}))
        names = ["emb"] + [str(i) for i in range(1, cmp.cka_matrix.shape[1])]
        frame = pd.DataFrame(cmp.cka_matrix, columns=[f"B {n}" for n in names],
                             index=[f"A {n}" for n in ["emb"] + [str(i) for i in range(1, cmp.cka_matrix.shape[0])]])
        widgets.download_csv(frame, "cka_matrix", key="cmp_matrix_csv")
if heads.open:
    with heads:
        if cmp.js is None:
            st.info("The models have different numbers of layers or heads, so their heads cannot be paired.")
        else:
            st.caption("Jensen-Shannon distance between the two models' attention, per head, averaged over every "
                       "query token of every line: 0 = the head attends as before, 1 = to entirely different tokens.")
            widgets.plotly_chart(views.heads_figure(cmp), key="cmp_js")
            drawn.append((views.heads_figure, {}))
            frame = pd.DataFrame(cmp.js, columns=[f"head {h + 1}" for h in range(cmp.js.shape[1])],
                                 index=[f"layer {i + 1}" for i in range(cmp.js.shape[0])])
            widgets.download_csv(frame, "js_per_head", key="cmp_js_csv")
if one.open:
    with one:
        if cmp.js is None:
            st.info("The models have different numbers of layers or heads, so their heads cannot be paired.")
        else:
            s1, s2, s3 = st.columns([3, 2, 2])
            with s1:
                line = st.selectbox("Line", range(len(cmp.sentences)), key="cmp_line",
                                    format_func=lambda i: f"{i + 1}: {cmp.sentences[i][:60]}") \
                    if len(cmp.sentences) > 1 else 0
                line = min(int(line), len(cmp.sentences) - 1)
            with s2:
                layer = widgets.layer_picker("cmp", cmp.js.shape[0], compact=True)  # 0-based block
            with s3:
                head = widgets.head_picker("cmp", cmp.js.shape[1], compact=True)  # 0-based
            shown_layer, shown_head = widgets.layer_number(layer), widgets.head_number(head)  # the labels' numbers
            one_line = cmp.lines[line]
            att_a, att_b = one_line.attention_a[layer, head], one_line.attention_b[layer, head]  # the CSVs' tables
            d = float(one_line.js[layer, head])
            st.caption(f"Layer {shown_layer}, head {shown_head} on line {line + 1}: JS distance {d:.3f} (mean over "
                       "query rows). "
                       "Rows are the tokens that look, columns the tokens looked at.")
            widgets.plotly_chart(views.side_by_side_figure(cmp, line, layer, head), key="cmp_side")
            drawn.append((views.side_by_side_figure, {"line": line, "layer": layer, "head": head}))
            names = [f"{i}:{tok}" for i, tok in enumerate(one_line.tokens)]
            d1, d2 = st.columns(2)
            for where, which, att in ((d1, "A", att_a), (d2, "B", att_b)):
                frame = pd.DataFrame(att, index=names, columns=names)
                widgets.download_csv(frame, f"attention_{which}_layer{shown_layer}_head{shown_head}",
                                     key=f"cmp_side_csv_{which}",
                                     label=f"CSV of model {which}", where=where)
as_code.expander("compare", "Compare models",
                 snippet("Compare models: CKA by layer and attention difference per head", views.compare, args,
                         draw=drawn), cmp)
