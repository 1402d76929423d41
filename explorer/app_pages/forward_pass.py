"""One forward pass, in real numbers: one token followed from its embedding through one attention head, the
feed-forward block and the MLM head. Wiring only: ``bertcore.readouts.forward_pass`` computes, ``explorer.figures.
forward_pass`` draws. Keys start with ``fp_``."""

import streamlit as st

from bertcore.modeling.embeddings import InputError
from bertcore.readouts.forward_pass import TraceError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.server import share
from explorer.panels import forward_pass as panels
from explorer.views import forward_pass as views
from explorer.views.code import snippet

DEFAULT = "The film won the [MASK] for best actor at the ceremony in London."
DEFAULT_B = "Its director thanked his mother."
TOLERANCE = 1e-4  # float32: each step and its formula, and the recording and a plain forward, differ by rounding only

st.title("One forward pass, in real numbers")
st.markdown(
    "Follow one token through the model, with every number the model computes. Each coloured strip is a vector "
    "(red above 0, blue below, one cell per dimension); its title gives the shape of the tensor it comes from, "
    "and hovering a cell shows the number and the formula that made it. Every step is read from the model's own "
    "forward pass, and each is checked against its formula applied to the step before it.")

lm = widgets.current_model()
cfg, tok = lm.config, lm.tokenizer
share.shareable({"fp_token": share.integer(0, 4096), "fp_layer": share.integer(1, 512),
                 "fp_head": share.integer(1, 512)})
text, text_pair = widgets.text_or_pair("fp", DEFAULT, DEFAULT_B)
try:
    enc = views.encoding(lm.source, text, text_pair)
except TextError as exc:
    widgets.show_error(exc)
    st.stop()
if enc.num_truncated:
    widgets.truncation_notice(len(enc) + enc.num_truncated, lm.max_length, "The trace follows the tokens kept.")
tokens = enc.tokens
n = len(tokens)
if "fp_token" not in st.session_state or not 0 <= int(st.session_state["fp_token"]) < n:
    st.session_state["fp_token"] = tokens.index(tok.mask_token) if tok.mask_token in tokens else min(1, n - 1)
c1, c2, c3 = st.columns([3, 1, 1])
i = int(c1.selectbox("Token to follow", range(n), key="fp_token", format_func=lambda j: f"{j}: {tokens[j]}",
                     help="Its row is taken out of every (T, …) tensor below."))
with c2:
    layer = widgets.layer_picker("fp", cfg.num_hidden_layers, default=0, compact=True)  # 0-based block
with c3:
    head = widgets.head_picker("fp", cfg.num_attention_heads, compact=True)  # 0-based
shown_layer, shown_head = widgets.layer_number(layer), widgets.head_number(head)  # the labels' numbers, in text

args = (lm.source, text, text_pair, i, layer, head)
try:
    result = views.trace(*args)
except (TraceError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
tr = result.trace

if tr.matches(TOLERANCE):
    st.success(f"Every step below equals its formula applied to the step before it, and the model's own forward "
               f"pass (hidden states of all "
               f"{cfg.num_hidden_layers} layers, every attention map" + (", the MLM logits" if tr.mlm else "")
               + f"): the largest difference is {max(tr.max_abs_diff.values()):.1e}, float32 rounding.",
               icon=":material/check_circle:")
else:
    st.error("Some steps differ from their formula or from the model's forward: " + ", ".join(
        f"{k} {v:.1e}" for k, v in tr.max_abs_diff.items()), icon=":material/error:")
LAYER_ROWS = ["embeddings"] + [widgets.layer_label(b) for b in range(cfg.num_hidden_layers)]  # row 0: embeddings
drawn = panels.steps(lm, result, LAYER_ROWS)
as_code.expander("forward_pass", "One forward pass", snippet(
    f"One forward pass: token {i}, layer {shown_layer}, head {shown_head}", views.trace, args, draw=drawn), result)
