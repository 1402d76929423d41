"""The Embedding projector page's view: many points of a corpus (tokens, or one per text) at a layer in 2-D,
coloured by part of speech, word, label, a classifier's answers or an SAE feature, one frame per layer."""

from __future__ import annotations

from dataclasses import dataclass

from bertcore.analysis import projector_view as PV
from bertcore.analysis import shipped
from bertcore.analysis.representations import projector as P
from explorer.figures import projector as figures
from explorer.views.core import load, progress, view

# the default view, shipped beside the model: corpus, points, layer, projection, colour, unit
DEFAULT_VIEW = (shipped.PROJECTOR_CORPUS, shipped.PROJECTOR_POINTS, shipped.PROJECTOR_LAYER,
                shipped.PROJECTOR_METHOD, shipped.PROJECTOR_COLOUR, shipped.PROJECTOR_UNIT)


@dataclass
class Projector:
    """What the page draws: ``projection`` (:class:`~bertcore.analysis.representations.projector.Projection`:
    ``coords`` ``(frames, N, 2)``, one frame per layer of ``layers``, each point's token, text and position),
    ``colour`` and ``values`` (one per point; ``numeric``: floats), the corpus's ``labels`` and the classifier's
    ``predictions`` per text (or None), ``notes`` (sentences for the reader) and ``shipped`` (read from the file
    shipped beside the model: its neighbours are a stored table, no vectors)."""

    projection: P.Projection
    colour: str
    values: list
    numeric: bool
    labels: list[str] | None
    predictions: list[str] | None
    notes: list[str]
    shipped: bool


@view
def projection(source, corpus_name: str, n_points: int, layer: int, method: str = "pca", colour: str = "pos",
               unit: str = "token", axis_words: tuple[str, str] = ("good", "bad"), own: str | None = None,
               sae_folder: str | None = None, feature: int = 0, cache_root: str | None = None) -> Projector:
    """``n_points`` points of ``corpus_name`` (or of ``own``: typed ``label | text`` lines) at ``layer`` (a
    hidden_states index, 0 = the embeddings) by ``method`` ("pca", "umap" or "axis" between ``axis_words``),
    coloured by ``colour`` (an SAE feature: ``sae_folder`` and ``feature``). ``cache_root``: a folder where
    projections are kept on disk (None: none kept).

    Raises ``ValueError`` (bad parameters, a colour the corpus or model cannot give) and ``DataError`` (a corpus that
    cannot be read)."""
    lm = load(source)
    found = None
    if (corpus_name, n_points, layer, method, colour, unit) == DEFAULT_VIEW:
        found = shipped.shipped(lm, shipped.projector(lm))  # the default view ships with the model, or None
    from_model = found is not None
    if found is None:
        # collect the vectors (every layer for PCA and the axis), project them, colour the points
        found = PV.view(lm, corpus_name, n_points, layer, method, colour, unit, tuple(axis_words),
                        cache_root=cache_root, texts=None if own is None else PV.own_corpus(own),
                        sae_folder=sae_folder, feature=feature, progress=progress)
    return Projector(found.projection, found.colour, found.values, found.numeric, found.labels, found.predictions,
                     found.notes, from_model)


@dataclass
class Neighbours:
    """A point's nearest neighbours at the projection's layer, in the full hidden space: ``ids`` and ``cosine``
    (descending) and each one's token in its ``context`` (exBERT's context column)."""

    point: int
    ids: list[int]
    cosine: list[float]
    context: list[str]


def neighbours(result: Projector, point: int) -> Neighbours:
    """The nearest neighbours of ``point`` among the view's points (:func:`projection`'s result): exact from its
    vectors, or the table shipped with the default view; milliseconds, so it reads the projection the page holds
    rather than being kept. Raises ``ValueError`` for a point out of range."""
    proj = result.projection
    if not 0 <= point < len(proj.tokens):
        raise ValueError(f"point {point} is not one of the {len(proj.tokens)} points")
    ids, cosine = P.neighbours(proj, point)
    return Neighbours(point, ids.tolist(), cosine.tolist(), [P.context(proj, j) for j in ids.tolist()])


def figure(result: Projector, layer: int, highlight: list[int] | None = None):
    """The points at every layer (a slider under the plot); for colour "layer", the paths of the first three
    texts' tokens through the layers. ``highlight``: points ringed (a clicked one and its neighbours)."""
    proj = result.projection
    hover = figures.hover_texts(proj.tokens, proj.sentence, proj.texts, proj.unit)
    first = sorted(set(proj.sentence.tolist()))[:3]  # the paths of the first three texts' tokens
    shown = [i for i in range(len(proj.tokens)) if proj.sentence[i] in first]
    return (figures.layer_paths(proj.coords, proj.layers, hover, shown, proj.axis_titles) if result.colour == "layer"
            else figures.projector_scatter(proj.coords, proj.layers, layer, result.values, result.numeric, hover,
                                           PV.COLOURS[result.colour], proj.axis_titles, highlight=highlight or []))
