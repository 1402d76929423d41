"""The embedding projector (docs/projector.md): many vectors of a corpus at once, drawn in 2-D.

A *point* is one token of a sentence (its hidden state) or one sentence ([CLS]'s hidden state, or the mean of its
ordinary tokens' hidden states: Reimers & Gurevych 2019's mean pooling). :func:`collect` runs the encoder once per
batch of sentences and keeps the points of the asked layers; :func:`project` draws them in 2-D:

- ``pca``: the first two principal components of each layer (scikit-learn's ``PCA``, :func:`bertcore.vectors.pca_2d`),
  each layer's signs flipped to agree with its neighbour's (walking out from the chosen layer), so that an animation
  over layers moves points rather than mirrors them (a component's sign is arbitrary; the values are scikit-learn's up
  to sign at every layer);
- ``umap``: UMAP (McInnes et al. 2018, the ``umap-learn`` library) with the cosine metric, seeded, chosen layer only;
- ``axis``: TensorBoard Projector's "custom projection": x = where a point lies between two words' vectors ``a`` and
  ``b`` (``(v - a)·(b - a) / |b - a|²``: 0 at ``a``, 1 at ``b``), y = the first principal component of what is left
  when that direction is removed.

Nearest neighbours are exact: cosine of one point with every other (brute force, the original space, the chosen
layer). A projection is cached on disk (:func:`cache_path`), keyed by the model files' SHA-256
(:func:`bertcore.loading.shipped_file.model_hash`), the corpus text, the unit, layer, method and number of points.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...device import device_of
from ...vectors import pca_2d

UNITS = ("token", "cls", "mean")
METHODS = ("pca", "umap", "axis")
K_NEIGHBOURS = 10
PCA_SOLVER = "covariance_eigh"  # scikit-learn's exact solver for N >> H: the H x H covariance's eigenvectors
CACHE_VERSION = 1
Progress = Callable[[int, int], None] | None


@dataclass
class PointSet:
    """The points of a corpus before projection.

    Attributes:
        vectors: ``(F, N, H)`` float32 hidden states, one row per point, at each layer of ``layers``.
        layers: F hidden_states indices (0 = embeddings, L = the last block's output).
        sentence: ``(N,)`` int, the point's text in ``texts``. position: ``(N,)`` int, the token's index in the
            encoded text (-1 for a sentence point). tokens: N labels (the WordPiece; the text for a sentence).
        texts: the corpus's texts. unit: ``token`` | ``cls`` | ``mean``.
    """

    vectors: np.ndarray
    layers: list[int]
    sentence: np.ndarray
    position: np.ndarray
    tokens: list[str]
    texts: list[str]
    unit: str


@torch.no_grad()
def collect(encoder, tokenizer, texts: list[str], unit: str = "token", layers: list[int] | None = None,
            max_length: int = 128, max_points: int | None = None, batch_size: int = 32,
            progress: Progress = None) -> PointSet:
    """Run ``encoder`` (a :class:`bertcore.modeling.model.BertModel`, never changed) on ``texts`` in padded batches
    and keep each point's hidden state at ``layers``, hidden_states indices (0 = embeddings; default: every one,
    0..L).

    ``unit``: ``token`` (every ordinary token: [CLS], [SEP] and padding left out), ``cls`` or ``mean`` (one point per
    text). Texts are cut to ``max_length`` tokens; with ``max_points`` the points stop there.

    Raises:
        ValueError: no text, an unknown unit, a layer outside 0..L, or no point at all.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError("the corpus has no text")
    n_layers = encoder.config.num_hidden_layers
    layers = list(range(n_layers + 1)) if layers is None else [int(x) for x in layers]
    if not layers or any(not 0 <= x <= n_layers for x in layers):
        raise ValueError(f"layers must be in 0..{n_layers}; got {layers}")
    device = device_of(encoder)
    special = torch.tensor(sorted(tokenizer.all_special_ids), device=device)
    chunks: list[np.ndarray] = []
    sentence, position, tokens = [], [], []
    total = 0
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        enc = tokenizer(batch, return_tensors="pt", truncation=True, max_length=max_length, padding=True).to(device)
        hidden = encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"],
                         output_hidden_states=True).hidden_states
        stack = torch.stack([hidden[x] for x in layers]).float()  # (F, B, T, H)
        ordinary = (enc["attention_mask"].bool() & ~torch.isin(enc["input_ids"], special))  # (B, T)
        for b in range(len(batch)):
            if unit == "token":
                keep = ordinary[b].nonzero().flatten()
                chunks.append(stack[:, b, keep].cpu().numpy())
                ids = enc["input_ids"][b, keep].tolist()
                tokens += tokenizer.convert_ids_to_tokens(ids)
                position += keep.tolist()
                sentence += [start + b] * len(ids)
                total += len(ids)
            else:
                if unit == "cls":
                    vec = stack[:, b, 0]  # (F, H)
                else:
                    w = ordinary[b].float()
                    vec = (stack[:, b] * w[None, :, None]).sum(1) / w.sum().clamp(min=1.0)
                chunks.append(vec[:, None].cpu().numpy())
                tokens.append(batch[b])
                position.append(-1)
                sentence.append(start + b)
                total += 1
            if max_points is not None and total >= max_points:
                break
        if progress is not None:
            progress(min(start + batch_size, len(texts)), len(texts))
        if max_points is not None and total >= max_points:
            break
    if total == 0:
        raise ValueError("the texts hold no ordinary token")
    vectors = np.concatenate(chunks, axis=1)
    cut = total if max_points is None else min(total, max_points)
    return PointSet(vectors[:, :cut], layers, np.asarray(sentence[:cut]), np.asarray(position[:cut]), tokens[:cut],
                    list(texts), unit)


