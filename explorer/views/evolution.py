"""The Evolution page's views: a run's checkpoints compared. One head's attention and the position embeddings'
similarity at each checkpoint, the published patterns (Clark et al. 2019, Ethayarajh 2019) and the minimal-pair
suite at each checkpoint, and the run's timeline: when the loss left its plateau (Chen et al. 2023), when a
previous-token head appeared, when attention to [SEP] rose.

Each checkpoint is a :class:`~bertcore.loading.sources.ModelSource` of kind "run": the per-checkpoint views are
keyed on its files (a checkpoint rewritten by a resumed run is read again) and load it with
:func:`bertcore.loading.sources.load` (run and dropped: checkpoints do not crowd the server's model cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore import runs
from bertcore.analysis.attention import activations
from bertcore.analysis.attention.words import merge_attention, word_groups
from bertcore.analysis.grammar import agreement
from bertcore.analysis.grammar import minimal_pairs
from bertcore.analysis.papers import emergence, evalset
from bertcore.analysis.representations import syntax
from bertcore.loading import sources
from bertcore.loading.sources import ModelSource
from bertcore.readouts import positional
from explorer.figures import evolution as figs
from explorer.figures import findings as finding_figs
from explorer.figures import training as train_figs
from explorer.views.core import view


def checkpoint_sources(run_dir: Path, steps: list[int]) -> list[ModelSource]:
    """The checkpoints of ``run_dir`` at ``steps``, as model sources. Raises ``KeyError`` for a step without one."""
    folders = {runs.checkpoint_step(c): c for c in runs.checkpoints(run_dir)}
    return [ModelSource("run", str(folders[step])) for step in steps]


@dataclass
class HeadAt:
    """One head's attention ``(T, T)`` float64 at one checkpoint (``(W, W)`` over words) and the T token labels."""

    attention: np.ndarray
    tokens: list[str]


@view
def attention_at(checkpoint: ModelSource, text: str, layer: int, head: int, words: bool = False) -> HeadAt:
    """The attention of ``layer`` / ``head`` (0-based block and head) of one checkpoint on ``text``; with
    ``words``, merged to words (:func:`bertcore.analysis.attention.words.merge_attention`). Raises ``TextError``."""
    loaded = sources.load(checkpoint)  # loaded, run and dropped
    acts = activations.run(loaded.encoder, loaded.tokenizer, text)
    one, tokens = acts.attentions[layer, head], acts.tokens  # (T, T); layer and head count from 0
    if words:
        groups = word_groups(acts.encoding.tokens, acts.encoding.word_ids)
        one, tokens = merge_attention(one, groups), groups.labels  # (W, W): words, not WordPieces
    return HeadAt(one.astype(np.float64), list(tokens))


@dataclass
class HeadEvolution:
    """One head's attention at each chosen checkpoint: ``maps`` (one ``(T, T)`` float64 each), ``tokens``,
    ``steps``, ``layer`` and ``head`` (0-based)."""

    maps: list[np.ndarray]
    tokens: list[str]
    steps: list[int]
    layer: int
    head: int


def attention(run_dir: Path, steps: list[int], text: str, layer: int, head: int, words: bool) -> HeadEvolution:
    """One head's attention at each checkpoint of ``steps`` (each checkpoint's map is a view of its own, keyed on
    its files). Raises ``TextError`` and ``SourceError``."""
    maps, tokens = [], []
    for checkpoint in checkpoint_sources(run_dir, steps):  # each checkpoint loaded, run on the sentence and dropped
        at = attention_at(checkpoint, text, layer, head, words)
        maps.append(at.attention)
        tokens = at.tokens
    return HeadEvolution(maps, tokens, list(steps), layer, head)


def attention_figure(evo: HeadEvolution):
    """One panel per checkpoint, one colour scale for all."""
    return figs.attention_evolution_figure(evo.maps, evo.tokens, evo.steps, layer=evo.layer, head=evo.head)


