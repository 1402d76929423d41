"""The Activation patching page's views: a clean / corrupted pair checked and encoded, and the scan that reruns
the corrupted input with one activation copied from the clean run (Meng et al. 2022; Heimersheim & Nanda 2024)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis.causal import patching as P
from bertcore.readouts.fill_mask import mask_token_positions
from bertcore.tokenization.tokenizer import encode
from explorer.figures import patching as figs
from explorer.views.core import load, view

MAX_TOKENS = 64  # one forward per site: inputs are kept short


@dataclass
class Pair:
    """A clean / corrupted pair as patching reads it: ``clean_tokens`` / ``corrupt_tokens`` (WordPieces),
    ``labels`` (one per position: the token, or ``clean / corrupted`` where they differ), ``position`` (the clean
    input's [MASK], or -1), ``good_id`` / ``bad_id`` (tokens A and B, None when not one WordPiece), and what stops
    the scan: ``truncated`` (an input over :data:`MAX_TOKENS`), ``longer`` / ``shorter`` / ``gap`` (inputs of
    different lengths: which, and by how many tokens) and ``problems`` (sentences)."""

    clean_tokens: list[str]
    corrupt_tokens: list[str]
    labels: list[str]
    position: int
    good_id: int | None
    bad_id: int | None
    truncated: bool
    longer: str | None
    shorter: str | None
    gap: int
    problems: list[str]


@view
def pair(source, clean: str, corrupt: str, good: str, bad: str) -> Pair:
    """Encode both inputs (at most :data:`MAX_TOKENS` tokens) and say what stops a scan of them: an input cut off,
    two lengths (patching copies activations position by position), not exactly one [MASK] in the clean input,
    tokens A and B that are not single WordPieces or are the same.

    Raises ``TextError`` for an empty or unusable text."""
    lm = load(source)
    tok = lm.tokenizer
    e_clean = encode(tok, clean, max_length=min(lm.max_length, MAX_TOKENS))
    e_corr = encode(tok, corrupt, max_length=min(lm.max_length, MAX_TOKENS))
    masks = mask_token_positions(tok, e_clean.tensors(lm.device)["input_ids"])
    ids = [tok.convert_tokens_to_ids(t) for t in (good, bad)]
    ids = [None if i is None or i == tok.unk_token_id else int(i) for i in ids]  # not one WordPiece: None
    problems = []
    if len(masks) != 1:
        problems.append(f"the clean input needs exactly one {tok.mask_token} (it has {len(masks)})")
    if None in ids:
        problems.append("tokens A and B must each be one WordPiece of the vocabulary")
    if good == bad:
        problems.append("tokens A and B must differ")
    longer, shorter = ("clean", "corrupted") if len(e_clean) > len(e_corr) else ("corrupted", "clean")
    gap = abs(len(e_clean) - len(e_corr))
    labels = [a if a == b else f"{a} / {b}" for a, b in zip(e_clean.tokens, e_corr.tokens)]
    return Pair(clean_tokens=e_clean.tokens, corrupt_tokens=e_corr.tokens, labels=labels,
                position=masks[0] if len(masks) == 1 else -1, good_id=ids[0], bad_id=ids[1],
                truncated=bool(e_clean.num_truncated or e_corr.num_truncated), longer=longer if gap else None,
                shorter=shorter if gap else None, gap=gap, problems=problems)


@dataclass
class Scan:
    """The patching scan: ``clean`` / ``corrupted`` (logit(A) - logit(B) at the [MASK] of each run), ``effects``
    (kind -> ``(L + 1, T)`` resid, ``(L, T)`` attn and mlp, ``(L, heads)`` head; 0 = the corrupted run, 1 = the
    clean answer back) and ``labels`` (the columns: one per position)."""

    clean: float
    corrupted: float
    effects: dict[str, np.ndarray]
    labels: list[str]


@view
def scan(source, clean: str, corrupt: str, good: str, bad: str, kinds: tuple[str, ...]) -> Scan:
    """Rerun the corrupted input with one activation of ``kinds`` copied from the clean run, for every site, and
    measure how much of the clean answer (logit(good) - logit(bad) at the [MASK]) comes back.

    Raises ``TextError`` and ``PatchingError`` (inputs :func:`pair` says cannot be patched, no site)."""
    lm = load(source)
    p = pair(source, clean, corrupt, good, bad)
    if p.truncated or p.gap or p.problems:
        raise P.PatchingError("these inputs cannot be patched: " + "; ".join(
            p.problems or [f"the {p.longer} input is longer" if p.gap else f"at most {MAX_TOKENS} tokens"]))
    if not kinds:
        raise P.PatchingError("pick at least one kind of site")
    tok = lm.tokenizer
    e_clean = encode(tok, clean, max_length=min(lm.max_length, MAX_TOKENS)).tensors(lm.device)  # (1, T) each
    e_corr = encode(tok, corrupt, max_length=min(lm.max_length, MAX_TOKENS)).tensors(lm.device)
    # the metric: logit(good) - logit(bad) at the clean input's one [MASK]
    metric = P.logit_diff(p.position, p.good_id, p.bad_id)
    # one run per site: the corrupted input with that one activation taken from the clean run
    found = P.scan(lm.model, e_clean, e_corr, metric, kinds=list(kinds))  # PatchingResult
    return Scan(found.clean, found.corrupted, found.effects, p.labels)


def heatmap_figure(result: Scan, kind: str = "resid"):
    """The effects of one kind of site: layers by positions (by heads for ``head``)."""
    return figs.effect_heatmap(result.effects[kind], kind, None if kind == "head" else result.labels)
