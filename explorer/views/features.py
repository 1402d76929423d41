"""The Features page's views: a sparse autoencoder (a TopK SAE, Gao et al. 2024) on one layer's hidden state, or a
transcoder of one block's feed-forward sub-layer, its features on a text, one feature's dashboard (held-out
contexts, histogram, labels, logit effect), a search by text and (SAEs) steering. A folder is keyed on its size and
modification time: a rewritten or newly indexed SAE or transcoder is read again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore.readouts.fill_mask import FillMaskError
from bertcore.sae import catalog, explore, labels
from bertcore.sae import features as sae_features
from bertcore.sae import io as sae_io
from bertcore.sae.report import QUICK_SENTENCES, index_features, label_texts, stored_index
from explorer.figures import features as figs
from explorer.views.core import load, view

N_STRONGEST = 12  # rows of the token strip


@dataclass
class SAECard:
    """An SAE or transcoder folder: ``layer`` (the 0-based block whose output an SAE reads, whose feed-forward
    sub-layer a transcoder replaces), ``d_sae`` features, ``k`` kept per token (a transcoder: on average, in
    training), ``metrics`` (metrics.json: FVU, dead share, MLM loss with it ...; {} without), ``indexed`` (held-out
    top contexts stored beside it for this model) and ``kind`` (``"sae"`` or ``"transcoder"``)."""

    layer: int
    d_sae: int
    k: int
    metrics: dict
    indexed: bool
    kind: str = "sae"


@view
def card(source, folder: Path) -> SAECard:
    """What the SAE or transcoder in ``folder`` is. Raises ``SAEError`` for a folder that cannot be read."""
    lm = load(source)
    sae, cfg = catalog.load(folder)  # a TopK SAE or a transcoder, by its cfg.json
    index = stored_index(folder, str(lm.path), cfg["layer"])
    return SAECard(int(cfg["layer"]), int(sae.d_sae), int(sae.k), sae_io.read_metrics(folder) or {},
                   index is not None, sae.kind)


def write_index(source, folder: Path, progress=None) -> None:
    """Not a view (an action): run the model and spaCy over :data:`QUICK_SENTENCES` held-out sentences and store the
    SAE's (or transcoder's) top contexts beside it (``features.npz``; :func:`card` then says ``indexed``). Raises what
    :func:`bertcore.sae.report.index_features` raises."""
    lm = load(source)
    index_features(folder, lm.model, lm.tokenizer, lm.path, QUICK_SENTENCES, progress=progress)


@dataclass
class TextFeatures:
    """The SAE (or transcoder) on each token of a text: ``features`` (:class:`bertcore.sae.explore.TextFeatures`:
    ``tokens``, ``z`` ``(T, d_sae)`` activations, ``num_truncated``) and ``strongest`` (the features most active
    anywhere in it, strongest first)."""

    features: explore.TextFeatures
    strongest: list[int]


@view
def text_features(source, folder: Path, text: str) -> TextFeatures:
    """Which features of the SAE or transcoder fire on each token of ``text``. Raises ``TextError``, ``SAEError``."""
    lm = load(source)
    sae, cfg = catalog.load(folder)  # a TopK SAE or a transcoder of block cfg["layer"]
    # one forward pass stopped after that block; an SAE encodes its output, a transcoder its feed-forward input
    tf = explore.text_features(lm.model, lm.tokenizer, sae, cfg["layer"], text, max_length=lm.max_length)
    return TextFeatures(tf, tf.strongest(N_STRONGEST))


def strip_figure(result: TextFeatures):
    """The strongest features (rows) on each token (columns); darker = stronger."""
    tf = result.features
    return figs.token_strip(tf.tokens, tf.z, result.strongest)


@dataclass
class Context:
    """A held-out context of a feature: its ``words``, the feature's ``activations`` on each, ``here`` (the token of
    the top activation)."""

    words: list[str]
    activations: np.ndarray
    here: int


@dataclass
class Dashboard:
    """One feature on the held-out text: ``fired`` of ``tokens`` active, its strongest ``contexts``, ``hist``
    (counts in :data:`bertcore.sae.features.HIST_EDGES` bins), ``profile`` (spaCy labels of its top 20 tokens, None
    with fewer), ``nearest`` features (decoder cosine), ``strength`` (its strongest activation), ``promoted`` /
    ``suppressed`` words through the MLM head (None without one; ``no_logits`` then says why) and the SAE's (or
    transcoder's) ``purity`` numbers; ``label`` its :class:`bertcore.sae.labels.FeatureLabel` (None: the index holds
    no labels)."""

    fired: int
    tokens: int
    contexts: list[Context]
    hist: np.ndarray
    profile: dict | None
    nearest: list[tuple[int, float]]
    strength: float
    promoted: list[tuple[str, float]] | None
    suppressed: list[tuple[str, float]] | None
    purity: dict
    no_logits: str = ""
    label: labels.FeatureLabel | None = None


@view
def dashboard(source, folder: Path, feature: int) -> Dashboard:
    """Feature ``feature`` of the SAE or transcoder on its stored held-out text. Raises ``ValueError`` when it has no
    stored index for this model (:func:`write_index`)."""
    lm = load(source)
    sae, cfg = catalog.load(folder)
    layer = cfg["layer"]
    index = stored_index(folder, str(lm.path), layer)
    if index is None:
        raise ValueError("this SAE has no indexed held-out text for this model yet")
    text = index.text
    rows = [int(r) for r in index.top_rows[feature] if r >= 0][:8]  # its strongest held-out tokens
    sents = [text.sentence_of(r) for r in rows]
    chunks = [text.token_ids[text.starts[s]:text.starts[s + 1]] for s in sents]
    shades = explore.context_activations(lm.model, lm.tokenizer, sae, layer, chunks, feature)  # on every token
    contexts = [Context(lm.tokenizer.convert_ids_to_tokens([int(i) for i in ids]), act, r - int(text.starts[s]))
                for r, s, ids, act in zip(rows, sents, chunks, shades)]
    strength = float(index.top_values[feature][0]) or 1.0
    promoted = suppressed = None
    no_logits = ""
    try:  # its direction added to the mean state it writes into, read through the MLM head (a logit lens)
        promoted, suppressed = explore.logit_effect(lm.model, lm.tokenizer, sae, layer, feature, index.mean, strength)
    except (FillMaskError, sae_io.SAEError) as exc:
        no_logits = str(exc)  # no MLM head, or a transcoder of a pre-LN model: no logit effect
    return Dashboard(int(index.fired[feature]), len(text.token_ids), contexts, index.hist[feature],
                     sae_features.pure_labels(index.top_rows[feature:feature + 1], text)[0],
                     explore.nearest(sae, feature), strength, promoted, suppressed, index.purity, no_logits,
                     labels.label_of(index, feature))


@view
def feature_labels(source, folder: Path) -> list[str] | None:
    """Each feature's label (:mod:`bertcore.sae.labels`) as stored in the SAE's or transcoder's index for this
    model; None when it holds none."""
    lm = load(source)
    _, cfg = catalog.load(folder)
    return label_texts(folder, str(lm.path), cfg["layer"])


@dataclass
class Found:
    """The features with the largest mean activation over a phrase's WordPieces: ``rows`` ``[(feature, mean)]``."""

    rows: list[tuple[int, float]]


@view
def search(source, folder: Path, phrase: str) -> Found:
    """Which features a word or phrase turns on. Raises ``TextError``."""
    lm = load(source)
    sae, cfg = catalog.load(folder)
    return Found(explore.search(lm.model, lm.tokenizer, sae, cfg["layer"], phrase))


@view
def steer(source, folder: Path, text: str, feature: int, mode: str, amount: float) -> explore.Steered:
    """Fill-mask at each [MASK] of ``text`` without and with feature ``feature`` changed at the SAE's layer: "add"
    (its direction times ``amount`` on every token) or "clamp" (its activation set to ``amount``). Raises
    ``FillMaskError`` (no MLM head, no [MASK]), ``TextError`` and ``SAEError`` (a transcoder: steering its
    features is on the Circuits page)."""
    lm = load(source)
    sae, cfg = catalog.load(folder)  # steering_edit refuses a transcoder (SAEError)
    edit = explore.steering_edit(sae, feature, mode, amount)
    return explore.steered_fill_mask(lm.model, lm.tokenizer, text, cfg["layer"], edit, max_length=lm.max_length)
