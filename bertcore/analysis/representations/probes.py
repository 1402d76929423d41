"""Probing classifiers by layer: at which depth are part of speech and dependency labels linearly readable?

Tenney et al. 2019 ("BERT Rediscovers the Classical NLP Pipeline") probe every layer and summarise where a task
is solved by its **expected layer** (section 3, the "center of gravity" of the cumulative score: with
``Delta(l) = acc(l) - acc(l-1)``, ``E[l] = sum_l l Delta(l) / sum_l Delta(l)``). Hewitt & Liang 2019 ("Designing
and Interpreting Probes with Control Tasks") add a **control task**: each word type gets a random label drawn
from the task's label distribution; a probe that also learns the control task is memorising word identities,
so they report **selectivity** = task accuracy - control accuracy.

Here: a word's vector is the mean of its WordPieces' hidden states (layer 0 = the embedding output, the
"static" baseline); labels come from spaCy (:mod:`bertcore.analysis.representations.syntax`); a scikit-learn logistic
regression
per layer is trained on some segments and tested on others (never the same segment on both sides).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from ...device import device_of

TASKS = ("pos", "dep")


@dataclass
class WordFeatures:
    """Per word (N of them): ``vectors`` ``(L+1, N, H)`` float32, ``labels[task]`` N strings, ``types`` N
    lower-cased word forms, ``groups`` N segment indices (the train/test split unit)."""

    vectors: np.ndarray
    labels: dict[str, list[str]]
    types: list[str]
    groups: np.ndarray


@torch.no_grad()
def word_features(encoder, tokenizer, parsed_segments, progress=None) -> WordFeatures:
    """Mean-of-pieces word vectors at every layer for parsed segments (:func:`syntax.parse_segment`); words
    with no WordPiece are skipped.

    Raises:
        ValueError: no word.
    """
    vecs, pos, dep, types, groups = [], [], [], [], []
    device = device_of(encoder)
    for s, seg in enumerate(parsed_segments):
        enc = tokenizer(seg.text_a, seg.text_b or None, return_tensors="pt").to(device)
        out = encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], output_hidden_states=True)
        hs = torch.stack([h[0] for h in out.hidden_states]).float().cpu().numpy()  # (L+1, T, H)
        pieces: dict[int, list[int]] = {}
        for t, w in enumerate(seg.word_ids[:hs.shape[1]]):
            if w is not None:
                pieces.setdefault(w, []).append(t)
        for w, ts in sorted(pieces.items()):
            word = seg.words[w]
            vecs.append(hs[:, ts].mean(1))
            pos.append(word.pos)
            dep.append(word.dep)
            types.append(word.text.lower())
            groups.append(s)
        if progress is not None:
            progress(s + 1, len(parsed_segments))
    if not vecs:
        raise ValueError("no word to probe")
    return WordFeatures(np.stack(vecs, 1), {"pos": pos, "dep": dep}, types, np.asarray(groups))


def control_labels(types: list[str], labels: list[str], seed: int = 0) -> list[str]:
    """Hewitt & Liang's control task: one label per word type, drawn from the empirical label distribution."""
    rng = np.random.default_rng(seed)
    counts = Counter(labels)
    names = sorted(counts)
    p = np.array([counts[n] for n in names], dtype=float)
    p /= p.sum()
    per_type = {t: names[i] for t, i in zip(sorted(set(types)), rng.choice(len(names), len(set(types)), p=p))}
    return [per_type[t] for t in types]


def expected_layer(accuracy: np.ndarray) -> float:
    """Tenney et al.'s expected layer from accuracies by layer (a hidden_states index (0 = embeddings); the result is
    on that scale: 2.5 lies between the outputs of blocks 1 and 2): the mean layer weighted by the gains
    ``acc(l) - acc(l-1)`` (l >= 1). Their cumulative scores only grow; probes of separate layers can
    lose accuracy in the top layers, so losses count as no gain (a decline would otherwise pull the centre below
    the first layer). NaN when nothing is gained."""
    a = np.asarray(accuracy, dtype=float)
    gain = np.clip(np.diff(a), 0, None)
    if gain.sum() <= 0:
        return float("nan")
    return float((np.arange(1, len(a)) * gain).sum() / gain.sum())


@dataclass
class ProbeResult:
    """One task: ``accuracy`` and ``control`` ``(L+1,)`` test accuracy by layer, ``majority`` (the most frequent
    training label's share of the test words), ``selectivity`` = accuracy - control, ``expected_layer``,
    ``n_train`` / ``n_test`` words, ``n_labels``."""

    accuracy: np.ndarray
    control: np.ndarray
    majority: float
    selectivity: np.ndarray
    expected_layer: float
    n_train: int
    n_test: int
    n_labels: int


def probe(features: WordFeatures, task: str, test_fraction: float = 0.25, seed: int = 0, max_iter: int = 300,
          progress=None) -> ProbeResult:
    """Train and test a logistic-regression probe per layer on ``task`` (``"pos"`` / ``"dep"``) and on its
    control task, split by segment.

    Raises:
        ValueError: an unknown task, or too few segments to split.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupShuffleSplit
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    # One BLAS thread for the fits: lbfgs on a few thousand words x H gains nothing from more, and OpenBLAS's
    # spinning threads are slowed many times over when another process holds a core (a browser, the app's
    # server): the Findings page's probing tab took 177 s on 20 segments beside Chromium, 5 s alone at 1 thread.

    if task not in features.labels:
        raise ValueError(f"task must be one of {sorted(features.labels)}; got {task!r}")
    if len(set(features.groups.tolist())) < 2:
        raise ValueError("probing needs at least 2 segments (train and test sentences differ)")
    y = np.asarray(features.labels[task])
    y_ctrl = np.asarray(control_labels(features.types, list(y), seed))
    train, test = next(GroupShuffleSplit(1, test_size=test_fraction, random_state=seed).split(
        features.vectors[0], y, features.groups))
    majority_label = Counter(y[train]).most_common(1)[0][0]
    layers = features.vectors.shape[0]
    acc, ctrl = np.zeros(layers), np.zeros(layers)
    for layer in range(layers):
        x = StandardScaler().fit(features.vectors[layer][train]).transform(features.vectors[layer])
        for target, out in ((y, acc), (y_ctrl, ctrl)):
            clf = LogisticRegression(max_iter=max_iter, C=1.0)
            with threadpool_limits(limits=1, user_api="blas"):  # see below
                clf.fit(x[train], target[train])
            out[layer] = float((clf.predict(x[test]) == target[test]).mean())
        if progress is not None:
            progress(layer + 1, layers)
    return ProbeResult(acc, ctrl, float((y[test] == majority_label).mean()), acc - ctrl, expected_layer(acc),
                       len(train), len(test), len(set(y.tolist())))


def probe_all(encoder, tokenizer, parsed_segments, progress=None) -> dict[str, ProbeResult]:
    """:func:`probe` of every task in :data:`TASKS` on the :func:`word_features` of ``parsed_segments``;
    ``progress(done, total)`` counts the layers of all tasks. Raises as :func:`word_features` and :func:`probe`."""
    feats = word_features(encoder, tokenizer, parsed_segments)
    return {task: probe(feats, task, progress=None if progress is None else (
        lambda done, n, i=i: progress(i * n + done, n * len(TASKS))))
        for i, task in enumerate(TASKS)}
