"""Time an attribution graph of the shipped MiniLM-MLM (the goals: at 2 threads
a graph for a 16-token sentence in <= 30 s, for 64 tokens in <= 3 min; the pruned JSON of a 64-token graph
<= 5 MB).

    python bench/bench_circuits.py --transcoders RUN/checkpoints/step-N [--threads 2]

Each graph: :func:`bertcore.circuits.attribution.build` (contrast "are" / "is"),
:func:`bertcore.circuits.graph.prune_graph` (0.8 / 0.98) and :func:`bertcore.circuits.export.neuronpedia_json` written
as the page's download writes it (:func:`bertcore.circuits.export.dumps`). The goals are absolute ones;
measured in the same run as a unit of this machine's speed, one float64 forward pass of the model on the same input
(the graph's private copy runs in float64), and the load average before and after (time nothing else while this runs:
on the shared 2-core machine a busy neighbour slows 2 threads far more than 1). Prints one JSON object. """

from __future__ import annotations

import harness

import copy
import json
from collections import Counter

from bertcore import encode
from bertcore.circuits.attribution import build
from bertcore.circuits.check import load_transcoders
from bertcore.circuits.export import dumps, neuronpedia_json
from bertcore.circuits.graph import prune_graph
from bertcore.loading import sources

#: 16 and 64 WordPiece tokens with [CLS] and [SEP] (checked below)
TEXTS = {
    16: "The keys to the old cabinet in the hall [MASK] on the table.",
    64: ("The keys that the tired old farmer left near the red doors of the small white house on the hill last "
         "night, after the long walk home from the busy market in the town across the river where his two brothers "
         "still sell apples, fresh eggs and bread every single morning, [MASK] still on the old wooden table."),
}
GOALS = {16: 30.0, 64: 180.0}
JSON_GOAL_MB = 5.0


def one_graph(model, tokenizer, text: str, transcoders, label: str = "graph") -> dict:
    with harness.stopwatch(f"{label}: build") as built_in:
        graph = build(model, tokenizer, text, transcoders, contrast=("are", "is"))
    with harness.stopwatch(f"{label}: prune") as pruned_in:
        pruned = prune_graph(graph.edges, graph.layout, graph.probabilities)
    with harness.stopwatch(f"{label}: export") as exported_in:
        built = neuronpedia_json(graph, pruned, "minilm-mlm", "bench", text)
        doc = dumps(built)
    build_s, prune_s, export_s = built_in.seconds, pruned_in.seconds, exported_in.seconds
    kind = {n["node_id"]: n["feature_type"] for n in built["nodes"]}
    links = Counter(f"{kind[k['source']]} -> {kind[k['target']]}" for k in built["links"])
    smaller = {digits: round(mb(dumps(neuronpedia_json(graph, pruned, "minilm-mlm", "bench", text, digits=digits))), 3)
               for digits in (5, 4, 3)}  # what fewer significant digits would save
    fewer_edges = {}  # what a lower edge threshold would keep (nodes, edges, MB)
    for threshold in (0.975, 0.97):
        kept = prune_graph(graph.edges, graph.layout, graph.probabilities, edge_threshold=threshold)
        fewer = neuronpedia_json(graph, kept, "minilm-mlm", "bench", text, edge_threshold=threshold)
        fewer_edges[threshold] = [len(fewer["nodes"]), len(fewer["links"]), round(mb(dumps(fewer)), 3)]
    return {"tokens": len(graph.tokens), "features": graph.layout.features, "nodes": graph.layout.size,
            "kept_nodes": int(pruned.nodes.sum()), "kept_edges": int(pruned.edges.sum()),
            "build_s": round(build_s, 2), "prune_s": round(prune_s, 2), "export_s": round(export_s, 2),
            "total_s": round(build_s + prune_s + export_s, 2), "json_mb": round(mb(doc), 3),
            "json_nodes_by_type": dict(Counter(kind.values())), "json_links_by_type": dict(links),
            "json_bytes_per_link": round(len(dumps(built["links"]).encode("utf-8")) / max(1, len(built["links"])), 1),
            "json_mb_at_fewer_digits": smaller, "json_nodes_edges_mb_at_edge_threshold": fewer_edges}


def mb(text: str) -> float:
    return len(text.encode("utf-8")) / 2 ** 20


def main() -> None:
    def options(ap):
        ap.add_argument("--transcoders", required=True, help="a folder of transcoder folders (layer-<n>/)")
        ap.add_argument("--threads", type=int, default=2,  # the harness applies it
                        help="torch intra-op threads (default 2: the goals are at 2 threads)")
        ap.add_argument("--lengths", type=int, nargs="+", default=[16, 64], choices=sorted(TEXTS))

    args = harness.parse(__doc__, options)
    load_before = harness.load_average()

    lm = sources.load(sources.PACKAGED_MLM)
    model, tok = lm.model, lm.tokenizer
    transcoders = load_transcoders(args.transcoders)
    out = {"threads": args.threads, "transcoders": str(args.transcoders)}
    for n in args.lengths:
        enc = encode(tok, TEXTS[n])
        assert len(enc.tokens) == n, (n, len(enc.tokens))
        ids = enc.tensors()
        model64 = copy.deepcopy(model).double()
        unit = harness.median_ms(lambda: model64(**ids), 5, warmup=1, name=f"forward float64, {n} tokens")
        got = one_graph(model, tok, TEXTS[n], transcoders, f"graph, {n} tokens")
        got.update({"one_forward_float64_ms": round(unit, 1), "ratio_total_to_one_forward": round(
            1000 * got["total_s"] / unit), "goal_s": GOALS[n], "met": got["total_s"] <= GOALS[n]})
        if n == 64:
            got.update({"json_goal_mb": JSON_GOAL_MB, "json_met": got["json_mb"] <= JSON_GOAL_MB})
        out[f"tokens_{n}"] = got
    out["load_average_before_after"] = [round(load_before, 2), round(harness.load_average(), 2)]
    print(json.dumps(out, indent=1))
    harness.save(args.json)


if __name__ == "__main__":
    main()