@dataclass
class Projection:
    """2-D coordinates of a :class:`PointSet`.

    Attributes:
        coords: ``(F, N, 2)`` float32, one frame per layer of ``layers`` (one frame for UMAP).
        layers: the frames' hidden-state indices. layer: the chosen one (the frame whose neighbours are kept).
        method: ``pca`` | ``umap`` | ``axis``. unit: as the point set's. axis_titles: the two axes' names.
        explained: ``(F, 2)`` float32 share of the variance on each axis (PCA, and y of ``axis``; else zeros).
        sentence, position, tokens, texts: as :class:`PointSet`.
        vectors: ``(N, H)`` float32 at ``layer`` (exact neighbours on request), or None where a shipped file keeps
            ``neighbour_ids`` / ``neighbour_cos`` ``(N, K)`` instead.
    """

    coords: np.ndarray
    layers: list[int]
    layer: int
    method: str
    unit: str
    axis_titles: tuple[str, str]
    explained: np.ndarray
    sentence: np.ndarray
    position: np.ndarray
    tokens: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None
    neighbour_ids: np.ndarray | None = None
    neighbour_cos: np.ndarray | None = None


def pca_layers(vectors: np.ndarray, anchor: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """PCA of each frame of ``vectors (F, N, H)`` -> ``(coords (F, N, 2), explained (F, 2))``; frame ``anchor`` keeps
    scikit-learn's signs, every other frame flips an axis whose coordinates anti-correlate with the frame before it
    (walking away from the anchor). Raises ``ValueError`` for fewer than 2 points."""
    out = [pca_2d(v, PCA_SOLVER) for v in vectors]
    coords = np.stack([c for c, _ in out])
    explained = np.stack([r for _, r in out])
    order = list(range(anchor + 1, len(coords))) + list(range(anchor - 1, -1, -1))
    for f in order:
        prev = f - 1 if f > anchor else f + 1
        signs = np.where((coords[f] * coords[prev]).sum(0) < 0, -1.0, 1.0).astype(np.float32)
        coords[f] *= signs
    return coords, explained


def umap_2d(x: np.ndarray, seed: int = 0, n_neighbors: int = 15, min_dist: float = 0.1) -> np.ndarray:
    """UMAP of ``x (N, H)`` with the cosine metric (``umap.UMAP``, ``random_state=seed``: repeatable) ->
    ``(N, 2)`` float32. ``n_neighbors`` is cut to N - 1. Raises ``ValueError`` for fewer than 4 points."""
    if len(x) < 4:
        raise ValueError(f"UMAP needs at least 4 points; got {len(x)}")
    import umap

    reducer = umap.UMAP(n_components=2, n_neighbors=min(n_neighbors, len(x) - 1), min_dist=min_dist,
                        metric="cosine", random_state=seed, n_jobs=1, init="spectral" if len(x) > 16 else "random")
    return reducer.fit_transform(np.asarray(x, dtype=np.float32)).astype(np.float32)


def axis_2d(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """The custom projection of ``x (N, H)`` on the axis from ``a (H,)`` to ``b (H,)``: ``x`` coordinate
    ``(v - a)·(b - a) / |b - a|²``, ``y`` the first principal component of ``x`` with that direction removed.
    Returns ``(coords (N, 2) float32, y's share of the residual variance)``. Raises ``ValueError`` when a = b."""
    x = np.asarray(x, dtype=np.float64)
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    norm2 = float(d @ d)
    if norm2 < 1e-12:
        raise ValueError("the two words have the same vector here: choose two different words")
    along = (x - a) @ d / norm2  # (N,)
    residual = x - np.outer(x @ d / norm2, d)
    if len(x) >= 2:
        y, ratio = pca_2d(residual, PCA_SOLVER)
        y, share = y[:, 0], float(ratio[0])
    else:
        y, share = np.zeros(len(x)), 0.0
    return np.stack([along, y], axis=1).astype(np.float32), share


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to length 1 (float32; a zero row stays zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _best(sims: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest of ``sims (N,)``, best first, ties by the smaller index."""
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.lexsort((top, -sims[top]))]


def nearest(vectors: np.ndarray, i: int, k: int = K_NEIGHBOURS) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` points nearest to point ``i`` by cosine in ``vectors (N, H)`` (itself left out), best first:
    ``(indices (k,) int, cosines (k,) float32)``. A zero vector has cosine 0 with everything."""
    unit = _unit(vectors)
    k = min(k, len(unit) - 1)
    if k <= 0:
        return np.zeros(0, int), np.zeros(0, np.float32)
    sims = unit @ unit[i]
    sims[i] = -np.inf
    top = _best(sims, k)
    return top, sims[top]


def neighbours(projection: Projection, i: int, k: int = K_NEIGHBOURS) -> tuple[np.ndarray, np.ndarray]:
    """Point ``i``'s nearest neighbours at ``projection.layer``: exact from its vectors, or its stored table."""
    if projection.vectors is not None:
        return nearest(projection.vectors, i, k)
    if projection.neighbour_ids is None:
        raise ValueError("this projection keeps neither vectors nor a neighbour table")
    return projection.neighbour_ids[i, :k], projection.neighbour_cos[i, :k]


def context(projection: Projection, i: int, window: int = 6) -> str:
    """Point ``i``'s token with up to ``window`` WordPieces either side from its text, the token in brackets and
    ``##`` pieces joined (exBERT's context column); a text point gives its text."""
    if projection.position[i] < 0:
        return projection.texts[int(projection.sentence[i])]
    same = np.flatnonzero(projection.sentence == projection.sentence[i])
    j = int(np.searchsorted(same, i))
    left = [projection.tokens[t] for t in same[max(0, j - window):j]]
    while left and left[0].startswith("##"):  # not from the middle of a word
        left.pop(0)
    right = [projection.tokens[t] for t in same[j + 1:j + 1 + window]]
    return " ".join(left + [f"[{projection.tokens[i]}]"] + right).replace(" ##", "")


def neighbour_table(vectors: np.ndarray, k: int = K_NEIGHBOURS, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nearest` of every point (blocks of ``block`` rows at a time): ``(ids (N, k) int32, cosines (N, k)
    float32)``, for a shipped file that keeps no vectors."""
    unit = _unit(vectors)
    n = len(unit)
    k = min(k, n - 1)
    ids, cos = np.zeros((n, k), np.int32), np.zeros((n, k), np.float32)
    for s in range(0, n, block):
        sims = unit[s:s + block] @ unit.T  # (b, N)
        rows = np.arange(sims.shape[0])
        sims[rows, s + rows] = -np.inf
        for r in rows:
            top = _best(sims[r], k)
            ids[s + r], cos[s + r] = top, sims[r, top]
    return ids, cos


def project(points: PointSet, layer: int, method: str = "pca",
            axis_vectors: tuple[np.ndarray, np.ndarray] | None = None,
            axis_words: tuple[str, str] = ("", ""), seed: int = 0) -> Projection:
    """Project ``points`` by ``method`` (:data:`METHODS`). ``layer``: a hidden_states index (0 = embeddings), one of
    ``points.layers`` (``0..L`` when every layer was collected); PCA and the
    custom axis give one frame per layer of the point set, UMAP only the chosen layer's.

    ``axis_vectors``: for ``axis``, ``(a (F, H), b (F, H))``, each word's vector at every layer of the point set
    (:func:`word_vectors`); ``axis_words`` their names (axis titles).

    Raises:
        ValueError: an unknown method, a layer the points do not hold, too few points, a missing or null axis.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if layer not in points.layers:
        raise ValueError(f"layer {layer} was not collected (have {points.layers})")
    anchor = points.layers.index(layer)
    n = points.vectors.shape[1]
    if n < 2:
        raise ValueError(f"a projection needs at least 2 points; the corpus gave {n}")
    layers = list(points.layers)
    if method == "pca":
        coords, explained = pca_layers(points.vectors, anchor)
        titles = ("principal component 1", "principal component 2")
    elif method == "umap":
        coords = umap_2d(points.vectors[anchor], seed)[None]  # (1, N, 2)
        explained, layers, titles = np.zeros((1, 2), np.float32), [layer], ("UMAP 1", "UMAP 2")
    else:
        if axis_vectors is None:
            raise ValueError("the custom axis needs two words")
        frames = [axis_2d(points.vectors[f], axis_vectors[0][f], axis_vectors[1][f]) for f in range(len(layers))]
        coords = np.stack([c for c, _ in frames])
        explained = np.array([[0.0, s] for _, s in frames], np.float32)
        titles = (f"{axis_words[0]} (0) → {axis_words[1]} (1)", "first principal component of the rest")
    return Projection(coords.astype(np.float32), layers, layer, method, points.unit, titles, explained,
                      points.sentence, points.position, points.tokens, points.texts,
                      vectors=np.ascontiguousarray(points.vectors[anchor], dtype=np.float32))


@torch.no_grad()
def word_vectors(encoder, tokenizer, points: PointSet, word: str) -> np.ndarray:
    """A word's vector at every layer of ``points`` -> ``(F, H)`` float32: the mean of the token points whose
    WordPiece is the word (when the corpus holds it and the points are tokens), else the word's own input
    ``[CLS] word [SEP]`` reduced as the points are (its pieces' mean for tokens). Raises ``ValueError`` for an
    empty word."""
    word = (word or "").strip()
    if not word:
        raise ValueError("type a word for each end of the axis")
    if points.unit == "token":
        hits = [i for i, t in enumerate(points.tokens) if t == word.lower() or t == word]
        if hits:
            return points.vectors[:, hits].mean(1).astype(np.float32)
    enc = tokenizer(word, return_tensors="pt").to(device_of(encoder))
    hidden = encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"],
                     output_hidden_states=True).hidden_states
    stack = torch.stack([hidden[x][0] for x in points.layers]).float()  # (F, T, H)
    if points.unit == "cls":
        return stack[:, 0].cpu().numpy()
    return stack[:, 1:-1].mean(1).cpu().numpy()


def token_labels(tokenizer, points: PointSet, max_length: int = 128) -> tuple[list[str], list[str]]:
    """spaCy's Universal part of speech and dependency label of each token point's word (``""`` where no word
    aligns), from :func:`.parses.parse_segment` of its text cut as :func:`collect` cut it. Sentence points get the
    label of their text's root. Raises :class:`.parses.SyntaxUnavailable` without spaCy."""
    from . import parses

    pos, dep = [], []
    parsed: dict[int, parses.ParsedSegment] = {}
    for s, p in zip(points.sentence.tolist(), points.position.tolist()):
        if s not in parsed:
            parsed[s] = parses.parse_segment(tokenizer, points.texts[s], max_length=max_length)
        seg = parsed[s]
        if p < 0:
            root = next((w for k, w in enumerate(seg.words) if w.head == k), None)
            pos.append(root.pos if root else "")
            dep.append(root.dep if root else "")
            continue
        w = seg.word_ids[p] if p < len(seg.word_ids) else None
        pos.append("" if w is None else seg.words[w].pos)
        dep.append("" if w is None else seg.words[w].dep)
    return pos, dep


# ----------------------------------------------------------------------------- the disk cache
def cache_key(model_hash: str, texts: list[str], unit: str, layer: int, method: str, n_points: int | None,
              extra: dict | None = None) -> str:
    """A digest of everything a projection depends on: the model files' hash, the corpus text, unit, layer (a
    hidden_states index (0 = embeddings); only hashed here), method, number of points and ``extra`` (axis words,
    seed, the layers collected)."""
    h = hashlib.sha256(json.dumps({"v": CACHE_VERSION, "model": model_hash, "unit": unit, "layer": layer,
                                   "method": method, "n": n_points, "extra": extra or {}}, sort_keys=True).encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    return h.hexdigest()[:32]


def cache_path(root: Path, key: str) -> Path:
    """``root/projector/<key>.npz``."""
    return Path(root) / "projector" / f"{key}.npz"


def save(projection: Projection, path: Path) -> None:
    """Write ``projection`` to ``path`` atomically (no pickle: :func:`bertcore.loading.shipped_file.encode`).
    Raises ``OSError``."""
    from ...modeling.checkpoint import atomic_write
    from ...loading.shipped_file import encode

    arrays: dict[str, np.ndarray] = {}
    tree = encode(projection, arrays)
    head = np.frombuffer(json.dumps(tree).encode(), dtype=np.uint8)

    def write(p: Path) -> None:
        with open(p, "wb") as fh:
            np.savez(fh, __tree__=head, **arrays)

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(Path(path), write)


def load(path: Path) -> Projection | None:
    """The projection saved at ``path``, or None (missing or unreadable: then it is computed again)."""
    from ...loading.shipped_file import ShippedFileError, decode

    try:
        with np.load(path, allow_pickle=False) as z:
            value = decode(json.loads(z["__tree__"].tobytes().decode()), {k: z[k] for k in z.files})
    except (OSError, ValueError, KeyError, ShippedFileError):
        return None
    return value if isinstance(value, Projection) else None
