"""Clark et al. 2019's attention-only probe ("What Does BERT Look At?", section 5, Table 3): how much of a
dependency parse a *learned combination* of every head's attention recovers, beyond the best single head.

For a word j and each candidate head i (the other words of j's sentence, and ROOT, which the [CLS] token stands
for as in Clark et al.'s data), the probe scores

    p(i | j) = softmax_i ( sum_k  w_k * alpha^k(j -> i)  +  u_k * alpha^k(i -> j) )

over the k = L x H heads' word-level attention (:func:`bertcore.analysis.representations.syntax.word_attention`), both
directions,
with 2 * L * H learned weights and nothing else. Trained (cross-entropy, SciPy's L-BFGS-B) on the words of some
segments and scored on others: the unlabelled attachment score (UAS), the share of words whose predicted head is
their parse head, punctuation left out. Clark et al. report 61 UAS for bert-base on the WSJ (right-branching
baseline: 26).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import GroupShuffleSplit

from .parses import ParsedSegment, word_attention
from ..attention.words import word_groups

ROOT = -1  #: the candidate index of ROOT in :class:`Dependent.candidates`


@dataclass
class Dependent:
    """One word to attach: ``candidates`` (word indices of the other words of its sentence, :data:`ROOT` last),
    ``gold`` (the index into ``candidates`` of its parse head), ``features`` ``(C, 2 * L * H)`` float32 (the
    word's attention to each candidate, then each candidate's attention to the word), ``segment``, ``word``."""

    segment: int
    word: int
    candidates: list[int]
    gold: int
    features: np.ndarray


@dataclass
class AttentionProbe:
    """:func:`attention_probe`'s result.

    Attributes:
        uas: test words whose predicted head is their parse head (share, punctuation left out).
        train_uas: the same on the training words.
        right_branching: test UAS of "the next word of the sentence is the head" (ROOT for the last word).
        weights: ``(2, L, H)`` the learned ``w`` (the word attending to the candidate) and ``u`` (the reverse).
        n_train / n_test: words (dependents) in each split; ``test_segments``: the held-out segment indices.
    """

    uas: float
    train_uas: float
    right_branching: float
    weights: np.ndarray
    n_train: int
    n_test: int
    test_segments: list[int]


def _sentence_of(seg: ParsedSegment) -> list[int]:
    """Each word's sentence, named by its root word (spaCy's root is its own head)."""
    out = []
    for w in range(len(seg.words)):
        seen = set()
        while seg.words[w].head != w and w not in seen:
            seen.add(w)
            w = seg.words[w].head
        out.append(w)
    return out


def dependents(attentions: np.ndarray, seg: ParsedSegment, segment: int = 0) -> list[Dependent]:
    """The probe's inputs for one segment: every word with a WordPiece but punctuation, whose head has one too.

    Args:
        attentions: ``(L, H, T, T)`` token attention of the segment (rows = queries).
        seg: its parse (:func:`bertcore.analysis.representations.syntax.parse_segment`).
    """
    merged, unit = word_attention(np.asarray(attentions), seg)  # (L, H, W', W')
    groups = word_groups(seg.tokens, seg.word_ids)
    root_unit = groups.token_to_unit[0]  # [CLS]
    sentence = _sentence_of(seg)
    out = []
    for d, w in enumerate(seg.words):
        if w.dep == "punct" or unit[d] < 0 or unit[w.head] < 0:
            continue
        cands = [c for c in range(len(seg.words)) if c != d and sentence[c] == sentence[d] and unit[c] >= 0]
        cands.append(ROOT)
        units = [root_unit if c == ROOT else unit[c] for c in cands]
        to_cand = merged[:, :, unit[d], units].reshape(-1, len(units)).T  # (C, L*H): the word -> candidate
        from_cand = merged[:, :, units, unit[d]].reshape(-1, len(units)).T  # (C, L*H): candidate -> the word
        gold = cands.index(ROOT if w.head == d else w.head)
        out.append(Dependent(segment, d, cands, gold, np.concatenate([to_cand, from_cand], 1).astype(np.float32)))
    return out


def _stack(deps: list[Dependent]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat candidate features ``(N_c, F)``, each candidate's dependent ``(N_c,)``, and each dependent's gold row
    in the flat array ``(N,)``, on the CPU: the features are numpy arrays and the fit is SciPy's."""
    x = torch.from_numpy(np.concatenate([d.features for d in deps]))
    sizes = torch.tensor([len(d.candidates) for d in deps], device=x.device)
    owner = torch.repeat_interleave(torch.arange(len(deps), device=x.device), sizes)
    first = torch.cumsum(sizes, 0) - sizes
    gold = first + torch.tensor([d.gold for d in deps], device=x.device)
    return x, owner, gold


