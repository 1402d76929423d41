"""Model anatomy: every named parameter, grouped; preset sizes checked against transformers; the pooler."""

import pandas as pd
import streamlit as st

from bertcore.readouts import anatomy
from bertcore.modeling import families
from bertcore.modeling.config import PRESETS
from bertcore.modeling.embeddings import InputError
from bertcore.tokenization.tokenizer import TextError
from explorer import as_code, widgets
from explorer.figures import anatomy as ana_figures
from explorer.server import heavy
from explorer.views import anatomy as views
from explorer.views.code import snippet

POOLER_TEXT = "The pooler summarises the whole input through the [CLS] token."

st.title("Model anatomy")
st.markdown(
    """
A BERT is a stack of named weight tensors, and the names follow the architecture: the
**embeddings** (token, position and segment tables plus a LayerNorm), **L identical encoder
layers** (self-attention with query/key/value and output projections, a feed-forward block
H → I → H, each followed by a residual connection and LayerNorm), the **pooler**, and the
task **heads** when there are any. The names below are Hugging Face's, so a checkpoint loads
by name.
"""
)


lm = widgets.current_model()
cfg = lm.config
params = views.parameters(lm.source)
rows, totals = params.rows, params.totals
total = sum(totals.values())

st.subheader(f"This model: {widgets.escape_md(lm.source.name)}")
m = st.columns(6)
m[0].metric("Parameters", f"{total / 1e6:.1f} M" if total >= 1e6 else f"{total:,}", help=f"{total:,} exactly")
m[1].metric("Named tensors", len(rows))
m[2].metric("Layers L", cfg.num_hidden_layers)
m[3].metric("Hidden H", cfg.hidden_size)
m[4].metric("Heads", cfg.num_attention_heads)
m[5].metric("Intermediate I", cfg.intermediate_size)
head_name = {"base": "none (BertModel)", "mlm": "MLM (BertForMaskedLM)",
             "pretraining": "MLM + NSP (BertForPreTraining)",
             "classification": "sequence classifier"}.get(lm.head, lm.head)
st.caption(f"{total:,} parameters in {len(rows)} named tensors · vocabulary {cfg.vocab_size:,} · "
           f"positions {cfg.max_position_embeddings} · segments "
           f"{cfg.type_vocab_size} · heads on top: {head_name}.")

widgets.plotly_chart(ana_figures.groups_figure(list(totals), list(totals.values())), key="ana_groups")
emb = totals.get("embeddings", 0)
st.caption(f"The embeddings hold {emb / total:.0%} of the parameters, mostly the {cfg.vocab_size:,} × "
           f"{cfg.hidden_size} token table. Every encoder layer has the same "
           f"{totals.get('encoder layer 0', 0):,} parameters: 4(H² + H) for Q, K, V and the attention output, "
           "(HI + I) + (IH + H) for the feed-forward block, and 2 × 2H for the two LayerNorms.")

tied = params.tied
if tied:
    st.info("Tied weights, counted once: " + "; ".join(f"`{a}` is `{b}`" for a, b in tied) +
            ". The MLM decoder reuses the token embedding matrix (Press & Wolf 2017), so the output "
            "layer adds only a bias.", icon=":material/link:")

groups = ["all"] + list(totals)
group = st.selectbox("Show the parameters of", groups, key="ana_group", persist_state="session")
table = pd.DataFrame([{"name": r.name, "shape": " × ".join(map(str, r.shape)), "parameters": r.count,
                       "group": r.group, "part": r.part} for r in rows if group == "all" or r.group == group])
if cfg.family != "bert":  # the same modules under the family's own names (bertcore.modeling.families)
    st.caption(f"This {cfg.family} model is built from BERT's modules, so the names below are BERT's; the column "
               f"*transformers name* is the same tensor in transformers' {cfg.family} class (its weight-name map).")
    table.insert(1, "transformers name", [families.hf_name(cfg.family, n, lm.head) for n in table["name"]])
st.dataframe(table, hide_index=True, key="ana_table",
             column_config={"parameters": st.column_config.NumberColumn(format="localized")})
st.caption(f"{len(table)} tensors, {int(table['parameters'].sum()):,} parameters.")

# ----------------------------------------------------------------------------- two architectures
st.subheader("Compare two architectures")
st.markdown("Each family is a configuration of the same modules, so two architectures line up part by part: "
            "which parts exist, their shapes, and how many parameters each holds (the bare encoders at their "
            "published base sizes; one encoder layer stands for all).")
names = list(anatomy.BASE_CONFIGS)
c1, c2 = st.columns(2)
arch_a = c1.selectbox("Architecture A", names, index=0, key="ana_arch_a", persist_state="session")
arch_b = c2.selectbox("Architecture B", names, index=names.index("ModernBERT-base"), key="ana_arch_b",
                      persist_state="session")
