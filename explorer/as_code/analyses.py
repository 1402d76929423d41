"""Snippets of the "Analyses" pages that read one input: Word senses, Grammar, Head ablation, Attribution. Each
function takes the inputs the page used and returns the snippet's text; its ``result`` is what the page passes to
``as_code.expander``."""

from __future__ import annotations

from bertcore.loading.sources import ModelSource

from .common import snippet


def word_senses(source: ModelSource, target: str, sentences: list[str], senses: list[str], layer: int) -> str:
    """One word's contextual vectors across sentences: ``result`` = ``{"cosine": (n, n) at the layer, "same",
    "different": (L+1,) mean similarity of same-sense / different-sense pairs by layer}``. ``layer``: a hidden_states
    index (0 = embeddings)."""
    body = """# the word's vector in every sentence and layer (mean of its WordPieces)
occ = similarity.word_occurrences(lm.encoder, lm.tokenizer, target, sentences)  # occ.vectors (n, L+1, H)
occ_senses = [senses[i] for i in occ.sentence_index]
labels = [f"[{senses[i]}] {occ.sentences[i]}" if senses[i] else occ.sentences[i] for i in occ.sentence_index]
base_mean, base_std = similarity.random_pair_baseline(occ.others, occ.other_words, n_pairs=400, seed=0)
cosine = vectors.cosine_matrix(occ.vectors[:, layer])  # (n, n); layer: hidden_states index (0 = embeddings)
same, different = similarity.similarity_by_layer(occ.vectors, occ_senses)  # (L+1,) each
result = {"cosine": cosine, "same": same, "different": different}
sim_figures.cosine_heatmap(cosine, labels, baseline=float(base_mean[layer])).show()
points, explained = vectors.pca_2d(occ.vectors[:, layer])
sim_figures.pca_scatter(points, labels, occ_senses, explained).show()
layer_names = ["emb"] + [str(i) for i in range(1, occ.vectors.shape[1])]
fig = sim_figures.similarity_by_layer(same, different, base_mean, base_std, layer_names)
fig.show()"""
    return snippet(f"Word senses: '{target}' at layer {layer}", source,
                   ["from bertcore import vectors", "from bertcore.analysis.representations import similarity",
                    "from explorer.figures import similarity as sim_figures"],
                   {"target": target, "sentences": sentences, "senses": senses, "layer": layer}, body)


def grammar(source: ModelSource, a: str, b: str, metric: str, max_tokens: int) -> str:
    """Two sentences' pseudo-log-likelihoods: ``result`` = ``{"pll": (2,), "log_probs_1", "log_probs_2": (T,)}``
    (nats)."""
    body = f"""# hide each token in turn and add up the log-probability of the real token (Salazar et al. 2020)
scores = [(label, pseudo_log_likelihood(lm.model, lm.tokenizer, s, metric, max_tokens={max_tokens}))
          for label, s in (("Sentence 1", a), ("Sentence 2", b))]
for label, s in scores:
    print(f"{{label}}: PLL {{s.pll:.2f}} nats")
result = {{"pll": np.array([s.pll for _, s in scores]), "log_probs_1": scores[0][1].log_probs,
          "log_probs_2": scores[1][1].log_probs}}
fig = figs.contributions_figure([(label, s.tokens, s.log_probs) for label, s in scores])
fig.show()"""
    return snippet("Grammar: which sentence does the model prefer?", source,
                   ["import numpy as np", "from bertcore.analysis.grammar.scoring import pseudo_log_likelihood",
                    "from explorer.figures import grammar as figs"], {"a": a, "b": b, "metric": metric}, body)


def ablation(source: ModelSource, text: str, text_pair: str | None, mode: str, off: tuple[tuple[int, int], ...]) -> str:
    """Heads switched off and how far the representations move: ``result`` = ``{"per_layer": (L+1,), "cls",
    "mean_pooled": float}`` (cosine to the unablated run)."""
    body = """cfg = lm.config
enc = activations.run(lm.encoder, lm.tokenizer, text, text_pair).encoding
# 1 keep / 0 off per (layer, head); "zero": Michel et al. 2019, "uniform": Kovaleva et al. 2019
mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off)
before = ablation.readout(lm.model, lm.head, lm.tokenizer, enc, None, mode)
after = ablation.readout(lm.model, lm.head, lm.tokenizer, enc, mask, mode)
mv = ablation.movement(before, after)  # cosine to the unablated run, 1 = unchanged
result = {"per_layer": mv.per_layer, "cls": mv.cls, "mean_pooled": mv.mean_pooled}
print("P(IsNext) before / after:", before.p_is_next, after.p_is_next)
layer_names = ["embeddings"] + [f"layer {i}" for i in range(1, cfg.num_hidden_layers + 1)]
fig = abl_figures.movement_figure(mv.per_layer, layer_names, mv.cls, mv.mean_pooled, mv.pooled)
fig.show()"""
    return snippet("Head ablation: how far the representations move", source,
                   ["from bertcore.analysis.attention import ablation, activations",
                    "from explorer.figures import ablation as abl_figures"],
                   {"text": text, "text_pair": text_pair, "mode": mode, "off": off}, body)


