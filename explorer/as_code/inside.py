"""Snippets of the "Inside BERT" pages: Tokenization, Embeddings, Positional embeddings, Attention, Model anatomy,
One forward pass. Each function takes the inputs the page used and returns the snippet's text
(:func:`explorer.as_code.common.snippet`); its ``result`` is what the page passes to ``as_code.expander``."""

from __future__ import annotations

from bertcore.loading.sources import ModelSource

from .common import snippet


def tokenization(source: ModelSource, text: str, text_pair: str | None, pos: bool) -> str:
    """The token grid: ``result`` = ``{"input_ids", "token_type_ids", "attention_mask"}`` (lists of ints)."""
    labels = ""
    if pos:
        labels = ("\n# each WordPiece's word: part of speech and dependency (spaCy's English parser)\n"
                  "labels, hovers = syntax.token_labels(syntax.parse_segment(lm.tokenizer, text, text_pair,\n"
                  "                                                          max_length=lm.max_length))\n")
    body = f"""enc = encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)
print(list(zip(enc.tokens, enc.input_ids)))
{labels}
fig = token_figures.token_grid(enc.tokens, enc.input_ids, enc.word_ids, enc.special_tokens_mask, enc.token_type_ids,
                               enc.attention_mask, per_row=12 if len(enc) <= 120 else 16{
                               ', labels=labels, label_hover=hovers' if pos else ''})
fig.show()
result = {{"input_ids": enc.input_ids, "token_type_ids": enc.token_type_ids, "attention_mask": enc.attention_mask}}"""
    imports = ["from bertcore.tokenization.tokenizer import encode",
               "from explorer.figures import tokens as token_figures"]
    if pos:
        imports.append("from bertcore.analysis.representations import syntax")
    return snippet("Tokenization: WordPieces, ids, segment ids, attention mask", source, imports,
                   {"text": text, "text_pair": text_pair}, body)


def embeddings(source: ModelSource, text: str, text_pair: str | None) -> str:
    """The size of each embedding part per token: ``result`` = ``{part: (T,) L2 norms}``."""
    body = """enc = encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)
t = enc.tensors()
# token + position + segment, then LayerNorm, written out from the weights (Devlin et al. 2019, section 3.2)
parts = anatomy.embedding_breakdown(lm.model, t["input_ids"], t["token_type_ids"])
print("recomposition equals the model's embedding output:", parts.matches(), parts.max_abs_diff)
result = {name: norm.numpy() for name, norm in parts.norms.items() if name != "normalised"}  # (T,) each
fig = emb_figures.norms_figure(result, enc.tokens)
fig.show()"""
    return snippet("Embeddings: the size of each part, token by token", source,
                   ["from bertcore.readouts import anatomy", "from bertcore.tokenization.tokenizer import encode",
                    "from explorer.figures import embeddings as emb_figures"],
                   {"text": text, "text_pair": text_pair}, body)


def positions(source: ModelSource, start: int, stop: int, base: float) -> str:
    """Cosine between positions, learned vs sinusoidal: ``result`` = ``{"learned", "sinusoidal"}`` ``(P, P)``."""
    body = """learned = positional.learned_positions(lm.model, start, stop)  # (P, H): this model's table
sinus = positional.sinusoidal(stop - start, lm.config.hidden_size, base=base, start=start)  # Vaswani et al. 3.5
lv, sv = positional.views(learned), positional.views(sinus)
result = {"learned": lv.cosine, "sinusoidal": sv.cosine}  # (P, P) cosine similarity between positions
fig = pos_figures.compare_cosine(lv.cosine, sv.cosine, start, ("learned (this model)", f"sinusoidal (base {base:g})"))
fig.show()"""
    return snippet("Positional embeddings: cosine similarity between positions", source,
                   ["from bertcore.readouts import positional",
                    "from explorer.figures import positions as pos_figures"],
                   {"start": start, "stop": stop, "base": float(base)}, body)


