"""Snippets of the pages that read two inputs, many sentences or a corpus: Activation patching, Query-key map,
Corpus search, Compare models, and the Overview's model summary. Each function takes the inputs the page used and
returns the snippet's text; its ``result`` is what the page passes to ``as_code.expander``."""

from __future__ import annotations

from bertcore.loading.sources import ModelSource

from .common import model_line, snippet


def overview(source: ModelSource) -> str:
    """The loaded model and its configuration: ``result`` = ``{"parameters": int, "layers", "heads", "hidden"}``."""
    body = """cfg = lm.config  # HF field names (bertcore.modeling.config.BertConfig)
print(lm.source.name, lm.path, "head on top:", lm.head)
print(cfg.to_dict())
result = {"parameters": lm.model.num_parameters(), "layers": cfg.num_hidden_layers,
          "heads": cfg.num_attention_heads, "hidden": cfg.hidden_size}"""
    return snippet("Overview: the loaded model", source, [], {}, body)


def patching(source: ModelSource, clean: str, corrupt: str, good: str, bad: str, kinds: list[str],
             max_tokens: int) -> str:
    """Activation patching of a logit difference: ``result`` = ``{"clean", "corrupted": float, kind: effects}``
    (``(layers, T)`` or ``(L, heads)`` for ``head``; 0 = the corrupted run, 1 = the clean answer back)."""
    body = f"""tok = lm.tokenizer
e_clean = encode(tok, clean, max_length={max_tokens})
e_corr = encode(tok, corrupt, max_length={max_tokens})
position = mask_token_positions(tok, e_clean.tensors()["input_ids"])[0]  # the clean input's one [MASK]
# the metric: logit(good) - logit(bad) at the [MASK]
metric = P.logit_diff(position, tok.convert_tokens_to_ids(good), tok.convert_tokens_to_ids(bad))
# rerun the corrupted input with one activation copied from the clean run, for every site
scan = P.scan(lm.model, e_clean.tensors(), e_corr.tensors(), metric, kinds=kinds)
print(f"clean {{scan.clean:+.3f}}, corrupted {{scan.corrupted:+.3f}}")
result = {{"clean": scan.clean, "corrupted": scan.corrupted, **scan.effects}}
labels = [a if a == b else f"{{a}} / {{b}}" for a, b in zip(e_clean.tokens, e_corr.tokens)]
for kind in kinds:
    fig = figs.effect_heatmap(scan.effects[kind], kind, None if kind == "head" else labels)
    fig.show()"""
    return snippet("Activation patching", source,
                   ["from bertcore.analysis.causal import patching as P",
                    "from bertcore.readouts.fill_mask import mask_token_positions",
                    "from bertcore.tokenization.tokenizer import encode",
                    "from explorer.figures import patching as figs"],
                   {"clean": clean, "corrupt": corrupt, "good": good, "bad": bad, "kinds": kinds}, body)


def query_key(source: ModelSource, sentences: list[str], layer: int, head: int, method: str, max_tokens: int) -> str:
    """One head's queries and keys over many sentences in 2-D (AttentionViz, Yeh et al. 2023): ``result`` =
    ``{"queries": (n, 2), "keys": (n, 2)}``; ``layer`` (the block) and ``head`` 0-based, as
    :func:`bertcore.analysis.attention.query_key.query_keys` takes them (the titles show the 1-based labels)."""
    body = f"""# layer and head count from 0 (the page's "Layer 1" is block 0)
qk = QK.query_keys(lm.encoder, lm.tokenizer, sentences, layer, head, max_length={max_tokens})
q, k, c = QK.normalize(qk.queries, qk.keys)  # keys centred on the queries, both scaled to one spread (c)
pq, pk = QK.project(q, k, method)  # (n, 2) each
result = {{"queries": pq, "keys": pk}}
fig = figs.qk_scatter(pq, pk, qk.tokens, qk.sentence, title=(
    f"Layer {{layer + 1}}, head {{head + 1}}: {{len(qk.tokens)}} queries and keys of {{len(sentences)}} sentences "
    f"(c = {{c:.2f}})"))
fig.show()"""
    return snippet(f"Query-key map: layer {layer + 1}, head {head + 1}", source,
                   ["from bertcore.analysis.attention import query_key as QK",
                    "from explorer.figures import query_key as figs"],
                   {"sentences": sentences, "layer": layer, "head": head, "method": method}, body)


def corpus_search(source: ModelSource, text: str, position: int, layer: int, k: int, n_segments: int | None,
                  upload: str | None) -> str:
    """The ``k`` corpus tokens nearest to one token (exBERT): ``result`` = ``{"cosine": (k,), "segment": (k,)}``.
    ``n_segments``: held-out BBC segments; ``upload``: the name of an uploaded .txt file instead."""
    if upload is None:
        values = {"text": text, "position": position, "layer": layer, "k": k, "n_segments": n_segments}
        body = """# index every token of the held-out BBC segments at the layer, then the nearest by cosine (the result
# shipped beside the model when it was computed with the same files and inputs)
found = shipped.get(lm, shipped.corpus_search(lm, text, position, layer, k, n_segments))
hits = found["hits"]"""
        imports = ["from bertcore.analysis import shipped"]
    else:
        values = {"text": text, "position": position, "layer": layer, "k": k, "file": upload}
        body = """with open(file, encoding="utf-8", errors="replace") as f:  # paragraphs separated by blank lines
    texts = [p.strip() for p in f.read().replace("\\r\\n", "\\n").split("\\n\\n") if p.strip()]
index = CS.build_index(lm.encoder, lm.tokenizer, texts, layer)
t = encode(lm.tokenizer, text, max_length=min(lm.max_length, 128)).tensors()
with torch.no_grad():
    hidden = lm.encoder(t["input_ids"], t["attention_mask"], t["token_type_ids"],
                        output_hidden_states=True).hidden_states[layer][0, position].numpy()
hits = CS.search(index, hidden, k)"""
        imports = ["import torch", "from bertcore.analysis.representations import corpus_search as CS",
                   "from bertcore.tokenization.tokenizer import encode"]
    body += """
for h in hits:
    print(f"{h.cosine:.3f}  {h.token!r:>12}  {h.context}")
result = {"cosine": [h.cosine for h in hits], "segment": [h.segment for h in hits]}"""
    return snippet("Corpus search: the nearest tokens of a corpus", source, imports, values, body)