_EXPLAIN = {
    "classification": "attribution.explain_class(lm.model, lm.tokenizer, text, other, target=target, n_steps=n_steps)",
    "fill_mask": "attribution.explain_fill_mask(lm.model, lm.tokenizer, text, position=position, token_id=target,\n"
                 "                                    n_steps=n_steps)",
    "similarity": "attribution.explain_similarity(lm.model, lm.tokenizer, text, other or '', n_steps=n_steps)",
}


def attribution(source: ModelSource, kind: str, text: str, other: str | None, position: int | None,
                target: int | None, n_steps: int, per_word: bool) -> str:
    """Integrated gradients of one output: ``result`` = the ``(T,)`` (or per-word) scores drawn."""
    body = f"""# integrated gradients (Sundararajan et al. 2017): Captum's LayerIntegratedGradients, word embeddings
res = {_EXPLAIN[kind]}
print(f"f(input) = {{res.f_input:.4f}}, f(baseline) = {{res.f_baseline:.4f}}, completeness gap {{abs(res.delta):.2e}}")
labels, result = {"res.word_scores()" if per_word else "res.tokens, res.scores"}
fig = attr_figures.attribution_bars(labels, result, f"What moves {{res.target}}", {
        "cosine" if kind == "similarity" else "probability"!r})
fig.show()"""
    return snippet(f"Attribution: {kind.replace('_', '-')}", source,
                   ["from bertcore.analysis.causal import attribution",
                    "from explorer.figures import attribution as attr_figures"],
                   {"text": text, "other": other, "position": position, "target": target, "n_steps": n_steps}, body)


def findings(source: ModelSource, n_segments: int) -> str:
    """The papers' measures on held-out segments: ``result`` = ``{"ours": the table's "ours" column, one line a
    measure, "to_cls", "to_sep": (L, heads) attention shares}``."""
    body = """# Clark et al. 2019, Kovaleva et al. 2019, Ethayarajh 2019 on held-out BBC segments (seed 0), and Wang &
# Chen 2020's position regression; the results shipped beside the model when computed with the same files and inputs
found = shipped.get(lm, shipped.findings(lm, n_segments))
regression = shipped.get(lm, shipped.position_regression(lm))
rows = published.comparison_rows(found, regression["learned"]["mae"], regression["sinusoidal"]["mae"])
print(pd.DataFrame(rows).to_string())
result = {"ours": "\\n".join(str(r["ours"]) for r in rows), "to_cls": found.to_cls, "to_sep": found.to_sep}
fig = figs.token_attention_figure({"[CLS]": found.to_cls, "[SEP]": found.to_sep, ". and ,": found.to_punct})
fig.show()"""
    return snippet("Findings: the papers' measures beside ours", source,
                   ["import pandas as pd", "from bertcore.analysis import shipped",
                    "from bertcore.analysis.papers import published", "from explorer.figures import findings as figs"],
                   {"n_segments": n_segments}, body)


def whatif(source: ModelSource, text_a: str, text_b: str, pair_a: str | None, pair_b: str | None) -> str:
    """Input A against an edited input B (the what-if view): ``result`` = ``{"cosine": (L+1, n) each aligned token's
    hidden-state cosine by layer, "head_js": (L, heads) each head's mean Jensen-Shannon distance}``."""
    body = """# tokens aligned by difflib's SequenceMatcher on the WordPieces (identical inputs: zero difference)
w = whatif.compare(lm.model, lm.tokenizer, text_a, text_b, pair_a, pair_b)
print("A:", w.act_a.tokens)
print("B:", w.act_b.tokens)
for m in w.masks or []:  # the k-th [MASK] of A against the k-th of B (None: a model without an MLM head)
    print(m)
result = {"cosine": w.cosine, "head_js": w.head_js}
wi_figures.cosine_by_layer(w.cosine, w.labels(), ~w.alignment.same).show()
fig = att_figures.stat_heatmap(w.head_js, "JS distance A vs B", 0.0, max(float(w.head_js.max()), 1e-6), fmt=".2f")
fig.show()"""
    return snippet("What if: A and B side by side", source,
                   ["from bertcore.analysis.representations import whatif",
                    "from explorer.figures import attention as att_figures",
                    "from explorer.figures import whatif as wi_figures"],
                   {"text_a": text_a, "text_b": text_b, "pair_a": pair_a, "pair_b": pair_b}, body)