@view
def position_similarity_at(checkpoint: ModelSource, n_positions: int) -> np.ndarray:
    """The cosine similarity ``(P, P)`` of the first ``n_positions`` learned position vectors of one checkpoint.
    Raises ``SourceError`` and ``ValueError``."""
    loaded = sources.load(checkpoint)
    table = positional.learned_positions(loaded.model, 0, n_positions)  # (P, H)
    sims = positional.cosine_similarity(table)
    return sims


def max_tokens_of(run_dir: Path) -> int:
    """The segment length the run trained on (its ``max_seq_len``, 128 when unknown or under 8)."""
    seq_len = (runs.read_config(run_dir) or {}).get("args", {}).get("max_seq_len")
    return int(seq_len) if isinstance(seq_len, int) and seq_len >= 8 else 128


@view
def summary_at(checkpoint: ModelSource, n_segments: int, max_tokens: int) -> dict[str, float]:
    """The Findings page's measures (:func:`bertcore.analysis.papers.emergence.summary`) of one checkpoint on
    ``n_segments`` held-out segments of at most ``max_tokens`` tokens, and the best head's unlabelled attachment
    score against spaCy's parses (``syntax_uas``; NaN without spaCy). Raises ``DataError``, ``SourceError``."""
    loaded = sources.load(checkpoint)
    limit = min(max_tokens, evalset.MAX_TOKENS, loaded.max_length)
    segments = evalset.build_segments(loaded.tokenizer, evalset.heldout_documents(), n_segments, limit)
    out = emergence.summary(evalset.run_findings(loaded.encoder, loaded.tokenizer, segments))
    try:  # Chen et al. 2023: the best head's unlabelled attachment score against spaCy's parses
        run = syntax.run_syntax(loaded.encoder, loaded.tokenizer, segments, min_count=1)
        out["syntax_uas"] = float(run.heads.uas.max())
    except (syntax.SyntaxUnavailable, ValueError):
        out["syntax_uas"] = float("nan")
    return out


@view
def agreement_at(checkpoint: ModelSource) -> dict[str, float]:
    """:func:`bertcore.analysis.grammar.agreement.agreement_heads` of one checkpoint: ``{"to_subject": the best
    head's mean verb -> subject attention, "to_attractor": the same head's verb -> attractor attention, "layer",
    "head"}`` (0-based block and head)."""
    loaded = sources.load(checkpoint)
    heads = agreement.agreement_heads(loaded.encoder, loaded.tokenizer)
    layer, head = heads.best
    found = {"to_subject": heads.best_score, "to_attractor": float(heads.to_attractor[layer, head]),
             "layer": layer, "head": head}
    return found


@view
def suite_at(checkpoint: ModelSource, n_pairs: int) -> dict[str, float]:
    """The minimal-pair suite's PLL accuracy per paradigm (``n_pairs`` per paradigm, the suite's seed) of one
    checkpoint with an MLM head. Raises ``FillMaskError`` without one."""
    loaded = sources.load(checkpoint)
    results = list(minimal_pairs.score(loaded.model, loaded.tokenizer, minimal_pairs.generate(n_pairs)))
    accuracy = {name: acc["pll"] for name, acc in minimal_pairs.accuracy_by_paradigm(results).items()}
    return accuracy


@dataclass
class Timeline:
    """A run's timeline: ``series`` (name -> (steps, values): the loss, validation accuracy at [MASK] and each
    measure per checkpoint), ``marks`` (series name -> the step of its event, or None) and ``events`` (the table:
    ``{"event", "step"}`` rows)."""

    series: dict[str, tuple[list, list]]
    marks: dict[str, int | None]
    events: list[dict[str, str]]


