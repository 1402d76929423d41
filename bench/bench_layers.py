"""What each layer knows and what causes a prediction, on the packaged MiniLM-MLM: the numbers and the time of
every view of the layer pages (Findings, Word senses ...) and of the causal ones (Attribution, Activation patching).

    python bench/bench_layers.py --threads 2                 # ~5 minutes on 2 CPU cores
    python bench/bench_layers.py --threads 2 --segments 100 --lens-steps 200

Prints JSON: for each view its time and its ratio to one forward pass of the model on a 128-token input measured
in the same run (so machine noise cancels), the load average, and the numbers: syntax heads per relation beside
Clark et al.'s bert-base heads, probes by layer, the tuned lens's KL beside the logit lens's per layer.
The 32-token activation-patching time: bench/bench_patching.py.
"""

from __future__ import annotations

import harness

import json

import numpy as np
import torch

from bertcore import encode
from bertcore.loading import sources
from bertcore.analysis.representations import corpus_search, logit_lens, probes, syntax
from bertcore.analysis.papers import evalset, published
from bertcore.analysis.causal import patching
from bertcore.analysis.attention import query_key


def _timed(name: str, fn):
    """``fn()`` run once as a stopwatch block (kept for ``--json``): its result and its seconds."""
    with harness.stopwatch(name) as sw:
        out = fn()
    return out, sw.seconds


