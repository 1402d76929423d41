"""Attention: what each head of each layer looks at, as heatmaps, grids, a head view, statistics,
rollout and flow across layers, what actually flows (context mixing: explorer.context_mixing) and the
neuron view; every view can merge WordPieces into words."""

import numpy as np
import pandas as pd
import streamlit as st

from bertcore.analysis.attention import activations
from bertcore.analysis.attention import rollout
from bertcore.analysis.representations import syntax
from bertcore.analysis.attention.words import merge_attention
from bertcore.analysis.grammar.agreement import check_verb
from bertcore.modeling.embeddings import InputError
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, resources, widgets
from explorer.server import share
from explorer import context_mixing as what_flows
from explorer import edited_input as whatif
from explorer.as_code import inside
from explorer.figures import attention as att_figures
from explorer.figures import rollout as rollout_figures

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
text_b = whatif.edited_input("att", text, lm, text_pair)  # None while "what if" is off
try:
    act = resources.forward(resources.source_key(lm.source), text, text_pair, _loaded=lm)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()

enc = act.encoding
limit = lm.max_length
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, limit)

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
shown_layer, shown_head = widgets.layer_number(layer), widgets.head_number(head)  # the labels' numbers, in text
key = resources.source_key(lm.source)
attn = resources.attention_maps(key, text, text_pair, hide, _loaded=lm)  # (L, heads, T, T) WordPieces
groups = resources.groups_of(key, text, text_pair, _loaded=lm) if by_word else None


def merged(a: np.ndarray) -> np.ndarray:
    """``(..., T, T)`` as shown: merged into words when the toggle is on (Clark et al. 2019)."""
    return a if groups is None else merge_attention(a, groups)


if groups is None:
    labels, members = list(enc.tokens), [[i] for i in range(len(enc.tokens))]
else:
    labels, members = groups.labels, groups.members
if st.toggle("Part of speech on the tokens (spaCy)", key="att_pos", persist_state="session",
             help="Each token (or word) label gets its word's part of speech and dependency label, e.g. "
                  "'keys · NOUN nsubj', from spaCy's English parser: see which heads link which word classes."):
    try:
        pos_labels, _ = syntax.token_labels(syntax.parse_segment(lm.tokenizer, text, text_pair, max_length=limit))
        if len(pos_labels) == len(enc.tokens):
            labels = [f"{lab} · {pos_labels[m[0]]}" if pos_labels[m[0]] else lab for lab, m in zip(labels, members)]
    except syntax.SyntaxUnavailable as exc:
        st.caption(widgets.escape_md(str(exc)))
t = len(labels)
unit_types = [enc.token_type_ids[m[0]] for m in members]
segment_break = next((u for u, m in enumerate(members) if enc.sequence_ids[m[0]] == 1), None)
notes = []
if hide:
    notes.append("Attention to [CLS]/[SEP] removed; each row is rescaled to sum to 1 over the other tokens.")
if groups is not None:
    notes.append(f"{len(enc.tokens)} WordPieces merged into {t} words and special tokens: a row is the mean of "
                 "its pieces' rows, a column the sum of its pieces' columns, so rows still sum to 1.")
if notes:
    st.caption(" ".join(notes))
if text_b is not None:
    with st.container(border=True):
        whatif.views(lm, "att", text, text_b, text_pair, fill_mask=False, head=(layer, head))
if (text, text_pair) == (DEFAULT, None):  # the default example: does this model get it right, and which head?
    try:
        chk = check_verb(lm.model, lm.tokenizer, DEFAULT, *DEFAULT_AGREEMENT)
    except FillMaskError:
        chk = None  # an encoder without an MLM head cannot say which verb it prefers
    except ValueError as exc:  # a vocabulary without "are" / "is" as one token (a small BPE): no verdict
        st.caption(f"The agreement check of this example does not apply to this model: {exc}.")
        chk = None
    if chk is not None:
        verdict = "gets it right" if chk.right else "gets it wrong (it agrees with the nearer noun)"
        (st.info if chk.right else st.warning)(
            f"With *are* masked, this model gives *are* {chk.p_correct:.1%} and *is* {chk.p_other:.1%}: it "
            f"{verdict}. Which head links the verb to its subject? In **layer {widgets.layer_number(chk.head[0])}, "
            f"head {widgets.head_number(chk.head[1])}**, "
            f"*are* puts {chk.to_subject:.0%} of its attention on *keys* and {chk.to_attractor:.0%} on *cabinet*, "
            "the noun in between: set the sliders to it.", icon=":material/check:" if chk.right else None)


def matrix_frame(m: np.ndarray, rows: list[str], cols: list[str]) -> pd.DataFrame:
    """A matrix with labelled rows and columns for CSV export (position-prefixed: tokens repeat)."""
    return pd.DataFrame(np.asarray(m), index=pd.Index(rows, name="query"), columns=cols)