def compare(source: ModelSource, source_b: ModelSource, sentences: list[str], include_special: bool) -> str:
    """Two models on the same sentences: ``result`` = ``{"cka": (L+1,) or None, "js": (L, heads) or None,
    "cka_matrix": (La+1, Lb+1)}``."""
    body = f"""{model_line(source_b, "lm_b")}
# linear CKA of each layer's hidden states (Kornblith et al. 2019), Jensen-Shannon distance of each head's attention
cmp = run_pair(lm.encoder, lm.tokenizer, lm_b.encoder, lm_b.tokenizer, sentences, include_special)
result = {{"cka": cmp.cka, "js": cmp.js, "cka_matrix": cmp.cka_matrix}}
if cmp.cka is not None:  # None: the two models have different numbers of layers
    fig = cmp_figures.by_layer(cmp.cka, cmp.js.mean(1) if cmp.js is not None else None)
    fig.show()
cmp_figures.cka_heatmap(cmp.cka_matrix, lm.source.name, lm_b.source.name).show()"""
    return snippet("Compare models: CKA by layer and attention difference per head", source,
                   ["from bertcore.analysis.representations.compare import run_pair",
                    "from explorer.figures import compare as cmp_figures"],
                   {"sentences": sentences, "include_special": include_special}, body)


def projector(source: ModelSource, corpus_name: str, n_points: int, layer: int, method: str, colour: str, unit: str,
              axis_words: tuple[str, str], own: str | None, shipped_default: bool,
              sae: tuple[str, int] | None = None) -> str:
    """Many points of a corpus at a layer in 2-D: ``result`` = the ``(frames, N, 2)`` coordinates drawn (one frame
    per layer for PCA and the axis). ``own``: "your own texts" as typed (``label | text`` lines);
    ``shipped_default``: the page's default view, shipped beside the model (read with ``shipped.get``, computed when
    it is not there). ``sae``: ``(SAE folder, feature)`` when the points are coloured by an SAE feature."""
    if shipped_default:
        values = {"layer": layer}
        get = "view = shipped.get(lm, shipped.projector(lm))  # the default view: shipped beside the model"
    else:
        values = {"corpus_name": corpus_name, "n_points": n_points, "layer": layer, "method": method,
                  "colour": colour, "unit": unit, "axis_words": axis_words}
        get = "view = PV.view(lm, corpus_name, n_points, layer, method, colour, unit, axis_words"
        if own is not None:
            values["own"] = own
            get += ", texts=PV.own_corpus(own)"
        if sae is not None:
            values["sae_folder"], values["feature"] = sae
            get += ", sae_folder=sae_folder, feature=feature"
        get += ")"
    if colour == "layer":
        draw = """first = sorted(set(proj.sentence.tolist()))[:3]  # the paths of the first three texts' tokens
shown = [i for i in range(len(proj.tokens)) if proj.sentence[i] in first]
fig = figures.layer_paths(proj.coords, proj.layers, hover, shown, proj.axis_titles)"""
    else:
        draw = """fig = figures.projector_scatter(proj.coords, proj.layers, layer, view.values, view.numeric, hover,
                                PV.COLOURS[view.colour], proj.axis_titles)"""
    body = f"""{get}
proj = view.projection
result = proj.coords  # (frames, N, 2): one frame per layer of proj.layers
hover = figures.hover_texts(proj.tokens, proj.sentence, proj.texts, proj.unit)
{draw}
fig.show()
# the nearest neighbours of point 0 in the full space (cosine), as a click on the page lists them
print(P.neighbours(proj, 0))"""
    return snippet("Embedding projector", source,
                   ["from bertcore.analysis import projector_view as PV", "from bertcore.analysis import shipped",
                    "from bertcore.analysis.representations import projector as P",
                    "from explorer.figures import projector as figures"], values, body)


def features(source: ModelSource, folder: str, text: str, n_strongest: int) -> str:
    """A sparse autoencoder's features on each token of ``text``: ``result`` = ``(T, n)`` activations of the
    ``n_strongest`` features drawn (rows of the strip)."""
    body = f"""sae, cfg = sae_io.load(sae_folder)  # a TopK SAE (Gao et al. 2024) on one layer's output
tf = explore.text_features(lm.model, lm.tokenizer, sae, cfg["layer"], text, max_length=lm.max_length)
strongest = tf.strongest({n_strongest})  # the features most active anywhere in the text
result = tf.z[:, strongest]  # (T, features)
fig = figs.token_strip(tf.tokens, tf.z, strongest)
fig.show()"""
    return snippet("Features: a sparse autoencoder's features on your text", source,
                   ["from bertcore.sae import explore", "from bertcore.sae import io as sae_io",
                    "from explorer.figures import features as figs"], {"sae_folder": folder, "text": text}, body)
