"""The Grammar page's views: which of two sentences a masked LM prefers by pseudo-log-likelihood (hide each token in
turn and add up the log-probability of the real token; Salazar et al. 2020), and a minimal-pair suite after Marvin &
Linzen 2018 and BLiMP (Warstadt et al. 2020)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis import shipped
from bertcore.analysis.grammar import minimal_pairs
from bertcore.analysis.grammar.scoring import ScoringError, SentenceScore, pseudo_log_likelihood
from explorer.figures import grammar as figs
from explorer.views.core import load, progress, view

MAX_TOKENS = 128  # sentences, not documents: 128 copies of 128 tokens take about 1 s


@view
def score(source, text: str, metric: str):
    """The pseudo-log-likelihood of ``text`` (a :class:`~bertcore.analysis.grammar.scoring.SentenceScore`): each
    WordPiece's log-probability (nats) when it is hidden (with the rest of its word too, in the "within_word_l2r"
    metric of Kauf & Ivanova 2023). Raises ``ScoringError`` for an empty or over-long sentence."""
    lm = load(source)
    s = pseudo_log_likelihood(lm.model, lm.tokenizer, text, metric, max_tokens=MAX_TOKENS)
    return s


@dataclass
class Preference:
    """Two sentences scored: ``labels`` and ``scores`` of those that could be scored, ``pll`` ``(n,)`` their sums
    (nats), ``errors``: ``{label: why}`` for those that could not."""

    labels: list[str]
    scores: list[SentenceScore]
    pll: np.ndarray
    errors: dict[str, str]


@view
def preference(source, a: str, b: str, metric: str) -> Preference:
    """Which of ``a`` and ``b`` the model prefers: the higher pseudo-log-likelihood (Salazar et al. 2020)."""
    labels, scores, errors = [], [], {}
    for label, text in (("Sentence 1", a), ("Sentence 2", b)):
        try:  # hide each token in turn and add up the log-probability of the real token
            scores.append(score(source, text, metric))
            labels.append(label)
        except ScoringError as exc:  # empty, or longer than the model reads
            errors[label] = str(exc)
    pll = np.array([s.pll for s in scores])
    return Preference(labels, scores, pll, errors)


def contributions_figure(pref: Preference):
    """One panel per sentence: each WordPiece's log-probability when it is hidden."""
    return figs.contributions_figure([(label, s.tokens, s.log_probs) for label, s in zip(pref.labels, pref.scores)])


@view
def shipped_suite(source, n_pairs: int, metric: str) -> list | None:
    """The minimal-pair suite's results as shipped beside the model (the same pairs, metric and weights), or None
    (nothing is computed)."""
    lm = load(source)
    found = shipped.shipped(lm, shipped.grammar_suite(lm, n_pairs, metric))
    return found


@view
def suite(source, n_pairs: int, metric: str) -> list[minimal_pairs.PairResult]:
    """The minimal-pair suite (``n_pairs`` per paradigm, fixed seed) scored by pseudo-log-likelihood: one result per
    pair (two PLLs each, and the same question with [MASK] at the word where the two differ), or the shipped
    result."""
    lm = load(source)
    results = shipped.get(lm, shipped.grammar_suite(lm, n_pairs, metric), progress)
    return results


def suite_figure(results: list[minimal_pairs.PairResult]):
    """The share of pairs whose grammatical sentence scores higher, per paradigm (50% is chance)."""
    return figs.suite_figure(minimal_pairs.accuracy_by_paradigm(results))