ids = [f"{i}:{lab}" for i, lab in enumerate(labels)]


def query_picker(key_: str, names: list[str], default: int) -> int:
    """A token selectbox whose value survives a shorter text (reset to ``default``)."""
    if key_ in st.session_state and not 0 <= st.session_state[key_] < len(names):
        st.session_state[key_] = default
    return int(st.selectbox("Token", range(len(names)), key=key_, format_func=lambda i: f"{i}: {names[i]}",
                            **({} if key_ in st.session_state else {"index": default})))


as_code.expander("attention", "Attention", inside.attention(lm.source, text, text_pair, layer, head, hide, by_word),
                 merged(attn[layer, head]))
default_query = next((u for u, m in enumerate(members) if enc.word_ids[m[0]] is not None), 0)
TABS = ["One head", "All heads of a layer", "All layers × heads", "Head view", "Head statistics",
        "Rollout and flow", "What flows", "Neuron view"]
# lazy: only the open tab runs
one, grid, thumbs, view, stats, roll, flows_tab, neuron = st.tabs(TABS, key="att_tab", on_change="rerun")
if one.open:
    with one:
        st.caption(f"Layer {shown_layer}, head {shown_head}: row = the token that looks, column = the token looked at. "
                   + ("The dotted lines separate sentence A from sentence B." if segment_break else ""))
        one_head = merged(attn[layer, head])
        widgets.plotly_chart(att_figures.attention_heatmap(one_head, labels,
                                                           segment_break=segment_break), key="att_one")
        widgets.download_csv(matrix_frame(one_head, ids, ids), f"attention_L{shown_layer}_H{shown_head}",
                             key="att_one_csv")
if grid.open:
    with grid:
        st.caption("The same sentence seen by every head of the chosen layer: heads specialize (next token, "
                   "previous token, [SEP], the same word ...).")
        layer_maps = merged(attn[layer])  # (heads, T, T)
        widgets.plotly_chart(att_figures.layer_grid(layer_maps, labels, layer), key="att_grid")
        index = pd.MultiIndex.from_product([range(1, act.num_heads + 1), ids], names=["head", "query"])
        widgets.download_csv(pd.DataFrame(layer_maps.reshape(-1, t), index=index, columns=ids),
                             f"attention_L{shown_layer}_all_heads", key="att_grid_csv")
if thumbs.open:
    with thumbs:
        st.caption("Every head of every layer as a thumbnail, each scaled to its own maximum; long inputs are "
                   "averaged over blocks of tokens. Vertical stripes mean everyone looks at one token "
                   "(often [SEP]); a diagonal means 'look at myself / my neighbour'. Download one layer's "
                   "maps as CSV from 'All heads of a layer'.")
        every = attn if groups is None else resources.word_attention(key, text, text_pair, hide, _loaded=lm)
        widgets.plotly_chart(att_figures.thumbnails(every), key="att_thumbs")
if view.open:
    with view:
        st.caption("Pick a token: lines go to the tokens it attends to in the chosen layer and head, thicker "
                   "for more attention. Only the strongest links are drawn.")
        vc1, vc2 = st.columns([3, 1])
        with vc1:
            query = query_picker("att_query", labels, default_query)
        with vc2:
            top_k = widgets.clamped_slider("Links drawn", "att_topk", 1, min(50, t), min(12, t))
        one_map = merged(attn[layer, head])
        fig = att_figures.head_view(one_map, labels, query, top_k=top_k, segment_ids=unit_types)
        widgets.plotly_chart(fig, key="att_view")
        d1, d2, _ = st.columns([1, 1, 4])
        widgets.download_html(fig, f"head_view_L{shown_layer}_H{shown_head}_{query}", key="att_view_html", where=d1)
        widgets.download_csv(pd.DataFrame({"key": ids, "weight": one_map[query]}).set_index("key"),
                             f"head_view_L{shown_layer}_H{shown_head}_{query}", key="att_view_csv", where=d2)