def _log_softmax_by_owner(scores: torch.Tensor, owner: torch.Tensor, n: int) -> torch.Tensor:
    """Log-softmax of ``scores (N_c,)`` within each dependent's candidates."""
    top = torch.full((n,), -torch.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(0, owner, scores,
                                                                                               "amax")
    z = torch.zeros(n, dtype=scores.dtype, device=scores.device).index_add(0, owner, torch.exp(scores - top[owner]))
    return scores - top[owner] - torch.log(z)[owner]


def _uas(scores: torch.Tensor, owner: torch.Tensor, gold: torch.Tensor, n: int) -> float:
    """Share of dependents whose best-scored candidate is the gold one (ties: the first)."""
    best = torch.full((n,), -torch.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(0, owner, scores,
                                                                                                "amax")
    return float((scores[gold] >= best).double().mean())


def fit(deps: list[Dependent], l2: float = 1e-3, steps: int = 200) -> torch.Tensor:
    """The probe's weights ``(F,)``: minimise the mean cross-entropy of the gold head plus ``l2 * |w|^2`` (convex
    in the weights) with SciPy's L-BFGS-B, from zero (all candidates equally likely); the gradient is the
    softmax's, ``x.T @ (p - onehot(gold)) / N + 2 * l2 * w``.

    Raises:
        ValueError: no dependents.
    """
    from scipy.optimize import minimize

    if not deps:
        raise ValueError("no words to train the probe on")
    x, owner, gold = _stack(deps)

    n = len(deps)

    def loss_and_grad(w_np: np.ndarray) -> tuple[float, np.ndarray]:
        w = torch.from_numpy(w_np.astype(np.float32))
        logp = _log_softmax_by_owner(x @ w, owner, n)  # (N_c,)
        loss = -logp[gold].mean() + l2 * (w * w).sum()
        residual = torch.exp(logp)
        residual[gold] -= 1  # d loss / d score = p - onehot(gold), per dependent
        grad = x.T @ residual / n + 2 * l2 * w
        return float(loss), grad.double().numpy()

    res = minimize(loss_and_grad, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": steps})
    return torch.tensor(res.x, dtype=torch.float32, device=x.device)  # SciPy's result, where the features are


def score(deps: list[Dependent], weights: torch.Tensor) -> float:
    """UAS of the probe ``weights`` on ``deps`` (0 when there are none)."""
    if not deps:
        return 0.0
    x, owner, gold = _stack(deps)
    return _uas(x @ weights.float(), owner, gold, len(deps))


def right_branching(deps: list[Dependent]) -> float:
    """UAS of "the head is the next word of the sentence" (ROOT for the sentence's last word)."""
    if not deps:
        return 0.0
    hits = 0
    for d in deps:
        later = [c for c in d.candidates if c != ROOT and c > d.word]
        guess = min(later) if later else ROOT
        hits += d.candidates[d.gold] == guess
    return hits / len(deps)


def attention_probe(attention_maps: list[np.ndarray], segments: list[ParsedSegment], test_size: float = 0.3,
                    seed: int = 0, l2: float = 1e-3) -> AttentionProbe:
    """Train Clark et al.'s attention-only probe on some segments and score it on the others.

    Args:
        attention_maps: per segment ``(L, H, T, T)`` attention (eval mode).
        segments: :func:`bertcore.analysis.representations.syntax.parse_segment` of the same inputs.
        test_size: share of segments held out (split by segment, so no sentence is in both).
    Raises:
        ValueError: lists of different lengths, fewer than two segments with words to attach.
    """
    if len(attention_maps) != len(segments):
        raise ValueError(f"{len(attention_maps)} attention maps for {len(segments)} segments")
    deps = [d for s, (att, seg) in enumerate(zip(attention_maps, segments)) for d in dependents(att, seg, s)]
    groups = np.array([d.segment for d in deps])
    if len(set(groups.tolist())) < 2:
        raise ValueError("the attention probe needs at least two segments with words to attach")
    train_i, test_i = next(GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
                           .split(groups, groups=groups))
    train, test = [deps[i] for i in train_i], [deps[i] for i in test_i]
    w = fit(train, l2)
    shape = np.asarray(attention_maps[0]).shape[:2]
    return AttentionProbe(score(test, w), score(train, w), right_branching(test),
                          w.numpy().reshape(2, *shape), len(train), len(test), sorted(set(groups[test_i].tolist())))