def attention(source: ModelSource, text: str, text_pair: str | None, layer: int, head: int, hide: bool,
              words: bool) -> str:
    """One head's attention map: ``result`` = the ``(T, T)`` map drawn (rows: queries; merged into words with
    ``words``; [CLS]/[SEP] hidden and rows rescaled with ``hide``). ``layer`` / ``head``: 0-based (the title shows
    the page's 1-based labels)."""
    imports = ["from bertcore.analysis.attention import activations", "from explorer.figures import attention as "
               "att_figures"]
    lines = ["act = activations.run(lm.encoder, lm.tokenizer, text, text_pair)",
             "enc = act.encoding",
             "attn = act.attentions  # (layers, heads, T, T), float32"]
    if hide:
        imports.append("import numpy as np")
        lines += ["# zero the attention to [CLS] / [SEP] and rescale each row to sum to 1 again",
                  "attn = activations.hide_tokens(attn, np.array(enc.special_tokens_mask, dtype=bool))"]
    lines += ["# layer and head count from 0 (the page's 'Layer 1' is block 0)",
              "result = attn[layer, head]  # (T, T): row = the token that looks, column = the token looked at",
              "labels, members = list(enc.tokens), [[i] for i in range(len(enc.tokens))]"]
    if words:
        imports.append("from bertcore.analysis.attention.words import merge_attention, word_groups")
        lines += ["# words, not WordPieces: to a word = sum over its pieces, from a word = mean (Clark et al. 2019)",
                  "groups = word_groups(enc.tokens, enc.word_ids)",
                  "result, labels, members = merge_attention(result, groups), groups.labels, groups.members"]
    lines += ["segment_break = next((u for u, m in enumerate(members) if enc.sequence_ids[m[0]] == 1), None)",
              "fig = att_figures.attention_heatmap(result, labels, segment_break=segment_break)",
              "fig.show()"]
    return snippet(f"Attention: layer {layer + 1}, head {head + 1}", source, imports,
                   {"text": text, "text_pair": text_pair, "layer": layer, "head": head}, "\n".join(lines))


def anatomy(source: ModelSource, text: str) -> str:
    """Parameters per group and the pooler's output: ``result`` = ``{"parameters": (groups,), "pooled": (H,) or
    None}``."""
    body = """rows = anatomy.parameter_table(lm.model)  # every named tensor, Hugging Face names
totals = anatomy.group_totals(rows)  # group -> parameter count
fig = ana_figures.groups_figure(list(totals), list(totals.values()))
fig.show()

# %%
# the pooler: tanh(W h_[CLS] + b)
enc = encode(lm.tokenizer, text, max_length=lm.max_length)
t = enc.tensors()
steps = anatomy.pooler_steps(lm.model, t["input_ids"], t["attention_mask"], t["token_type_ids"])
if steps is not None:  # None: this model has no pooler
    ana_figures.pooler_figure(steps.dense.numpy(), steps.pooled.numpy()).show()
result = {"parameters": np.array(list(totals.values())), "pooled": None if steps is None else steps.pooled.numpy()}"""
    return snippet("Model anatomy: parameters per group and the pooler", source,
                   ["import numpy as np", "from bertcore.readouts import anatomy",
                    "from bertcore.tokenization.tokenizer import encode",
                    "from explorer.figures import anatomy as ana_figures"], {"text": text}, body)


def forward_pass(source: ModelSource, text: str, text_pair: str | None, token: int, layer: int, head: int) -> str:
    """One forward pass step by step: ``result`` = ``{"hidden_states": (L+1, H) of the token, "probs":
    (T,) its attention row in the head}``. ``layer`` / ``head``: 0-based (the title shows the 1-based labels)."""
    body = """enc = encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)
t = enc.tensors()
# every step of the chosen block read at the model's named sites, each checked against its formula
# (layer and head count from 0: the page's "Layer 1" is block 0)
tr = forward_pass.trace(lm.model, t["input_ids"], token, layer, head, t["token_type_ids"])
print("largest difference to a formula or the model's forward:", max(tr.max_abs_diff.values()))
result = {"hidden_states": tr.hidden_states[:, token].double().numpy(),  # (L+1, H): the token after each layer
          "probs": tr.steps.probs[head, token].double().numpy()}  # (T,): its attention weights in the head
n_layers = lm.config.num_hidden_layers
fig = figs.strips_figure([figs.Strip(f"'{enc.tokens[token]}' after each layer", result["hidden_states"],
                                     f"(L+1, H) = ({n_layers + 1}, {lm.config.hidden_size})",
                                     "each layer's output",
                                     rows=["embeddings"] + [f"layer {k}" for k in range(1, n_layers + 1)],
                                     highlight=layer + 1)])  # row 0: the embeddings
fig.show()"""
    return snippet(f"One forward pass: token {token}, layer {layer + 1}, head {head + 1}", source,
                   ["from bertcore.readouts import forward_pass", "from bertcore.tokenization.tokenizer import encode",
                    "from explorer.figures import forward_pass as figs"],
                   {"text": text, "text_pair": text_pair, "token": token, "layer": layer, "head": head}, body)