if stats.open:
    with stats:
        st.caption("Computed on the full attention (special tokens and WordPieces, whatever the toggles say), "
                   "averaged over the query tokens. Entropy: 0 bits = all attention on one token; "
                   f"{np.log2(len(enc.tokens)):.1f} bits = spread evenly over all {len(enc.tokens)}. "
                   "Distance: how many positions away, on average.")
        hs = resources.head_stats(key, text, text_pair, _loaded=lm)
        name = st.radio("Statistic", list(activations.HeadStats.NAMES), format_func=activations.HeadStats.NAMES.get,
                        horizontal=True, key="att_stat")
        bounds = {"entropy": (0, hs.max_entropy), "distance": (0, None)}.get(name, (0, 1))
        values = getattr(hs, name)
        widgets.plotly_chart(att_figures.stat_heatmap(values, activations.HeadStats.NAMES[name], *bounds),
                             key="att_stat_fig")
        widgets.download_csv(pd.DataFrame(values, index=pd.Index(range(1, act.num_layers + 1), name="layer"),
                                          columns=[f"head {h}" for h in range(1, act.num_heads + 1)]),
                             f"head_{name}", key="att_stat_csv")
        st.caption(f"Layer {shown_layer}, every head (the table's toolbar downloads it as CSV):")
        st.dataframe(pd.DataFrame({"head": np.arange(1, act.num_heads + 1),
                                   **{label: np.round(getattr(hs, k)[layer], 3)
                                      for k, label in activations.HeadStats.NAMES.items()}}),
                     hide_index=True, key="att_stat_table")
if roll.open:
    with roll:
        st.caption(
            "How much of each input token reaches the chosen token at each layer (Abnar & Zuidema 2020, "
            "'Quantifying Attention Flow in Transformers'). **Raw**: that layer's attention alone, averaged "
            "over heads. **Rollout**: the layers' attention multiplied from the bottom up, with the residual "
            "connection counted as 0.5·A + 0.5·I. **Flow**: the same graph read as pipes with capacities, "
            "the maximum flow from each input token. Rows sum to 1; top row = last layer.")
        query = query_picker("att_query", labels, default_query)
        maps = {rollout.METHODS["raw"]: resources.head_mean(key, text, text_pair, hide, by_word,
                                                            _loaded=lm)[:, query, :],
                rollout.METHODS["rollout"]: resources.rollout_maps(key, text, text_pair, hide, by_word,
                                                                   _loaded=lm)[:, query, :]}
        if t <= rollout.FLOW_MAX_TOKENS:
            maps[rollout.METHODS["flow"]] = resources.flow_map(key, text, text_pair, hide, by_word, query, _loaded=lm)
        else:
            maps[rollout.METHODS["flow"]] = None
            st.info(f"Attention flow is offered up to {rollout.FLOW_MAX_TOKENS} tokens (this input has {t}"
                    f"{' words' if groups is not None else ''}): it needs one max-flow per layer and input token. "
                    "Shorten the text, or turn on 'Words, not WordPieces' to merge pieces.",
                    icon=":material/hourglass_disabled:")
        fig = rollout_figures.contributions_figure(maps, labels, f"{query}: {labels[query]}")
        widgets.plotly_chart(fig, key="att_roll")
        rows = [(method, lv) for method, m in maps.items() if m is not None for lv in range(1, act.num_layers + 1)]
        table = pd.DataFrame(np.concatenate([m for m in maps.values() if m is not None]),
                             index=pd.MultiIndex.from_tuples(rows, names=["method", "layer"]), columns=ids)
        d1, d2, _ = st.columns([1, 1, 4])
        widgets.download_html(fig, f"rollout_{query}", key="att_roll_html", where=d1)
        widgets.download_csv(table, f"rollout_{query}", key="att_roll_csv", where=d2)
if flows_tab.open:
    with flows_tab:
        what_flows.section(lm, key, text, text_pair, layer, labels, groups,
                           query_picker("att_query", labels, default_query))
if neuron.open:
    with neuron:
        st.caption(
            "Where one attention weight comes from (bertviz's neuron view; Vig 2019). For the chosen layer, "
            "head and query token: the query vector q, every key vector k, their elementwise product (its "
            "sum is the dot product), the score q·k/√d and the softmax that turns scores into the attention "
            "weights of the other views. Red = positive, blue = negative. Always per WordPiece: q and k are "
            "vectors of single tokens.")
        nq = query_picker("att_nq", enc.tokens, next((i for i, w in enumerate(enc.word_ids) if w is not None), 0))
        nv = resources.neuron_view(key, text, text_pair, layer, head, nq, _loaded=lm)
        widgets.plotly_chart(rollout_figures.neuron_figure(nv.query_vector, nv.key_vectors, nv.product, nv.scores,
                                                           nv.probs, enc.tokens, f"{nq}: {enc.tokens[nq]}"),
                             key="att_neuron")
        tok_ids = [f"{i}:{tok}" for i, tok in enumerate(enc.tokens)]
        d = nv.query_vector.size
        table = pd.DataFrame(np.column_stack([nv.scores, nv.probs, nv.key_vectors, nv.product]),
                             index=pd.Index(tok_ids, name="key"),
                             columns=["score", "probability"] + [f"k[{i}]" for i in range(d)]
                             + [f"q*k[{i}]" for i in range(d)])
        widgets.download_csv(table, f"neuron_view_L{shown_layer}_H{shown_head}_{nq}", key="att_neuron_csv")
