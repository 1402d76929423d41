"""An attribution graph as the JSON that Neuronpedia's graph viewer opens (the format of circuit-tracer's
``create_graph_files``; Neuronpedia's ``apps/webapp/app/api/graph/graph-schema.json``): ``metadata``, ``qParams``,
``nodes`` (``node_id``, ``feature``, ``layer``, ``ctx_idx``, ``feature_type``, ``jsNodeId``, ``clerp``,
``influence``, ``activation``) and ``links`` (``source``, ``target``, ``weight``) of the pruned graph.

Ids, as the viewer lays them out: a feature ``"{block}_{latent}_{position}"``; an error ``"{block}_-1_{position}"``;
an embedding ``"E_{token id}_{position}"`` on layer ``"E"``; a logit ``"{L + 1}_{token id}_{position}"``.
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

from .attribution import AttributionGraph
from .graph import Pruned

GENERATOR = {"name": "bert-explorer (bertcore.circuits)", "version": "0.1.0"}
DIGITS = 6  #: significant digits of the weights, influences and activations written (the viewer draws them)


def _num(x, digits: int = DIGITS) -> float:
    """``x`` rounded to ``digits`` significant digits: a link's weight in 10 characters, not 20 (a 64-token graph
    has ~10^5 links)."""
    return float(f"{float(x):.{digits}g}")


def neuronpedia_json(graph: AttributionGraph, pruned: Pruned, scan: str, slug: str, prompt: str,
                     node_threshold: float = 0.8, edge_threshold: float = 0.98, digits: int = DIGITS) -> dict[str, Any]:
    """The pruned ``graph`` (``pruned`` from :func:`bertcore.circuits.graph.prune`) as Neuronpedia's graph JSON.
    ``scan``: the model's name (Neuronpedia's model id); ``slug``: the graph's name; ``prompt``: the input text;
    ``digits``: significant digits of the numbers written."""
    num = partial(_num, digits=digits)
    lay, t, n_blocks = graph.layout, len(graph.tokens), graph.layout.errors // max(1, len(graph.tokens))
    ids: dict[int, str] = {}
    nodes = []
    for i in pruned.nodes.nonzero().flatten().tolist():
        influence = num(pruned.cumulative[i])
        if i < lay.features:
            block, pos, latent = (int(v) for v in graph.features[i])
            node = {"node_id": f"{block}_{latent}_{pos}", "feature": latent, "layer": str(block), "ctx_idx": pos,
                    "feature_type": "cross layer transcoder", "jsNodeId": f"{block}_{latent}-{pos}",
                    "clerp": f"block {block} latent {latent}", "influence": influence,
                    "activation": num(graph.activations[i])}
        elif i < lay.part("embeddings").start:
            block, pos = divmod(i - lay.features, t)
            node = {"node_id": f"{block}_-1_{pos}", "feature": -1, "layer": str(block), "ctx_idx": pos,
                    "feature_type": "mlp reconstruction error", "jsNodeId": f"{block}_err-{pos}",
                    "clerp": f"error of block {block} at '{graph.tokens[pos]}'", "influence": influence,
                    "activation": None}
        elif i < lay.part("logits").start:
            pos = i - lay.part("embeddings").start
            token_id = int(graph.input_ids[pos])
            node = {"node_id": f"E_{token_id}_{pos}", "feature": token_id, "layer": "E", "ctx_idx": pos,
                    "feature_type": "embedding", "jsNodeId": f"E_{token_id}-{pos}",
                    "clerp": f"'{graph.tokens[pos]}' (embedding)", "influence": influence, "activation": None}
        else:
            target = graph.targets[i - lay.part("logits").start]
            token_id, pos = target.token_ids[0], graph.mask_position
            node = {"node_id": f"{n_blocks + 1}_{token_id}_{pos}", "feature": token_id, "layer": str(n_blocks + 1),
                    "ctx_idx": pos, "feature_type": "logit", "jsNodeId": f"L_{token_id}-{pos}",
                    "clerp": f"{target.label} (p = {target.probability:.3f})", "influence": influence,
                    "activation": None, "token_prob": target.probability}
        ids[i] = node["node_id"]
        nodes.append(node)
    links = [{"source": ids[s], "target": ids[tg], "weight": num(graph.adjacency[tg, s])}
             for tg, s in pruned.edges.nonzero().tolist() if s in ids and tg in ids]
    metadata = {"slug": slug, "scan": scan, "prompt_tokens": list(graph.tokens), "prompt": prompt,
                "node_threshold": node_threshold,
                "info": {"generator": GENERATOR, "create_time_ms": int(time.time() * 1000)},
                "generation_settings": {"max_n_logits": len(graph.targets)},
                "pruning_settings": {"node_threshold": node_threshold, "edge_threshold": edge_threshold}}
    return {"metadata": metadata, "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both"},
            "nodes": nodes, "links": links}


def dumps(doc: dict[str, Any]) -> str:
    """``doc`` (:func:`neuronpedia_json`) as compact JSON text, UTF-8 characters as they are: what the download and
    the size benchmark write (without the spaces of ``json.dumps``' defaults: the benchmark's 64-token graph 5.59 MB,
    not 6.12)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