@view
def timeline(metrics: Path, steps: list[int], n_segments: int) -> Timeline:
    """The run whose ``metrics.jsonl`` is ``metrics`` (the key holds the file's size and modification time, so a
    running run's new lines are read) at the checkpoints of ``steps``: its loss and the measures of
    :func:`summary_at`, and the steps where the loss left its plateau, the first previous-token head appeared
    (> 50% on the previous token, Clark et al. 2019), attention to [SEP] rose, and the held-out MLM loss went below
    the unigram line for good. Raises what :func:`summary_at` raises."""
    run_dir = metrics.parent
    checkpoints = checkpoint_sources(run_dir, steps)
    summaries = [summary_at(c, n_segments, max_tokens_of(run_dir)) for c in checkpoints]
    series = {}
    train = [r for r in runs.read_metrics(run_dir) if r.get("split") == "train"]
    loss_key = "mlm_loss" if any("mlm_loss" in r for r in train) else "loss"
    points = [(r["step"], r[loss_key]) for r in train if isinstance(r.get(loss_key), (int, float))]
    loss_name = f"MLM loss (train, {loss_key})"
    # Chen et al. 2023: a plateau, then a sudden drop
    exit_step, plateau = emergence.plateau_exit(*zip(*points)) if len(points) >= 3 else (None, None)
    if points:
        series[loss_name] = tuple(zip(*points))
    val = [(r["step"], r["mlm_acc_mask"]) for r in runs.read_metrics(run_dir, split="val")
           if isinstance(r.get("mlm_acc_mask"), (int, float))]
    if val:
        series["Accuracy at [MASK] positions (validation)"] = tuple(zip(*val))
    for k, name in emergence.SUMMARY_NAMES.items():
        series[name] = (list(steps), [s.get(k, float("nan")) for s in summaries])
    if (runs.read_config(run_dir) or {}).get("args", {}).get("corpus") == "agreement":  # the generated language
        found = [agreement_at(c) for c in checkpoints]
        last = found[-1]
        series[f"Agreement head: verb -> subject (best head per checkpoint; last L{last['layer'] + 1} "
               f"H{last['head'] + 1})"] = (list(steps), [f["to_subject"] for f in found])
        series["Same head: verb -> attractor noun"] = (list(steps), [f["to_attractor"] for f in found])
    records = runs.read_metrics(run_dir)
    unigram = train_figs.reference_of(records).get("unigram_loss")
    unigram_step = train_figs.unigram_exit_step(records, unigram) if isinstance(unigram, (int, float)) else None
    prev_step = emergence.first_above(steps, [s["prev_max"] for s in summaries], emergence.PREV_MIN)
    sep_step = emergence.rise_step(steps, [s["sep"] for s in summaries])
    marks = {emergence.SUMMARY_NAMES["prev_max"]: prev_step, emergence.SUMMARY_NAMES["sep"]: sep_step,
             loss_name: exit_step}
    not_yet = "not in the chosen checkpoints"
    if not points:
        plateau_text = "no loss in metrics.jsonl"
    elif exit_step is None:
        plateau_text = "not yet" if plateau is not None else "too few logged steps"
    else:
        plateau_text = str(exit_step)
    aniso = [s["anisotropy_last"] for s in summaries]
    events = [
        {"event": "first previous-token head (> 50%)", "step": not_yet if prev_step is None else str(prev_step)},
        {"event": f"[SEP] attention rose (x{emergence.SEP_RISE:g}, >= {emergence.SEP_MIN:.0%})",
         "step": not_yet if sep_step is None else str(sep_step)},
        {"event": "loss left its plateau" + (f" (plateau {plateau:.2f})" if plateau is not None else ""),
         "step": plateau_text},
        {"event": f"held-out MLM loss below the unigram line for good (by {emergence.UNIGRAM_MARGIN:g} nats)",
         "step": "not yet" if unigram_step is None else str(unigram_step)},
        {"event": "anisotropy of the last layer, first -> last checkpoint",
         "step": f"{aniso[0]:.2f} -> {aniso[-1]:.2f}"},
    ]
    return Timeline(series, marks, events)


def timeline_figure(t: Timeline):
    """Every series on its own axis, dashed red lines at the events' steps."""
    return finding_figs.emergence_figure(t.series, t.marks)
