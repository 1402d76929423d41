"""The Embeddings page's view: the embedding layer taken apart for one text (token + position + segment, their sum,
LayerNorm; Devlin et al. 2019, section 3.2 and figure 2), each step written out from the weights and checked against
the model's own embedding output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.readouts import anatomy
from bertcore.tokenization.tokenizer import encode
from explorer.figures import embeddings as emb_figures
from explorer.views.core import load, view


COMPONENTS = ["token", "position", "segment", "sum", "normalised", "output"]  # the parts, in order


@dataclass
class Parts:
    """The embedding layer of one text. ``tokens``, ``input_ids``, ``token_type_ids``: the T tokens; ``parts``:
    ``{"token", "position", "segment", "sum", "normalised", "output"}`` each ``(T, H)`` float32; ``norms``: the
    ``(T,)`` L2 norm of each part but ``normalised``; ``max_abs_diff``: ``layernorm`` (written out vs the module)
    and ``model`` (the recomposition vs ``hidden_states[0]``); ``matches``: both within 1e-5; ``num_truncated``:
    tokens cut at the model's length; ``missing``: the tables this model lacks ("position", "segment")."""

    tokens: list[str]
    input_ids: list[int]
    token_type_ids: list[int]
    parts: dict[str, np.ndarray]
    norms: dict[str, np.ndarray]
    max_abs_diff: dict[str, float]
    matches: bool
    num_truncated: int
    missing: list[str]


@view
def parts(source, text: str, text_pair: str | None) -> Parts:
    """Token + position + segment, then LayerNorm, for ``text`` (and ``text_pair``), from the model's weights.

    Raises ``TextError`` (an empty or unreadable text) and ``InputError`` (ids the model cannot embed)."""
    lm = load(source)
    enc = encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)
    t = enc.tensors(lm.device)  # (1, T) each
    # token + position + segment, then LayerNorm, written out from the weights (Devlin et al. 2019, section 3.2)
    breakdown = anatomy.embedding_breakdown(lm.model, t["input_ids"], t["token_type_ids"])
    steps = {"token": breakdown.word, "position": breakdown.position, "segment": breakdown.segment,
             "sum": breakdown.total, "normalised": breakdown.normalised, "output": breakdown.output}  # (T, H) each
    norms = {name: norm.cpu().numpy() for name, norm in breakdown.norms.items() if name != "normalised"}  # (T,) each
    # rotary models have no position table, some families no segment table: those parts are zeros
    missing = [name for name, table in (("position", lm.encoder.embeddings.position_embeddings),
                                        ("segment", lm.encoder.embeddings.token_type_embeddings)) if table is None]
    return Parts(enc.tokens, enc.input_ids, enc.token_type_ids, {k: v.cpu().numpy() for k, v in steps.items()},
                 norms, breakdown.max_abs_diff, breakdown.matches(), enc.num_truncated, missing)


def norms_figure(result: Parts):
    """The size (L2 norm) of each part, token by token."""
    return emb_figures.norms_figure(result.norms, result.tokens)


def token_steps(result: Parts, token: int) -> dict[str, list]:
    """One token's embedding, step by step: each part's name, L2 norm, mean and standard deviation (the biased one,
    as LayerNorm's), in :data:`COMPONENTS`' order."""
    vectors = [result.parts[k][token] for k in COMPONENTS]
    return {"step": [f"token (id {result.input_ids[token]})", f"position {token}",
                     f"segment {result.token_type_ids[token]}", "sum", "normalised", "output (γ · normalised + β)"],
            "L2 norm": [float(np.linalg.norm(v)) for v in vectors], "mean": [float(v.mean()) for v in vectors],
            "std": [float(v.std()) for v in vectors]}