def main() -> None:
    def options(p):
        p.add_argument("--segments", type=int, default=100)
        p.add_argument("--lens-steps", type=int, default=200)

    a = harness.parse(__doc__, options)
    lm = sources.load(sources.PACKAGED_MLM)
    tok, model, encoder = lm.tokenizer, lm.model, lm.encoder
    segments = evalset.build_segments(tok, evalset.heldout_documents(), a.segments, 128)
    long = max(segments, key=lambda s: len(tok(s.text_a, s.text_b)["input_ids"]))
    enc = tok(long.text_a, long.text_b, return_tensors="pt")
    t_tokens = enc["input_ids"].shape[1]
    with torch.no_grad():
        forward_ms = harness.median_ms(lambda: encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
                                       10, 2, name=f"forward, {t_tokens} tokens")
    out: dict = {"threads": torch.get_num_threads(), "tokens": t_tokens, "forward_ms": round(forward_ms, 1)}

    # logit lens on the 128-token input
    lens_ms = harness.median_ms(lambda: logit_lens.logit_lens(model, enc["input_ids"], enc["attention_mask"],
                                                              enc["token_type_ids"]), 5, 1, name="logit lens")
    out["logit_lens"] = {"ms": round(lens_ms, 1), "x_forward": round(lens_ms / forward_ms, 2)}

    # tuned lens: fitted on the first half of the segments, KL measured on its held-out positions
    encs = [tok(s.text_a, s.text_b, return_tensors="pt") for s in segments[:40]]
    tuned, fit_s = _timed("tuned lens fit", lambda: logit_lens.train_tuned_lens(model, encs, steps=a.lens_steps))
    out["tuned_lens"] = {"fit_s": round(fit_s, 1), "kl_logit": [round(float(x), 3) for x in tuned.kl_logit],
                         "kl_tuned": [round(float(x), 3) for x in tuned.kl_tuned],
                         "tuned_le_logit_every_layer": bool((tuned.kl_tuned <= tuned.kl_logit + 1e-6).all())}

    # syntax heads
    run, syn_s = _timed("syntax heads", lambda: syntax.run_syntax(encoder, tok, segments))
    probe_run, probe_s = _timed("syntax heads + attention probe",
                               lambda: syntax.run_syntax(encoder, tok, segments, with_probe=True))
    probe = probe_run.probe
    res = run.heads
    rows = {}
    for rel in res.relations:
        share, layer, head, direction = res.best(rel)
        pub = published.SYNTAX_HEADS.get(rel)
        rows[rel] = {"arcs": res.counts[rel], "best": f"{layer + 1}-{head + 1}", "direction": direction,
                     "accuracy": round(share, 3), "fixed_offset": round(res.baseline[rel][0], 3),
                     **({"bert_base": f"{pub.accuracy:.3f} ({pub.name}, {pub.direction}; "
                                      f"offset {pub.baseline:.3f})"} if pub else {})}
    out["syntax_heads"] = {"s": round(syn_s, 1), "segments": len(segments),
                           "best_head_uas": round(float(res.uas.max()), 3), "relations": rows}
    top = np.dstack(np.unravel_index(np.argsort(-probe.weights, axis=None)[:5], probe.weights.shape))[0]
    out["attention_probe"] = {
        "s_with_probe": round(probe_s, 1), "uas": round(probe.uas, 3), "train_uas": round(probe.train_uas, 3),
        "right_branching": round(probe.right_branching, 3), "n_train": probe.n_train, "n_test": probe.n_test,
        "bert_base_uas": published.ATTENTION_PROBE_UAS, "bert_base_right_branching": published.RIGHT_BRANCHING_UAS,
        "largest_weights": [f"{'w' if d == 0 else 'u'} {layer + 1}-{head + 1}: {probe.weights[d, layer, head]:.2f}"
                            for d, layer, head in top]}

    # probes
    feats, feat_s = _timed("probe word features", lambda: probes.word_features(encoder, tok, run.segments))
    out["probes"] = {"features_s": round(feat_s, 1)}
    for task in probes.TASKS:
        r, s = _timed(f"probe {task}", lambda task=task: probes.probe(feats, task))
        out["probes"][task] = {"s": round(s, 1), "accuracy": [round(float(x), 3) for x in r.accuracy],
                               "control": [round(float(x), 3) for x in r.control], "majority": round(r.majority, 3),
                               "expected_layer": round(r.expected_layer, 2), "n_test": r.n_test}

    # activation patching, the default example
    clean = encode(tok, "The keys to the cabinet [MASK] on the table.").tensors()
    corrupt = encode(tok, "The key to the cabinet [MASK] on the table.").tensors()
    pos = int((clean["input_ids"][0] == tok.mask_token_id).nonzero())
    are, is_ = tok.convert_tokens_to_ids(["are", "is"])
    pres, pat_s = _timed("activation patching scan",
                          lambda: patching.scan(model, clean, corrupt, patching.logit_diff(pos, are, is_)))
    resid = pres.effects["resid"]
    out["patching"] = {"s": round(pat_s, 2), "clean": round(pres.clean, 3), "corrupted": round(pres.corrupted, 3),
                       "subject_position_restores_by_layer": [round(float(x), 3) for x in resid[:, 2]],
                       "mask_position_restores_by_layer": [round(float(x), 3) for x in resid[:, pos]]}

    # query-key map of ~2,000 tokens (the held-out segments' first parts), one head
    sents, n_tok = [], 0
    for s in segments:
        if n_tok >= 2000:
            break
        sents.append(s.text_a)
        n_tok += len(tok(s.text_a)["input_ids"])
    def qk_map():
        qk = query_key.query_keys(encoder, tok, sents, 2, 0)  # block 2 (the page's default "Layer 3"), head 0
        return query_key.project(*query_key.normalize(qk.queries, qk.keys)[:2])

    qk_ms = harness.median_ms(qk_map, 3, 1, name="query-key map, uncached")
    out["query_key"] = {"tokens": n_tok, "sentences": len(sents), "ms_uncached": round(qk_ms, 1),
                        "x_forward": round(qk_ms / forward_ms, 2)}

    # corpus search: index then one query
    texts = [f"{s.text_a} {s.text_b}" for s in segments]
    index, idx_s = _timed("corpus search index", lambda: corpus_search.build_index(encoder, tok, texts, 4))
    q = index.vectors[0]
    search_ms = harness.median_ms(lambda: corpus_search.search(index, q, 20), 10, 1, name="corpus search query")
    out["corpus_search"] = {"index_s": round(idx_s, 1), "tokens": len(index.tokens), "query_ms": round(search_ms, 2)}
    out["load_average_1min"] = round(harness.load_average(), 2)
    print(json.dumps(out, indent=1, default=lambda x: float(x) if isinstance(x, np.floating) else str(x)))
    harness.save(a.json)


if __name__ == "__main__":
    main()