archs = heavy.run_view(views.architectures, "both architectures, built on the meta device", arch_a, arch_b)
arch = pd.DataFrame(archs.rows)
(n_a, n_b), (layers_a, layers_b) = archs.counts, archs.layers
m = st.columns(3)
m[0].metric(f"{arch_a}: parameters", f"{n_a / 1e6:.1f} M", help=f"{n_a:,}; {layers_a} layers")
m[1].metric(f"{arch_b}: parameters", f"{n_b / 1e6:.1f} M", help=f"{n_b:,}; {layers_b} layers")
m[2].metric("Difference (B − A)", f"{(n_b - n_a) / 1e6:+.1f} M")
st.dataframe(arch, hide_index=True, key="ana_arch",
             column_config={"shapes_a": f"shapes in {arch_a}", "shapes_b": f"shapes in {arch_b}",
                            "params_a": st.column_config.NumberColumn(arch_a, format="localized"),
                            "params_b": st.column_config.NumberColumn(arch_b, format="localized"),
                            "difference": st.column_config.NumberColumn("B − A", format="localized")})
st.caption("A dash: the part does not exist in that architecture. ModernBERT has no position table (rotary "
           "positions), no segment table, no biases (its LayerNorms hold only a gain), a GeGLU feed-forward "
           "whose first map is twice as wide (half of it gates the other half), a final LayerNorm and no pooler; "
           "ELECTRA's narrower embeddings get a projection; DistilBERT keeps BERT's layer with half the layers.")

# ----------------------------------------------------------------------------- presets
st.subheader("Presets")
st.markdown("The sizes this project can build and train. *nano* fits a CPU training run; *tiny* to *medium* are "
            "Turc et al.'s (2019) miniatures; *base* and *large* are the paper's. Each count is computed from the "
            "config's shapes and compared with `transformers`' own classes built for the same config on "
            "PyTorch's `meta` device (shapes only, no memory): BERT-base has 199 named tensors and "
            "109,482,240 parameters, BERT-large 335,141,888.")
presets = pd.DataFrame(heavy.run_view(views.presets, "the presets' parameter counts, beside transformers'"))
match = [name for name, c in PRESETS.items()
         if (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) ==
         (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.intermediate_size)]
widgets.plotly_chart(ana_figures.presets_figure(list(presets["preset"]), list(presets["BertModel"]),
                                           highlight=match[0] if match else None), key="ana_presets")
st.dataframe(presets, hide_index=True, key="ana_preset_table",
             column_config={"BertModel": st.column_config.NumberColumn(format="localized"),
                            "BertForPreTraining": st.column_config.NumberColumn(format="localized")})
if match:
    st.caption(f"This model has the shape of the {match[0]} preset (red bar); its vocabulary or positions may differ.")
if not presets["equal to transformers"].all():
    st.error("Some preset counts differ from transformers': see the table.", icon=":material/error:")

# ----------------------------------------------------------------------------- pooler
st.subheader("What the pooler does")
st.markdown("The pooler takes the last layer's vector of the first token, `[CLS]`, multiplies it by an H × H "
            "matrix, adds a bias and applies **tanh**: `pooled = tanh(W · h_[CLS] + b)`. The result is the "
            "single vector that next-sentence prediction and sequence classifiers read. Every other token's "
            "output is ignored by the pooler.")
text = st.text_input("Sentence for the pooler", POOLER_TEXT, key="ana_text", persist_state="session")
try:
    steps = views.pooler(lm.source, text)
except (TextError, InputError) as exc:
    widgets.show_error(exc)
    st.stop()
if steps.num_truncated:
    widgets.truncation_notice(steps.n_tokens + steps.num_truncated, steps.n_tokens,
                              "The pooler only reads [CLS] anyway, but [CLS] has attended to the kept tokens only.")
result = views.model_anatomy(lm.source, text)  # the two views above, as "Show the code" prints them
if steps.pooled is None:
    st.info("This model has no pooler (BertForMaskedLM drops it, as Hugging Face does).", icon=":material/info:")
elif cfg.pooler_act != "tanh" or cfg.pooler_norm or cfg.classifier_pooling != "cls":
    st.info(f"This {cfg.family} model's sentence head is not BERT's tanh pooler (it applies {cfg.pooler_act}"
            + (" then a LayerNorm" if cfg.pooler_norm else "") + f" over the {cfg.classifier_pooling} token"
            + ("s" if cfg.classifier_pooling == "mean" else "") + "), so the tanh view below does not apply.",
            icon=":material/info:")
else:
    widgets.plotly_chart(views.pooler_figure(result), key="ana_pooler")
    check = "equals" if steps.matches_model else "does NOT equal"
    st.caption(f"Each dot is one of the {cfg.hidden_size} dimensions: before tanh (x) and after (y). "
               f"Recomputed here, the pooled vector {check} the model's `pooler_output`. "
               f"Saturated dimensions (|y| > 0.99): {int((abs(steps.pooled) > 0.99).sum())}.")
draw = [(views.groups_figure, {})] + ([(views.pooler_figure, {})] if steps.pooled is not None else [])
as_code.expander("anatomy", "Model anatomy", snippet("Model anatomy: parameters per group and the pooler",
                                                     views.model_anatomy, (lm.source, text), draw=draw), result)
