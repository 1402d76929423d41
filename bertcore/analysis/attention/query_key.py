"""The joint query-key map of one attention head (AttentionViz: Yeh et al. 2023, "AttentionViz: A Global View
of Transformer Attention", IEEE VIS; section 4.1).

Every token of a set of sentences gives a query and a key vector in the head's d-dimensional space; where a
query lies near a key (large dot product) it attends to it. Two changes make queries and keys comparable in one
picture without changing any attention weight:

- **scaling**: queries are multiplied by ``c`` and keys divided by ``c`` (``q . k`` unchanged), with ``c`` chosen
  so both spread alike (the same mean distance from their own centroid);
- **translation**: then the keys are shifted so their mean equals the queries' mean; a shift ``v`` adds the same
  ``q . v`` to every score of a query, which softmax ignores.

Then queries and keys are projected together to 2-D (PCA, or t-SNE from scikit-learn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...device import device_of
from ...modeling.interventions import Interventions


@dataclass
class QueryKeys:
    """Queries and keys of one head over N tokens (all sentences, special tokens included).

    Attributes:
        queries / keys: ``(N, d)`` float32, as the model computes them (before the 1/sqrt(d) scaling).
        sentence: ``(N,)`` int, the sentence of each token; position: ``(N,)`` int; tokens: N strings.
        lengths: tokens per sentence.
    """

    queries: np.ndarray
    keys: np.ndarray
    sentence: np.ndarray
    position: np.ndarray
    tokens: list[str]
    lengths: list[int]


@torch.no_grad()
def query_keys(encoder, tokenizer, sentences: list[str], layer: int, head: int, max_length: int = 128) -> QueryKeys:
    """Record the queries and keys of head ``head`` of block ``layer`` (both from 0) on each sentence: the sites
    ``blocks.{layer}.attn.hook_q`` / ``hook_k`` (a rotary model's ``hook_rot_q`` / ``hook_rot_k``, whose dot product
    is the score).

    Raises:
        ValueError: no sentence, or a layer / head out of range.
    """
    cfg = encoder.config
    if not sentences:
        raise ValueError("give at least one sentence")
    if not 0 <= layer < cfg.num_hidden_layers or not 0 <= head < cfg.num_attention_heads:
        raise ValueError(f"layer must be 0..{cfg.num_hidden_layers - 1} and head 0..{cfg.num_attention_heads - 1}")
    rot = "rot_" if cfg.position_embedding_type == "rotary" else ""
    q_site, k_site = f"blocks.{layer}.attn.hook_{rot}q", f"blocks.{layer}.attn.hook_{rot}k"
    qs, ks, sent, pos, toks, lengths = [], [], [], [], [], []
    device = device_of(encoder)
    for i, s in enumerate(sentences):
        enc = tokenizer(s, return_tensors="pt", truncation=True, max_length=max_length).to(device)
        iv = Interventions(record=[q_site, k_site])  # this call's own, never a hook
        encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], interventions=iv)
        t = enc["input_ids"].shape[1]
        qs.append(iv.recorded[q_site][0, :, head].float().cpu().numpy())  # (T, d)
        ks.append(iv.recorded[k_site][0, :, head].float().cpu().numpy())
        sent += [i] * t
        pos += list(range(t))
        toks += tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
        lengths.append(t)
    return QueryKeys(np.concatenate(qs), np.concatenate(ks), np.array(sent), np.array(pos), toks, lengths)


def normalize(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """AttentionViz's normalisation: ``(q', k', c)`` with ``q' = c q`` and ``k' = k / c`` shifted so that
    ``mean k' = mean q'``; ``c`` makes the spreads equal (mean distance to the centroid). No attention weight of
    the head changes (softmax over keys of ``q . k / sqrt(d)``)."""
    sq = np.linalg.norm(queries - queries.mean(0), axis=1).mean()
    sk = np.linalg.norm(keys - keys.mean(0), axis=1).mean()
    c = float(np.sqrt(sk / sq)) if sq > 0 and sk > 0 else 1.0
    q = queries * c
    k = keys / c
    return q, k + (q.mean(0) - k.mean(0)), c


def project(queries: np.ndarray, keys: np.ndarray, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Queries and keys together to 2-D: ``("pca" | "tsne")`` -> ``((N, 2), (N, 2))``.

    Raises:
        ValueError: an unknown method or fewer than 3 points.
    """
    x = np.concatenate([queries, keys]).astype(np.float64)
    if len(x) < 3:
        raise ValueError("need at least 3 tokens to project")
    if method == "pca":
        from sklearn.decomposition import PCA

        y = PCA(n_components=2, random_state=seed).fit_transform(x)
    elif method == "tsne":
        from sklearn.manifold import TSNE

        y = TSNE(n_components=2, perplexity=min(30.0, (len(x) - 1) / 3), init="pca", random_state=seed).fit_transform(x)
    else:
        raise ValueError(f"method must be 'pca' or 'tsne'; got {method!r}")
    n = len(queries)
    return y[:n], y[n:]


def attention_from(queries: np.ndarray, keys: np.ndarray, qk: QueryKeys, sentence: int) -> np.ndarray:
    """The head's ``(T, T)`` attention for one sentence recomputed from (possibly normalised) queries and keys
    (softmax of ``q . k / sqrt(d)``, one unpadded sentence)."""
    idx = np.flatnonzero(qk.sentence == sentence)
    scores = queries[idx] @ keys[idx].T / np.sqrt(queries.shape[1])
    scores -= scores.max(1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(1, keepdims=True)
